//! The one place that changes sessions: state machine → store compare-and-set → effects
//! (live event, metrics, cluster work). HTTP handlers and the sweep both call this; neither
//! writes a session itself.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use breakglass_shared::api::SessionChange;
use breakglass_shared::session::{NewSession, Progress};
use breakglass_shared::{Session, SessionEvent, SessionState};
use time::OffsetDateTime;
use tracing::Instrument;
use uuid::Uuid;

use crate::error::ApiError;
use crate::state::Context;
use crate::store::{EventDraft, StoreError};

/// How often a write is retried after losing a compare-and-set race before giving up. Each
/// retry re-reads the row and re-runs the state machine, so a race normally ends in a clear
/// state error (e.g. "cannot approve a session that is Approved"), not in a retry storm.
const CAS_ATTEMPTS: usize = 5;

/// Records a step done in the cluster on the session row (through the state machine).
#[async_trait]
pub trait ProgressSink: Send + Sync {
    /// Records `p`; fails if the session can no longer change.
    async fn record(&self, p: Progress) -> Result<Session, ApiError>;
}

/// The cluster side of a session: implemented by the cluster driver. The lifecycle calls it
/// at the right moments and turns its outcome into transitions; implementations never write
/// sessions themselves.
#[async_trait]
pub trait ClusterOps: Send + Sync + 'static {
    /// Whether this driver reaches `environment`'s cluster.
    fn serves(&self, environment: &str) -> bool;

    /// Creates the grant and the debug container (or copy pod) for an `Activating` session and
    /// waits, bounded, until it runs. Every step must be idempotent: after a crash this is
    /// called again for the same session. Returns a sentence for the requester on failure.
    async fn activate(&self, session: &Session, progress: &dyn ProgressSink) -> Result<(), String>;

    /// Removes everything the session may have created (idempotent; safe when nothing was).
    async fn cleanup(&self, session: &Session, progress: &dyn ProgressSink) -> Result<(), String>;

    /// Whether the debugged pod (or the copy) has disappeared.
    async fn pod_gone(&self, session: &Session) -> Result<bool, String>;

    /// Removes break-glass objects in `environment` whose session is not in `live`; returns how
    /// many objects were removed.
    async fn reconcile(&self, environment: &str, live: &HashSet<Uuid>) -> Result<usize, String>;

    /// Attaches (stdin + tty) to the session's debug container with fresh credentials.
    async fn attach(&self, session: &Session) -> Result<kube::api::AttachedProcess, String>;
}

/// Records a step on the session row, through the state machine.
pub async fn record_progress(
    ctx: &Arc<Context>,
    id: Uuid,
    p: Progress,
) -> Result<Session, ApiError> {
    RowProgress { ctx, id }.record(p).await
}

/// Puts `entry` on an `Ended` session whose final hash was anchored after it ended (the log
/// was unreachable at the end; the sweep retried).
pub async fn anchor_late(
    ctx: &Arc<Context>,
    id: Uuid,
    entry: &breakglass_shared::session::RekorEntry,
) -> Result<Session, ApiError> {
    commit(ctx, id, |s, now| {
        let next = s.anchor_late(entry)?;
        let event = SessionEvent::Progress(Progress::Anchored(entry.clone()));
        Ok((next, draft_for(&event, now), "progress"))
    })
    .await
}

/// Stores a new request (Ground requests start `Approved`) and starts activation if a cluster
/// serves it.
pub async fn create(
    ctx: &Arc<Context>,
    req: NewSession,
    now: OffsetDateTime,
) -> Result<Session, ApiError> {
    let session = Session::new_request(Uuid::now_v7(), req, now);
    let draft = EventDraft {
        actor: session.requester.clone(),
        kind: "create".into(),
        detail: None,
        at: now,
    };
    ctx.store.insert(&session, &draft).await?;
    after_commit(ctx, &session, "create");
    Ok(session)
}

/// Applies the event `make` builds from the current row, retrying on a lost race.
pub async fn apply<F>(ctx: &Arc<Context>, id: Uuid, make: F) -> Result<Session, ApiError>
where
    F: Fn(&Session) -> Result<SessionEvent, ApiError> + Send + Sync,
{
    commit(ctx, id, |s, now| {
        let event = make(s)?;
        let next = s.apply(&event, now)?;
        Ok((next, draft_for(&event, now), event.kind()))
    })
    .await
}

