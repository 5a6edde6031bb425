//! The keeper: one task per replica (not one per writer) that renews the leases of this
//! replica's writers and finishes a recording once its session left `Active`.
//!
//! A session ended on any replica is noticed from the change stream, which carries the other
//! replicas' commits too (the database notifies them; `state` re-reads and publishes them).
//! Only when changes may have been missed (this receiver lagged, or the notifications were
//! interrupted) does the keeper read the rows of the sessions it records.

use std::sync::{Arc, Weak};
use std::time::Duration;

use breakglass_shared::api::SessionChange;
use breakglass_shared::terminal::close;
use breakglass_shared::{Session, SessionState};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::watch;

use uuid::Uuid;

use super::Recorder;
use crate::ports::Terminals;

/// How often the keeper renews the leases of a lifetime `ttl`: three times per lifetime, so a
/// renewal may fail twice before the lease runs out. Every renewal is one database write per
/// recorded session (a commit with an fsync on SQLite); renewing every second was most of what
/// an idle server with many open terminals spent (BENCHMARKS.md, "Relay and recording").
fn keep_every(ttl: Duration) -> Duration {
    ttl / 3
}

/// Runs the keeper of `recorder` until the recorder is dropped.
pub(super) fn spawn(
    recorder: Weak<Recorder>,
    mut changes: broadcast::Receiver<SessionChange>,
    mut missed: watch::Receiver<u64>,
) {
    let Some(every) = recorder.upgrade().map(|r| keep_every(r.lease_ttl())) else {
        return;
    };
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let Some(r) = recorder.upgrade() else { return };
                    r.keep_all().await;
                }
                change = changes.recv() => {
                    let Some(r) = recorder.upgrade() else { return };
                    match change {
                        Ok(c) => {
                            r.note(&c).await;
                            r.on_change(&c.session).await;
                        }
                        Err(RecvError::Lagged(_)) => r.reread().await,
                        Err(RecvError::Closed) => return,
                    }
                }
                gone = missed.changed() => {
                    let Some(r) = recorder.upgrade() else { return };
                    if gone.is_err() {
                        return;
                    }
                    r.reread().await;
                }
            }
        }
    });
}

impl Recorder {
    /// The writers of this replica now.
    async fn live(&self) -> Vec<(uuid::Uuid, crate::recording::CastWriter)> {
        self.writers
            .lock()
            .await
            .iter()
            .map(|(id, w)| (*id, w.clone()))
            .collect()
    }

    /// One pass: every live writer's lease renewed, all in one statement (one write per
    /// writer was an idle server's largest cost at a thousand open terminals: BENCHMARKS.md);
    /// a lost one abandons its writer.
    async fn keep_all(self: &Arc<Self>) {
        let open: Vec<_> = self
            .live()
            .await
            .into_iter()
            .filter(|(_, w)| !w.is_closed())
            .collect();
        if open.is_empty() {
            return;
        }
        let ids: Vec<Uuid> = open.iter().map(|(id, _)| *id).collect();
        let lost = match self.renew(&ids).await {
            Ok(lost) => lost,
            // The database is unreachable: keep recording; the lease says who writes.
            Err(e) => {
                tracing::warn!(writers = ids.len(), error = %e, "recording leases not renewed");
                return;
            }
        };
        for id in lost {
            // One finished meanwhile gave its lease up itself: nothing was lost.
            let Some((_, writer)) = open.iter().find(|(w, _)| *w == id) else {
                continue;
            };
            if writer.is_closed() {
                continue;
            }
            // This replica was cut off longer than the lease: another one continues the
            // recording, and this one must not write a byte more.
            tracing::error!(%id, "another replica took this session's recording; this one stops writing it");
            writer.abandon("another server replica continues this recording");
            self.writers.lock().await.remove(&id);
            self.lost(id).await;
        }
    }

    /// Reads the rows of the sessions recorded here, for changes that may have been missed.
    async fn reread(self: &Arc<Self>) {
        for (id, _) in self.live().await {
            if let Ok(Some(s)) = self.db.get(id).await {
                self.on_change(&s).await;
            }
        }
    }

    /// Finishes the recording of `s` here when it has a live writer and left `Active` (it may
    /// have been ended through another replica, which waits for this lease).
    /// Writes into a recording made here what a change did to its session that the person
    /// at the terminal and a later reviewer should see in it (more time asked, given or
    /// refused), wherever that change was made.
    async fn note(&self, c: &SessionChange) {
        let Some(text) = c.session.extension_note(&c.kind) else {
            return;
        };
        if let Some(w) = self.writers.lock().await.get(&c.session.id) {
            let _ = w.marker(&text);
        }
    }

    async fn on_change(self: &Arc<Self>, s: &Session) {
        // Only the states after `Active` end a recording. A change is a snapshot that can
        // reach the keeper late (it lags behind the commits under load): one from before the
        // recording started (`Approved`) must not end the writer started since.
        if !matches!(
            s.state,
            SessionState::Ending | SessionState::Ended | SessionState::Failed
        ) {
            return;
        }
        // A writer already closed is being finished (or was abandoned).
        let open = self
            .writers
            .lock()
            .await
            .get(&s.id)
            .is_some_and(|w| !w.is_closed());
        if !open {
            return;
        }
        let me = self.clone();
        let s = s.clone();
        // Off the keeper's loop: storing the final version may take a while.
        tokio::spawn(async move {
            let reason = s.end_reason.as_ref().map_or("ended", |r| r.kind());
            me.connections
                .close(
                    s.id,
                    close::SESSION_ENDED,
                    format!("session ended: {reason}"),
                )
                .await;
            me.end(&s, reason).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_renewed_thrice_per_lifetime_not_every_second() {
        let ttl = Duration::from_secs(10);
        assert!(keep_every(ttl) * 3 <= ttl);
        assert!(keep_every(ttl) > Duration::from_secs(3));
    }
}
