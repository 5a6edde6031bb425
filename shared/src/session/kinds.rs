//! The enumerations a session row is made of, each named as on the wire and in the database.

use serde::{Deserialize, Serialize};

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
    /// only, never on Flight. The request check (`validate::recycle`) and the form
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

/// ClusterRole bound by a live-mode grant (a contract: never rename).
pub const LIVE_ROLE: &str = "tower-breakglass-debug-live";
/// ClusterRole bound by a copy-mode grant (a contract: never rename).
pub const COPY_ROLE: &str = "tower-breakglass-debug-copy";

impl Mode {
    /// Lowercase name used on the wire and in the database (`FromStr` reads it back).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The ClusterRole a grant of this mode binds: what a session's access is, in the
    /// cluster's words (the audit trail names it).
    pub fn cluster_role(self) -> &'static str {
        match self {
            Mode::Live => LIVE_ROLE,
            Mode::Copy => COPY_ROLE,
        }
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
    /// Its requester no longer holds the right to it (the identity provider or the
    /// configuration took the permission away while it ran).
    Revoked,
    /// Its environment or its requester was locked (see `crate::lock`).
    Locked,
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
