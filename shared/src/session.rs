//! The session model and its state machine.
//!
//! Every change to a session row is computed here by [`Session::apply`] (or
//! [`Session::new_request`] for the first row) and written by the store with a compare-and-set
//! on the row's version, so concurrent actors race safely: the second writer finds the version
//! moved and gets a conflict.

use serde::{Deserialize, Serialize};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use crate::access::Action;
use crate::permissions::{Permission, PermissionSet};

/// How strict an environment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::Display)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Tier {
    /// Dev and staging: requests are approved automatically.
    Ground,
    /// Production: a second person approves, or a holder of `self` breaks the glass.
    Flight,
}

impl Tier {
    /// Lowercase name used on the wire and in the database (`FromStr` reads it back).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether a debugged pod may be recycled at the end when its requester asks: on Ground
    /// only, never on Flight. The request check ([`crate::validate::recycle`]) and the form
    /// both ask this.
    pub fn allows_recycle(self) -> bool {
        self == Tier::Ground
    }
}

/// How the debug container reaches the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::Display)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Mode {
    /// An ephemeral container added to the running pod.
    Live,
    /// A hardened copy of the pod with the debug container in it.
    Copy,
}

impl Mode {
    /// Lowercase name used on the wire and in the database (`FromStr` reads it back).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Where a session is in its life. Its name on the wire and in the database is the variant's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::Display)]
pub enum SessionState {
    /// Flight only: waiting for a second person.
    PendingApproval,
    /// Approved (or auto-approved on Ground); activation has not started.
    Approved,
    /// The grant and debug container are being created.
    Activating,
    /// The debug container runs; the terminal may attach.
    Active,
    /// The relay is closing and the cluster objects are being removed.
    Ending,
    /// Final: ended after being active (see [`EndReason`]).
    Ended,
    /// Final: an approver said no.
    Denied,
    /// Final: approval (or activation) never came in time.
    Expired,
    /// Final: the requester withdrew before activation.
    Withdrawn,
    /// Final: activation failed; everything created was removed.
    Failed,
}

impl SessionState {
    /// Every state, in life order.
    pub const ALL: [SessionState; 10] = [
        SessionState::PendingApproval,
        SessionState::Approved,
        SessionState::Activating,
        SessionState::Active,
        SessionState::Ending,
        SessionState::Ended,
        SessionState::Denied,
        SessionState::Expired,
        SessionState::Withdrawn,
        SessionState::Failed,
    ];

    /// Between approval and the end: the session holds, or is getting or giving back, cluster
    /// access. The "in progress" cards show these and the list filter `in_progress` selects
    /// them.
    pub const IN_PROGRESS: [SessionState; 4] = [
        SessionState::Approved,
        SessionState::Activating,
        SessionState::Active,
        SessionState::Ending,
    ];

    /// Whether the state is one of [`SessionState::IN_PROGRESS`].
    pub fn is_in_progress(self) -> bool {
        SessionState::IN_PROGRESS.contains(&self)
    }

    /// The final states a glass-broken session may still owe a review in.
    pub const REVIEWABLE: [SessionState; 2] = [SessionState::Ended, SessionState::Failed];

    /// Final states accept no event.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            SessionState::Ended
                | SessionState::Denied
                | SessionState::Expired
                | SessionState::Withdrawn
                | SessionState::Failed
        )
    }

    /// Whether the session may hold objects in a cluster (so cleanup may be owed).
    pub fn may_hold_cluster_objects(self) -> bool {
        matches!(
            self,
            SessionState::Activating | SessionState::Active | SessionState::Ending
        )
    }

    /// The name used on the wire and in the database.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Parses [`SessionState::as_str`] output; `None` for anything else (a form's empty
    /// "any state" option, a hand-edited row).
    pub fn parse(s: &str) -> Option<SessionState> {
        s.parse().ok()
    }
}

/// Why an active session ended. The kind name (the variant's) is the `kind` on the wire and
/// the `end_reason` column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[derive(strum::IntoStaticStr, strum::EnumString)]
#[serde(tag = "kind")]
pub enum EndReason {
    /// The requester ended it.
    UserEnded,
    /// Someone holding `terminate` ended it.
    Terminated {
        /// Who terminated it.
        by: String,
    },
    /// Its requested duration ran out.
    TtlExpired,
    /// The debugged pod (or the copy) disappeared.
    PodGone,
    /// The terminal relay broke beyond repair.
    RelayError,
    /// The recording could not be kept ("no recording, no session").
    RecordingFailed,
    /// An operator forced it to end from the CLI.
    AdminForceEnded,
}

