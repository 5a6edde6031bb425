//! The terminal relay: browser ⇄ WebSocket ⇄ server ⇄ `pods/attach` ⇄ the debug container, with
//! the recording tee here and only here (one way in, one way out).
//!
//! One writer per session: a new connection of the requester takes over (the previous one is
//! closed with [`close::TAKEN_OVER`]), because after a network blip the old socket may be
//! half-dead and the person should get their terminal back at once. Every connection of a
//! session feeds the same recording. At End, TTL or terminate, the lifecycle closes the relay
//! with the reason before the cluster objects go.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use breakglass_shared::session::Progress;
use breakglass_shared::terminal::{close, Frame, Status, MAX_FRAME};
use breakglass_shared::{EndReason, Session, SessionEvent, SessionState};
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{oneshot, Mutex};
use uuid::Uuid;

use crate::lifecycle;
use crate::recording::{
    recording_key, CastWriter, OnStored, RecordingConfig, RecordingStore, SessionInfo, WriterState,
};
use crate::state::Context;

/// Why a connection is being closed by the server.
#[derive(Debug, Clone)]
pub struct CloseReason {
    /// WebSocket close code (see [`close`]).
    pub code: u16,
    /// Text for the person.
    pub reason: String,
}

/// Live recordings and connections, per session.
pub struct Relays {
    store: Arc<dyn RecordingStore>,
    config: RecordingConfig,
    writers: Mutex<HashMap<Uuid, CastWriter>>,
    conns: Mutex<HashMap<Uuid, oneshot::Sender<CloseReason>>>,
}

/// Records each stored version on the session row, through the state machine.
struct RowStored {
    ctx: Arc<Context>,
    id: Uuid,
}

#[async_trait::async_trait]
impl OnStored for RowStored {
    async fn stored(&self, version: breakglass_shared::session::RecordingRef) {
        let r = lifecycle::record_progress(&self.ctx, self.id, Progress::RecordingStored(version))
            .await;
        if let Err(e) = r {
            tracing::debug!(id = %self.id, error = %e.body.message, "recording version not put on the row");
        }
    }
}

impl Relays {
    /// The relays over the recording store of `config`.
    pub fn new(config: RecordingConfig) -> Result<Relays, crate::recording::StoreError> {
        Ok(Relays {
            store: config.open_store()?,
            config,
            writers: Mutex::new(HashMap::new()),
            conns: Mutex::new(HashMap::new()),
        })
    }

    /// The recording store.
    pub fn store(&self) -> &Arc<dyn RecordingStore> {
        &self.store
    }

    /// Starts the recording of a session about to activate: no recording, no session. The
    /// header is stored at once, so an unreachable store fails the activation before anything
    /// is created in the cluster.
    pub async fn start_recording(&self, ctx: &Arc<Context>, s: &Session) -> Result<(), String> {
        if self.writers.lock().await.contains_key(&s.id) {
            return Ok(());
        }
        self.store.check().await.map_err(|e| {
            format!("the recording store is unavailable, so no session can start: {e}")
        })?;
        let info = SessionInfo {
            width: 80,
            height: 24,
            title: Some(format!(
                "breakglass {} {}/{}/{}",
                s.id, s.environment, s.namespace, s.pod
            )),
            timestamp: None,
        };
        let writer = CastWriter::start(
            self.store.clone(),
            recording_key(s.id),
            info,
            self.config.writer.clone(),
            RowStored {
                ctx: ctx.clone(),
                id: s.id,
            },
        )
        .await
        .map_err(|e| format!("the recording could not be started, so no session can start: {e}"))?;
        let label = match (&s.approver, &s.glass_broken_by) {
            (_, Some(by)) => format!("approved: glass broken by {by}"),
            (Some(a), _) => format!("approved by {a}"),
            _ => "approved: Ground".to_string(),
        };
        let _ = writer.marker(&label);
        // "No recording, no session": a recording that fails ends the session.
        let mut state = writer.watch_state();
        let (ctx2, id) = (ctx.clone(), s.id);
        tokio::spawn(async move {
            while state.changed().await.is_ok() {
                let now = state.borrow().clone();
                if let WriterState::Failed(reason) = now {
                    tracing::warn!(%id, %reason, "recording failed; ending the session");
                    let _ = lifecycle::apply(&ctx2, id, |_| {
                        Ok(SessionEvent::SystemEnd {
                            reason: EndReason::RecordingFailed,
                        })
                    })
                    .await;
                    break;
                }
            }
        });
        self.writers.lock().await.insert(s.id, writer);
        Ok(())
    }

    /// Adds a marker to a live recording (e.g. `active`).
    pub async fn marker(&self, id: Uuid, label: &str) {
        if let Some(w) = self.writers.lock().await.get(&id) {
            let _ = w.marker(label);
        }
    }

    /// Closes the session's connection with `reason` and stores the recording's final
    /// version. Safe to call when there is neither.
    pub async fn end(&self, id: Uuid, reason: &str) {
        if let Some(tx) = self.conns.lock().await.remove(&id) {
            let _ = tx.send(CloseReason {
                code: close::SESSION_ENDED,
                reason: format!("session ended: {reason}"),
            });
        }
        let writer = self.writers.lock().await.remove(&id);
        if let Some(w) = writer {
            if let Err(e) = w.finish(reason).await {
                tracing::warn!(%id, error = %e, "final recording version not stored; earlier versions are kept");
            }
        }
    }

    async fn writer(&self, id: Uuid) -> Option<CastWriter> {
        self.writers.lock().await.get(&id).cloned()
    }

