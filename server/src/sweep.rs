//! The sweep: every few seconds, move on sessions that time alone moves on. Every action goes
//! through the lifecycle, so a sweep racing a person (or another replica's sweep) is safe: the
//! compare-and-set lets exactly one of them win.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use breakglass_shared::{EndReason, Session, SessionEvent, SessionState};
use time::OffsetDateTime;
use tracing::Instrument;

use crate::lifecycle::Error;
use crate::state::Context;
use crate::store::{ListFilter, Store, StoreError};

/// Rows read per query; the sweep pages on until it has seen every match.
const PAGE: u32 = 200;

/// Every session matching `filter` (newest first), read a page at a time, so no due session
/// hides behind newer ones however many there are.
async fn all_of(ctx: &Arc<Context>, filter: ListFilter) -> Result<Vec<Session>, Error> {
    let mut out = Vec::new();
    let mut page = ListFilter {
        limit: PAGE,
        ..filter
    };
    loop {
        let rows = ctx.store.list(&page).await?;
        let full = rows.len() == PAGE as usize;
        page.before = rows.last().map(|s| s.id);
        out.extend(rows);
        if !full {
            return Ok(out);
        }
    }
}

/// The live sessions (every state but the final ones) as the sweep last read them. A pass
/// reads the id and version of each (one narrow statement) and whole rows only of those new or
/// changed since: with many sessions open and nothing happening, decoding every live row every
/// pass was much of what an idle server spent (BENCHMARKS.md, "Relay and recording").
#[derive(Default)]
pub struct LiveSet(HashMap<uuid::Uuid, Session>);

