//! The session model: the audit row ([`Session`]), the kinds it is made of, the events that
//! can happen to it and its review.
//!
//! The first row is [`Session::new_request`]; every later one is computed by the state machine
//! ([`Session::apply`], in `transition`) and written by the store with a compare-and-set on the
//! row's version, so concurrent actors race safely: the second writer finds the version moved
//! and gets a conflict.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use uuid::Uuid;

mod approvals;
mod event;
mod extension;
mod kinds;
mod review;
mod spec;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;

pub use approvals::{Approval, Quorum};
pub use event::{Actor, Progress, RecordingRef, RekorEntry, SessionEvent, TransitionError};
pub use extension::{Extension, ExtensionAsk, ExtensionDenial, ExtensionLimits, Extensions};
pub use kinds::{EndReason, Mode, SessionState, Tier, COPY_ROLE, LIVE_ROLE};
pub use review::{Review, ReviewError, Verdict};
pub use spec::{DryRun, SessionSpec, SpecSummary, SPEC_ANNOTATION};

/// What a requester asks for; validated before a session is made of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSession {
    /// Environment (cluster) name.
    pub environment: String,
    /// The environment's tier at request time.
    pub tier: Tier,
    /// Namespace of the pod.
    pub namespace: String,
    /// Pod to debug.
    pub pod: String,
    /// Container whose processes the debug container may see, if asked.
    pub target_container: Option<String>,
    /// Live or copy.
    pub mode: Mode,
    /// Why access is needed.
    pub reason: String,
    /// Ticket or incident URL.
    pub ticket: Option<String>,
    /// Requested duration in minutes.
    pub duration_minutes: u32,
    /// Recycle the last ready pod at the end (where [`Tier::allows_recycle`]).
    pub recycle: bool,
    /// Who asks.
    pub requester: String,
    /// What its approval needs (Flight; from its environment).
    pub quorum: Quorum,
    /// How far it may be extended (from its tier's durations).
    pub extension_limits: ExtensionLimits,
}

/// One session: the audit record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Session {
    /// UUIDv7.
    pub id: Uuid,
    /// Environment (cluster) name.
    pub environment: String,
    /// Tier at request time.
    pub tier: Tier,
    /// Namespace of the pod.
    pub namespace: String,
    /// The debugged pod.
    pub pod: String,
    /// Container whose processes the debug container may see.
    pub target_container: Option<String>,
    /// Live or copy.
    pub mode: Mode,
    /// Why access was asked.
    pub reason: String,
    /// Ticket or incident URL.
    pub ticket: Option<String>,
    /// Requested duration in minutes; extensions add to it ([`Session::granted_minutes`]).
    pub duration_minutes: u32,
    /// Recycle asked (only where [`Tier::allows_recycle`]).
    pub recycle: bool,
    /// Who asked.
    pub requester: String,
    /// Who approved (Flight; with a quorum, the last approval) or denied.
    pub approver: Option<String>,
    /// What its approval needs.
    #[serde(default)]
    pub quorum: Quorum,
    /// The approvals given so far (Flight), oldest first.
    #[serde(default)]
    pub approvals: Vec<Approval>,
    /// More time asked and given while it runs.
    #[serde(default)]
    pub extensions: Extensions,
    /// Who broke the glass, if anyone.
    pub glass_broken_by: Option<String>,
    /// Current state.
    pub state: SessionState,
    /// Why it ended or is ending.
    pub end_reason: Option<EndReason>,
    /// Why it was denied.
    pub denial_reason: Option<String>,
    /// Why activation failed.
    pub failure: Option<String>,
    /// Row version for compare-and-set; +1 on every write.
    pub version: i64,
    /// Created.
    #[serde(with = "time::serde::rfc3339")]
    #[cfg_attr(feature = "server", schema(value_type = String, format = DateTime))]
    pub created_at: OffsetDateTime,
    /// Approved, denied or glass broken (auto-approval on Ground: creation time).
    #[serde(with = "time::serde::rfc3339::option", default)]
    #[cfg_attr(feature = "server", schema(value_type = Option<String>, format = DateTime))]
    pub decided_at: Option<OffsetDateTime>,
    /// Activation started.
    #[serde(with = "time::serde::rfc3339::option", default)]
    #[cfg_attr(feature = "server", schema(value_type = Option<String>, format = DateTime))]
    pub activating_at: Option<OffsetDateTime>,
    /// Became active.
    #[serde(with = "time::serde::rfc3339::option", default)]
    #[cfg_attr(feature = "server", schema(value_type = Option<String>, format = DateTime))]
    pub active_at: Option<OffsetDateTime>,
    /// Access ends at the latest (active_at + duration).
    #[serde(with = "time::serde::rfc3339::option", default)]
    #[cfg_attr(feature = "server", schema(value_type = Option<String>, format = DateTime))]
    pub expires_at: Option<OffsetDateTime>,
    /// Ending started.
    #[serde(with = "time::serde::rfc3339::option", default)]
    #[cfg_attr(feature = "server", schema(value_type = Option<String>, format = DateTime))]
    pub ending_at: Option<OffsetDateTime>,
    /// Reached a final state.
    #[serde(with = "time::serde::rfc3339::option", default)]
    #[cfg_attr(feature = "server", schema(value_type = Option<String>, format = DateTime))]
    pub finished_at: Option<OffsetDateTime>,
    /// Grant RoleBinding name, once created.
    pub grant_name: Option<String>,
    /// Debug container name, once added.
    pub debug_container: Option<String>,
    /// Copy pod name (copy mode), once created.
    pub copy_pod: Option<String>,
    /// Whether the process-access annotation was set.
    pub process_access_annotated: bool,
    /// The latest stored recording version.
    pub recording: Option<RecordingRef>,
    /// Transparency-log entry of the final hash.
    pub rekor: Option<RekorEntry>,
    /// Review, once recorded.
    pub review: Option<Review>,
    /// The objects activation will create, rendered when the request was made (none on a
    /// request made where no cluster is served, or before specs were bound to approvals).
    #[serde(default)]
    pub spec: Option<SessionSpec>,
}

