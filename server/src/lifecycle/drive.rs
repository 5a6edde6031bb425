//! [`Lifecycle::drive`]: moves a session on to its next resting state, doing the cluster and
//! recording work each stage owes. Safe to call again at any point: the sweep does after a
//! crash, and every step below is idempotent.

use breakglass_shared::session::Progress;
use breakglass_shared::terminal::close;
use breakglass_shared::{Session, SessionEvent, SessionState};
use uuid::Uuid;

use super::progress::RowProgress;
use super::{Error, Lifecycle};
#[cfg(feature = "failpoints")]
use crate::failpoint::{self, Failpoint};
use crate::ports::{ClusterOps, Recording};

impl Lifecycle {
    /// Moves a session one stage on toward its next resting state: Approved → Activating →
    /// Active (or Failed), Ending → Ended.
    /// A drive of a session this replica is driving already returns the row as it is, and the
    /// running drive goes round once more when it is done.
    pub async fn drive(&self, id: Uuid) -> Result<Session, Error> {
        let Some(mut claim) = self.driving.take(id) else {
            return self.get(id).await;
        };
        loop {
            let r = self.drive_once(id).await;
            if !claim.again() {
                return r;
            }
        }
    }

    async fn drive_once(&self, id: Uuid) -> Result<Session, Error> {
        let mut s = self.get(id).await?;
        let cluster = self.cluster_for(&s.environment).cloned();
        if s.state == SessionState::Approved {
            if !self.owes_activation(&s.environment) {
                return Ok(s);
            }
            // Approved just before a lock: it never starts.
            if let Err(Error::Locked(_)) = self.refuse_if_locked(&s.environment, &s.requester).await
            {
                self.stop_locked(&s).await;
                return self.get(id).await;
            }
            s = self.apply_event(id, SessionEvent::BeginActivation).await?;
            #[cfg(feature = "failpoints")]
            failpoint::hit(Failpoint::Activating);
        }
        match (s.state, cluster) {
            (SessionState::Activating, Some(c)) => self.activate(s, c.as_ref()).await,
            // Nothing was created: the request cannot run here, and waiting would not help.
            (SessionState::Activating, None) if !self.park_without_cluster => {
                let error = no_cluster(&s.environment);
                self.finish_recording(&s, "activation failed").await?;
                self.apply_event(id, SessionEvent::ActivationFailed { error })
                    .await
            }
            (SessionState::Ending, c) => self.end(s, c.as_deref()).await,
            _ => Ok(s),
        }
    }

    /// Activating → Active, or Failed with everything created removed.
    async fn activate(&self, s: Session, cluster: &dyn ClusterOps) -> Result<Session, Error> {
        let id = s.id;
        let progress = RowProgress {
            lifecycle: self,
            id,
        };
        let outcome = match self.recorder.start(&s).await {
            Ok(Recording::Here) => cluster
                .activate(&s, &progress)
                .await
                .map_err(|e| e.to_string()),
            // Another replica records this session and is activating it.
            Ok(Recording::Elsewhere) => return Ok(s),
            Err(e) => Err(e.to_string()),
        };
        let error = match outcome {
            Ok(()) => {
                #[cfg(feature = "failpoints")]
                failpoint::hit(Failpoint::Running);
                let active = self.apply_event(id, SessionEvent::Activated).await?;
                self.recorder.marker(id, "active").await;
                return Ok(active);
            }
            Err(error) => error,
        };
        // Everything created so far goes before the session is marked Failed.
        let current = self.store.get(id).await?.unwrap_or(s);
        self.finish_recording(&current, "activation failed").await?;
        if let Err(cleanup) = cluster.cleanup(&current, &progress).await {
            // Nothing recorded as created: nothing to undo here. Anything the cluster did
            // create unrecorded carries the session label, and the sweep removes it once the
            // session is final.
            if created_anything(&current) {
                tracing::warn!(%cleanup, "cleanup after a failed activation did not finish; the sweep retries it");
                return Err(cleanup.into());
            }
        }
        self.apply_event(id, SessionEvent::ActivationFailed { error })
            .await
    }

    /// Finishes the recording of `s` and makes sure its row names the final version before the
    /// session becomes final: a final row takes no more progress, and the writer's own report
    /// of that version is lost when the database was down at that moment, which would leave
    /// the row naming an earlier version for good (and the sweep building a shorter final cast
    /// from it). A failure here leaves the session where it is: the next drive finds the same
    /// final version and tries again.
    async fn finish_recording(&self, s: &Session, reason: &str) -> Result<(), Error> {
        let Some(done) = self.recorder.finish(s, reason).await else {
            return Ok(());
        };
        let named = self.store.get(s.id).await?.and_then(|now| now.recording);
        if named.as_ref() != Some(&done) {
            self.record_progress(s.id, Progress::RecordingStored(done))
                .await?;
        }
        Ok(())
    }

    /// Ending → Ended: the terminal closes, the recording is finished and anchored, then the
    /// cluster objects go.
    async fn end(&self, s: Session, cluster: Option<&dyn ClusterOps>) -> Result<Session, Error> {
        let id = s.id;
        #[cfg(feature = "failpoints")]
        failpoint::hit(Failpoint::Ending);
        let reason = s.end_reason.as_ref().map_or("ended", |r| r.kind());
        self.terminals
            .close(id, close::SESSION_ENDED, format!("session ended: {reason}"))
            .await;
        self.finish_recording(&s, reason).await?;
        // The row now names the final version: anchor its hash before the session is final
        // (the row takes no more progress after that).
        if let Some(now) = self.store.get(id).await? {
            if let Some(entry) = self.recorder.anchor(&now, 2).await {
                if let Err(e) = self.record_progress(id, Progress::Anchored(entry)).await {
                    tracing::warn!(%id, error = %e, "log entry not put on the row");
                }
            }
        }
        // Nothing was ever created when activation never started.
        if s.activating_at.is_some() {
            let Some(c) = cluster else { return Ok(s) };
            let progress = RowProgress {
                lifecycle: self,
                id,
            };
            c.cleanup(&s, &progress).await?;
        }
        self.apply_event(id, SessionEvent::CleanupDone).await
    }
}

/// Why a session in `environment` cannot start, and what fixes it.
pub fn no_cluster(environment: &str) -> String {
    format!(
        "environment `{environment}` has no cluster configured, so no session can start there: \
         give it a `cluster` in the server's configuration ([[environments]] name = \"{environment}\") \
         and check it with `breakglass-server doctor --cluster {environment}`"
    )
}

/// Whether the row records any object created in the cluster.
fn created_anything(s: &Session) -> bool {
    s.grant_name.is_some()
        || s.process_access_annotated
        || s.debug_container.is_some()
        || s.copy_pod.is_some()
}
