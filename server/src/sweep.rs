//! The sweep: every few seconds, move on sessions that time alone moves on. Every action goes
//! through the lifecycle, so a sweep racing a person (or another replica's sweep) is safe: the
//! compare-and-set lets exactly one of them win.

use std::sync::Arc;

use breakglass_shared::{EndReason, Session, SessionEvent, SessionState};
use time::OffsetDateTime;
use tracing::Instrument;

use crate::error::ApiError;
use crate::lifecycle;
use crate::state::Context;
use crate::store::ListFilter;

/// Rows looked at per state per pass; the next pass takes the rest.
const BATCH: u32 = 200;

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SweepReport {
    /// Requests that waited too long for approval.
    pub expired: usize,
    /// Active sessions past their end.
    pub ttl_ended: usize,
    /// Sessions whose activation or cleanup was pushed on.
    pub driven: usize,
}

async fn in_state(ctx: &Arc<Context>, state: SessionState) -> Result<Vec<Session>, ApiError> {
    Ok(ctx
        .store
        .list(&ListFilter {
            state: Some(state),
            limit: BATCH,
            ..Default::default()
        })
        .await?)
}

/// One pass at `now`.
pub async fn sweep_once(ctx: &Arc<Context>, now: OffsetDateTime) -> Result<SweepReport, ApiError> {
    let mut report = SweepReport::default();
    for s in in_state(ctx, SessionState::PendingApproval).await? {
        if s.created_at + ctx.config.approval_expiry <= now
            && lifecycle::apply(ctx, s.id, |_| Ok(SessionEvent::Expire))
                .await
                .is_ok()
        {
            ctx.metrics
                .sweep_actions
                .with_label_values(&["expire_approval"])
                .inc();
            report.expired += 1;
        }
    }
    for s in in_state(ctx, SessionState::Active).await? {
        if s.expires_at.is_some_and(|t| t <= now)
            && lifecycle::apply(ctx, s.id, |_| {
                Ok(SessionEvent::SystemEnd {
                    reason: EndReason::TtlExpired,
                })
            })
            .await
            .is_ok()
        {
            ctx.metrics
                .sweep_actions
                .with_label_values(&["end_ttl"])
                .inc();
            report.ttl_ended += 1;
        }
    }
    // Stuck work: activation or cleanup interrupted (crash, unreachable cluster).
    for state in [
        SessionState::Approved,
        SessionState::Activating,
        SessionState::Ending,
    ] {
        for s in in_state(ctx, state).await? {
            let serves = ctx
                .clusters
                .as_ref()
                .is_some_and(|c| c.serves(&s.environment));
            if !serves && state != SessionState::Ending {
                continue;
            }
            match lifecycle::drive(ctx, s.id).await {
                Ok(after) if after.state != state => {
                    ctx.metrics
                        .sweep_actions
                        .with_label_values(&["drive"])
                        .inc();
                    report.driven += 1;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(id = %s.id, error = %e.body.message, "sweep could not move the session on")
                }
            }
        }
    }
    Ok(report)
}

/// Runs the sweep forever at the configured interval.
pub async fn run(ctx: Arc<Context>) {
    let mut tick = tokio::time::interval(ctx.config.sweep_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let pass =
            sweep_once(&ctx, OffsetDateTime::now_utc()).instrument(tracing::debug_span!("sweep"));
        if let Err(e) = pass.await {
            tracing::warn!(error = %e.body.message, "sweep pass failed");
        }
    }
}
