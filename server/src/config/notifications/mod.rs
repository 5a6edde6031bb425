//! `[notifications]`: the receivers (Standard Webhooks endpoints, Slack incoming webhooks, mail)
//! and how a delivery is retried; each environment's `notify` names the receivers that get its
//! events (`environments.rs` reads those keys, [`Notifications::check_routes`] checks them).
//!
//! Secrets (webhook signing keys, Slack URLs, the SMTP password) come from the file, a file it
//! names, or an environment variable, and are held in [`Secret`], whose `Debug` never shows
//! them: the configuration is logged and printed by `check-config`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use breakglass_shared::notify::NoticeKind;
use serde::Deserialize;

use super::{within, ConfigError};

mod route;
mod secret;
mod siem;

pub use route::Route;
use secret::{webhook_key, SecretSource};
pub use secret::{Secret, SigningKey};
pub use siem::{certificates, SiemFile, SiemSink};

/// `[notifications]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotificationsFile {
    /// Minutes a delivery is retried before it is marked dead (default 1440, a day).
    pub retry_for_minutes: Option<u64>,
    /// Seconds one attempt may take, connecting included (default 10).
    pub timeout_seconds: Option<u64>,
    /// Seconds before the first retry (default 2), doubled per attempt up to ten minutes.
    pub first_retry_seconds: Option<u64>,
    /// Standard Webhooks receivers.
    #[serde(default)]
    pub webhooks: Vec<WebhookFile>,
    /// Slack incoming webhooks.
    #[serde(default)]
    pub slack: Vec<SlackFile>,
    /// Mail receivers (over `[notifications.smtp]`).
    #[serde(default)]
    pub email: Vec<EmailFile>,
    /// SIEMs that take every session event as OCSF (over HTTP or syslog).
    #[serde(default)]
    pub siem: Vec<SiemFile>,
    /// The mail server.
    pub smtp: Option<SmtpFile>,
    /// Mail addresses of people (`alice = "alice@example.com"`) and of groups
    /// (`"group:sre" = ["oncall@example.com"]`), for "the environment's approvers"; a user name
    /// that is itself an address needs no entry.
    #[serde(default)]
    pub addresses: BTreeMap<String, Addresses>,
}

/// One address or several.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum Addresses {
    /// One.
    One(String),
    /// Several.
    Many(Vec<String>),
}

/// `[[notifications.webhooks]]` (the contract: `name`, `url`, and `secret` or `secret_file`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookFile {
    /// The name environments' `notify` use.
    pub name: String,
    /// Where to POST.
    pub url: String,
    /// `whsec_<base64>`; several separated by spaces while rotating (each signs).
    pub secret: Option<String>,
    /// A file holding the secret(s), whitespace-separated.
    pub secret_file: Option<PathBuf>,
    /// An environment variable holding the secret(s).
    pub secret_env: Option<String>,
    /// Only these events (snake-case names); all when absent. A broken glass comes anyway.
    pub events: Option<Vec<String>>,
}

/// `[[notifications.slack]]`: the incoming webhook's URL is its secret.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlackFile {
    /// The name environments' `notify` use.
    pub name: String,
    /// The incoming webhook URL.
    pub url: Option<String>,
    /// A file holding it.
    pub url_file: Option<PathBuf>,
    /// An environment variable holding it.
    pub url_env: Option<String>,
    /// Only these events; all when absent.
    pub events: Option<Vec<String>>,
}

/// `[[notifications.email]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmailFile {
    /// The name environments' `notify` use.
    pub name: String,
    /// Fixed recipients.
    #[serde(default)]
    pub to: Vec<String>,
    /// Also the environment's approvers (for what asks something of them: a request, a
    /// reminder, an escalation, more time, a review), from `addresses`.
    #[serde(default)]
    pub approvers: bool,
    /// Also the requester, for what became of their request (decided, active, ended).
    #[serde(default)]
    pub requester: bool,
    /// Only these events; all when absent.
    pub events: Option<Vec<String>>,
}