/// The write primitive: read, compute the next row with `step`, compare-and-set; on a lost
/// race, read again and recompute.
pub async fn commit<F>(ctx: &Arc<Context>, id: Uuid, step: F) -> Result<Session, ApiError>
where
    F: Fn(&Session, OffsetDateTime) -> Result<(Session, EventDraft, &'static str), ApiError>
        + Send
        + Sync,
{
    let mut last = None;
    for _ in 0..CAS_ATTEMPTS {
        let current = ctx
            .store
            .get(id)
            .await?
            .ok_or_else(|| ApiError::not_found(format!("no session {id}")))?;
        let now = OffsetDateTime::now_utc();
        let (next, draft, kind) = step(&current, now)?;
        match ctx.store.compare_and_set(&current, &next, &draft).await {
            Ok(()) => {
                after_commit(ctx, &next, kind);
                return Ok(next);
            }
            Err(StoreError::Conflict { current }) => last = current,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::conflict(last))
}

fn draft_for(event: &SessionEvent, at: OffsetDateTime) -> EventDraft {
    EventDraft {
        actor: event.actor().name().to_string(),
        kind: event.kind().to_string(),
        detail: event.detail(),
        at,
    }
}

/// Effects of a committed change: metrics, the live stream, and cluster work owed by the new
/// state.
fn after_commit(ctx: &Arc<Context>, session: &Session, kind: &'static str) {
    ctx.metrics.transitions.with_label_values(&[kind]).inc();
    // No subscribers is fine: nobody is watching.
    let _ = ctx.changes.send(SessionChange {
        session: session.clone(),
        kind: kind.to_string(),
    });
    // Only transitions that hand work to the driver spawn it; progress and the driver's own
    // transitions do not (the running drive carries on by itself).
    let hands_over = matches!(kind, "create" | "approve" | "break_glass")
        && session.state == SessionState::Approved
        && ctx
            .clusters
            .as_ref()
            .is_some_and(|c| c.serves(&session.environment));
    let ending =
        matches!(kind, "end" | "terminate" | "system_end") && session.state == SessionState::Ending;
    if hands_over || ending {
        spawn_drive(ctx, session.id);
    }
}

fn spawn_drive(ctx: &Arc<Context>, id: Uuid) {
    let ctx = ctx.clone();
    tokio::spawn(
        async move {
            if let Err(e) = drive(&ctx, id).await {
                tracing::warn!(error = %e.body.message, "session step did not complete; the sweep retries it");
            }
        }
        .instrument(tracing::info_span!("session", %id)),
    );
}

struct RowProgress<'a> {
    ctx: &'a Arc<Context>,
    id: Uuid,
}

#[async_trait]
impl ProgressSink for RowProgress<'_> {
    async fn record(&self, p: Progress) -> Result<Session, ApiError> {
        let step = crate::failpoint::name_of(&p);
        let event = SessionEvent::Progress(p);
        let next = commit(self.ctx, self.id, |s, now| {
            let next = s.apply(&event, now)?;
            Ok((next, draft_for(&event, now), "progress"))
        })
        .await?;
        crate::failpoint::hit(step);
        Ok(next)
    }
}

/// Moves a session one stage on toward its next resting state: Approved → Activating → Active
/// (or Failed), Ending → Ended. Safe to call again at any point (the sweep does after a crash).
pub async fn drive(ctx: &Arc<Context>, id: Uuid) -> Result<Session, ApiError> {
    let mut s = ctx
        .store
        .get(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no session {id}")))?;
    let progress = RowProgress { ctx, id };
    let cluster = ctx.clusters.clone().filter(|c| c.serves(&s.environment));
    if s.state == SessionState::Approved {
        if cluster.is_none() {
            return Ok(s);
        }
        s = apply(ctx, id, |_| Ok(SessionEvent::BeginActivation)).await?;
        crate::failpoint::hit("activating");
    }
    if s.state == SessionState::Activating {
        let Some(c) = &cluster else { return Ok(s) };
        let recording = match &ctx.relays {
            Some(r) => r.start_recording(ctx, &s).await,
            None => Err("no recording store is configured, so no session can start".to_string()),
        };
        let outcome = match recording {
            Ok(true) => c.activate(&s, &progress).await,
            // Another replica records this session and is activating it.
            Ok(false) => return Ok(s),
            Err(e) => Err(e),
        };
        match outcome {
            Ok(()) => {
                crate::failpoint::hit("running");
                let active = apply(ctx, id, |_| Ok(SessionEvent::Activated)).await?;
                if let Some(r) = &ctx.relays {
                    r.marker(id, "active").await;
                }
                return Ok(active);
            }
            Err(error) => {
                // Everything created so far goes before the session is marked Failed.
                let current = ctx.store.get(id).await?.unwrap_or(s);
                if let Some(r) = &ctx.relays {
                    r.end(ctx, &current, "activation failed").await;
                }
                if let Err(cleanup) = c.cleanup(&current, &progress).await {
                    // Nothing recorded as created: nothing to undo here. Anything the cluster
                    // did create unrecorded carries the session label, and the sweep removes
                    // it once the session is final.
                    let created = current.grant_name.is_some()
                        || current.process_access_annotated
                        || current.debug_container.is_some()
                        || current.copy_pod.is_some();
                    if created {
                        tracing::warn!(%cleanup, "cleanup after a failed activation did not finish; the sweep retries it");
                        return Err(ApiError::new(
                            breakglass_shared::ErrorCode::Unavailable,
                            cleanup,
                        ));
                    }
                }
                return apply(ctx, id, |_| {
                    Ok(SessionEvent::ActivationFailed {
                        error: error.clone(),
                    })
                })
                .await;
            }
        }
    }
    if s.state == SessionState::Ending {
        crate::failpoint::hit("ending");
        if let Some(r) = &ctx.relays {
            let reason = s.end_reason.as_ref().map_or("ended", |r| r.kind());
            r.end(ctx, &s, reason).await;
            // The row now names the final version: anchor its hash before the session is final
            // (the row takes no more progress after that).
            if let Some(now) = ctx.store.get(id).await? {
                r.anchor(ctx, &now).await;
            }
        }
        // Nothing was ever created when activation never started.
        if s.activating_at.is_some() {
            let Some(c) = &cluster else { return Ok(s) };
            c.cleanup(&s, &progress)
                .await
                .map_err(|e| ApiError::new(breakglass_shared::ErrorCode::Unavailable, e))?;
        }
        return apply(ctx, id, |_| Ok(SessionEvent::CleanupDone)).await;
    }
    Ok(s)
}