impl EndReason {
    /// The kind name, e.g. `TtlExpired`.
    pub fn kind(&self) -> &'static str {
        self.into()
    }

    /// Rebuilds a reason from its kind and, for `Terminated`, who did it (required there).
    pub fn from_parts(kind: &str, by: Option<&str>) -> Option<EndReason> {
        let mut reason: EndReason = kind.parse().ok()?;
        if let EndReason::Terminated { by: who } = &mut reason {
            *who = by?.to_string();
        }
        Some(reason)
    }

    /// Who ended it, when a person did.
    pub fn by(&self) -> Option<&str> {
        match self {
            EndReason::Terminated { by } => Some(by),
            _ => None,
        }
    }
}

/// Who causes an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// A signed-in person with the permissions they hold in the session's environment.
    User {
        /// User name.
        name: String,
        /// Permissions in the session's environment.
        permissions: PermissionSet,
    },
    /// The server itself (activation, sweep, relay).
    System,
}

impl Actor {
    /// Name written to the events table.
    pub fn name(&self) -> &str {
        match self {
            Actor::User { name, .. } => name,
            Actor::System => "system",
        }
    }

    fn user(&self) -> Option<(&str, &PermissionSet)> {
        match self {
            Actor::User { name, permissions } => Some((name, permissions)),
            Actor::System => None,
        }
    }
}

/// Something that happened to a session in a cluster, recorded on the row without changing its
/// state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(tag = "kind")]
pub enum Progress {
    /// The grant RoleBinding exists.
    GrantCreated {
        /// RoleBinding name.
        name: String,
    },
    /// The process-access annotation was set on the pod.
    ProcessAccessAnnotated,
    /// The ephemeral debug container was added (live mode).
    DebugContainerAdded {
        /// Container name.
        name: String,
    },
    /// The hardened copy pod was created (copy mode).
    CopyPodCreated {
        /// Pod name.
        name: String,
        /// Debug container name inside it.
        container: String,
    },
    /// A version of the recording was stored.
    RecordingStored(RecordingRef),
    /// The recording's final hash was anchored in a transparency log.
    Anchored(RekorEntry),
    /// A cleanup step finished (free text for the audit trail).
    CleanupStep {
        /// What was removed.
        detail: String,
    },
}

/// Everything that can happen to a session.
#[derive(Debug, Clone, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum SessionEvent {
    /// A second person approves (Flight).
    Approve {
        /// The approver.
        by: Actor,
    },
    /// A second person refuses (Flight).
    Deny {
        /// The approver.
        by: Actor,
        /// Why (shown to the requester).
        reason: String,
    },
    /// A holder of `self` activates a Flight session without a second person.
    BreakGlass {
        /// Who broke the glass.
        by: Actor,
    },
    /// The requester ends their own session: before activation it is withdrawn, after it ends.
    End {
        /// The requester.
        by: Actor,
    },
    /// A holder of `terminate` ends someone's session.
    Terminate {
        /// Who terminated it.
        by: Actor,
    },
    /// The server ends a session (TTL, pod gone, relay or recording failure, operator force).
    SystemEnd {
        /// Why; `UserEnded` and `Terminated` are for people and are refused here.
        reason: EndReason,
    },
    /// Approval (or activation) did not come in time.
    Expire,
    /// The server starts creating the cluster objects.
    BeginActivation,
    /// The debug container runs.
    Activated,
    /// Activation failed and everything created was removed.
    ActivationFailed {
        /// What went wrong, for the requester.
        error: String,
    },
    /// Everything the session created in the cluster is gone.
    CleanupDone,
    /// A step in the cluster or the recording was done; the state stays.
    Progress(Progress),
}

impl SessionEvent {
    /// Short stable name for the events table and metrics: the variant in snake case
    /// (`break_glass`, `cleanup_done`).
    pub fn kind(&self) -> &'static str {
        self.into()
    }

    /// Who causes it.
    pub fn actor(&self) -> &Actor {
        match self {
            SessionEvent::Approve { by }
            | SessionEvent::Deny { by, .. }
            | SessionEvent::BreakGlass { by }
            | SessionEvent::End { by }
            | SessionEvent::Terminate { by } => by,
            _ => &Actor::System,
        }
    }

    /// Free-text detail for the events table.
    pub fn detail(&self) -> Option<String> {
        match self {
            SessionEvent::Deny { reason, .. } => Some(reason.clone()),
            SessionEvent::SystemEnd { reason } => Some(reason.kind().to_string()),
            SessionEvent::ActivationFailed { error } => Some(error.clone()),
            SessionEvent::Progress(p) => serde_json::to_string(p).ok(),
            _ => None,
        }
    }

    /// The person's action this event carries out (whose rule [`Session::may`] states), for the
    /// events people cause.
    pub fn action(&self) -> Option<Action> {
        Some(match self {
            SessionEvent::Approve { .. } => Action::Approve,
            SessionEvent::Deny { .. } => Action::Deny,
            SessionEvent::BreakGlass { .. } => Action::BreakGlass,
            SessionEvent::End { .. } => Action::End,
            SessionEvent::Terminate { .. } => Action::Terminate,
            _ => return None,
        })
    }

    /// True for events only the server itself may cause.
    pub fn is_system(&self) -> bool {
        matches!(self.actor(), Actor::System)
    }
}

