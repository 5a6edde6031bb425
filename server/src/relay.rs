//! The terminal relay: browser ⇄ WebSocket ⇄ server ⇄ `pods/attach` ⇄ the debug container,
//! with the recording tee here and only here (one way in, one way out). The relay is the pump
//! and nothing else: the writer comes from the recorder, the attach from the cluster port, and
//! the connection registry (takeover, closing at End) is `crate::connections`.

use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket};
use breakglass_shared::access::{Action, Refusal};
use breakglass_shared::terminal::{close, Frame, MAX_FRAME, TAG_DATA};
use breakglass_shared::PermissionSet;
use futures::{SinkExt, StreamExt};
use uuid::Uuid;

use crate::config::Config;
use crate::connections::{close_frame, CloseReason, Connections};
use crate::holds::{Held, Holder, Holds};
use crate::ports::ClusterOps;
use crate::recorder::Recorder;
use crate::store::Store;
use crate::watch::Audience;

/// What the relay needs to serve a terminal.
pub struct Relay {
    /// Session rows.
    pub store: Arc<dyn Store>,
    /// The writers the output is teed into.
    pub recorder: Arc<Recorder>,
    /// The attach; `None` when no environment has a cluster.
    pub cluster: Option<Arc<dyn ClusterOps>>,
    /// This replica's open terminals.
    pub connections: Arc<Connections>,
    /// What people hold open here, checked again every second (`crate::revocation`).
    pub holds: Arc<Holds>,
    /// Which environments are moderated.
    pub config: Arc<Config>,
}

/// The line a moderated session's requester reads while their input waits.
pub const PAUSED: &str = "input paused: this session is moderated and no approver is watching; it resumes when one watches";

/// The data frames carrying `output` to the browser: as few as the frame limit allows, each
/// the [`TAG_DATA`] tag and a piece of the output.
fn data_frames(output: &[u8]) -> impl Iterator<Item = (&[u8], Vec<u8>)> {
    output.chunks(MAX_FRAME - 1).map(|piece| {
        let mut frame = Vec::with_capacity(1 + piece.len());
        frame.push(TAG_DATA);
        frame.extend_from_slice(piece);
        (piece, frame)
    })
}

async fn close_with(mut ws: WebSocket, code: u16, reason: impl Into<String>) {
    let reason: String = reason.into();
    if reason.len() > 123 {
        tracing::info!(code, %reason, "terminal refused");
    }
    let _ = ws.send(close_frame(code, &reason)).await;
}

