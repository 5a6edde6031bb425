//! The one place that changes sessions: state machine → store compare-and-set → effects
//! (live event, metrics, cluster and recording work). HTTP handlers and the sweep both call
//! the [`Lifecycle`]; neither writes a session itself.
//!
//! The lifecycle owns its ports (`crate::ports`): the cluster driver, the recorder and the
//! terminal connections. They never call back into it: the driver reports steps through the
//! [`ProgressSink`](crate::ports::ProgressSink) it is handed, and the recorder reports stored
//! versions and failures as [`RecorderEvent`]s on a channel the lifecycle drains.

mod claims;
mod commit;
mod drive;
mod extend;
mod locks;
pub mod operator;
mod progress;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Weak};

use breakglass_shared::api::SessionChange;
use breakglass_shared::lock::{blocking, find, LockScope};
use breakglass_shared::session::{NewSession, Progress, RekorEntry};
use breakglass_shared::session::{ReviewError, TransitionError, Verdict};
use breakglass_shared::validate::FieldError;
use breakglass_shared::{Actor, PermissionSet, Session, SessionEvent, SessionState};
use prometheus::IntCounterVec;
use time::OffsetDateTime;
use tokio::sync::{broadcast, mpsc};
use tracing::Instrument;
use uuid::Uuid;

pub use commit::Commit;
pub use drive::no_cluster;

use crate::outbox::Outbox;
use crate::ports::{ClusterError, ClusterOps, RecorderEvent, Recordings, Terminals};
use crate::store::{EventDraft, Store, StoreError};

/// How often a write is retried after losing a compare-and-set race before giving up. Each
/// retry re-reads the row and re-runs the state machine, so a race normally ends in a clear
/// state error (e.g. "cannot approve a session that is Approved"), not in a retry storm.
const CAS_ATTEMPTS: usize = 5;

/// Why the lifecycle could not change a session.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No session has this id.
    #[error("no session {0}")]
    NotFound(Uuid),
    /// The state machine refused the event.
    #[error(transparent)]
    Transition(#[from] TransitionError),
    /// The review was refused.
    #[error(transparent)]
    Review(#[from] ReviewError),
    /// A decision came after the request's approval deadline (this long after it was made);
    /// the request is `Expired` now.
    #[error(
        "this request waited longer than {} minutes for approval and has expired; \
         the requester can ask again",
        .0.whole_minutes()
    )]
    Expired(time::Duration),
    /// Every compare-and-set attempt lost a race; the state the row was last seen in.
    #[error("someone else changed this session at the same moment")]
    Conflict(Option<SessionState>),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The cluster could not finish a cleanup that must finish before the session moves on,
    /// or could not be asked whether a request's pod exists.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// A request names what its cluster does not list (a pod, a container); nothing was
    /// written.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// A lock stops this (the environment's or the person's); nothing was written.
    #[error("{}", .0.sentence())]
    Locked(Box<breakglass_shared::lock::Lock>),
}

/// The sessions' lifecycle over its ports.
pub struct Lifecycle {
    store: Arc<dyn Store>,
    changes: broadcast::Sender<SessionChange>,
    transitions: IntCounterVec,
    cluster: Option<Arc<dyn ClusterOps>>,
    recorder: Arc<dyn Recordings>,
    terminals: Arc<dyn Terminals>,
    /// Whether requests in an environment without a cluster wait in `Approved` (the API-only
    /// `--no-clusters` mode) instead of failing at once.
    park_without_cluster: bool,
    /// How long a Flight request waits for a decision.
    approval_expiry: time::Duration,
    /// What each change tells whom (written with the change).
    outbox: Arc<Outbox>,
    /// Sessions being driven on this replica now.
    driving: claims::Claims,
    /// Room for the sweep's drives: a pass starts at most this many at once, so a stuck
    /// activation cannot take every task and the pass itself never waits for one.
    sweep_drives: Arc<tokio::sync::Semaphore>,
    /// Itself, for the drives it spawns.
    me: Weak<Lifecycle>,
}

/// How many drives the sweep runs at once.
const SWEEP_DRIVES: usize = 8;