/// Why an event was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// The session is in a final state; nothing more can happen to it.
    #[error("the session is {state} and can no longer change")]
    Final {
        /// The current state.
        state: SessionState,
    },
    /// The event makes no sense in the current state.
    #[error("cannot {event} a session that is {state}")]
    WrongState {
        /// The current state.
        state: SessionState,
        /// The refused event's kind.
        event: &'static str,
    },
    /// The requester tried to approve or deny their own request.
    #[error("you cannot approve or deny your own request; ask another approver")]
    OwnRequest,
    /// Only the requester may do this.
    #[error("only the requester ({requester}) can do this")]
    NotRequester {
        /// The session's requester.
        requester: String,
    },
    /// A permission is missing in the session's environment.
    #[error("you need the {0} permission in this environment")]
    MissingPermission(Permission),
    /// Approval and breaking the glass exist only on Flight.
    #[error("this is a Ground environment: requests are approved automatically")]
    NotFlight,
    /// A person tried a server-only event, or the server a person-only one.
    #[error("the {event} event cannot be caused by {actor}")]
    WrongActor {
        /// The refused event's kind.
        event: &'static str,
        /// Who tried.
        actor: String,
    },
}

impl TransitionError {
    /// True when the refusal is about who asked (403) rather than when (409).
    pub fn is_forbidden(&self) -> bool {
        matches!(
            self,
            TransitionError::OwnRequest
                | TransitionError::NotRequester { .. }
                | TransitionError::MissingPermission(_)
                | TransitionError::WrongActor { .. }
        )
    }
}

/// Where the recording of a session is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct RecordingRef {
    /// Object key, `sessions/<id>.cast`.
    pub key: String,
    /// Object version id of the stored version (empty for stores without versions).
    pub version: String,
    /// Lowercase hex SHA-256 of that version's bytes.
    pub sha256: String,
    /// Byte count of that version.
    pub bytes: u64,
}

/// A transparency-log entry anchoring the recording's final hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct RekorEntry {
    /// Entry UUID.
    pub uuid: String,
    /// Log index.
    pub log_index: i64,
}

/// A reviewer's verdict on a finished session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::Display)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Verdict {
    /// Nothing wrong seen.
    Ok,
    /// Something needs follow-up.
    Concern,
}

impl Verdict {
    /// Lowercase name used on the wire and in the database (`FromStr` reads it back).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A recorded review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Review {
    /// Who reviewed.
    pub reviewer: String,
    /// When.
    #[serde(with = "time::serde::rfc3339")]
    #[cfg_attr(feature = "server", schema(value_type = String, format = DateTime))]
    pub at: OffsetDateTime,
    /// The verdict.
    pub verdict: Verdict,
    /// Free text.
    pub notes: String,
}

