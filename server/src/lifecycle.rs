//! The one place that changes sessions: state machine → store compare-and-set → effects
//! (live event, metrics, cluster work). HTTP handlers and the sweep both call this; neither
//! writes a session itself.

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
    match session.state {
        SessionState::Approved | SessionState::Activating
            if ctx
                .clusters
                .as_ref()
                .is_some_and(|c| c.serves(&session.environment)) =>
        {
            spawn_drive(ctx, session.id);
        }
        SessionState::Ending => spawn_drive(ctx, session.id),
        _ => {}
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
        let event = SessionEvent::Progress(p);
        commit(self.ctx, self.id, |s, now| {
            let next = s.apply(&event, now)?;
            Ok((next, draft_for(&event, now), "progress"))
        })
        .await
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
    }
    if s.state == SessionState::Activating {
        let Some(c) = &cluster else { return Ok(s) };
        match c.activate(&s, &progress).await {
            Ok(()) => return apply(ctx, id, |_| Ok(SessionEvent::Activated)).await,
            Err(error) => {
                // Everything created so far goes before the session is marked Failed.
                let current = ctx.store.get(id).await?.unwrap_or(s);
                if let Err(cleanup) = c.cleanup(&current, &progress).await {
                    tracing::warn!(%cleanup, "cleanup after a failed activation did not finish; the sweep retries it");
                    return Err(ApiError::new(
                        breakglass_shared::ErrorCode::Unavailable,
                        cleanup,
                    ));
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