impl Relay {
    /// Serves one upgraded connection of `holder` to session `id`, until it closes or the
    /// holder's right to it ends.
    pub async fn serve(&self, ws: WebSocket, id: Uuid, holder: Holder) {
        let user = holder.name.clone();
        let session = match self.store.get(id).await {
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
        // The terminal rule is the shared one (the UI shows the terminal by it too); it does
        // not depend on permissions: only the requester types, only while Active.
        match session.may(Action::UseTerminal, &user, &PermissionSet::NONE) {
            Ok(()) => {}
            Err(r @ Refusal::TerminalClosed(_)) => {
                return close_with(ws, close::NOT_ACTIVE, r.to_string()).await
            }
            // Someone else's session is answered as a missing one: the close must not tell a
            // stranger which ids exist.
            Err(_) => return close_with(ws, close::NOT_FOUND, "no such session").await,
        }
        // The requester must still hold the right the session was given under; one who lost
        // it gets no shell back (and `crate::revocation` ends the session).
        let env = session.environment.as_str();
        if !holder.access.iter().any(|(e, p)| e == env && p.request) {
            let why = format!("you no longer hold tower.breakglass.request in {env}");
            return close_with(ws, close::REVOKED, why).await;
        }
        let mut hold = self.holds.open(
            holder,
            Held::Terminal {
                session: id,
                environment: session.environment.clone(),
            },
        );
        let Some(cluster) = self
            .cluster
            .as_ref()
            .filter(|c| c.serves(&session.environment))
        else {
            return close_with(ws, close::RELAY_ERROR, "no cluster is configured").await;
        };
        let writer = match self.recorder.writer_for(&session).await {
            Ok(w) => w,
            Err(e) => return close_with(ws, close::RELAY_ERROR, e.to_string()).await,
        };
        let mut attached = match cluster.attach(&session).await {
            Ok(a) => a,
            Err(e) => {
                return close_with(ws, close::RELAY_ERROR, format!("cannot attach: {e}")).await
            }
        };
        // `_served` lives until this function returns: a handover waits for it.
        let (mut closed_by_server, _served) = self.connections.take_over(id).await;
        let hub = self.connections.watches().hub(id);
        let mut audience = hub.audience();
        let moderated = self.config.environment(env).is_some_and(|e| e.moderated);
        let paused_now = |a: &Audience| moderated && a.moderators == 0;
        let mut paused = paused_now(&audience.borrow_and_update());
        let (mut sink, mut stream) = ws.split();
        let first = crate::watch::audience_status(
            &audience.borrow(),
            moderated,
            if paused {
                PAUSED.into()
            } else {
                "attached".into()
            },
        );
        if paused {
            let _ = writer.marker("input paused: no approver watching");
        }
        let _ = sink
            .send(Message::Binary(Frame::Status(first).encode().into()))
            .await;
        let mut commands = breakglass_shared::commands::Commands::default();
        // Told once per pause that what was typed went nowhere.
        let mut dropped_told = false;

        let reason: CloseReason = 'relay: loop {
            if let Some(why) = hold.ended_now() {
                let _ = writer.marker(&format!("access revoked: {why}"));
                break CloseReason {
                    code: close::REVOKED,
                    reason: why,
                };
            }
            tokio::select! {
                // Pod → browser, each piece recorded before it is sent. Awaiting the send is
                // the back-pressure: a slow browser slows the reads from the pod, and memory
                // stays at what the cluster sent at once.
                out = attached.output() => {
                    let Some(out) = out else {
                        break CloseReason { code: close::RELAY_ERROR, reason: "the debug container's terminal closed".into() };
                    };
                    for (piece, frame) in data_frames(&out) {
                        let frame = bytes::Bytes::from(frame);
                        // Each command the shell's marked prompt ran is a moment on the
                        // timeline, just before the piece in which it ran.
                        for command in commands.feed(piece) {
                            let _ = writer.marker(&format!("$ {command}"));
                        }
                        if let Err(e) = hub.output(&writer, piece, &frame) {
                            break 'relay CloseReason { code: close::SESSION_ENDED, reason: e.to_string() };
                        }
                        if sink.send(Message::Binary(frame)).await.is_err() {
                            break 'relay CloseReason { code: 1001, reason: "browser gone".into() };
                        }
                    }
                    // The recording's bounds (its unstored tail, its rate) slow the pod too.
                    if let Err(e) = writer.ready().await {
                        break CloseReason { code: close::SESSION_ENDED, reason: e.to_string() };
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
                                Ok(Frame::Data(d)) if paused => {
                                    // Held back in the server: a moderated session's pod gets
                                    // nothing while no approver watches.
                                    if !d.is_empty() && !dropped_told {
                                        dropped_told = true;
                                        let status = crate::watch::audience_status(&audience.borrow(), moderated, PAUSED.into());
                                        let _ = sink.send(Message::Binary(Frame::Status(status).encode().into())).await;
                                    }
                                }
                                Ok(Frame::Data(d)) => {
                                    commands.typed();
                                    let _ = writer.input(d);
                                    if attached.input(d).await.is_err() {
                                        break CloseReason { code: close::RELAY_ERROR, reason: "the debug container stopped taking input".into() };
                                    }
                                }
                                Ok(Frame::Resize { cols, rows }) => {
                                    let (cols, rows) = breakglass_shared::terminal::person_size(cols, rows);
                                    let _ = hub.resize(&writer, cols, rows);
                                    let _ = writer.marker(&format!("resized: {cols}x{rows}"));
                                    if let Err(e) = attached.resize(cols, rows).await {
                                        tracing::info!(%id, error = %e, "terminal: resize not passed on");
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
                changed = audience.changed() => {
                    if changed.is_err() { continue; }
                    let now = audience.borrow_and_update().clone();
                    let was = paused;
                    paused = paused_now(&now);
                    let message = match (was, paused) {
                        (false, true) => {
                            let _ = writer.marker("input paused: no approver watching");
                            dropped_told = false;
                            PAUSED.to_string()
                        }
                        (true, false) => {
                            let _ = writer.marker("input resumed: an approver watches");
                            "input resumed: an approver is watching".to_string()
                        }
                        _ if now.names.is_empty() => "nobody is watching".to_string(),
                        _ => format!("watching: {}", now.names.join(", ")),
                    };
                    let status = crate::watch::audience_status(&now, moderated, message);
                    if sink.send(Message::Binary(Frame::Status(status).encode().into())).await.is_err() {
                        break CloseReason { code: 1001, reason: "browser gone".into() };
                    }
                }
                why = hold.ended() => {
                    let _ = writer.marker(&format!("access revoked: {why}"));
                    break CloseReason { code: close::REVOKED, reason: why };
                }
                r = &mut closed_by_server => {
                    break r.unwrap_or(CloseReason { code: close::SESSION_ENDED, reason: "session ended".into() });
                }
            }
        };
        // Dropping the attach closes its connection to the API server.
        drop(attached);
        let _ = sink.send(close_frame(reason.code, &reason.reason)).await;
        tracing::info!(%id, code = reason.code, reason = %reason.reason, "terminal closed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_goes_out_in_data_frames_within_the_limit() {
        let output: Vec<u8> = (0..2 * MAX_FRAME + 10).map(|i| (i % 251) as u8).collect();
        let mut pieces = Vec::new();
        for (piece, frame) in data_frames(&output) {
            assert!(frame.len() <= MAX_FRAME, "{}", frame.len());
            assert_eq!(Frame::decode(&frame), Ok(Frame::Data(piece)));
            pieces.extend_from_slice(piece);
        }
        assert_eq!(pieces, output, "every byte, in order, once");
        assert_eq!(data_frames(&output).count(), 3);
        assert_eq!(data_frames(b"x").count(), 1);
    }
}
