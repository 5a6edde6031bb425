//! What happens to a session: who causes it, the events, the progress recorded on the row, and
//! why an event is refused.

use serde::{Deserialize, Serialize};

use super::kinds::{EndReason, SessionState};
use crate::permissions::{Permission, PermissionSet};

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

    /// The person's name and permissions; `None` for the server.
    pub(crate) fn user(&self) -> Option<(&str, &PermissionSet)> {
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
        /// What was removed, or what is left and why.
        detail: String,
        /// The step leaves something of the session in the cluster (a debug container that did
        /// not stop): the page then never says that everything is gone. Absent in the rows
        /// written before it existed, and when false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        left: bool,
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
        /// Their groups that hold `approve` in the session's environment: with a quorum of
        /// distinct groups, the approval counts through the first one not counted yet.
        groups: Vec<String>,
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
        /// Recycle the debugged pod at the end (live mode, where the tier allows it), by the
        /// recycle rule: what the session left in the pod that outlives its debug container
        /// (a process started in the app's namespace through process access) goes with it.
        recycle: bool,
    },
    /// A holder of `terminate` ends someone's session.
    Terminate {
        /// Who terminated it.
        by: Actor,
    },
    /// The requester asks for more time while the session runs: on Ground it is given at once,
    /// on Flight it waits for approval.
    AskExtension {
        /// The requester.
        by: Actor,
        /// Minutes to add.
        minutes: u32,
        /// Why.
        reason: String,
    },
    /// A second person approves the waiting extension (Flight); with enough approvals for the
    /// session's quorum the time is added.
    ApproveExtension {
        /// The approver.
        by: Actor,
        /// Their groups that hold `approve` there (see [`SessionEvent::Approve`]).
        groups: Vec<String>,
    },
    /// A second person refuses the waiting extension (Flight); the session keeps its deadline.
    DenyExtension {
        /// The approver.
        by: Actor,
        /// Why (shown to the requester).
        reason: String,
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
            SessionEvent::Approve { by, .. }
            | SessionEvent::Deny { by, .. }
            | SessionEvent::AskExtension { by, .. }
            | SessionEvent::ApproveExtension { by, .. }
            | SessionEvent::DenyExtension { by, .. }
            | SessionEvent::BreakGlass { by }
            | SessionEvent::End { by, .. }
            | SessionEvent::Terminate { by } => by,
            _ => &Actor::System,
        }
    }

    /// Free-text detail for the events table.
    pub fn detail(&self) -> Option<String> {
        match self {
            SessionEvent::Deny { reason, .. } | SessionEvent::DenyExtension { reason, .. } => {
                Some(reason.clone())
            }
            SessionEvent::AskExtension {
                minutes, reason, ..
            } => Some(format!("{minutes} min: {reason}")),
            SessionEvent::SystemEnd { reason } => Some(reason.kind().to_string()),
            SessionEvent::ActivationFailed { error } => Some(error.clone()),
            SessionEvent::Progress(p) => serde_json::to_string(p).ok(),
            _ => None,
        }
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
    /// This approver counted already.
    #[error("you approved this request already; it waits for another approver")]
    AlreadyApproved,
    /// The quorum wants approvals through distinct groups and the approver's groups counted.
    #[error("an approver of each of your groups that may approve here counted already; this request needs someone from another group")]
    GroupCounted,
    /// An extension waits for approval already.
    #[error("an extension of this session is waiting for approval already")]
    ExtensionWaiting,
    /// No extension waits for a decision.
    #[error("no extension of this session is waiting for approval")]
    NoExtensionWaiting,
    /// The session had every extension it may have.
    #[error("{}", no_extensions_left(*.max))]
    NoExtensionsLeft {
        /// The bound it was made under.
        max: u8,
    },
    /// The minutes asked are none, or more than fit under the session's longest time.
    #[error("ask for 1 to {room} minutes: no more fits the longest a session may run here")]
    BeyondMaximum {
        /// The most minutes that fit.
        room: u32,
    },
    /// The session's deadline passed; it is ending.
    #[error("the session's time is up; ask for a new session")]
    DeadlinePassed,
    /// Approval and breaking the glass exist only on Flight.
    #[error("this is a Ground environment: requests are approved automatically")]
    NotFlight,
    /// Recycling at the end was asked where it cannot be.
    #[error("recycle: {why}")]
    NoRecycle {
        /// Why not, and what to do instead.
        why: &'static str,
    },
    /// A person tried a server-only event, or the server a person-only one.
    #[error("the {event} event cannot be caused by {actor}")]
    WrongActor {
        /// The refused event's kind.
        event: &'static str,
        /// Who tried.
        actor: String,
    },
}

fn no_extensions_left(max: u8) -> String {
    match max {
        0 => "sessions here cannot be extended; end this one and ask for a new session".into(),
        1 => "this session had its one extension; end it and ask for a new session".into(),
        n => format!("this session had its {n} extensions; end it and ask for a new session"),
    }
}

impl TransitionError {
    /// The request field a refusal is about, where it is about what was asked rather than who
    /// or when (answered 400 naming it).
    pub fn field(&self) -> Option<&'static str> {
        match self {
            TransitionError::BeyondMaximum { .. } => Some("minutes"),
            TransitionError::NoRecycle { .. } => Some("recycle"),
            _ => None,
        }
    }

    /// True when the refusal is about who asked (403) rather than when (409).
    pub fn is_forbidden(&self) -> bool {
        matches!(
            self,
            TransitionError::OwnRequest
                | TransitionError::NotRequester { .. }
                | TransitionError::MissingPermission(_)
                | TransitionError::GroupCounted
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