/// What a [`Lifecycle`] is built from.
pub struct Ports {
    /// Session storage.
    pub store: Arc<dyn Store>,
    /// Where committed changes are published (the SSE streams and the recorder listen).
    pub changes: broadcast::Sender<SessionChange>,
    /// Counter of applied changes, by kind.
    pub transitions: IntCounterVec,
    /// The cluster driver; `None` when no environment has a cluster.
    pub cluster: Option<Arc<dyn ClusterOps>>,
    /// Session recordings.
    pub recorder: Arc<dyn Recordings>,
    /// Terminal connections of this replica.
    pub terminals: Arc<dyn Terminals>,
    /// `--no-clusters`: requests where no cluster is configured wait in `Approved` instead of
    /// failing at once with the configuration that fixes it.
    pub park_without_cluster: bool,
    /// How long a Flight request waits for a decision: after it, approving, denying or
    /// breaking the glass is refused and the request expires, whether or not the sweep has
    /// come by yet.
    pub approval_expiry: time::Duration,
    /// Notification routing: the rows each change writes into the outbox.
    pub outbox: Arc<Outbox>,
}

impl Lifecycle {
    /// The lifecycle over `ports`; drains `recorder_events` until the recorder is gone.
    pub fn new(ports: Ports, recorder_events: mpsc::Receiver<RecorderEvent>) -> Arc<Lifecycle> {
        let lifecycle = Arc::new_cyclic(|me| Lifecycle {
            store: ports.store,
            changes: ports.changes,
            transitions: ports.transitions,
            cluster: ports.cluster,
            recorder: ports.recorder,
            terminals: ports.terminals,
            park_without_cluster: ports.park_without_cluster,
            approval_expiry: ports.approval_expiry,
            outbox: ports.outbox,
            driving: claims::Claims::default(),
            sweep_drives: Arc::new(tokio::sync::Semaphore::new(SWEEP_DRIVES)),
            me: me.clone(),
        });
        tokio::spawn(progress::drain(Arc::downgrade(&lifecycle), recorder_events));
        lifecycle
    }

    /// The cluster driver, when it reaches `environment`.
    pub fn cluster_for(&self, environment: &str) -> Option<&Arc<dyn ClusterOps>> {
        self.cluster.as_ref().filter(|c| c.serves(environment))
    }

    /// Whether this server moves an `Approved` session of `environment` on: activates it, or,
    /// with no cluster there, fails it at once (unless `--no-clusters` parks it).
    pub fn owes_activation(&self, environment: &str) -> bool {
        self.cluster_for(environment).is_some() || !self.park_without_cluster
    }

    /// Whether any environment has a cluster driver.
    pub fn has_cluster(&self) -> bool {
        self.cluster.is_some()
    }

    /// Whether this replica is driving `id` right now.
    pub fn is_driving(&self, id: Uuid) -> bool {
        self.driving.holds(id)
    }

