//! A reader of the server's live stream (`GET /api/breakglass/events`) for the benchmarks: each
//! `session` event is stamped with the wall-clock time its bytes arrived, before any parsing,
//! and handed on as text, so what is measured is the server's delivery and not this reader's
//! JSON work. Parsing it in the reader, as this did first, cost each event about as much as
//! the server's delivery: with 3,000 streams on this process's two workers, a stream's bytes
//! waited for the workers parsing the others, and their stamp measured that wait
//! (BENCHMARKS.md, "Three replicas").

use std::time::{Duration, SystemTime};

use anyhow::{anyhow, bail};
use breakglass_e2e::server::ApiClient;
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;

/// One `session` event as it arrived.
pub struct Arrival {
    /// When its last byte was read.
    pub at: SystemTime,
    /// The `SessionChange` JSON (`session`, `kind`), as sent.
    data: String,
}

impl Arrival {
    /// The `SessionChange`, parsed.
    pub fn change(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or(Value::Null)
    }

    /// The changed session's `created_at` (the server's clock, taken before its row was
    /// written).
    pub fn created_at(&self) -> SystemTime {
        let change = self.change();
        let text = change["session"]["created_at"].as_str().unwrap_or_default();
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
            .map(SystemTime::from)
            .unwrap_or(SystemTime::UNIX_EPOCH)
    }

    /// Whether this is a change of session `id`, without parsing it: the session is the
    /// change's first field, so its `id` is the first one in the text.
    pub fn is_of(&self, id: &str) -> bool {
        self.data
            .split_once("\"id\":\"")
            .is_some_and(|(_, rest)| rest.starts_with(id) && rest[id.len()..].starts_with('"'))
    }
}

/// Opens the stream as `client`'s user; fails unless the server answers 200 with an event
/// stream.
pub async fn open(
    http: &reqwest::Client,
    base: &str,
    client: &ApiClient,
) -> anyhow::Result<reqwest::Response> {
    let r = http
        .get(format!("{base}/api/breakglass/events"))
        .header("cookie", client.cookie_header())
        .send()
        .await?;
    if r.status() != 200 {
        bail!("GET /events as {}: {}", client.user, r.status());
    }
    Ok(r)
}

/// Reads `response` until it ends, sending every `session` event to `out`; a `lagged` event
/// (the stream fell behind, events were dropped) ends it with an error, since a benchmark that
/// lost events measured nothing.
pub async fn forward(
    response: reqwest::Response,
    out: mpsc::UnboundedSender<Arrival>,
) -> anyhow::Result<()> {
    let mut body = response.bytes_stream();
    let mut buf: Vec<u8> = Vec::new();
    while let Some(chunk) = body.next().await {
        let at = SystemTime::now();
        buf.extend_from_slice(&chunk?);
        while let Some(end) = find(&buf, b"\n\n") {
            let frame: Vec<u8> = buf.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&frame);
            let mut event = "message";
            let mut data = String::new();
            for line in text.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    event = v.trim();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim_start());
                }
            }
            match event {
                // The receiver is gone: nothing more to hand on.
                "session" if out.send(Arrival { at, data }).is_err() => return Ok(()),
                "lagged" => return Err(anyhow!("the stream fell behind and was told to reload")),
                _ => {}
            }
        }
    }
    Ok(())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Many open streams, each read by its own task into one channel; the tasks end on drop.
pub struct Streams {
    rx: mpsc::UnboundedReceiver<Arrival>,
    readers: Vec<tokio::task::JoinHandle<()>>,
}

impl Streams {
    /// Opens one stream per `(server URL, user)`.
    pub async fn open<'a>(targets: impl IntoIterator<Item = (&'a str, &'a ApiClient)>) -> Streams {
        let http = reqwest::Client::new();
        let (tx, rx) = mpsc::unbounded_channel();
        let mut readers = Vec::new();
        for (base, who) in targets {
            let response = open(&http, base, who)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let tx = tx.clone();
            readers.push(tokio::spawn(async move {
                forward(response, tx)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
            }));
        }
        Streams { rx, readers }
    }

    /// Waits, at most 60 s, until session `id`'s change reached every stream; how long after
    /// the session's `created_at` it reached each. Other sessions' changes are passed over.
    pub async fn delays_of(&mut self, id: &str) -> Vec<Duration> {
        let n = self.readers.len();
        let (mut at, mut created) = (Vec::with_capacity(n), None);
        let wait = async {
            while at.len() < n {
                let a = self
                    .rx
                    .recv()
                    .await
                    .expect("every reader ended before the change arrived");
                if !a.is_of(id) {
                    continue;
                }
                // Parsed once, from the first arrival: the stamps are taken by then.
                created.get_or_insert_with(|| a.created_at());
                at.push(a.at);
            }
        };
        tokio::time::timeout(Duration::from_secs(60), wait)
            .await
            .unwrap_or_else(|_| {
                panic!("the change reached {} of {n} streams within 60 s", at.len())
            });
        let created = created.unwrap_or(SystemTime::UNIX_EPOCH);
        at.iter()
            .map(|t| t.duration_since(created).unwrap_or_default())
            .collect()
    }
}

impl Drop for Streams {
    fn drop(&mut self) {
        for r in &self.readers {
            r.abort();
        }
    }
}