/// Why a review was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReviewError {
    /// Only finished sessions are reviewed.
    #[error("only an Ended or Failed session can be reviewed; this one is {0}")]
    NotFinished(SessionState),
    /// Already reviewed.
    #[error("this session was already reviewed by {0}")]
    AlreadyReviewed(String),
    /// Reviewing one's own session.
    #[error("you cannot review your own session; ask another approver")]
    OwnSession,
    /// Reviewing a session one approved or broke the glass for.
    #[error("you {0} this session, so its review must come from another approver")]
    OwnDecision(&'static str),
    /// Reviewers hold `approve` in the environment.
    #[error("you need the {0} permission in this environment to review")]
    MissingPermission(Permission),
}

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
    /// Requested duration in minutes.
    pub duration_minutes: u32,
    /// Recycle asked (only where [`Tier::allows_recycle`]).
    pub recycle: bool,
    /// Who asked.
    pub requester: String,
    /// Who approved (Flight) or denied.
    pub approver: Option<String>,
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
        self.glass_broken_by.is_some()
            || self
                .approver
                .as_deref()
                .is_some_and(|a| a != self.requester)
    }

    /// A glass-broken session that finished without a review.
    pub fn review_due(&self) -> bool {
        self.glass_broken_by.is_some()
            && SessionState::REVIEWABLE.contains(&self.state)
            && self.review.is_none()
    }

    /// Applies `event` at `now`: the next row (version + 1) or why not.
    pub fn apply(
        &self,
        event: &SessionEvent,
        now: OffsetDateTime,
    ) -> Result<Session, TransitionError> {
        use SessionState as S;
        if self.state.is_final() {
            return Err(TransitionError::Final { state: self.state });
        }
        let wrong = || TransitionError::WrongState {
            state: self.state,
            event: event.kind(),
        };
        // People's events pass first the rule `Session::may` states for them.
        if let Some(action) = event.action() {
            let (name, perms) = self.person(event)?;
            self.may_change(action, name, perms)?;
        }
        let by = event.actor().name();
        let mut next = self.clone();
        next.version += 1;
        match event {
            SessionEvent::Approve { .. } => {
                next.approver = Some(by.to_string());
                next.decided_at = Some(now);
                next.state = S::Approved;
            }
            SessionEvent::Deny { reason, .. } => {
                next.approver = Some(by.to_string());
                next.decided_at = Some(now);
                next.state = S::Denied;
                next.denial_reason = Some(reason.clone());
                next.finished_at = Some(now);
            }
            SessionEvent::BreakGlass { .. } => {
                next.glass_broken_by = Some(by.to_string());
                next.decided_at = Some(now);
                next.state = S::Approved;
            }
            SessionEvent::End { .. } => {
                if matches!(self.state, S::PendingApproval | S::Approved) {
                    next.state = S::Withdrawn;
                    next.finished_at = Some(now);
                } else {
                    next.begin_ending(EndReason::UserEnded, now);
                }
            }
            SessionEvent::Terminate { .. } => {
                next.begin_ending(EndReason::Terminated { by: by.to_string() }, now);
            }
            SessionEvent::SystemEnd { reason } => {
                if matches!(reason, EndReason::UserEnded | EndReason::Terminated { .. }) {
                    return Err(TransitionError::WrongActor {
                        event: event.kind(),
                        actor: "system".to_string(),
                    });
                }
                match self.state {
                    S::Activating | S::Active => next.begin_ending(reason.clone(), now),
                    _ => return Err(wrong()),
                }
            }
            SessionEvent::Expire => match self.state {
                S::PendingApproval | S::Approved => {
                    next.state = S::Expired;
                    next.finished_at = Some(now);
                }
                _ => return Err(wrong()),
            },
            SessionEvent::BeginActivation => {
                if self.state != S::Approved {
                    return Err(wrong());
                }
                // Defence in depth: an Approved Flight row without a second person or broken
                // glass can only come from a tampered store; never activate it.
                if self.tier == Tier::Flight && !self.is_authorized_for_flight() {
                    return Err(wrong());
                }
                next.state = S::Activating;
                next.activating_at = Some(now);
            }
            SessionEvent::Activated => {
                if self.state != S::Activating {
                    return Err(wrong());
                }
                next.state = S::Active;
                next.active_at = Some(now);
                next.expires_at = Some(now + Duration::minutes(i64::from(self.duration_minutes)));
            }
            SessionEvent::ActivationFailed { error } => {
                if self.state != S::Activating {
                    return Err(wrong());
                }
                next.state = S::Failed;
                next.failure = Some(error.clone());
                next.finished_at = Some(now);
            }
            SessionEvent::CleanupDone => {
                if self.state != S::Ending {
                    return Err(wrong());
                }
                next.state = S::Ended;
                next.finished_at = Some(now);
            }
            SessionEvent::Progress(p) => {
                if !self.state.may_hold_cluster_objects() {
                    return Err(wrong());
                }
                next.record(p);
            }
        }
        Ok(next)
    }

    /// Records a review on a finished session: the next row (version + 1) or why not.
    pub fn review(
        &self,
        reviewer: &str,
        permissions: &PermissionSet,
        verdict: Verdict,
        notes: &str,
        now: OffsetDateTime,
    ) -> Result<Session, ReviewError> {
        self.may_review(reviewer, permissions)?;
        let mut next = self.clone();
        next.version += 1;
        next.review = Some(Review {
            reviewer: reviewer.to_string(),
            at: now,
            verdict,
            notes: notes.to_string(),
        });
        Ok(next)
    }

    /// Puts the transparency-log entry of the final recording hash on a session that ended
    /// before the log could take it (the log was unreachable then): the next row (version + 1)
    /// or why not. Only on an `Ended` session with a recording and no entry yet; nothing else
    /// changes.
    pub fn anchor_late(&self, entry: &RekorEntry) -> Result<Session, TransitionError> {
        if self.state != SessionState::Ended || self.recording.is_none() || self.rekor.is_some() {
            return Err(TransitionError::WrongState {
                state: self.state,
                event: "anchored",
            });
        }
        let mut next = self.clone();
        next.version += 1;
        next.rekor = Some(entry.clone());
        Ok(next)
    }

    /// The person causing a person-made `event`, or why the server cannot cause it.
    fn person<'a>(
        &self,
        event: &'a SessionEvent,
    ) -> Result<(&'a str, &'a PermissionSet), TransitionError> {
        let by = event.actor();
        by.user().ok_or_else(|| TransitionError::WrongActor {
            event: event.kind(),
            actor: by.name().to_string(),
        })
    }

    fn begin_ending(&mut self, reason: EndReason, now: OffsetDateTime) {
        self.state = SessionState::Ending;
        self.end_reason = Some(reason);
        self.ending_at = Some(now);
    }

    fn record(&mut self, p: &Progress) {
        match p {
            Progress::GrantCreated { name } => self.grant_name = Some(name.clone()),
            Progress::ProcessAccessAnnotated => self.process_access_annotated = true,
            Progress::DebugContainerAdded { name } => self.debug_container = Some(name.clone()),
            Progress::CopyPodCreated { name, container } => {
                self.copy_pod = Some(name.clone());
                self.debug_container = Some(container.clone());
            }
            Progress::RecordingStored(r) => self.recording = Some(r.clone()),
            Progress::Anchored(e) => self.rekor = Some(e.clone()),
            Progress::CleanupStep { .. } => {}
        }
    }
}

