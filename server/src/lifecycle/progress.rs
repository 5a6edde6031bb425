//! How steps reach the session row: the [`ProgressSink`] the cluster driver is handed (each
//! step committed, then, in a `failpoints` build, its failpoint), and the drain of the
//! recorder's events.

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use breakglass_shared::session::Progress;
use breakglass_shared::{EndReason, Session, SessionEvent};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::Lifecycle;
#[cfg(feature = "failpoints")]
use crate::failpoint::{self, Failpoint};
use crate::ports::{CleanupStep, ProgressSink, RecorderEvent, SessionMoved};

/// The sink for one session's steps.
pub(super) struct RowProgress<'a> {
    pub(super) lifecycle: &'a Lifecycle,
    pub(super) id: Uuid,
}

impl RowProgress<'_> {
    async fn commit(&self, p: Progress) -> Result<Session, SessionMoved> {
        self.lifecycle
            .record_progress(self.id, p)
            .await
            .map_err(|e| SessionMoved(Arc::new(e)))
    }
}

#[async_trait]
impl ProgressSink for RowProgress<'_> {
    async fn record(&self, p: Progress) -> Result<Session, SessionMoved> {
        #[cfg(feature = "failpoints")]
        let point = Failpoint::after_progress(&p);
        let next = self.commit(p).await?;
        #[cfg(feature = "failpoints")]
        if let Some(point) = point {
            failpoint::hit(point);
            failpoint::pause(point).await;
        }
        Ok(next)
    }

    async fn cleaned(&self, step: CleanupStep) -> Result<Session, SessionMoved> {
        let next = self
            .commit(Progress::CleanupStep {
                detail: step.to_string(),
                left: step.leaves_something(),
            })
            .await?;
        #[cfg(feature = "failpoints")]
        failpoint::hit(Failpoint::after_cleanup(&step));
        Ok(next)
    }
}

/// Applies the recorder's events until the recorder (every sender) is gone.
pub(super) async fn drain(lifecycle: Weak<Lifecycle>, mut events: mpsc::Receiver<RecorderEvent>) {
    while let Some(event) = events.recv().await {
        let Some(lifecycle) = lifecycle.upgrade() else {
            return;
        };
        match event {
            RecorderEvent::Stored { id, version, done } => {
                let r = lifecycle
                    .record_progress(id, Progress::RecordingStored(version))
                    .await;
                if let Err(e) = &r {
                    tracing::debug!(%id, error = %e, "recording version not put on the row");
                }
                #[cfg(feature = "failpoints")]
                if r.is_ok() {
                    failpoint::hit(Failpoint::Recording);
                }
                let _ = done.send(());
            }
            RecorderEvent::Failed { id, reason } => {
                // "No recording, no session": a recording that fails ends the session.
                tracing::warn!(%id, %reason, "recording failed; ending the session");
                let ended = lifecycle
                    .apply_event(
                        id,
                        SessionEvent::SystemEnd {
                            reason: EndReason::RecordingFailed,
                        },
                    )
                    .await;
                if let Err(e) = ended {
                    tracing::debug!(%id, error = %e, "session not ended after its recording failed");
                }
            }
        }
    }
}
