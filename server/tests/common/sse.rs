//! The server on a loopback port and a reader of its live-update stream (Server-Sent
//! Events), for the tests that watch what a stream says and when it ends.

use std::net::SocketAddr;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio::time::{timeout, Instant};

use super::{Caller, TestServer};
use breakglass_server::state::AppState;

/// The server on a loopback port; the task is aborted on drop.
pub struct Live {
    pub base: String,
    pub client: reqwest::Client,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Live {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn serve(s: &TestServer) -> Live {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = breakglass_server::app(AppState(s.ctx.clone()));
    let task = tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    Live {
        base: format!("http://{addr}"),
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap(),
        task,
    }
}

/// One event of the stream.
#[derive(Debug)]
pub struct SseEvent {
    pub event: String,
    pub data: String,
}

/// Reads events off a streaming response body.
pub struct Sse {
    body: futures::stream::BoxStream<'static, reqwest::Result<axum::body::Bytes>>,
    buf: String,
}

impl Sse {
    /// The next event within `within`, or `None` when none came (comments are skipped).
    pub async fn next(&mut self, within: Duration) -> Option<SseEvent> {
        let deadline = Instant::now() + within;
        loop {
            // Events end with a blank line; a block of only comments (keep-alives) is skipped.
            while let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let mut event = String::from("message");
                let mut data = Vec::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim_start().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.strip_prefix(' ').unwrap_or(v).to_string());
                    }
                }
                if !data.is_empty() {
                    return Some(SseEvent {
                        event,
                        data: data.join("\n"),
                    });
                }
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next())
                .await
                .ok()??
                .unwrap();
            self.buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The `session` event of session `id` with kind `kind`, skipping others, within `within`.
    pub async fn session_event(&mut self, id: &str, kind: &str, within: Duration) -> Option<Value> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let ev = self.next(left).await?;
            if ev.event != "session" {
                continue;
            }
            let v: Value = serde_json::from_str(&ev.data).unwrap();
            if v["session"]["id"] == id && v["kind"] == kind {
                return Some(v);
            }
        }
    }
}

impl Live {
    /// Opens the event stream as `who`.
    pub async fn events(&self, who: &Caller) -> Sse {
        let r = timeout(
            Duration::from_secs(10),
            self.client
                .get(format!("{}/api/breakglass/events", self.base))
                .header("cookie", who.cookie.clone().unwrap())
                .send(),
        )
        .await
        .expect("the event stream answered within 10 s")
        .unwrap();
        assert_eq!(r.status(), 200);
        let ct = r.headers()["content-type"].to_str().unwrap().to_string();
        assert!(ct.starts_with("text/event-stream"), "{ct}");
        Sse {
            body: r.bytes_stream().boxed(),
            buf: String::new(),
        }
    }
}

impl Sse {
    /// Drops the stream's other events until it ends; whether it ended within `within`.
    pub async fn ends_within(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Err(_) => return false,
                Ok(None) => return true,
                Ok(Some(chunk)) => {
                    if chunk.is_err() {
                        return true;
                    }
                }
            }
        }
    }
}
