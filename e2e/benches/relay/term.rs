//! The two ways the relay benchmark reaches a shell on the test control plane's node: through
//! the server's terminal WebSocket, speaking the browser's binary frames, and the baseline, a
//! kube-rs `attach` straight to the API server. Both are driven by the same measuring code, so
//! the only difference between a figure and its baseline is the path the bytes take.

use std::pin::Pin;
use std::time::{Duration, Instant};

use breakglass_e2e::bench::Dist;
use breakglass_e2e::server::{ApiClient, ServerProcess};
use breakglass_shared::terminal::Frame;
use futures::{SinkExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::AttachParams;
use kube::Api;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

/// A terminal's socket, as the browser's side holds it.
pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// How long any one wait for output may take before the benchmark gives up (not a measured
/// bound: a stuck path fails the run instead of hanging it).
const STUCK: Duration = Duration::from_secs(120);

/// One interactive terminal: bytes in, chunks of output out.
pub trait Term {
    /// Sends the bytes as typed.
    async fn send(&mut self, bytes: &[u8]);
    /// Appends the next chunk of output to `out`; panics when the terminal closed.
    async fn recv_into(&mut self, out: &mut Vec<u8>);
}

/// The server's terminal WebSocket.
pub struct Relayed(pub Ws);

/// Opens the terminal of session `id` as `who`, with the Origin the page sends, and waits
/// for the relay's "attached" status.
pub async fn open(server: &ServerProcess, who: &ApiClient, id: &str) -> anyhow::Result<Ws> {
    let url = format!(
        "{}/api/breakglass/sessions/{id}/terminal",
        server.url.replace("http://", "ws://")
    );
    let mut req = url.into_client_request()?;
    req.headers_mut()
        .insert("cookie", who.cookie_header().parse()?);
    req.headers_mut().insert("origin", server.url.parse()?);
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await?;
    let first = tokio::time::timeout(STUCK, ws.next()).await?;
    match first {
        Some(Ok(Message::Binary(b))) => match Frame::decode(&b) {
            Ok(Frame::Status(st)) if st.message == "attached" => Ok(ws),
            other => anyhow::bail!("terminal {id}: unexpected first frame {other:?}"),
        },
        other => anyhow::bail!("terminal {id}: unexpected answer {other:?}"),
    }
}

impl Term for Relayed {
    async fn send(&mut self, bytes: &[u8]) {
        let frame = Frame::Data(bytes).encode();
        tokio::time::timeout(STUCK, self.0.send(Message::Binary(frame.into())))
            .await
            .expect("the relay took no input for two minutes")
            .expect("the relay took no input");
    }

    async fn recv_into(&mut self, out: &mut Vec<u8>) {
        loop {
            let next = tokio::time::timeout(STUCK, self.0.next()).await;
            match next.expect("the relay's terminal printed nothing for two minutes") {
                Some(Ok(Message::Binary(b))) => {
                    if let Ok(Frame::Data(d)) = Frame::decode(&b) {
                        out.extend_from_slice(d);
                        return;
                    }
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                other => panic!("the relay's terminal closed: {other:?}"),
            }
        }
    }
}

/// The baseline: kube-rs `attach` to a container of the same kind, straight to the API
/// server.
pub struct Direct {
    // Kept so the attach stays open; its streams are taken out below.
    _process: kube::api::AttachedProcess,
    stdin: Pin<Box<dyn AsyncWrite + Send>>,
    stdout: Pin<Box<dyn AsyncRead + Send>>,
    buf: Vec<u8>,
}

/// Attaches to `container` of `pod` as the client `pods` was made with (a TTY, stdin on).
pub async fn attach(pods: &Api<Pod>, pod: &str, container: &str) -> anyhow::Result<Direct> {
    // A TTY with stdin, as the relay's attach. kube-rs's default output pipe (1 KiB) would cut
    // bulk output into 1 KiB reads; 64 KiB lets the baseline read what arrived in one go, as
    // the relay reads each message the API server sends whole.
    let ap = AttachParams::interactive_tty()
        .container(container)
        .max_stdout_buf_size(64 * 1024);
    let mut process = pods.attach(pod, &ap).await?;
    let stdin = process
        .stdin()
        .ok_or_else(|| anyhow::anyhow!("the attach has no stdin"))?;
    let stdout = process
        .stdout()
        .ok_or_else(|| anyhow::anyhow!("the attach has no stdout"))?;
    Ok(Direct {
        _process: process,
        stdin: Box::pin(stdin),
        stdout: Box::pin(stdout),
        buf: vec![0; 64 * 1024],
    })
}

impl Term for Direct {
    async fn send(&mut self, bytes: &[u8]) {
        tokio::time::timeout(STUCK, async {
            self.stdin.write_all(bytes).await?;
            self.stdin.flush().await
        })
        .await
        .expect("the attach took no input for two minutes")
        .expect("the attach took no input");
    }

    async fn recv_into(&mut self, out: &mut Vec<u8>) {
        let n = tokio::time::timeout(STUCK, self.stdout.read(&mut self.buf))
            .await
            .expect("the attach printed nothing for two minutes")
            .expect("the attach's output failed");
        assert!(n > 0, "the attach's terminal closed");
        out.extend_from_slice(&self.buf[..n]);
    }
}

/// Reads until `needle` appears in the output; what came before it is dropped.
async fn read_past(term: &mut impl Term, needle: &[u8]) -> usize {
    let mut window = Vec::new();
    let mut total = 0;
    tokio::time::timeout(STUCK, async {
        loop {
            let before = window.len();
            term.recv_into(&mut window).await;
            total += window.len() - before;
            if window.windows(needle.len()).any(|w| w == needle) {
                return;
            }
            // Keep only a tail long enough for a needle cut across two chunks.
            let keep = needle.len().min(window.len());
            window.drain(..window.len() - keep);
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{:?} never came", String::from_utf8_lossy(needle)));
    total
}

/// Reads until `count` bytes equal to `byte` arrived.
async fn read_count(term: &mut impl Term, byte: u8, count: usize) {
    let mut seen = 0;
    let mut chunk = Vec::new();
    tokio::time::timeout(STUCK, async {
        while seen < count {
            chunk.clear();
            term.recv_into(&mut chunk).await;
            seen += chunk.iter().filter(|b| **b == byte).count();
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{count} echoes of {byte:#04x} never came ({seen} did)"));
}

/// Waits until the shell answered a command, so nothing older is still on its way.
pub async fn settle(term: &mut impl Term) {
    // Typed split by quotes, so the echo of the command line does not match the output.
    term.send(b"echo SET''TLED\r").await;
    read_past(term, b"SETTLED").await;
}

/// `samples` round trips of `bytes` keystrokes: the time from sending them (one frame) until
/// the terminal's echo of all of them arrived. Each is erased after (untimed), so the line
/// never grows.
pub async fn keystrokes(term: &mut impl Term, bytes: usize, samples: usize) -> Vec<Duration> {
    keystrokes_at(term, bytes, samples)
        .await
        .into_iter()
        .map(|(_, took)| took)
        .collect()
}

/// [`keystrokes`], each with the moment it was sent: the slow ones' moments are where a
/// profile of the tail looks (`relay/tail.rs`).
pub async fn keystrokes_at(
    term: &mut impl Term,
    bytes: usize,
    samples: usize,
) -> Vec<(Instant, Duration)> {
    keystrokes_paced(term, bytes, samples, Duration::ZERO).await
}

/// [`keystrokes_at`], one sent every `every` at most (as typed, not back to back), so the
/// samples spread over the machine's periodic work instead of falling between two of its
/// beats.
pub async fn keystrokes_paced(
    term: &mut impl Term,
    bytes: usize,
    samples: usize,
    every: Duration,
) -> Vec<(Instant, Duration)> {
    settle(term).await;
    let keys = vec![b'x'; bytes];
    let erase = vec![0x7f; bytes];
    let mut times = Vec::with_capacity(samples);
    // The first few warm the path up (buffers, the shell's pages) and are not kept.
    for i in 0..samples + 10 {
        let start = Instant::now();
        term.send(&keys).await;
        read_count(term, b'x', bytes).await;
        let took = start.elapsed();
        if i >= 10 {
            times.push((start, took));
        }
        // The line discipline echoes an erased character as "\b \b".
        term.send(&erase).await;
        read_count(term, 0x08, 2 * bytes).await;
        tokio::time::sleep_until((start + every).into()).await;
    }
    times
}

/// The distribution of timed samples' durations (what [`keystrokes_at`] and
/// [`keystrokes_paced`] return).
pub fn dist(samples: &[(Instant, Duration)]) -> Dist {
    let took: Vec<Duration> = samples.iter().map(|&(_, took)| took).collect();
    Dist::from_durations(&took)
}

/// Time for `bytes` of output (`yes` cut by `head -c`, so the shell and the PTY are the
/// source) to arrive in full, up to the marker printed after it.
pub async fn bulk(term: &mut impl Term, bytes: u64) -> Duration {
    settle(term).await;
    let cmd = format!(
        "yes 0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ | head -c {bytes}; echo BULK''DONE\r"
    );
    let start = Instant::now();
    term.send(cmd.as_bytes()).await;
    let seen = read_past(term, b"BULKDONE").await;
    let took = start.elapsed();
    assert!(
        seen as u64 >= bytes,
        "only {seen} of {bytes} bytes arrived before the marker"
    );
    took
}

/// Creates pods `names` (one `app` container each) in `pods`' namespace, 16 at a time, and
/// waits until each runs.
pub async fn create_pods(pods: &Api<Pod>, names: &[String]) {
    futures::stream::iter(names)
        .for_each_concurrent(16, |name| async move {
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}
            }))
            .expect("a pod's JSON");
            pods.create(&kube::api::PostParams::default(), &pod)
                .await
                .unwrap_or_else(|e| panic!("pod {name}: {e}"));
            breakglass_e2e::wait_for_pod_running(pods, name, Duration::from_secs(300))
                .await
                .unwrap_or_else(|e| panic!("pod {name}: {e}"));
        })
        .await;
}