    /// A slot for one sweep drive, if one is free (see [`SWEEP_DRIVES`]).
    pub fn sweep_drive_slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        Arc::clone(&self.sweep_drives).try_acquire_owned().ok()
    }

    /// The recorder.
    pub fn recorder(&self) -> &Arc<dyn Recordings> {
        &self.recorder
    }

    /// Stores a new request (Ground requests start `Approved`) and starts activation if a
    /// cluster serves it.
    pub async fn create(&self, req: NewSession, now: OffsetDateTime) -> Result<Session, Error> {
        self.refuse_if_locked(&req.environment, &req.requester)
            .await?;
        self.check_target(&req).await?;
        let mut session = Session::new_request(Uuid::now_v7(), req, now);
        if let Some(cluster) = self
            .cluster
            .as_ref()
            .filter(|c| c.serves(&session.environment))
        {
            session.spec = Some(cluster.spec(&session).await?);
        }
        let draft = EventDraft {
            actor: session.requester.clone(),
            kind: Commit::Create.label().into(),
            // A Ground request is approved as it is made: its creation is what binds the spec.
            detail: spec_detail(&session),
            at: now,
            notices: self.outbox.drafts(None, &session, &session.requester, now),
        };
        self.store.insert(&session, &draft).await?;
        if !draft.notices.is_empty() {
            self.outbox.wake();
        }
        self.after_commit(&session, Commit::Create);
        Ok(session)
    }

    /// Refuses a request for a pod, or a container of it, that its environment's cluster does
    /// not list (an environment without a cluster here has nothing to ask).
    async fn check_target(&self, req: &NewSession) -> Result<(), Error> {
        let Some(cluster) = self.cluster.as_ref().filter(|c| c.serves(&req.environment)) else {
            return Ok(());
        };
        let containers = cluster
            .containers_of(&req.environment, &req.namespace, &req.pod)
            .await?;
        let Some(containers) = containers else {
            return Err(FieldError::new(
                "pod",
                format!(
                    "the cluster of {} lists no pod `{}` in namespace `{}`; pick one from the \
                     namespace's pod list",
                    req.environment, req.pod, req.namespace
                ),
            )
            .into());
        };
        match &req.target_container {
            Some(c) if !containers.contains(c) => Err(FieldError::new(
                "target_container",
                format!(
                    "pod `{}` has no container `{c}`; it has {}",
                    req.pod,
                    containers.join(", ")
                ),
            )
            .into()),
            _ => Ok(()),
        }
    }

    /// Applies a person's `event` (its actor names them), retrying on a lost race. A decision
    /// (approve, deny, break the glass) on a request past its approval deadline is refused with
    /// [`Error::Expired`], and the same write marks the request `Expired`, so the row says what
    /// the refusal says.
    pub async fn act(&self, id: Uuid, event: SessionEvent) -> Result<Session, Error> {
        // A locked person does nothing anywhere: no decision, extension or end of theirs goes
        // through, on anyone's session (the lock ends their own). The locks are read once for
        // this and for the decision's own rule below.
        let locks = self.store.locks().await?;
        let locked = |lock: &breakglass_shared::lock::Lock| Error::Locked(Box::new(lock.clone()));
        if let Actor::User { name, .. } = event.actor() {
            if let Some(lock) = find(&locks, LockScope::User, name) {
                return Err(locked(lock));
            }
        }
        let decides = matches!(
            event,
            SessionEvent::Approve { .. }
                | SessionEvent::Deny { .. }
                | SessionEvent::BreakGlass { .. }
        );
        if matches!(
            event,
            SessionEvent::Approve { .. } | SessionEvent::BreakGlass { .. }
        ) {
            let s = self.get(id).await?;
            if let Some(lock) = blocking(&locks, &s.environment, &s.requester) {
                return Err(locked(lock));
            }
        }
        if matches!(
            event,
            SessionEvent::AskExtension { .. } | SessionEvent::ApproveExtension { .. }
        ) {
            self.prepare_extension(id, &event).await?;
        }
        let next = self
            .commit(id, |s, now| {
                let overdue = decides
                    && s.state == SessionState::PendingApproval
                    && s.created_at + self.approval_expiry <= now;
                let event = if overdue {
                    &SessionEvent::Expire
                } else {
                    &event
                };
                let next = s.apply(event, now)?;
                Ok((next, draft_for(event, s, now), Commit::of(event)))
            })
            .await?;
        // Only `Expire` leads to `Expired`, and no person's event is one: the deadline passed.
        if next.state == SessionState::Expired {
            return Err(Error::Expired(self.approval_expiry));
        }
        Ok(next)
    }

    /// Applies a system event (no person behind it).
    pub async fn apply_event(&self, id: Uuid, event: SessionEvent) -> Result<Session, Error> {
        self.commit(id, |s, now| {
            let next = s.apply(&event, now)?;
            Ok((next, draft_for(&event, s, now), Commit::of(&event)))
        })
        .await
    }

    /// Records `reviewer`'s review of a finished session: their `verdict` and `notes`, under
    /// the `permissions` they hold in its environment.
    pub async fn review(
        &self,
        id: Uuid,
        reviewer: &str,
        permissions: &PermissionSet,
        verdict: Verdict,
        notes: &str,
    ) -> Result<Session, Error> {
        self.commit(id, |s, now| {
            let next = s.review(reviewer, permissions, verdict, notes, now)?;
            let draft = EventDraft {
                actor: reviewer.to_string(),
                kind: Commit::Review.label().into(),
                detail: Some(format!("{}: {notes}", verdict.as_str())),
                at: now,
                notices: Vec::new(),
            };
            Ok((next, draft, Commit::Review))
        })
        .await
    }

    /// Records a step on the session row, through the state machine.
    pub async fn record_progress(&self, id: Uuid, p: Progress) -> Result<Session, Error> {
        self.apply_event(id, SessionEvent::Progress(p)).await
    }

    /// Puts `entry` on an `Ended` session whose final hash was anchored after it ended (the log
    /// was unreachable at the end; the sweep retried).
    pub async fn anchor_late(&self, id: Uuid, entry: &RekorEntry) -> Result<Session, Error> {
        self.commit(id, |s, now| {
            let next = s.anchor_late(entry).map_err(Error::from)?;
            let event = SessionEvent::Progress(Progress::Anchored(entry.clone()));
            Ok((next, draft_for(&event, s, now), Commit::Progress))
        })
        .await
    }

    /// The write primitive ([`commit_with`]), then the change's effects on this replica.
    async fn commit<F>(&self, id: Uuid, step: F) -> Result<Session, Error>
    where
        F: Fn(&Session, OffsetDateTime) -> Result<(Session, EventDraft, Commit), Error>
            + Send
            + Sync,
    {
        let (next, kind, told) = commit_with(self.store.as_ref(), &self.outbox, id, step).await?;
        if told {
            self.outbox.wake();
        }
        self.after_commit(&next, kind);
        Ok(next)
    }

    async fn get(&self, id: Uuid) -> Result<Session, Error> {
        self.store.get(id).await?.ok_or(Error::NotFound(id))
    }

    /// Effects of a committed change: metrics, the live stream, and work owed by the new
    /// state.
    fn after_commit(&self, session: &Session, kind: Commit) {
        self.transitions.with_label_values(&[kind.label()]).inc();
        // No subscribers is fine: nobody is watching.
        let _ = self.changes.send(SessionChange {
            session: session.clone(),
            kind: kind.label().to_string(),
        });
        // Only changes that hand work to the driver spawn it; progress and the driver's own
        // transitions do not (the running drive carries on by itself).
        let hands_over = kind.hands_over()
            && session.state == SessionState::Approved
            && self.owes_activation(&session.environment);
        let ending = kind.ends() && session.state == SessionState::Ending;
        if hands_over || ending {
            self.spawn_drive(session.id);
        }
    }

    fn spawn_drive(&self, id: Uuid) {
        let Some(me) = self.me.upgrade() else { return };
        tokio::spawn(
            async move {
                if let Err(e) = me.drive(id).await {
                    tracing::warn!(error = %e, "session step did not complete; the sweep retries it");
                }
            }
            .instrument(tracing::info_span!("session", %id)),
        );
    }
}

