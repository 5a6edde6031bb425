//! The terminal's `pods/attach` connection, opened here rather than with kube-rs's
//! `Api::attach`, for what an open terminal holds while nobody types.
//!
//! kube-rs's `AttachedProcess` wraps the API server's WebSocket in a task of its own with a
//! pipe each way, and makes that WebSocket with tungstenite's default configuration, whose
//! frame reader zero-fills a 128 KiB buffer on its first read: with a thousand terminals open,
//! 128 MB resident for sockets that carry an echo now and then (BENCHMARKS.md, "Relay and
//! recording"). Here one small task reads the WebSocket and hands each message to the relay
//! through a channel of a few messages (no pipes, no copy), and the read buffer starts at
//! [`READ_BUFFER`]; a larger message still arrives whole, tungstenite making room for it.
//!
//! The wire protocol is the API server's channel protocol (`v5.channel.k8s.io`, or
//! `v4.channel.k8s.io` from an older one): each binary message starts with its channel, 0 for
//! stdin, 1 and 2 for the TTY's output, 3 for the `Status` that ends the stream, 4 for resizes.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use kube::api::AttachParams;
use kube::{Client, Resource};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::handshake::client::generate_key;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use crate::ports::{AttachedTerminal, ClusterError};

/// Bytes the attach's WebSocket reads at a time, and what it holds while idle: an echo or a
/// prompt fits; bulk output is read in several reads of a TLS record's worth.
const READ_BUFFER: usize = 4 * 1024;

/// How often an idle attach pings the API server, so proxies and load balancers in front of it
/// do not close a terminal nobody types in (kube-rs's interval).
const PING_EVERY: Duration = Duration::from_secs(60);

/// The subprotocols asked for, preferred first; both frame the streams alike.
const PROTOCOLS: &str = "v5.channel.k8s.io, v4.channel.k8s.io";

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const STATUS: u8 = 3;
const RESIZE: u8 = 4;

type Socket = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// An open attach to a debug container's TTY.
pub struct Attach {
    sink: SplitSink<Socket, Message>,
    /// What the reader took off the socket, up to [`READ_AHEAD`] messages ahead of the relay.
    output: mpsc::Receiver<Bytes>,
    reader: tokio::task::JoinHandle<()>,
    env: String,
    /// When the next keep-alive ping is due; pushed back by any traffic.
    ping_at: tokio::time::Instant,
}

