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
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use breakglass_shared::session::{Progress, RekorEntry};
use breakglass_shared::terminal::{close, Frame, Status, MAX_FRAME};
use breakglass_shared::{EndReason, Session, SessionEvent, SessionState};
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{oneshot, Mutex};
use uuid::Uuid;

use crate::lifecycle;
use crate::recording::{
    recording_key, CastWriter, OnStored, RecordingConfig, RecordingStore, SessionInfo,
    TransparencyLog, WriterState,
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
///
/// One writer per session across replicas: the replica whose writer records a session holds
/// the database lease `recording:<id>` (renewed every second while the writer lives, released
/// once the final version is on the row). Another replica neither starts nor continues that
/// recording while the lease is held; when the holder dies the lease expires and the next
/// replica that needs the recording continues it (`CastWriter::resume`).
pub struct Relays {
    store: Arc<dyn RecordingStore>,
    log: Option<Arc<TransparencyLog>>,
    config: RecordingConfig,
    /// This process's lease holder name.
    holder: String,
    writers: Mutex<HashMap<Uuid, CastWriter>>,
    conns: Mutex<HashMap<Uuid, oneshot::Sender<CloseReason>>>,
}

/// How often the writer's replica renews its lease and looks at the session's state.
const KEEP_EVERY: Duration = Duration::from_secs(1);

/// Name of the lease of a session's recording.
fn lease_name(id: Uuid) -> String {
    format!("recording:{id}")
}

fn now_ms() -> i64 {
    i64::try_from(time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
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
            log: config.open_log()?,
            config,
            holder: Uuid::now_v7().to_string(),
            writers: Mutex::new(HashMap::new()),
            conns: Mutex::new(HashMap::new()),
        })
    }

    /// The recording store.
    pub fn store(&self) -> &Arc<dyn RecordingStore> {
        &self.store
    }

    /// The transparency log final hashes are anchored in, when configured.
    pub fn log(&self) -> Option<&TransparencyLog> {
        self.log.as_deref()
    }

    /// Anchors the final recording hash of `s` (the version on its row, in `Ending`) in the
    /// transparency log, when one is configured and the row has no entry yet. Two quick tries:
    /// the session ends either way (its cluster objects must go), and the sweep keeps trying
    /// for sessions that ended unanchored ([`Relays::anchor_ended`]).
    pub async fn anchor(&self, ctx: &Arc<Context>, s: &Session) {
        if let Some(entry) = self.submit(ctx, s, 2).await {
            if let Err(e) = lifecycle::record_progress(ctx, s.id, Progress::Anchored(entry)).await {
                tracing::warn!(id = %s.id, error = %e.body.message, "log entry not put on the row");
            }
        }
    }

    /// Anchors the final hash of an `Ended` session that ended unanchored (one try); true when
    /// the entry is now on the row.
    pub async fn anchor_ended(&self, ctx: &Arc<Context>, s: &Session) -> bool {
        let Some(entry) = self.submit(ctx, s, 1).await else {
            return false;
        };
        match lifecycle::anchor_late(ctx, s.id, &entry).await {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(id = %s.id, error = %e.body.message, "log entry not put on the row");
                false
            }
        }
    }

    /// Submits the row's final hash, up to `attempts` times while the log is unreachable.
    async fn submit(&self, ctx: &Context, s: &Session, attempts: u32) -> Option<RekorEntry> {
        let (Some(log), Some(rec), None) = (&self.log, &s.recording, &s.rekor) else {
            return None;
        };
        let mut delay = Duration::from_millis(500);
        for attempt in 1..=attempts {
            match log.anchor(&rec.sha256).await {
                Ok(entry) => {
                    tracing::info!(id = %s.id, uuid = %entry.uuid, log_index = entry.log_index, "recording hash anchored");
                    ctx.metrics.anchors.with_label_values(&["anchored"]).inc();
                    return Some(entry);
                }
                Err(e @ crate::recording::LogError::Unavailable(_)) if attempt < attempts => {
                    tracing::warn!(id = %s.id, attempt, error = %e, "anchoring failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                }
                Err(e) => {
                    tracing::error!(id = %s.id, error = %e, log = log.url(), "the recording hash could not be anchored (the sweep tries again)");
                    ctx.metrics.anchors.with_label_values(&["failed"]).inc();
                    return None;
                }
            }
        }
        None
    }

    /// How long a lease outlives its last renewal: a crashed holder's sessions are continued
    /// by another replica after this.
    pub fn lease_ttl(&self) -> Duration {
        (self.config.writer.flush_interval * 3).max(Duration::from_secs(10))
    }

    /// Takes or renews this replica's lease on the recording of `id`; false when another
    /// live replica holds it.
    async fn claim(&self, ctx: &Context, id: Uuid) -> Result<bool, String> {
        let ttl = i64::try_from(self.lease_ttl().as_millis()).unwrap_or(i64::MAX);
        ctx.store
            .try_lease(&lease_name(id), &self.holder, now_ms(), ttl)
            .await
            .map_err(|e| format!("the recording's lease cannot be taken: {e}"))
    }

    /// Why a terminal is refused here (short: it is a close reason).
    fn held_elsewhere(&self) -> String {
        format!(
            "another server replica records this session; retry (a stopped replica's recording moves here within {} s)",
            self.lease_ttl().as_secs()
        )
    }

    /// Starts the recording of a session about to activate: no recording, no session. The
    /// header is stored at once, so an unreachable store fails the activation before anything
    /// is created in the cluster. A session whose row already names a recording (activation
    /// re-driven after a restart) continues that recording. `Ok(false)`: another replica
    /// records (and so activates) this session; leave it to that one.
    pub async fn start_recording(&self, ctx: &Arc<Context>, s: &Session) -> Result<bool, String> {
        let mut writers = self.writers.lock().await;
        if writers.contains_key(&s.id) {
            return Ok(true);
        }
        if !self.claim(ctx, s.id).await? {
            return Ok(false);
        }
        self.store.check().await.map_err(|e| {
            format!("the recording store is unavailable, so no session can start: {e}")
        })?;
        if s.recording.is_some() {
            let existing = self.latest(s.id).await?;
            let w = self
                .resume(ctx, s, existing, "server restarted during activation")
                .await?;
            self.keep(ctx, s.id, &w);
            writers.insert(s.id, w);
            return Ok(true);
        }
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
        end_session_when_failed(ctx, s.id, &writer);
        self.keep(ctx, s.id, &writer);
        writers.insert(s.id, writer);
        Ok(true)
    }

    /// While `writer` lives: renews the lease every [`KEEP_EVERY`], and finishes the recording
    /// here once the session left `Active` (it may have been ended through another replica,
    /// which waits for this lease). A lease lost to another replica (this one was cut off
    /// longer than the lease) abandons the writer: the other replica continues the recording.
    fn keep(&self, ctx: &Arc<Context>, id: Uuid, writer: &CastWriter) {
        let ctx = ctx.clone();
        let writer = writer.clone();
        tokio::spawn(async move {
            let Some(relays) = ctx.relays.clone() else {
                return;
            };
            let mut tick = tokio::time::interval(KEEP_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if writer.is_closed() {
                    return;
                }
                match relays.claim(&ctx, id).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::error!(%id, "another replica took this session's recording; this one stops writing it");
                        writer.abandon("another server replica continues this recording");
                        relays.writers.lock().await.remove(&id);
                        relays
                            .close_conn(id, close::RELAY_ERROR, relays.held_elsewhere())
                            .await;
                        return;
                    }
                    // The database is unreachable: keep recording; the lease says who writes.
                    Err(e) => tracing::warn!(%id, error = %e, "recording lease not renewed"),
                }
                match ctx.store.get(id).await {
                    Ok(Some(s))
                        if !matches!(s.state, SessionState::Activating | SessionState::Active) =>
                    {
                        let reason = s.end_reason.as_ref().map_or("ended", |r| r.kind());
                        relays.end(&ctx, &s, reason).await;
                        return;
                    }
                    _ => {}
                }
            }
        });
    }

    /// The newest stored version of the recording of `id`.
    async fn latest(&self, id: Uuid) -> Result<Vec<u8>, String> {
        self.store.get(&recording_key(id), None).await.map_err(|e| {
            format!("the recording of this session cannot be read, so it cannot continue: {e}")
        })
    }

    /// Continues the stored recording of `s` with a new writer (this server has none: it
    /// restarted, or another replica ran the session). The latest stored version must extend
    /// the version on the session row byte for byte, so a recording changed behind the
    /// server's back is never continued.
    async fn resume(
        &self,
        ctx: &Arc<Context>,
        s: &Session,
        existing: Vec<u8>,
        why: &str,
    ) -> Result<CastWriter, String> {
        let key = recording_key(s.id);
        if let Some(row) = &s.recording {
            let prefix = usize::try_from(row.bytes)
                .ok()
                .and_then(|n| existing.get(..n));
            if prefix.map(crate::recording::sha256_hex).as_deref() != Some(row.sha256.as_str()) {
                return Err(format!(
                    "the stored recording {key} does not continue the version on the session row \
                     (sha256 {}, {} bytes); it is not continued (run verify-recording)",
                    row.sha256, row.bytes
                ));
            }
        }
        let writer = CastWriter::resume(
            self.store.clone(),
            key,
            existing,
            why,
            self.config.writer.clone(),
            RowStored {
                ctx: ctx.clone(),
                id: s.id,
            },
        )
        .await
        .map_err(|e| format!("the recording could not be continued: {e}"))?;
        tracing::info!(id = %s.id, %why, "recording resumed");
        end_session_when_failed(ctx, s.id, &writer);
        Ok(writer)
    }

    /// The live recording of an active session on this server, continuing the stored one
    /// when this server has none yet.
    async fn writer_for(&self, ctx: &Arc<Context>, s: &Session) -> Result<CastWriter, String> {
        let mut writers = self.writers.lock().await;
        if let Some(w) = writers.get(&s.id) {
            return Ok(w.clone());
        }
        if !self.claim(ctx, s.id).await? {
            return Err(self.held_elsewhere());
        }
        let existing = self.latest(s.id).await?;
        let w = self.resume(ctx, s, existing, "server restarted").await?;
        self.keep(ctx, s.id, &w);
        writers.insert(s.id, w.clone());
        Ok(w)
    }

    /// Adds a marker to a live recording (e.g. `active`).
    pub async fn marker(&self, id: Uuid, label: &str) {
        if let Some(w) = self.writers.lock().await.get(&id) {
            let _ = w.marker(label);
        }
    }

    /// Closes the session's connection with `reason` and stores the recording's final
    /// version (with its `ended` marker), then gives up the recording's lease. When another
    /// replica writes the recording, waits (up to the lease's lifetime) for it to finish, or for
    /// its lease to expire. When no replica has a live writer but a recording is stored and not
    /// yet finished (a server restarted), that one is continued and finished. Safe to call
    /// when there is nothing to finish, and more than once.
    pub async fn end(&self, ctx: &Arc<Context>, s: &Session, reason: &str) {
        let id = s.id;
        self.close_conn(id, close::SESSION_ENDED, format!("session ended: {reason}"))
            .await;
        // Finish a live writer while it stays registered: a concurrent `end` finishes the same
        // writer (same result) instead of continuing the recording a second time.
        let live = self.writers.lock().await.get(&id).cloned();
        if let Some(w) = live {
            if let Err(e) = w.finish(reason).await {
                tracing::warn!(%id, error = %e, "final recording version not stored; earlier versions are kept");
            }
            self.writers.lock().await.remove(&id);
            self.release(ctx, id).await;
            return;
        }
        if s.recording.is_none() {
            return;
        }
        let deadline = tokio::time::Instant::now() + self.lease_ttl() + Duration::from_secs(2);
        loop {
            match self.claim(ctx, id).await {
                Ok(true) => break,
                Ok(false) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Ok(false) => {
                    tracing::warn!(%id, "another replica still holds the recording; it finishes it");
                    return;
                }
                Err(e) => {
                    tracing::warn!(%id, error = %e, "the recording could not be finished; earlier versions are kept");
                    return;
                }
            }
        }
        // The lease is ours: whoever wrote before has finished or is gone.
        match self.latest(id).await {
            Ok(bytes) if crate::recording::ended_reason(&bytes).is_some() => {}
            Ok(bytes) => {
                // Read the row again: the previous writer may have stored versions since `s`.
                let current = match ctx.store.get(id).await {
                    Ok(Some(now)) => now,
                    _ => s.clone(),
                };
                match self.resume(ctx, &current, bytes, "server restarted").await {
                    Ok(w) => {
                        if let Err(e) = w.finish(reason).await {
                            tracing::warn!(%id, error = %e, "final recording version not stored; earlier versions are kept");
                        }
                    }
                    Err(e) => {
                        tracing::warn!(%id, error = %e, "the recording could not be finished; earlier versions are kept")
                    }
                }
            }
            Err(e) => {
                tracing::warn!(%id, error = %e, "the recording could not be finished; earlier versions are kept")
            }
        }
        self.release(ctx, id).await;
    }

    async fn release(&self, ctx: &Context, id: Uuid) {
        if let Err(e) = ctx.store.release_lease(&lease_name(id), &self.holder).await {
            tracing::debug!(%id, error = %e, "recording lease not released; it expires");
        }
    }

    /// Closes the session's live connection on this replica, if any.
    async fn close_conn(&self, id: Uuid, code: u16, reason: String) {
        if let Some(tx) = self.conns.lock().await.remove(&id) {
            let _ = tx.send(CloseReason { code, reason });
        }
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

/// "No recording, no session": a recording that fails ends the session.
fn end_session_when_failed(ctx: &Arc<Context>, id: Uuid, writer: &CastWriter) {
    let mut state = writer.watch_state();
    let ctx = ctx.clone();
    tokio::spawn(async move {
        while state.changed().await.is_ok() {
            let now = state.borrow().clone();
            if let WriterState::Failed(reason) = now {
                tracing::warn!(%id, %reason, "recording failed; ending the session");
                let _ = lifecycle::apply(&ctx, id, |_| {
                    Ok(SessionEvent::SystemEnd {
                        reason: EndReason::RecordingFailed,
                    })
                })
                .await;
                break;
            }
        }
    });
}

/// A close frame; the reason is cut to the 123 bytes a close frame can carry (at a character
/// boundary, marked with `…`), since a longer one breaks the browser's socket instead.
fn close_frame(code: u16, reason: &str) -> Message {
    const MAX: usize = 123;
    let reason = if reason.len() <= MAX {
        reason.to_string()
    } else {
        let mut end = MAX - '…'.len_utf8();
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &reason[..end])
    };
    Message::Close(Some(CloseFrame {
        code,
        reason: reason.into(),
    }))
}

async fn close_with(mut ws: WebSocket, code: u16, reason: impl Into<String>) {
    let reason: String = reason.into();
    if reason.len() > 123 {
        tracing::info!(code, %reason, "terminal refused");
    }
    let _ = ws.send(close_frame(code, &reason)).await;
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
    let writer = match relays.writer_for(&ctx, &session).await {
        Ok(w) => w,
        Err(e) => return close_with(ws, close::RELAY_ERROR, e).await,
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
    let _ = sink.send(close_frame(reason.code, &reason.reason)).await;
    tracing::info!(%id, code = reason.code, reason = %reason.reason, "terminal closed");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_reasons_fit_a_close_frame() {
        let short = close_frame(4000, "fine");
        assert!(matches!(short, Message::Close(Some(ref c)) if c.reason.as_str() == "fine"));
        let long = "é".repeat(200);
        let Message::Close(Some(c)) = close_frame(4000, &long) else {
            panic!("not a close frame")
        };
        assert!(c.reason.len() <= 123, "{}", c.reason.len());
        assert!(c.reason.ends_with('…'));
    }
}