impl LiveSet {
    /// Brings the set up to `store`'s live sessions; returns them, newest first.
    pub async fn refresh(&mut self, store: &dyn Store) -> Result<Vec<&Session>, StoreError> {
        let now = store.live_versions().await?;
        let ids: HashSet<_> = now.iter().map(|(id, _)| *id).collect();
        self.0.retain(|id, _| ids.contains(id));
        let stale: Vec<_> = now
            .into_iter()
            .filter(|(id, v)| self.0.get(id).map(|s| s.version) != Some(*v))
            .map(|(id, _)| id)
            .collect();
        for s in store.get_many(&stale).await? {
            // One that moved on between the two reads is seen as it is now; one that reached a
            // final state meanwhile is no longer live.
            if !s.state.is_final() {
                self.0.insert(s.id, s);
            }
        }
        let mut live: Vec<&Session> = self.0.values().collect();
        live.sort_unstable_by_key(|s| std::cmp::Reverse(s.id));
        Ok(live)
    }
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SweepReport {
    /// Requests that waited too long for approval.
    pub expired: usize,
    /// Active sessions past their end.
    pub ttl_ended: usize,
    /// Active sessions whose pod disappeared.
    pub pod_gone: usize,
    /// Sessions whose activation or cleanup was pushed on.
    pub driven: usize,
    /// Ended sessions whose final hash was anchored late.
    pub anchored: usize,
    /// Orphaned cluster objects removed.
    pub orphans_removed: usize,
    /// Notifications the clock owed (reminders, escalations, overdue reviews) written now.
    pub clock_notices: u64,
}

/// Name of the sweep's lease.
pub const LEASE: &str = "sweep";

/// Most anchoring attempts per pass, so an unreachable log cannot stall the sweep.
const ANCHORS_PER_PASS: usize = 3;

/// How long after its end a session's unanchored hash is still retried by the sweep.
const ANCHOR_RETRY_WINDOW: time::Duration = time::Duration::days(7);

/// Recently ended sessions whose final hash the log could not take at the end: anchored now,
/// a few per pass, stopping at the first failure (the log is still unreachable).
async fn anchor_ended(ctx: &Arc<Context>, now: OffsetDateTime) -> Result<usize, Error> {
    let recorder = ctx.lifecycle.recorder();
    if !recorder.anchors() {
        return Ok(0);
    }
    let mut anchored = 0;
    let pending = all_of(
        ctx,
        ListFilter {
            state: Some(SessionState::Ended),
            unanchored_since: Some(now - ANCHOR_RETRY_WINDOW),
            ..Default::default()
        },
    )
    .await?
    .into_iter()
    .take(ANCHORS_PER_PASS);
    for s in pending {
        // One try each; the first failure means the log is still unreachable.
        let Some(entry) = recorder.anchor(&s, 1).await else {
            break;
        };
        if let Err(e) = ctx.lifecycle.anchor_late(s.id, &entry).await {
            tracing::warn!(id = %s.id, error = %e, "log entry not put on the row");
            break;
        }
        ctx.metrics
            .sweep_actions
            .with_label_values(&["anchor"])
            .inc();
        anchored += 1;
    }
    Ok(anchored)
}

/// One whole pass at `now`, orphan reconciliation included.
pub async fn sweep_once(ctx: &Arc<Context>, now: OffsetDateTime) -> Result<SweepReport, Error> {
    pass(ctx, now, true, &mut LiveSet::default()).await
}

/// Passes of [`run`] per orphan reconciliation. Reconciling lists every break-glass grant of
/// every cluster (one per open session) to find crash leftovers, which are rare and harmless
/// for a while; every pass, it was the largest part of what an idle server with a thousand
/// open terminals spent (BENCHMARKS.md, "Relay and recording"). Every sixth pass: half a
/// minute at the default interval.
const RECONCILE_EVERY: u64 = 6;

/// One pass at `now`; `reconcile_too` says whether it looks for orphans too; `known` is what
/// the previous pass read of the live sessions.
async fn pass(
    ctx: &Arc<Context>,
    now: OffsetDateTime,
    reconcile_too: bool,
    known: &mut LiveSet,
) -> Result<SweepReport, Error> {
    let mut report = SweepReport::default();
    let overdue = ListFilter {
        state: Some(SessionState::PendingApproval),
        created_by: Some(now - ctx.config.approval_expiry),
        ..Default::default()
    };
    for s in all_of(ctx, overdue).await? {
        if ctx
            .lifecycle
            .apply_event(s.id, SessionEvent::Expire)
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
    let past_time_box = ListFilter {
        state: Some(SessionState::Active),
        expires_by: Some(now),
        ..Default::default()
    };
    for s in all_of(ctx, past_time_box).await? {
        if ctx
            .lifecycle
            .apply_event(
                s.id,
                SessionEvent::SystemEnd {
                    reason: EndReason::TtlExpired,
                },
            )
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
    // Every session that may own cluster objects now or soon, read once for the rest of the
    // pass (reading them for each step was most of what the pass cost with many sessions
    // open). Read before the cluster is listed: the driver skips objects too young to judge,
    // so a session created meanwhile is never mistaken for an orphan.
    let live = known.refresh(ctx.store.as_ref()).await?;
    report.pod_gone = end_pod_gone(ctx, &live).await;
    report.driven = drive_stuck(ctx, &live).await;
    report.anchored = anchor_ended(ctx, now).await?;
    // Recordings whose end could not store the final cast: built from their segments.
    ctx.recorder.rebuild_finals(now).await;
    if reconcile_too {
        let live: HashSet<_> = live.iter().map(|s| s.id).collect();
        report.orphans_removed = reconcile(ctx, &live).await;
    }
    prune_logins(ctx, now).await;
    report.clock_notices = clock_notices(ctx, now).await?;
    Ok(report)
}

/// Writes what the clock owes people: reminders and escalations of waiting requests, overdue
/// reviews. Each is written once (the outbox's unique key), whichever leader sees it first.
pub async fn clock_notices(ctx: &Arc<Context>, now: OffsetDateTime) -> Result<u64, Error> {
    if !ctx.outbox.has_receivers() {
        return Ok(0);
    }
    let pending = ListFilter {
        state: Some(SessionState::PendingApproval),
        ..Default::default()
    };
    let review_due = ListFilter {
        review_due: true,
        ..Default::default()
    };
    let pending = all_of(ctx, pending).await?;
    let review_due = all_of(ctx, review_due).await?;
    let mut drafts = ctx.outbox.clock_drafts(&pending, &review_due, now);
    // Written (and due) now; each payload keeps the moment the clock passed.
    let written = crate::outbox::unix_ms(OffsetDateTime::now_utc());
    for d in &mut drafts {
        d.created_at_ms = written;
    }
    let new = ctx.store.enqueue(&drafts).await?;
    if new > 0 {
        ctx.outbox.wake();
    }
    Ok(new)
}

/// Ends the active sessions whose pod is gone, asking each cluster once for all of its
/// sessions (so the pass reads a namespace's pods once, not every session's pod).
async fn end_pod_gone(ctx: &Arc<Context>, live: &[&Session]) -> usize {
    let mut by_env: std::collections::BTreeMap<&str, Vec<&Session>> = Default::default();
    for &s in live.iter().filter(|s| s.state == SessionState::Active) {
        by_env.entry(&s.environment).or_default().push(s);
    }
    let mut ended = 0;
    for (env, sessions) in by_env {
        let Some(c) = ctx.lifecycle.cluster_for(env) else {
            continue;
        };
        let answers = c.pods_gone(&sessions).await;
        for (s, gone) in sessions.iter().zip(answers) {
            match gone {
                Ok(true) => {
                    let end = SessionEvent::SystemEnd {
                        reason: EndReason::PodGone,
                    };
                    if ctx.lifecycle.apply_event(s.id, end).await.is_ok() {
                        ctx.metrics
                            .sweep_actions
                            .with_label_values(&["end_pod_gone"])
                            .inc();
                        ended += 1;
                    }
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(id = %s.id, error = %e, "sweep could not check the pod"),
            }
        }
    }
    ended
}

/// How long an expired login's record is kept (it is refused from its expiry on; the record
/// only answers "who was signed in" for a while).
const LOGIN_KEEP: time::Duration = time::Duration::days(7);

/// Deletes login records long expired; a failure is logged, never the pass's end.
async fn prune_logins(ctx: &Arc<Context>, now: OffsetDateTime) {
    match ctx.store.prune_logins(now - LOGIN_KEEP).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(pruned = n, "sweep removed expired login records"),
        Err(e) => tracing::warn!(error = %e, "sweep could not prune expired logins"),
    }
}

/// How long a pass waits for the drives it started; one still running then goes on by itself
/// (claimed, so the next pass does not start it again).
const DRIVE_WAIT: Duration = Duration::from_secs(5);

/// Stuck work: activation or cleanup interrupted (crash, unreachable cluster), driven off the
/// pass's own loop, a bounded number at once; returns how many moved on within [`DRIVE_WAIT`].
async fn drive_stuck(ctx: &Arc<Context>, live: &[&Session]) -> usize {
    let mut drives = tokio::task::JoinSet::new();
    'states: for state in [
        SessionState::Approved,
        SessionState::Activating,
        SessionState::Ending,
    ] {
        for s in live.iter().filter(|s| s.state == state) {
            // A request left `Approved` where no cluster serves it is failed by the drive (with
            // `--no-clusters` it waits); cleanup of an `Ending` one needs no cluster.
            let owed = match state {
                SessionState::Ending => true,
                _ => ctx.lifecycle.owes_activation(&s.environment),
            };
            if !owed || ctx.lifecycle.is_driving(s.id) {
                continue;
            }
            let Some(slot) = ctx.lifecycle.sweep_drive_slot() else {
                // Every slot is busy: the next pass takes the rest.
                break 'states;
            };
            let lifecycle = Arc::clone(&ctx.lifecycle);
            let id = s.id;
            drives.spawn(
                async move {
                    let _slot = slot;
                    (id, state, lifecycle.drive(id).await)
                }
                .instrument(tracing::info_span!("sweep drive", %id)),
            );
        }
    }
    let mut driven = 0;
    let deadline = tokio::time::sleep(DRIVE_WAIT);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            next = drives.join_next() => match next {
                None => break,
                Some(Ok((_, state, Ok(after)))) if after.state != state => {
                    ctx.metrics.sweep_actions.with_label_values(&["drive"]).inc();
                    driven += 1;
                }
                Some(Ok((id, _, Err(e)))) => {
                    tracing::warn!(%id, error = %e, "sweep could not move the session on");
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => tracing::error!(error = %e, "a sweep drive panicked"),
            },
            () = &mut deadline => {
                drives.detach_all();
                break;
            }
        }
    }
    driven
}

/// Removes cluster objects of sessions not in `live` (crash leftovers).
async fn reconcile(ctx: &Arc<Context>, live: &HashSet<uuid::Uuid>) -> usize {
    if !ctx.lifecycle.has_cluster() {
        return 0;
    }
    let mut removed = 0;
    for env in &ctx.config.environments {
        let Some(c) = ctx.lifecycle.cluster_for(&env.name) else {
            continue;
        };
        match c.reconcile(&env.name, live).await {
            Ok(n) => {
                if n > 0 {
                    ctx.metrics
                        .sweep_actions
                        .with_label_values(&["remove_orphan"])
                        .inc_by(n as u64);
                }
                removed += n;
            }
            Err(e) => tracing::warn!(env = %env.name, error = %e, "orphan reconciliation failed"),
        }
    }
    removed
}

/// Runs the sweep forever at the configured interval, only while this replica holds the
/// sweep lease in the database (one leader among replicas; a crashed leader's lease expires
/// after three intervals).
pub async fn run(ctx: Arc<Context>) {
    let holder = uuid::Uuid::now_v7().to_string();
    let ttl_ms = i64::try_from(ctx.config.sweep_interval.as_millis() * 3).unwrap_or(i64::MAX);
    let mut tick = tokio::time::interval(ctx.config.sweep_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut passes: u64 = 0;
    let mut known = LiveSet::default();
    loop {
        tick.tick().await;
        let now = OffsetDateTime::now_utc();
        let now_ms = i64::try_from(now.unix_timestamp_nanos() / 1_000_000).unwrap_or(0);
        let leading = ctx.store.try_lease(LEASE, &holder, now_ms, ttl_ms).await;
        ctx.metrics.sweep_rounds.inc();
        match leading {
            Ok(true) => ctx.metrics.sweep_leader.set(1),
            Ok(false) => {
                ctx.metrics.sweep_leader.set(0);
                passes = 0;
                // The leader's copy goes stale; memory is not held for it meanwhile.
                known = LiveSet::default();
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "sweep lease unavailable");
                continue;
            }
        }
        // The first pass of a new leader reconciles: it may follow a crash.
        let reconcile_too = passes.is_multiple_of(RECONCILE_EVERY);
        passes += 1;
        let one =
            pass(&ctx, now, reconcile_too, &mut known).instrument(tracing::debug_span!("sweep"));
        if let Err(e) = one.await {
            tracing::warn!(error = %e, "sweep pass failed");
        }
    }
}