/// The events-table row of `event`.
/// Read, compute the next row with `step`, compare-and-set with the notices the change
/// causes; on a lost race, read again and recompute. The lifecycle's writes and the command
/// line's (which has no lifecycle: `operator`) go through here; returns the row written, the
/// kind of change, and whether notices were written.
pub(crate) async fn commit_with<F>(
    store: &dyn Store,
    outbox: &Outbox,
    id: Uuid,
    step: F,
) -> Result<(Session, Commit, bool), Error>
where
    F: Fn(&Session, OffsetDateTime) -> Result<(Session, EventDraft, Commit), Error> + Send + Sync,
{
    let mut last = None;
    for _ in 0..CAS_ATTEMPTS {
        let current = store.get(id).await?.ok_or(Error::NotFound(id))?;
        let now = OffsetDateTime::now_utc();
        let (next, mut draft, kind) = step(&current, now)?;
        draft.notices = outbox.drafts(Some(&current), &next, &draft.actor, now);
        match store.compare_and_set(&current, &next, &draft).await {
            Ok(()) => return Ok((next, kind, !draft.notices.is_empty())),
            Err(StoreError::Conflict { current }) => last = current,
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::Conflict(last))
}

/// `spec sha256 <hash>`: the approved spec named in the event that approves it.
fn spec_detail(s: &Session) -> Option<String> {
    s.spec
        .as_ref()
        .map(|sp| format!("spec sha256 {}", sp.sha256))
}

/// The event row of `event` applied to `current`; a decision that lets the session go ahead
/// (an approval, a broken glass) names the spec it approves.
fn draft_for(event: &SessionEvent, current: &Session, at: OffsetDateTime) -> EventDraft {
    let detail = match event {
        SessionEvent::Approve { .. } | SessionEvent::BreakGlass { .. } => spec_detail(current),
        _ => event.detail(),
    };
    EventDraft {
        actor: event.actor().name().to_string(),
        kind: event.kind().to_string(),
        detail,
        at,
        notices: Vec::new(),
    }
}
