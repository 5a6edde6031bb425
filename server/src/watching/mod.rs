//! One watcher's socket (`GET /sessions/{id}/watch`): checks who may watch, seats them at the session's hub, sends the
//! screen and then the stream, and discards whatever the watcher sends (a watch socket has no
//! way to the pod: nothing read from it is decoded, let alone written anywhere).

mod forward;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket};
use axum::http::HeaderValue;
use axum_extra::extract::cookie::Key;
use breakglass_shared::access::Refusal;
use breakglass_shared::terminal::{close, Frame, Status};
use breakglass_shared::PermissionSet;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use uuid::Uuid;

use crate::config::Config;
use crate::connections::{close_frame, CloseReason};
use crate::holds::{Held, Hold, Holder, Holds};
use crate::recorder::Recorder;
use crate::recording::{CastWriter, RecordingStore};
use crate::store::Store;
use crate::watch::{audience_status, CatchUp, Hub, Watches};
pub use forward::{Pass, PASS_HEADER};

/// One watcher as the pump serves them.
struct Watcher {
    id: Uuid,
    name: String,
    moderates: bool,
    moderated: bool,
}

/// What serving a watcher needs.
pub struct Watching {
    /// The configuration (who may watch where, which environments are moderated).
    pub config: Arc<Config>,
    /// Session rows.
    pub store: Arc<dyn Store>,
    /// The writers (a watcher is served where the session's writer is) and their store.
    pub recorder: Arc<Recorder>,
    /// This replica's hubs.
    pub watches: Arc<Watches>,
    /// What people hold open here, checked again every second.
    pub holds: Arc<Holds>,
    /// The cookie key, which every replica shares: it signs the pass of a watcher forwarded
    /// to the replica serving the terminal.
    pub key: Key,
}

fn status_frame(status: &Status) -> Message {
    Message::Binary(Frame::Status(status.clone()).encode().into())
}

impl Watching {
    /// Serves one upgraded watch socket of `holder` to session `id` until it closes, the
    /// session's terminal closes here, or the holder's right to watch ends.
    pub async fn serve(
        &self,
        mut ws: WebSocket,
        id: Uuid,
        holder: Holder,
        host: Option<HeaderValue>,
    ) {
        let refuse = |code: u16, why: String| close_frame(code, &why);
        let session = match self.store.get(id).await {
            Ok(Some(s)) => s,
            Ok(None) => {
                let _ = ws
                    .send(refuse(close::NOT_FOUND, "no such session".into()))
                    .await;
                return;
            }
            Err(e) => {
                tracing::warn!(%id, error = %e, "watch: cannot read the session");
                let why = "the server cannot read the session now".to_string();
                let _ = ws.send(refuse(close::RELAY_ERROR, why)).await;
                return;
            }
        };
        let env = self.config.environment(&session.environment);
        let permissions = holder
            .access
            .iter()
            .find(|(e, _)| *e == session.environment)
            .map(|(_, p)| *p)
            .unwrap_or(PermissionSet::NONE);
        let auditors = env.is_some_and(|e| e.auditors_watch);
        let moderated = env.is_some_and(|e| e.moderated);
        if let Err(r) = session.may_watch(&holder.name, &permissions, auditors) {
            let code = match r {
                Refusal::TerminalClosed(_) => close::NOT_ACTIVE,
                Refusal::NotWatcher => close::NOT_WATCHER,
                _ => close::NOT_FOUND,
            };
            let _ = ws.send(refuse(code, r.to_string())).await;
            return;
        }
        let moderates = session.moderates(&holder.name, &permissions);
        let name = holder.name.clone();
        let hold = self.holds.open(
            holder,
            Held::Watch {
                session: id,
                environment: session.environment.clone(),
            },
        );
        let watcher = Watcher {
            id,
            name,
            moderates,
            moderated,
        };
        match self.recorder.writer_here(id).await {
            Some(writer) => self.pump(ws, &watcher, writer, Some(hold)).await,
            None => self.forward(ws, watcher, host, hold).await,
        }
    }

    /// Serves a watcher whom another replica checked and forwards here (its pass says who).
    pub async fn serve_forwarded(&self, mut ws: WebSocket, pass: Pass) {
        let id = pass.session;
        // One read: whether it runs, and whether its environment is moderated.
        let session = match self.store.get(id).await {
            Ok(Some(s)) if s.state == breakglass_shared::SessionState::Active => Some(s),
            _ => None,
        };
        let (Some(writer), Some(_)) = (self.recorder.writer_here(id).await, &session) else {
            let why = "this session's terminal is not served by this replica".to_string();
            let _ = ws.send(close_frame(close::MOVED, &why)).await;
            return;
        };
        let moderated = session
            .and_then(|s| self.config.environment(&s.environment).map(|e| e.moderated))
            .unwrap_or(false);
        let watcher = Watcher {
            id,
            name: pass.name,
            moderates: pass.moderates,
            moderated,
        };
        self.pump(ws, &watcher, writer, None).await;
    }