impl Drop for Attach {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Output messages the reader may take off the socket before the relay asks for them: reading
/// the next message while the relay sends the last one to the browser keeps bulk output at the
/// socket's pace, and the bound keeps a slow browser's back-pressure reaching the pod.
const READ_AHEAD: usize = 4;

/// How much output [`Attach::with_ready`] joins into one piece before it stops: the browser's
/// frame limit less its tag byte, one frame's worth.
const COALESCE: usize = breakglass_shared::terminal::MAX_FRAME - 1;

/// `first` and the output already waiting behind it in `output`, as one piece, taking no more
/// once it holds [`COALESCE`] bytes (the relay splits a longer one into frames): under bulk
/// output the relay then records, frames and flushes once per piece rather than once per
/// message of the API server (a few KiB each). Alone, `first` goes on uncopied.
fn with_ready(first: Bytes, output: &mut mpsc::Receiver<Bytes>) -> Bytes {
    let mut joined: Option<BytesMut> = None;
    while joined.as_ref().map_or(first.len(), BytesMut::len) < COALESCE {
        let Ok(next) = output.try_recv() else {
            break;
        };
        joined
            .get_or_insert_with(|| {
                let mut b = BytesMut::with_capacity(COALESCE);
                b.extend_from_slice(&first);
                b
            })
            .extend_from_slice(&next);
    }
    joined.map_or(first, BytesMut::freeze)
}

/// Reads the attach's socket until it closes, handing each piece of output to the relay.
async fn read(mut stream: SplitStream<Socket>, to_relay: mpsc::Sender<Bytes>, env: String) {
    while let Some(message) = stream.next().await {
        match message {
            Err(e) => {
                tracing::info!(%env, error = %e, "attach: connection broke");
                return;
            }
            Ok(Message::Binary(b)) => match b.first() {
                // A message of the channel byte alone opens each stream.
                Some(&(STDOUT | STDERR)) if b.len() > 1 => {
                    let relay_gone = to_relay.send(b.slice(1..)).await.is_err();
                    if relay_gone {
                        return;
                    }
                }
                Some(&STATUS) => {
                    let status = String::from_utf8_lossy(&b[1..]);
                    tracing::info!(%env, %status, "attach: the terminal's process ended");
                    return;
                }
                _ => {}
            },
            Ok(Message::Close(_)) => return,
            // Pings are answered by tungstenite; text frames are not part of the protocol.
            Ok(_) => {}
        }
    }
}

/// What the action is called in errors.
const WHAT: &str = "attach to the debug container";

fn unreachable(
    env: &str,
    what: &str,
    e: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> ClusterError {
    ClusterError::Unreachable {
        env: env.into(),
        what: what.into(),
        source: Arc::from(e.into()),
    }
}

impl Attach {
    /// Attaches to `container` of `pod` (stdin and TTY, no separate stderr) in `namespace` of
    /// `env`'s cluster through `client`.
    pub async fn open(
        client: &Client,
        env: &str,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> Result<Attach, ClusterError> {
        let params = AttachParams::interactive_tty().container(container);
        let mut req = kube::core::Request::new(Pod::url_path(&(), Some(namespace)))
            .attach(pod, &params)
            .map_err(|e| ClusterError::config_from(env, "cannot build the attach request", e))?;
        let key = generate_key();
        let headers = req.headers_mut();
        for (name, value) in [
            (http::header::CONNECTION, "Upgrade"),
            (http::header::UPGRADE, "websocket"),
            (http::header::SEC_WEBSOCKET_VERSION, "13"),
            (http::header::SEC_WEBSOCKET_PROTOCOL, PROTOCOLS),
        ] {
            headers.insert(name, http::HeaderValue::from_static(value));
        }
        headers.insert(
            http::header::SEC_WEBSOCKET_KEY,
            http::HeaderValue::try_from(key.as_str()).map_err(|e| unreachable(env, WHAT, e))?,
        );
        let res = client
            .send(req.map(kube::client::Body::from))
            .await
            .map_err(|e| unreachable(env, WHAT, e))?;
        if res.status() != http::StatusCode::SWITCHING_PROTOCOLS {
            return Err(refused(env, res).await);
        }
        let accepted = res
            .headers()
            .get(http::header::SEC_WEBSOCKET_ACCEPT)
            .is_some_and(|v| v.as_bytes() == derive_accept_key(key.as_bytes()).as_bytes());
        let protocol = res
            .headers()
            .get(http::header::SEC_WEBSOCKET_PROTOCOL)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !accepted || !PROTOCOLS.split(", ").any(|p| p == protocol) {
            return Err(unreachable(
                env,
                WHAT,
                "the API server's WebSocket answer does not match the request",
            ));
        }
        let upgraded = hyper::upgrade::on(res)
            .await
            .map_err(|e| unreachable(env, WHAT, e))?;
        let config = WebSocketConfig::default().read_buffer_size(READ_BUFFER);
        let ws =
            WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Client, Some(config))
                .await;
        let (sink, stream) = ws.split();
        let (to_relay, output) = mpsc::channel(READ_AHEAD);
        let reader = tokio::spawn(read(stream, to_relay, env.to_string()));
        Ok(Attach {
            sink,
            output,
            reader,
            env: env.into(),
            ping_at: tokio::time::Instant::now() + PING_EVERY,
        })
    }

    async fn send(&mut self, channel: u8, data: &[u8], what: &str) -> Result<(), ClusterError> {
        let mut message = Vec::with_capacity(1 + data.len());
        message.push(channel);
        message.extend_from_slice(data);
        self.ping_at = tokio::time::Instant::now() + PING_EVERY;
        self.sink
            .send(Message::Binary(message.into()))
            .await
            .map_err(|e| unreachable(&self.env, what, e))
    }
}

/// The API server's refusal of the upgrade as a [`ClusterError`]: its `Status` when the body is
/// one (a 403 names the missing permission), else the body's text.
async fn refused(env: &str, res: http::Response<kube::client::Body>) -> ClusterError {
    let code = res.status().as_u16();
    let body = match res.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return unreachable(env, WHAT, e),
    };
    let message = match serde_json::from_slice::<kube::core::Status>(&body) {
        Ok(status) => status.message,
        Err(_) => String::from_utf8_lossy(&body).trim().to_string(),
    };
    ClusterError::Refused {
        env: env.into(),
        what: WHAT.into(),
        code,
        message,
    }
}

#[async_trait]
impl AttachedTerminal for Attach {
    async fn output(&mut self) -> Option<Bytes> {
        loop {
            tokio::select! {
                out = self.output.recv() => {
                    self.ping_at = tokio::time::Instant::now() + PING_EVERY;
                    return out.map(|first| with_ready(first, &mut self.output));
                }
                () = tokio::time::sleep_until(self.ping_at) => {
                    self.ping_at = tokio::time::Instant::now() + PING_EVERY;
                    if let Err(e) = self.sink.send(Message::Ping(Bytes::new())).await {
                        tracing::info!(env = %self.env, error = %e, "attach: keep-alive ping failed");
                        return None;
                    }
                }
            }
        }
    }

    async fn input(&mut self, data: &[u8]) -> Result<(), ClusterError> {
        self.send(STDIN, data, "type into the debug container")
            .await
    }

    async fn resize(&mut self, cols: u16, rows: u16) -> Result<(), ClusterError> {
        let size = serde_json::json!({ "Width": cols, "Height": rows }).to_string();
        self.send(
            RESIZE,
            size.as_bytes(),
            "resize the debug container's terminal",
        )
        .await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiting_output_is_joined_in_order_up_to_a_frame() {
        let (tx, mut rx) = mpsc::channel(READ_AHEAD);
        let piece = |b: u8, n: usize| Bytes::from(vec![b; n]);
        tx.send(piece(b'b', 3)).await.unwrap();
        tx.send(piece(b'c', 2)).await.unwrap();
        assert_eq!(
            with_ready(piece(b'a', 1), &mut rx),
            Bytes::from_static(b"abbbcc")
        );

        // Alone, the first piece goes on as it came.
        let first = piece(b'x', 4);
        let joined = with_ready(first.clone(), &mut rx);
        assert_eq!(joined.as_ptr(), first.as_ptr());

        // Once a frame's worth is held, the rest waits for the next call.
        tx.send(piece(b'd', COALESCE)).await.unwrap();
        tx.send(piece(b'e', 1)).await.unwrap();
        let joined = with_ready(piece(b'a', 1), &mut rx);
        assert_eq!(joined.len(), 1 + COALESCE);
        assert_eq!(
            with_ready(rx.recv().await.unwrap(), &mut rx),
            piece(b'e', 1)
        );
    }
}