    /// Registers a new connection for `id`, closing the previous one (takeover).
    async fn take_over(&self, id: Uuid) -> oneshot::Receiver<CloseReason> {
        let (tx, rx) = oneshot::channel();
        if let Some(old) = self.conns.lock().await.insert(id, tx) {
            let _ = old.send(CloseReason {
                code: close::TAKEN_OVER,
                reason: "this terminal was opened elsewhere".into(),
            });
        }
        rx
    }
}

async fn close_with(mut ws: WebSocket, code: u16, reason: impl Into<String>) {
    let _ = ws
        .send(Message::Close(Some(CloseFrame {
            code,
            reason: reason.into().into(),
        })))
        .await;
}

/// Serves one upgraded connection of `user` to session `id`.
pub async fn serve(ctx: Arc<Context>, ws: WebSocket, id: Uuid, user: String) {
    let Some(relays) = ctx.relays.clone() else {
        return close_with(
            ws,
            close::RELAY_ERROR,
            "terminals are not available on this server",
        )
        .await;
    };
    let session = match ctx.store.get(id).await {
        Ok(Some(s)) => s,
        Ok(None) => return close_with(ws, close::NOT_FOUND, "no such session").await,
        Err(e) => {
            tracing::warn!(%id, error = %e, "terminal: cannot read the session");
            return close_with(
                ws,
                close::RELAY_ERROR,
                "the server cannot read the session now",
            )
            .await;
        }
    };
    if session.requester != user {
        return close_with(
            ws,
            close::NOT_REQUESTER,
            "only the requester can use this terminal",
        )
        .await;
    }
    if session.state != SessionState::Active {
        return close_with(
            ws,
            close::NOT_ACTIVE,
            format!("the session is {}", session.state),
        )
        .await;
    }
    let Some(clusters) = ctx.clusters.clone() else {
        return close_with(ws, close::RELAY_ERROR, "no cluster is configured").await;
    };
    let Some(writer) = relays.writer(id).await else {
        return close_with(ws, close::RELAY_ERROR, "the recording of this session is not available on this server; no recording, no terminal").await;
    };
    let mut attached = match clusters.attach(&session).await {
        Ok(a) => a,
        Err(e) => return close_with(ws, close::RELAY_ERROR, format!("cannot attach: {e}")).await,
    };
    let mut closed_by_server = relays.take_over(id).await;
    let (Some(mut stdin), Some(mut stdout)) = (attached.stdin(), attached.stdout()) else {
        return close_with(ws, close::RELAY_ERROR, "the attach has no terminal streams").await;
    };
    let mut resize = attached.terminal_size();
    let (mut sink, mut stream) = ws.split();
    let status = Frame::Status(Status {
        state: SessionState::Active,
        message: "attached".into(),
    });
    let _ = sink.send(Message::Binary(status.encode().into())).await;

    let mut buf = vec![0u8; 16 * 1024];
    let reason: CloseReason = loop {
        tokio::select! {
            // Pod → browser. Awaiting the send is the back-pressure: a slow browser slows the
            // reads from the pod, and memory stays at one buffer.
            n = stdout.read(&mut buf) => {
                let n = match n { Ok(0) | Err(_) => break CloseReason { code: close::RELAY_ERROR, reason: "the debug container's terminal closed".into() }, Ok(n) => n };
                if let Err(e) = writer.output(&buf[..n]) {
                    break CloseReason { code: close::SESSION_ENDED, reason: e.to_string() };
                }
                let mut frame = Vec::with_capacity(n + 1);
                Frame::Data(&buf[..n]).encode_into(&mut frame);
                if sink.send(Message::Binary(frame.into())).await.is_err() {
                    break CloseReason { code: 1001, reason: "browser gone".into() };
                }
            }
            // Browser → pod.
            msg = stream.next() => {
                let Some(Ok(msg)) = msg else { break CloseReason { code: 1001, reason: "browser gone".into() } };
                match msg {
                    Message::Binary(bytes) => {
                        if bytes.len() > MAX_FRAME {
                            let _ = writer.marker("refused: oversized frame");
                            break CloseReason { code: close::BAD_FRAME, reason: format!("frame larger than {MAX_FRAME} bytes") };
                        }
                        match Frame::decode(&bytes) {
                            Ok(Frame::Data(d)) => {
                                let _ = writer.input(d);
                                if stdin.write_all(d).await.is_err() {
                                    break CloseReason { code: close::RELAY_ERROR, reason: "the debug container stopped taking input".into() };
                                }
                            }
                            Ok(Frame::Resize { cols, rows }) => {
                                let _ = writer.resize(cols, rows);
                                if let Some(r) = resize.as_mut() {
                                    let _ = r.send(kube::api::TerminalSize { width: cols, height: rows }).await;
                                }
                            }
                            Ok(Frame::Heartbeat) => {}
                            Ok(Frame::Status(_)) | Err(_) => {
                                let _ = writer.marker("refused: malformed frame");
                                break CloseReason { code: close::BAD_FRAME, reason: "malformed frame; the terminal speaks binary frames only".into() };
                            }
                        }
                    }
                    Message::Text(_) => {
                        let _ = writer.marker("refused: text frame");
                        break CloseReason { code: close::BAD_FRAME, reason: "text frames are not accepted; send binary frames".into() };
                    }
                    Message::Close(_) => break CloseReason { code: 1000, reason: "closed by the browser".into() },
                    Message::Ping(_) | Message::Pong(_) => {}
                }
            }
            r = &mut closed_by_server => {
                break r.unwrap_or(CloseReason { code: close::SESSION_ENDED, reason: "session ended".into() });
            }
        }
    };
    attached.abort();
    let _ = sink
        .send(Message::Close(Some(CloseFrame {
            code: reason.code,
            reason: reason.reason.clone().into(),
        })))
        .await;
    tracing::info!(%id, code = reason.code, reason = %reason.reason, "terminal closed");
}