impl Session {
    /// The first row of a validated request. Ground skips approval.
    pub fn new_request(id: Uuid, req: NewSession, now: OffsetDateTime) -> Session {
        let (state, decided_at) = match req.tier {
            Tier::Ground => (SessionState::Approved, Some(now)),
            Tier::Flight => (SessionState::PendingApproval, None),
        };
        Session {
            id,
            environment: req.environment,
            tier: req.tier,
            namespace: req.namespace,
            pod: req.pod,
            target_container: req.target_container,
            mode: req.mode,
            reason: req.reason,
            ticket: req.ticket,
            duration_minutes: req.duration_minutes,
            // Validation (`validate::recycle`) owns the rule and refuses the flag on Flight; this
            // only keeps a request that skipped it from storing a flag that could never apply.
            recycle: req.recycle && req.tier.allows_recycle(),
            requester: req.requester,
            approver: None,
            quorum: req.quorum,
            approvals: Vec::new(),
            extensions: Extensions::under(req.extension_limits),
            glass_broken_by: None,
            state,
            end_reason: None,
            denial_reason: None,
            failure: None,
            version: 1,
            created_at: now,
            decided_at,
            activating_at: None,
            active_at: None,
            expires_at: None,
            ending_at: None,
            finished_at: None,
            grant_name: None,
            debug_container: None,
            copy_pod: None,
            process_access_annotated: false,
            recording: None,
            rekor: None,
            review: None,
            spec: None,
        }
    }

    /// The first eight hex digits of the id's random tail, used in cluster object names
    /// (`breakglass-<short>`, `debug-<short>`). UUIDv7 starts with a timestamp, so the tail is
    /// what tells two sessions apart.
    pub fn short_id(&self) -> String {
        short_id(&self.id)
    }

    /// Whether a second person (or broken glass) stands behind this session, as Flight requires.
    pub fn is_authorized_for_flight(&self) -> bool {
        // A row from before quorums carries its one approver and no approval list.
        let enough = self.approvals.len() >= self.quorum.needed()
            || (self.approvals.is_empty() && self.quorum.needed() == 1);
        self.glass_broken_by.is_some()
            || (enough
                && self
                    .approver
                    .as_deref()
                    .is_some_and(|a| a != self.requester))
    }

    /// The minutes this session may run: what was requested and every extension given. The
    /// grant's TTL says this.
    pub fn granted_minutes(&self) -> u32 {
        self.duration_minutes + self.extensions.granted_minutes()
    }

    /// The longest this session could run if every extension it may still get were given:
    /// the time box of what it leaves in the cluster that cannot be moved later (the debug
    /// container's own deadline, a copy pod's cleanup label). The server ends it explicitly at
    /// its actual deadline.
    pub fn ceiling_minutes(&self) -> u32 {
        if self.extensions.asks_left() == 0 {
            self.granted_minutes()
        } else {
            self.granted_minutes()
                .max(self.extensions.limits.max_total_minutes)
        }
    }

    /// A glass-broken session that finished without a review.
    pub fn review_due(&self) -> bool {
        self.glass_broken_by.is_some()
            && SessionState::REVIEWABLE.contains(&self.state)
            && self.review.is_none()
    }

    /// When the review of a session that [needs one](Session::review_due) is due:
    /// [`REVIEW_WITHIN`] after its end. `None` when no review is due.
    pub fn review_deadline(&self) -> Option<OffsetDateTime> {
        self.finished_at
            .filter(|_| self.review_due())
            .map(|at| at + REVIEW_WITHIN)
    }
}

/// How long after its end a glass-broken session is to be reviewed: a week, while the people
/// involved still remember why they broke the glass.
pub const REVIEW_WITHIN: time::Duration = time::Duration::days(7);

/// See [`Session::short_id`].
pub fn short_id(id: &Uuid) -> String {
    let hex = id.simple().to_string();
    hex[hex.len() - 8..].to_string()
}
