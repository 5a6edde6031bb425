//! The real receivers of the notification tests (`e2e/receivers/receiver.py`, started through
//! `scripts/notify-receivers.sh`): a Standard Webhooks endpoint checked by the independent
//! `standardwebhooks` package, a Slack-shaped endpoint that checks the Block Kit JSON, and an
//! SMTP server (`aiosmtpd`), with what each received read back as JSON. The server's own tests
//! include this file too (`#[path]`), so both suites drive the same receivers.
#![allow(clippy::unwrap_used, dead_code)]

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The secret the receivers verify webhooks with.
pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The receivers' process, killed on drop.
pub struct Receivers {
    child: Child,
    /// The HTTP port (`/webhook`, `/slack`, `/log`, `/mode/...`).
    pub http: u16,
    /// The plain SMTP port.
    pub smtp: u16,
    /// The SMTP port that requires STARTTLS.
    pub smtp_starttls: u16,
    /// The SMTP port with TLS from the first byte.
    pub smtp_tls: u16,
    /// The CA (PEM) that issued the TLS ports' certificate (for 127.0.0.1).
    pub ca_file: std::path::PathBuf,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Receivers {
    /// Starts them (the virtualenv is made on first use).
    pub fn start() -> Receivers {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scripts/notify-receivers.sh"
        );
        let dir = tempfile::tempdir().unwrap();
        let ca_file = dir.path().join("ca.pem");
        let mut child = Command::new("bash")
            .args([script, "run", "--secret", SECRET, "--ca-out"])
            .arg(&ca_file)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let ports: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the receivers did not start ({e}): {line:?}"));
        let port = |name: &str| u16::try_from(ports[name].as_u64().unwrap()).unwrap();
        Receivers {
            child,
            http: port("http"),
            smtp: port("smtp"),
            smtp_starttls: port("smtp_starttls"),
            smtp_tls: port("smtp_tls"),
            ca_file,
            client: reqwest::Client::new(),
            _dir: dir,
        }
    }

    /// Everything received so far.
    pub async fn log(&self) -> Vec<Value> {
        let url = format!("http://127.0.0.1:{}/log", self.http);
        self.client
            .get(url)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Has every later webhook payload validated against `schema` (a JSON Schema).
    pub async fn schema(&self, schema: &Value) {
        let url = format!("http://127.0.0.1:{}/schema", self.http);
        let r = self.client.post(url).json(schema).send().await.unwrap();
        assert!(
            r.status().is_success(),
            "the receivers refused the schema: {}",
            r.text().await.unwrap_or_default()
        );
    }

    /// `up`, `down` (503) or `hang` (no answer for a minute).
    pub async fn mode(&self, mode: &str) {
        let url = format!("http://127.0.0.1:{}/mode/{mode}", self.http);
        self.client.post(url).send().await.unwrap();
    }

    /// The log once `done` holds of it (checked every 50 ms, for at most 60 s).
    pub async fn until(&self, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let log = self.log().await;
            if done(&log) {
                return log;
            }
            assert!(
                Instant::now() < deadline,
                "waited a minute for {what}; the receivers saw {log:#?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Receivers {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The entries of `kind`.
pub fn of_kind<'a>(log: &'a [Value], kind: &str) -> Vec<&'a Value> {
    log.iter().filter(|e| e["kind"] == kind).collect()
}

/// The webhook deliveries about session `id` of event `type`.
pub fn hooks<'a>(log: &'a [Value], id: &str, ty: &str) -> Vec<&'a Value> {
    of_kind(log, "webhook")
        .into_iter()
        .filter(|e| e["payload"]["session"]["id"] == id && e["payload"]["type"] == ty)
        .collect()
}

/// Nothing was refused by the verifier, sent twice, or shaped wrong for Slack.
pub fn clean(log: &[Value]) {
    assert!(
        of_kind(log, "rejected").is_empty(),
        "the verifier refused: {log:#?}"
    );
    assert!(
        of_kind(log, "replay").is_empty(),
        "a webhook-id came twice: {log:#?}"
    );
    for s in of_kind(log, "slack") {
        assert_eq!(s["problems"], serde_json::json!([]), "{s:#}");
    }
    for w in of_kind(log, "webhook") {
        assert_eq!(
            w["schema_problems"],
            serde_json::json!([]),
            "the payload does not fit its schema: {w:#}"
        );
    }
}