/// `[notifications.smtp]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmtpFile {
    /// Host name.
    pub host: String,
    /// Port (default: 465 with `tls`, 587 with `starttls`, 25 with `none`).
    pub port: Option<u16>,
    /// `starttls` (default), `tls`, or `none` (a local relay only).
    pub tls: Option<String>,
    /// Sign-in name, if the server wants one.
    pub username: Option<String>,
    /// Its password, in a file.
    pub password_file: Option<PathBuf>,
    /// Its password, in an environment variable.
    pub password_env: Option<String>,
    /// The sender address.
    pub from: String,
    /// A CA certificate file (PEM) to trust besides the public roots (a private relay's).
    pub ca_file: Option<PathBuf>,
}

/// How mail leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpTls {
    /// TLS from the first byte.
    Tls,
    /// Plain, then STARTTLS (required).
    StartTls,
    /// No TLS (a relay on the same host).
    None,
}

/// The resolved mail server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Smtp {
    /// Host.
    pub host: String,
    /// Port.
    pub port: u16,
    /// TLS mode.
    pub tls: SmtpTls,
    /// Name and password.
    pub credentials: Option<(String, Secret)>,
    /// Sender.
    pub from: String,
    /// Extra trusted CA certificates (PEM), checked at start.
    pub ca_pem: Option<Vec<u8>>,
}

/// Where a receiver's messages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A Standard Webhooks endpoint; every secret (raw key bytes) signs.
    Webhook {
        /// Endpoint.
        url: url::Url,
        /// Signing keys.
        secrets: Vec<SigningKey>,
    },
    /// A Slack incoming webhook.
    Slack {
        /// Its URL.
        url: Secret,
    },
    /// Mail.
    Email {
        /// Fixed recipients.
        to: Vec<String>,
        /// The environment's approvers too.
        approvers: bool,
        /// The requester too.
        requester: bool,
    },
    /// A SIEM: every session event as OCSF, not the notices people read.
    Siem(SiemSink),
}

/// One receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receiver {
    /// Its name.
    pub name: String,
    /// The events it takes; all when `None`.
    pub events: Option<BTreeSet<NoticeKind>>,
    /// Where its messages go.
    pub target: Target,
}

impl Receiver {
    /// Whether it takes `kind`.
    pub fn takes(&self, kind: NoticeKind) -> bool {
        if matches!(self.target, Target::Siem(_)) {
            // A SIEM gets the session's OCSF events (`Outbox::drafts`), never the notices.
            return false;
        }
        !kind.filterable() || self.events.as_ref().is_none_or(|e| e.contains(&kind))
    }

    /// `webhook`, `slack`, `email` or `siem`.
    pub fn kind(&self) -> &'static str {
        match self.target {
            Target::Webhook { .. } => "webhook",
            Target::Slack { .. } => "slack",
            Target::Email { .. } => "email",
            Target::Siem(_) => "siem",
        }
    }
}

/// The resolved `[notifications]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notifications {
    /// How long a delivery is retried.
    pub retry_for: Duration,
    /// One attempt's bound.
    pub timeout: Duration,
    /// The first retry's delay.
    pub first_retry: Duration,
    /// Every receiver, by its unique name.
    pub receivers: Vec<Receiver>,
    /// The mail server (required when a mail receiver exists).
    pub smtp: Option<Smtp>,
    /// Addresses by user name or `group:NAME`.
    pub addresses: BTreeMap<String, Vec<String>>,
}

impl Default for Notifications {
    fn default() -> Notifications {
        Notifications {
            retry_for: Duration::from_secs(24 * 3600),
            timeout: Duration::from_secs(10),
            first_retry: Duration::from_secs(2),
            receivers: Vec::new(),
            smtp: None,
            addresses: BTreeMap::new(),
        }
    }
}

impl Notifications {
    /// The receiver called `name`.
    pub fn receiver(&self, name: &str) -> Option<&Receiver> {
        self.receivers.iter().find(|r| r.name == name)
    }