    /// Seats the watcher at the hub of the writer held here, and sends the screen and the
    /// stream until the socket, the session's terminal here or the hold closes.
    async fn pump(&self, ws: WebSocket, watcher: &Watcher, writer: CastWriter, hold: Option<Hold>) {
        let Watcher {
            id,
            ref name,
            moderates,
            moderated,
        } = *watcher;
        let mut hold = hold;
        let hub = self.watches.hub(id);
        let mut closed = hub.closed();
        let mut audience = hub.audience();
        let mut joined = hub.join(&writer, name, moderates);
        tracing::info!(%id, watcher = %name, "watching");
        let (mut sink, mut stream) = ws.split();
        let mut ignored = 0usize;
        let store = self.recorder.store().as_ref();
        // The screen being fetched after a nudge. Polled beside everything else, so a watcher
        // whose screen waits (for the painter, or for the recording's store) is still closed
        // at once on the hold's end, the session's end or the browser's going.
        let mut catching: Option<Pin<Box<dyn Future<Output = Caught> + Send + '_>>> = None;
        let mut behind = false;
        let reason: CloseReason = 'serve: loop {
            if let Some(why) = hold.as_ref().and_then(Hold::ended_now) {
                break CloseReason {
                    code: close::REVOKED,
                    reason: why,
                };
            }
            tokio::select! {
                // Live frames queued once the screen is asked for come after it.
                frame = joined.queue.recv(), if catching.is_none() => {
                    let Some(frame) = frame else { continue };
                    if sink.send(Message::Binary(frame)).await.is_err() {
                        break CloseReason { code: 1001, reason: "browser gone".into() };
                    }
                }
                () = joined.nudge.notified(), if catching.is_none() => {
                    // Whatever was queued is older than the screen about to be sent.
                    while joined.queue.try_recv().is_ok() {
                        behind = true;
                    }
                    catching = Some(Box::pin(catch_up(&hub, joined.key, &writer, store)));
                }
                caught = async { match catching.as_mut() { Some(c) => c.await, None => std::future::pending().await } } => {
                    catching = None;
                    let frames = match caught {
                        Caught::Frames(frames) => frames,
                        Caught::Again => continue,
                        Caught::Failed(e) => break CloseReason { code: close::RELAY_ERROR, reason: format!("cannot draw the screen: {e}") },
                    };
                    if std::mem::take(&mut behind) {
                        let text = "you fell behind the terminal's output; the screen is drawn afresh";
                        let status = audience_status(&audience.borrow(), moderated, text.into());
                        if sink.send(status_frame(&status)).await.is_err() {
                            break CloseReason { code: 1001, reason: "browser gone".into() };
                        }
                    }
                    for frame in frames {
                        if sink.send(Message::Binary(frame)).await.is_err() {
                            break 'serve CloseReason { code: 1001, reason: "browser gone".into() };
                        }
                    }
                }
                changed = audience.changed() => {
                    if changed.is_err() { continue; }
                    let status = audience_status(&audience.borrow_and_update(), moderated, "watching".into());
                    if sink.send(status_frame(&status)).await.is_err() {
                        break CloseReason { code: 1001, reason: "browser gone".into() };
                    }
                }
                msg = stream.next() => match msg {
                    Some(Ok(Message::Close(_))) => break CloseReason { code: 1000, reason: "closed by the browser".into() },
                    None | Some(Err(_)) => break CloseReason { code: 1001, reason: "browser gone".into() },
                    // Read and dropped: a watcher has no way to the pod.
                    Some(Ok(_)) => ignored += 1,
                },
                why = async { match hold.as_mut() { Some(h) => h.ended().await, None => std::future::pending().await } } => {
                    break CloseReason { code: close::REVOKED, reason: why };
                }
                reason = async { closed.wait_for(Option::is_some).await.ok().and_then(|r| r.clone()) } => {
                    let (code, reason) = reason.unwrap_or((close::SESSION_ENDED, "session ended".into()));
                    break CloseReason { code, reason };
                }
            }
        };
        drop(catching);
        drop(joined);
        let _ = sink.send(close_frame(reason.code, &reason.reason)).await;
        tracing::info!(%id, watcher = %name, code = reason.code, ignored, "stopped watching");
    }
}

/// What catching up after a nudge came to.
enum Caught {
    /// The screen's frames, to send before anything queued from now on.
    Frames(Vec<Bytes>),
    /// Nothing to send yet; the next nudge says when (another watcher draws the screen, this
    /// one just drew it, or the painter was dropped meanwhile).
    Again,
    /// The screen cannot be drawn: the watcher is closed with why.
    Failed(String),
}

/// Asks the hub for seat `key`'s screen and waits for it (the painter's answer, or the first
/// screen drawn from the recording's stored tail).
async fn catch_up(hub: &Hub, key: u64, writer: &CastWriter, store: &dyn RecordingStore) -> Caught {
    match hub.catch_up(key, writer) {
        CatchUp::Frames(f) => f.await.map_or(Caught::Again, Caught::Frames),
        CatchUp::Wait => Caught::Again,
        CatchUp::Draw { len, draw } => match hub.first_screen(writer, store, len, draw).await {
            Ok(()) => Caught::Again,
            Err(e) => Caught::Failed(e),
        },
    }
}
