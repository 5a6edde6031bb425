//! `[[notifications.siem]]`: a security team's SIEM, which takes every moment of every session
//! of the environments that route to it as an OCSF event (`breakglass_shared::ocsf`), as it
//! happens: POSTed to `url` (signed as Standard Webhooks when a secret is given), or sent as
//! RFC 5424 syslog over TCP to `syslog` (TLS unless `tls = false`). Delivered through the
//! outbox like every notification: retried, once per id, nothing lost on a restart.

use std::path::PathBuf;

use serde::Deserialize;

use super::secret::{webhook_key, SecretSource};
use super::{http_url, Receiver, SigningKey, Target};
use crate::config::ConfigError;

/// `[[notifications.siem]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiemFile {
    /// The name environments' `notify` use.
    pub name: String,
    /// An HTTP(S) endpoint that takes one OCSF event per POST.
    pub url: Option<String>,
    /// `whsec_<base64>` keys that sign each POST (Standard Webhooks); several while rotating.
    pub secret: Option<String>,
    /// A file holding them.
    pub secret_file: Option<PathBuf>,
    /// An environment variable holding them.
    pub secret_env: Option<String>,
    /// A syslog collector, `host:port` (RFC 5424 messages, octet-counted, over TCP).
    pub syslog: Option<String>,
    /// Whether the syslog connection is TLS (RFC 5425; default true).
    pub tls: Option<bool>,
    /// A CA certificate file (PEM) to trust for the collector besides the public roots.
    pub ca_file: Option<PathBuf>,
}

/// Where a SIEM receiver's events go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SiemSink {
    /// POSTed, one event per request.
    Http {
        /// The endpoint.
        url: url::Url,
        /// Keys that sign each request (none: unsigned).
        secrets: Vec<SigningKey>,
    },
    /// Syslog over TCP.
    Syslog {
        /// The collector's host name or address.
        host: String,
        /// Its port.
        port: u16,
        /// TLS (RFC 5425) or plain TCP (RFC 6587).
        tls: bool,
        /// Extra trusted CA certificates (PEM), checked at start.
        ca_pem: Option<Vec<u8>>,
    },
}

impl SiemFile {
    /// The receiver, every key checked; `key` is `notifications.siem[i]`.
    pub(super) fn resolve(self, key: &str) -> Result<Receiver, ConfigError> {
        let source = SecretSource {
            value: self.secret,
            file: self.secret_file,
            env: self.secret_env,
        };
        let sink = match (self.url, self.syslog) {
            (Some(url), None) => {
                if self.tls.is_some() || self.ca_file.is_some() {
                    return Err(ConfigError::new(
                        format!("{key}.tls"),
                        "`tls` and `ca_file` are for a syslog collector; an https:// URL is TLS",
                    ));
                }
                let url = http_url(&format!("{key}.url"), &url)?;
                let secrets = if source.given() {
                    source
                        .read(key, "secret")?
                        .split_whitespace()
                        .map(|s| webhook_key(&format!("{key}.secret"), s))
                        .collect::<Result<Vec<_>, _>>()?
                } else {
                    Vec::new()
                };
                SiemSink::Http { url, secrets }
            }
            (None, Some(addr)) => {
                if source.given() {
                    return Err(ConfigError::new(
                        format!("{key}.secret"),
                        "a syslog collector takes no signing key (use TLS and `ca_file`)",
                    ));
                }
                let (host, port) = addr
                    .rsplit_once(':')
                    .and_then(|(h, p)| Some((h.trim_matches(['[', ']']), p.parse::<u16>().ok()?)))
                    .filter(|(h, p)| !h.is_empty() && *p > 0)
                    .ok_or_else(|| {
                        ConfigError::new(
                            format!("{key}.syslog"),
                            format!("`{addr}` is not host:port (e.g. siem.example.com:6514)"),
                        )
                    })?;
                let ca_pem = self
                    .ca_file
                    .map(|f| {
                        let pem = std::fs::read(&f).map_err(|e| {
                            ConfigError::new(
                                format!("{key}.ca_file"),
                                format!("cannot read {}: {e}", f.display()),
                            )
                        })?;
                        if certificates(&pem).is_empty() {
                            return Err(ConfigError::new(
                                format!("{key}.ca_file"),
                                format!("{} holds no PEM certificate", f.display()),
                            ));
                        }
                        Ok(pem)
                    })
                    .transpose()?;
                SiemSink::Syslog {
                    host: host.to_string(),
                    port,
                    tls: self.tls.unwrap_or(true),
                    ca_pem,
                }
            }
            _ => {
                return Err(ConfigError::new(
                    format!("{key}.url"),
                    "a SIEM receiver needs one of `url` (HTTP) and `syslog` (host:port)",
                ))
            }
        };
        Ok(Receiver {
            name: self.name,
            events: None,
            target: Target::Siem(sink),
        })
    }
}

/// The certificates of a PEM file (none when it holds none or is not PEM).
pub fn certificates(pem: &[u8]) -> Vec<rustls_pki_types::CertificateDer<'static>> {
    use rustls_pki_types::pem::PemObject as _;
    rustls_pki_types::CertificateDer::pem_slice_iter(pem)
        .filter_map(Result::ok)
        .collect()
}