    /// Checks that every name in `routes` (a key path and the names it lists) is a receiver.
    pub fn check_routes<'a>(
        &self,
        routes: impl IntoIterator<Item = (String, &'a [String])>,
    ) -> Result<(), ConfigError> {
        for (key, names) in routes {
            for name in names {
                if self.receiver(name).is_none() {
                    let known: Vec<_> = self.receivers.iter().map(|r| r.name.as_str()).collect();
                    return Err(ConfigError::new(
                        key,
                        format!(
                            "names no receiver `{name}`; the [notifications] receivers are: {}",
                            if known.is_empty() {
                                "none".to_string()
                            } else {
                                known.join(", ")
                            }
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl NotificationsFile {
    /// Checks every key and reads the secrets.
    pub fn resolve(self) -> Result<Notifications, ConfigError> {
        let defaults = Notifications::default();
        let minutes = |key: &str, v: Option<u64>, d: Duration, max: u64| {
            v.map(|v| within(format!("notifications.{key}"), v, 1, max))
                .transpose()
                .map(|v| v.map_or(d, |v| Duration::from_secs(v * 60)))
        };
        let seconds = |key: &str, v: Option<u64>, d: Duration, max: u64| {
            v.map(|v| within(format!("notifications.{key}"), v, 1, max))
                .transpose()
                .map(|v| v.map_or(d, Duration::from_secs))
        };
        let mut receivers = Vec::new();
        for (i, w) in self.webhooks.into_iter().enumerate() {
            let key = format!("notifications.webhooks[{i}]");
            let url = http_url(&format!("{key}.url"), &w.url)?;
            let source = SecretSource {
                value: w.secret,
                file: w.secret_file,
                env: w.secret_env,
            };
            let text = source.read(&key, "secret")?;
            let secrets = text
                .split_whitespace()
                .map(|s| webhook_key(&format!("{key}.secret"), s))
                .collect::<Result<Vec<_>, _>>()?;
            receivers.push(Receiver {
                events: events(&key, w.events)?,
                name: w.name,
                target: Target::Webhook { url, secrets },
            });
        }
        for (i, s) in self.slack.into_iter().enumerate() {
            let key = format!("notifications.slack[{i}]");
            let source = SecretSource {
                value: s.url,
                file: s.url_file,
                env: s.url_env,
            };
            let url = source.read(&key, "url")?;
            http_url(&format!("{key}.url"), &url)?;
            receivers.push(Receiver {
                events: events(&key, s.events)?,
                name: s.name,
                target: Target::Slack { url: Secret(url) },
            });
        }
        let mail_receivers = !self.email.is_empty();
        for (i, e) in self.email.into_iter().enumerate() {
            let key = format!("notifications.email[{i}]");
            for (j, a) in e.to.iter().enumerate() {
                address(&format!("{key}.to[{j}]"), a)?;
            }
            if e.to.is_empty() && !e.approvers && !e.requester {
                return Err(ConfigError::new(
                    format!("{key}.to"),
                    "a mail receiver needs recipients: `to`, `approvers = true` or \
                     `requester = true`",
                ));
            }
            receivers.push(Receiver {
                events: events(&key, e.events)?,
                name: e.name,
                target: Target::Email {
                    to: e.to,
                    approvers: e.approvers,
                    requester: e.requester,
                },
            });
        }
        for (i, s) in self.siem.into_iter().enumerate() {
            receivers.push(s.resolve(&format!("notifications.siem[{i}]"))?);
        }
        let mut names = BTreeSet::new();
        for r in &receivers {
            if r.name.is_empty() || !names.insert(r.name.clone()) {
                return Err(ConfigError::new(
                    format!("notifications.{}.name", r.kind()),
                    format!(
                        "receiver names must be non-empty and unique across webhooks, slack, \
                         email and siem; `{}` is not",
                        r.name
                    ),
                ));
            }
        }
        let smtp = self.smtp.map(SmtpFile::resolve).transpose()?;
        if mail_receivers && smtp.is_none() {
            return Err(ConfigError::new(
                "notifications.smtp",
                "mail receivers are configured but no mail server: add [notifications.smtp] \
                 with host and from",
            ));
        }
        let mut addresses = BTreeMap::new();
        for (who, a) in self.addresses {
            let list = match a {
                Addresses::One(a) => vec![a],
                Addresses::Many(l) => l,
            };
            for a in &list {
                address(&format!("notifications.addresses.{who}"), a)?;
            }
            addresses.insert(who, list);
        }
        Ok(Notifications {
            retry_for: minutes(
                "retry_for_minutes",
                self.retry_for_minutes,
                defaults.retry_for,
                10_080,
            )?,
            timeout: seconds(
                "timeout_seconds",
                self.timeout_seconds,
                defaults.timeout,
                120,
            )?,
            first_retry: seconds(
                "first_retry_seconds",
                self.first_retry_seconds,
                defaults.first_retry,
                600,
            )?,
            receivers,
            smtp,
            addresses,
        })
    }
}

impl SmtpFile {
    fn resolve(self) -> Result<Smtp, ConfigError> {
        let tls = match self.tls.as_deref().unwrap_or("starttls") {
            "starttls" => SmtpTls::StartTls,
            "tls" => SmtpTls::Tls,
            "none" => SmtpTls::None,
            other => {
                return Err(ConfigError::new(
                    "notifications.smtp.tls",
                    format!("`{other}` is not a TLS mode: use `starttls`, `tls` or `none`"),
                ))
            }
        };
        address("notifications.smtp.from", &self.from)?;
        let password = SecretSource {
            value: None,
            file: self.password_file,
            env: self.password_env,
        };
        let credentials = match (self.username, password.given()) {
            (Some(u), true) => Some((u, Secret(password.read("notifications.smtp", "password")?))),
            (None, false) => None,
            _ => {
                return Err(ConfigError::new(
                    "notifications.smtp.username",
                    "give both `username` and a password (`password_file` or `password_env`), \
                     or neither",
                ))
            }
        };
        let ca_pem = self
            .ca_file
            .map(|f| {
                let pem = std::fs::read(&f).map_err(|e| {
                    ConfigError::new(
                        "notifications.smtp.ca_file",
                        format!("cannot read {}: {e}", f.display()),
                    )
                })?;
                lettre::transport::smtp::client::Certificate::from_pem(&pem).map_err(|e| {
                    ConfigError::new(
                        "notifications.smtp.ca_file",
                        format!("{} holds no PEM certificate: {e}", f.display()),
                    )
                })?;
                Ok(pem)
            })
            .transpose()?;
        Ok(Smtp {
            ca_pem,
            port: self.port.unwrap_or(match tls {
                SmtpTls::Tls => 465,
                SmtpTls::StartTls => 587,
                SmtpTls::None => 25,
            }),
            host: self.host,
            tls,
            credentials,
            from: self.from,
        })
    }
}

fn http_url(key: &str, text: &str) -> Result<url::Url, ConfigError> {
    match url::Url::parse(text) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(u),
        _ => Err(ConfigError::new(
            key,
            "must be an absolute http:// or https:// URL",
        )),
    }
}

fn address(key: &str, a: &str) -> Result<(), ConfigError> {
    a.parse::<lettre::Address>()
        .map(|_| ())
        .map_err(|e| ConfigError::new(key, format!("`{a}` is not a mail address ({e})")))
}

fn events(
    key: &str,
    names: Option<Vec<String>>,
) -> Result<Option<BTreeSet<NoticeKind>>, ConfigError> {
    names
        .map(|names| {
            names
                .iter()
                .map(|n| {
                    n.parse::<NoticeKind>().map_err(|_| {
                        use strum::IntoEnumIterator;
                        let all: Vec<&str> = NoticeKind::iter().map(<&str>::from).collect();
                        ConfigError::new(
                            format!("{key}.events"),
                            format!("`{n}` is no event; the events are: {}", all.join(", ")),
                        )
                    })
                })
                .collect()
        })
        .transpose()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