/// See [`Session::short_id`].
pub fn short_id(id: &Uuid) -> String {
    let hex = id.simple().to_string();
    hex[hex.len() - 8..].to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;
    use time::macros::datetime;

    pub(crate) const NOW: OffsetDateTime = datetime!(2026-01-01 12:00 UTC);

    fn req(tier: Tier) -> NewSession {
        NewSession {
            environment: "prod".into(),
            tier,
            namespace: "shop".into(),
            pod: "web-1".into(),
            target_container: None,
            mode: Mode::Live,
            reason: "checking a stuck worker".into(),
            ticket: None,
            duration_minutes: 30,
            recycle: true,
            requester: "alice".into(),
        }
    }

    fn user(name: &str, permissions: PermissionSet) -> Actor {
        Actor::User {
            name: name.into(),
            permissions,
        }
    }

    /// alice's request in `state`, approved by dave where Flight needs it (dave is no one
    /// the tables below ask about, so the approver's own rules stay out of them).
    pub(crate) fn session_in(state: SessionState, tier: Tier) -> Session {
        let mut s = Session::new_request(Uuid::from_u128(7), req(tier), NOW);
        s.state = state;
        if tier == Tier::Flight && state != SessionState::PendingApproval {
            s.approver = Some("dave".into());
        }
        if matches!(state, SessionState::Ending | SessionState::Ended) {
            s.end_reason = Some(EndReason::UserEnded);
        }
        s
    }

    /// One representative of every event, each caused by an actor that is allowed to cause it
    /// somewhere, so the table below isolates the state rule.
    fn all_events() -> Vec<SessionEvent> {
        let approver = user("bob", PermissionSet::ALL);
        vec![
            SessionEvent::Approve {
                by: approver.clone(),
            },
            SessionEvent::Deny {
                by: approver.clone(),
                reason: "not now".into(),
            },
            SessionEvent::BreakGlass {
                by: user("alice", PermissionSet::ALL),
            },
            SessionEvent::End {
                by: user("alice", PermissionSet::NONE),
            },
            SessionEvent::Terminate { by: approver },
            SessionEvent::SystemEnd {
                reason: EndReason::TtlExpired,
            },
            SessionEvent::Expire,
            SessionEvent::BeginActivation,
            SessionEvent::Activated,
            SessionEvent::ActivationFailed {
                error: "boom".into(),
            },
            SessionEvent::CleanupDone,
            SessionEvent::Progress(Progress::GrantCreated {
                name: "breakglass-x".into(),
            }),
        ]
    }

    /// The whole table: for each tier, state and event, the expected next state or `None` for a
    /// refusal. Written out by hand so that any change to the machine shows up here.
    fn expected(tier: Tier, state: SessionState, event: &SessionEvent) -> Option<SessionState> {
        use SessionState as S;
        let flight = tier == Tier::Flight;
        match (state, event.kind()) {
            (s, _) if s.is_final() => None,
            (S::PendingApproval, "approve") if flight => Some(S::Approved),
            (S::PendingApproval, "deny") if flight => Some(S::Denied),
            (S::PendingApproval, "break_glass") if flight => Some(S::Approved),
            (S::PendingApproval | S::Approved, "end") => Some(S::Withdrawn),
            (S::Activating | S::Active, "end") => Some(S::Ending),
            (S::Approved | S::Activating | S::Active, "terminate") => Some(S::Ending),
            (S::Activating | S::Active, "system_end") => Some(S::Ending),
            (S::PendingApproval | S::Approved, "expire") => Some(S::Expired),
            (S::Approved, "begin_activation") => Some(S::Activating),
            (S::Activating, "activated") => Some(S::Active),
            (S::Activating, "activation_failed") => Some(S::Failed),
            (S::Ending, "cleanup_done") => Some(S::Ended),
            (S::Activating | S::Active | S::Ending, "progress") => Some(state),
            _ => None,
        }
    }

    #[test]
    fn every_state_event_pair_is_a_transition_or_a_typed_error() {
        let mut checked = 0;
        for tier in [Tier::Ground, Tier::Flight] {
            for state in SessionState::ALL {
                for event in all_events() {
                    let s = session_in(state, tier);
                    let got = s.apply(&event, NOW);
                    match (expected(tier, state, &event), got) {
                        (Some(want), Ok(next)) => {
                            assert_eq!(next.state, want, "{tier:?} {state} {}", event.kind());
                            assert_eq!(next.version, s.version + 1);
                        }
                        (None, Err(e)) => {
                            if state.is_final() {
                                assert_eq!(e, TransitionError::Final { state });
                            }
                        }
                        (want, got) => {
                            panic!(
                                "{tier:?} {state} {}: want {want:?}, got {got:?}",
                                event.kind()
                            )
                        }
                    }
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 2 * 10 * 12);
    }

    #[test]
    fn ground_skips_approval_and_keeps_recycle() {
        let s = Session::new_request(Uuid::from_u128(1), req(Tier::Ground), NOW);
        assert_eq!(s.state, SessionState::Approved);
        assert!(s.recycle);
        let f = Session::new_request(Uuid::from_u128(1), req(Tier::Flight), NOW);
        assert_eq!(f.state, SessionState::PendingApproval);
        assert!(!f.recycle, "Flight never recycles");
    }

    #[test]
    fn requester_cannot_approve_own_request() {
        let s = session_in(SessionState::PendingApproval, Tier::Flight);
        let e = s
            .apply(
                &SessionEvent::Approve {
                    by: user("alice", PermissionSet::ALL),
                },
                NOW,
            )
            .unwrap_err();
        assert_eq!(e, TransitionError::OwnRequest);
        assert!(e.is_forbidden());
    }

    #[test]
    fn approve_needs_the_permission_and_break_glass_needs_self() {
        let s = session_in(SessionState::PendingApproval, Tier::Flight);
        let mut only_request = PermissionSet::NONE;
        only_request.request = true;
        assert_eq!(
            s.apply(
                &SessionEvent::Approve {
                    by: user("carol", only_request)
                },
                NOW
            ),
            Err(TransitionError::MissingPermission(Permission::Approve))
        );
        let mut approver = PermissionSet::NONE;
        approver.approve = true;
        assert_eq!(
            s.apply(
                &SessionEvent::BreakGlass {
                    by: user("alice", approver)
                },
                NOW
            ),
            Err(TransitionError::MissingPermission(Permission::SelfApprove))
        );
        let next = s
            .apply(
                &SessionEvent::BreakGlass {
                    by: user("alice", PermissionSet::ALL),
                },
                NOW,
            )
            .unwrap();
        assert_eq!(next.glass_broken_by.as_deref(), Some("alice"));
        assert!(next.is_authorized_for_flight());
    }

    #[test]
    fn only_the_requester_ends_and_terminate_needs_permission() {
        let s = session_in(SessionState::Active, Tier::Ground);
        assert!(matches!(
            s.apply(
                &SessionEvent::End {
                    by: user("bob", PermissionSet::ALL)
                },
                NOW
            ),
            Err(TransitionError::NotRequester { .. })
        ));
        assert_eq!(
            s.apply(
                &SessionEvent::Terminate {
                    by: user("bob", PermissionSet::NONE)
                },
                NOW
            ),
            Err(TransitionError::MissingPermission(Permission::Terminate))
        );
        let next = s
            .apply(
                &SessionEvent::Terminate {
                    by: user("bob", PermissionSet::ALL),
                },
                NOW,
            )
            .unwrap();
        assert_eq!(
            next.end_reason,
            Some(EndReason::Terminated { by: "bob".into() })
        );
        let done = next.apply(&SessionEvent::CleanupDone, NOW).unwrap();
        assert_eq!(done.state, SessionState::Ended);
        assert_eq!(
            done.end_reason,
            Some(EndReason::Terminated { by: "bob".into() })
        );
    }

    #[test]
    fn people_cannot_send_system_events_and_the_system_cannot_approve() {
        let s = session_in(SessionState::PendingApproval, Tier::Flight);
        assert!(matches!(
            s.apply(&SessionEvent::Approve { by: Actor::System }, NOW),
            Err(TransitionError::WrongActor { .. })
        ));
        let a = session_in(SessionState::Active, Tier::Flight);
        assert!(matches!(
            a.apply(
                &SessionEvent::SystemEnd {
                    reason: EndReason::UserEnded
                },
                NOW
            ),
            Err(TransitionError::WrongActor { .. })
        ));
    }

    #[test]
    fn activation_sets_the_deadline_and_refuses_an_unapproved_flight_row() {
        let s = session_in(SessionState::Activating, Tier::Ground);
        let a = s.apply(&SessionEvent::Activated, NOW).unwrap();
        assert_eq!(a.expires_at, Some(NOW + Duration::minutes(30)));
        let mut forged = session_in(SessionState::Approved, Tier::Flight);
        forged.approver = Some("alice".into());
        assert!(forged.apply(&SessionEvent::BeginActivation, NOW).is_err());
    }

    #[test]
    fn late_anchoring_only_once_on_an_ended_recorded_session() {
        let entry = RekorEntry {
            uuid: "ab".repeat(40),
            log_index: 7,
        };
        let recording = RecordingRef {
            key: "sessions/x.cast".into(),
            version: "3".into(),
            sha256: "00".repeat(32),
            bytes: 10,
        };
        for state in SessionState::ALL {
            let mut s = session_in(state, Tier::Flight);
            s.recording = Some(recording.clone());
            let r = s.anchor_late(&entry);
            if state == SessionState::Ended {
                let next = r.unwrap();
                assert_eq!(next.version, s.version + 1);
                assert_eq!(next.rekor.as_ref(), Some(&entry));
                let mut only_entry = next.clone();
                only_entry.rekor = None;
                only_entry.version = s.version;
                assert_eq!(only_entry, s, "nothing else changes");
                assert!(next.anchor_late(&entry).is_err(), "only once");
            } else {
                assert!(r.is_err(), "{state:?}");
            }
        }
        let mut unrecorded = session_in(SessionState::Ended, Tier::Ground);
        unrecorded.recording = None;
        assert!(unrecorded.anchor_late(&entry).is_err());
    }

    #[test]
    fn review_rules() {
        let mut s = session_in(SessionState::Ended, Tier::Flight);
        s.glass_broken_by = Some("alice".into());
        assert!(s.review_due());
        assert_eq!(
            s.review("alice", &PermissionSet::ALL, Verdict::Ok, "", NOW),
            Err(ReviewError::OwnSession)
        );
        assert_eq!(
            s.review("bob", &PermissionSet::NONE, Verdict::Ok, "", NOW),
            Err(ReviewError::MissingPermission(Permission::Approve))
        );
        let r = s
            .review("bob", &PermissionSet::ALL, Verdict::Concern, "odd", NOW)
            .unwrap();
        assert!(!r.review_due());
        assert!(matches!(
            r.review("carol", &PermissionSet::ALL, Verdict::Ok, "", NOW),
            Err(ReviewError::AlreadyReviewed(_))
        ));
        let active = session_in(SessionState::Active, Tier::Flight);
        assert_eq!(
            active.review("bob", &PermissionSet::ALL, Verdict::Ok, "", NOW),
            Err(ReviewError::NotFinished(SessionState::Active))
        );
    }

    #[test]
    fn names_round_trip() {
        for s in SessionState::ALL {
            assert_eq!(SessionState::parse(s.as_str()), Some(s));
        }
        for r in [
            EndReason::UserEnded,
            EndReason::Terminated { by: "x".into() },
            EndReason::TtlExpired,
            EndReason::PodGone,
            EndReason::RelayError,
            EndReason::RecordingFailed,
            EndReason::AdminForceEnded,
        ] {
            assert_eq!(EndReason::from_parts(r.kind(), r.by()), Some(r.clone()));
        }
        assert_eq!(short_id(&Uuid::from_u128(0xabcdef12)), "abcdef12");
    }

    #[test]
    fn derived_names_are_the_wire_names() {
        let serde_name = |v: serde_json::Value| v.as_str().map(str::to_string);
        for s in SessionState::ALL {
            assert_eq!(serde_name(json!(s)).as_deref(), Some(s.as_str()));
            assert_eq!(s.to_string(), s.as_str());
        }
        assert_eq!(
            [Tier::Ground.as_str(), Tier::Flight.as_str()],
            ["ground", "flight"]
        );
        assert_eq!([Mode::Live.as_str(), Mode::Copy.as_str()], ["live", "copy"]);
        assert_eq!(
            [Verdict::Ok.as_str(), Verdict::Concern.as_str()],
            ["ok", "concern"]
        );
        for t in [Tier::Ground, Tier::Flight] {
            assert_eq!(serde_name(json!(t)).as_deref(), Some(t.as_str()));
            assert_eq!(t.as_str().parse::<Tier>(), Ok(t));
        }
        for m in [Mode::Live, Mode::Copy] {
            assert_eq!(serde_name(json!(m)).as_deref(), Some(m.as_str()));
            assert_eq!(m.as_str().parse::<Mode>(), Ok(m));
        }
        for v in [Verdict::Ok, Verdict::Concern] {
            assert_eq!(serde_name(json!(v)).as_deref(), Some(v.as_str()));
            assert_eq!(v.as_str().parse::<Verdict>(), Ok(v));
        }
        let r = EndReason::Terminated { by: "x".into() };
        assert_eq!(json!(r)["kind"], "Terminated");
        assert_eq!(r.kind(), "Terminated");
        assert_eq!(EndReason::from_parts("Terminated", None), None);
        let kinds: Vec<&str> = all_events().iter().map(SessionEvent::kind).collect();
        assert_eq!(
            kinds,
            [
                "approve",
                "deny",
                "break_glass",
                "end",
                "terminate",
                "system_end",
                "expire",
                "begin_activation",
                "activated",
                "activation_failed",
                "cleanup_done",
                "progress"
            ]
        );
    }

    fn arb_actor() -> impl Strategy<Value = Actor> {
        prop_oneof![
            Just(Actor::System),
            (
                prop::sample::select(vec!["alice", "bob", "carol"]),
                any::<[bool; 4]>()
            )
                .prop_map(|(n, p)| Actor::User {
                    name: n.into(),
                    permissions: PermissionSet {
                        request: p[0],
                        approve: p[1],
                        terminate: p[2],
                        self_approve: p[3],
                    },
                }),
        ]
    }

    fn arb_event() -> impl Strategy<Value = SessionEvent> {
        prop_oneof![
            arb_actor().prop_map(|by| SessionEvent::Approve { by }),
            arb_actor().prop_map(|by| SessionEvent::Deny {
                by,
                reason: "no".into()
            }),
            arb_actor().prop_map(|by| SessionEvent::BreakGlass { by }),
            arb_actor().prop_map(|by| SessionEvent::End { by }),
            arb_actor().prop_map(|by| SessionEvent::Terminate { by }),
            Just(SessionEvent::SystemEnd {
                reason: EndReason::PodGone
            }),
            Just(SessionEvent::Expire),
            Just(SessionEvent::BeginActivation),
            Just(SessionEvent::Activated),
            Just(SessionEvent::ActivationFailed { error: "x".into() }),
            Just(SessionEvent::CleanupDone),
            Just(SessionEvent::Progress(Progress::ProcessAccessAnnotated)),
        ]
    }

    proptest! {
        #[test]
        fn random_sequences_never_leave_a_final_state_nor_skip_flight_approval(
            flight in any::<bool>(),
            events in prop::collection::vec(arb_event(), 0..40),
        ) {
            let tier = if flight { Tier::Flight } else { Tier::Ground };
            let mut s = Session::new_request(Uuid::from_u128(9), req(tier), NOW);
            for e in &events {
                let before = s.clone();
                if let Ok(next) = s.apply(e, NOW) {
                    prop_assert!(!before.state.is_final(), "left final state {}", before.state);
                    prop_assert_eq!(next.version, before.version + 1);
                    s = next;
                }
                let past_approval = matches!(
                    s.state,
                    SessionState::Approved | SessionState::Activating | SessionState::Active
                        | SessionState::Ending | SessionState::Ended | SessionState::Failed
                );
                if tier == Tier::Flight && past_approval {
                    prop_assert!(s.is_authorized_for_flight(), "Flight skipped approval: {:?}", s);
                    if let Some(a) = &s.approver { prop_assert_ne!(a, &s.requester); }
                }
            }
        }
    }
}
