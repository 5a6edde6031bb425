//! Syslog for a SIEM: each OCSF event is one RFC 5424 message (`authpriv`, notice, or warning
//! for a broken glass; APP-NAME `breakglass`, MSGID `ocsf`, the event as the MSG), framed by
//! octet counting (RFC 6587, and RFC 5425 over TLS), on a connection of its own. Syslog has no
//! acknowledgement: a message counts as sent once the collector's TCP stack took all of it
//! and the connection closed cleanly; a retry after a failure may repeat it, which the
//! event's `metadata.uid` lets the SIEM drop.

use std::sync::Arc;
use std::time::Duration;

use time::format_description::well_known::Rfc3339;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

use super::{Answer, Failure};
use crate::config::certificates;

/// `authpriv` (10): security and authorisation messages.
const FACILITY: u8 = 10;

/// The RFC 5424 message of `event` (an OCSF event, JSON) sent now from `host`.
pub fn message(event: &str, host: &str) -> String {
    let glass = serde_json::from_str::<serde_json::Value>(event)
        .ok()
        .and_then(|v| v["severity_id"].as_u64())
        .is_some_and(|s| s >= 3);
    let severity = if glass { 4 } else { 5 };
    let at = time::OffsetDateTime::now_utc()
        .format(&Rfc3339)
        .unwrap_or_else(|_| "-".into());
    // HOSTNAME is printable US-ASCII without spaces, at most 255 characters.
    let host: String = host
        .chars()
        .filter(char::is_ascii_graphic)
        .take(255)
        .collect();
    let host = if host.is_empty() { "-".into() } else { host };
    format!(
        "<{}>1 {at} {host} breakglass {} ocsf - {event}",
        FACILITY * 8 + severity,
        std::process::id()
    )
}

/// This machine's name, for HOSTNAME.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// Sends `event` to the collector at `host:port`, over TLS when `tls` (trusting the public
/// roots and `ca_pem`), within `timeout`.
pub async fn send(
    host: &str,
    port: u16,
    tls: bool,
    ca_pem: Option<&[u8]>,
    timeout: Duration,
    event: &str,
) -> Result<Answer, Failure> {
    let msg = message(event, &hostname());
    let frame = format!("{} {msg}", msg.len());
    let sending = async {
        let tcp = TcpStream::connect((host, port))
            .await
            .map_err(|e| Failure::retry(None, format!("cannot reach the syslog collector: {e}")))?;
        if tls {
            let mut roots = rustls::RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            for cert in ca_pem.map(certificates).unwrap_or_default() {
                roots
                    .add(cert)
                    .map_err(|e| Failure::permanent(None, format!("ca_file: {e}")))?;
            }
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map_err(|e| Failure::permanent(None, format!("TLS settings: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
            let name = rustls_pki_types::ServerName::try_from(host.to_string())
                .map_err(|e| Failure::permanent(None, format!("`{host}`: {e}")))?;
            let mut stream = tokio_rustls::TlsConnector::from(Arc::new(config))
                .connect(name, tcp)
                .await
                .map_err(|e| Failure::retry(None, format!("TLS with the syslog collector: {e}")))?;
            write(&mut stream, frame.as_bytes()).await
        } else {
            let mut stream = tcp;
            write(&mut stream, frame.as_bytes()).await
        }
    };
    tokio::time::timeout(timeout, sending)
        .await
        .unwrap_or_else(|_| {
            Err(Failure::retry(
                None,
                format!(
                    "the syslog collector did not take it within {} s",
                    timeout.as_secs()
                ),
            ))
        })
}

async fn write<S: tokio::io::AsyncWrite + Unpin>(
    s: &mut S,
    frame: &[u8],
) -> Result<Answer, Failure> {
    let failed = |e: std::io::Error| Failure::retry(None, format!("syslog write: {e}"));
    s.write_all(frame).await.map_err(failed)?;
    s.flush().await.map_err(failed)?;
    s.shutdown().await.map_err(failed)?;
    Ok(Answer {
        status: None,
        body: String::new(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_rfc_5424_with_the_event_as_its_text() {
        let m = message(r#"{"severity_id":3,"class_uid":3003}"#, "node 1");
        let parts: Vec<&str> = m.splitn(8, ' ').collect();
        assert_eq!(parts[0], "<84>1", "authpriv.warning for a broken glass");
        assert!(time::OffsetDateTime::parse(parts[1], &Rfc3339).is_ok());
        assert_eq!(parts[2], "node1");
        assert_eq!(
            &parts[3..6],
            ["breakglass", &std::process::id().to_string(), "ocsf"]
        );
        assert_eq!(parts[6], "-");
        assert_eq!(parts[7], r#"{"severity_id":3,"class_uid":3003}"#);
        assert!(message("{}", "").starts_with("<85>1 "));
    }
}
