//! Request and response bodies of the HTTP API under `/api/breakglass`.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::permissions::PermissionSet;
use crate::session::{Mode, Session, SessionState, Tier, Verdict};
use crate::validate::{self, DurationBounds, FieldError};

/// Path prefix of every API route.
pub const API_PREFIX: &str = "/api/breakglass";
/// Header carrying the CSRF token on state-changing requests.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// Largest page a list returns.
pub const MAX_PAGE: u32 = 200;
/// Page size when none is asked.
pub const DEFAULT_PAGE: u32 = 50;

/// `POST /sessions`: ask for access to a pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "server", schema(example = json!({
    "environment": "dev",
    "namespace": "shop",
    "pod": "web-7d9f-abcde",
    "mode": "live",
    "target_container": "app",
    "reason": "orders stuck in the payment worker since 09:10",
    "ticket": "https://tracker.example.com/INC-4711",
    "duration_minutes": 30,
    "recycle": false
})))]
// A typo (`duration` for `duration_minutes`) must not silently become a default.
#[serde(deny_unknown_fields)]
pub struct CreateSessionRequest {
    /// Environment (cluster) name: one of `GET /environments`.
    #[cfg_attr(feature = "server", schema(min_length = 1, example = "dev"))]
    pub environment: String,
    /// Namespace of the pod (a DNS-1123 label).
    #[cfg_attr(
        feature = "server",
        schema(
            min_length = 1,
            max_length = 63,
            pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            example = "shop"
        )
    )]
    pub namespace: String,
    /// Pod name (a DNS-1123 subdomain).
    #[cfg_attr(
        feature = "server",
        schema(
            min_length = 1,
            max_length = 253,
            pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
            example = "web-7d9f-abcde"
        )
    )]
    pub pod: String,
    /// `live` (ephemeral container) or `copy` (hardened copy).
    pub mode: Mode,
    /// Container whose processes the debug container may see (process access; a DNS-1123
    /// label).
    #[serde(default)]
    #[cfg_attr(
        feature = "server",
        schema(
            min_length = 1,
            max_length = 63,
            pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
        )
    )]
    pub target_container: Option<String>,
    /// Why access is needed, 10 to 1000 characters once trimmed, no control characters
    /// other than newline and tab.
    #[cfg_attr(feature = "server", schema(min_length = 10, max_length = 1000))]
    pub reason: String,
    /// Ticket or incident URL: an absolute http:// or https:// link.
    #[serde(default)]
    #[cfg_attr(
        feature = "server",
        schema(
            max_length = 2000,
            pattern = "^[hH][tT][tT][pP][sS]?://[^/?#]+",
            example = "https://tracker.example.com/INC-4711"
        )
    )]
    pub ticket: Option<String>,
    /// Requested minutes, within the environment's `durations`; its default when absent.
    #[serde(default)]
    #[cfg_attr(feature = "server", schema(minimum = 1, maximum = 1440))]
    pub duration_minutes: Option<u32>,
    /// Recycle the pod at the end if it is the last ready one (Ground only).
    #[serde(default)]
    pub recycle: bool,
}

impl CreateSessionRequest {
    /// Checks every field against the shared rules; the first failure names its field.
    pub fn validate(&self, bounds: &DurationBounds) -> Result<(), FieldError> {
        if self.environment.trim().is_empty() {
            return Err(FieldError::new("environment", "is required"));
        }
        validate::dns_label("namespace", &self.namespace)?;
        validate::dns_subdomain("pod", &self.pod)?;
        if let Some(c) = &self.target_container {
            validate::dns_label("target_container", c)?;
        }
        validate::reason(&self.reason)?;
        if let Some(t) = &self.ticket {
            validate::ticket(t)?;
        }
        validate::duration(
            self.duration_minutes.unwrap_or(bounds.default_minutes),
            bounds,
        )?;
        Ok(())
    }
}

/// `POST /sessions/{id}/deny`.
/// Body of `POST /sessions/{id}/end`, which may also come without one (then nothing is
/// recycled).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct EndRequest {
    /// Recycle the debugged pod at the end by the recycle rule (live mode, on Ground): what the
    /// session left in the pod that outlives its debug container (a process started in the
    /// app's namespace through process access) goes with it.
    #[serde(default)]
    pub recycle: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
// A typo (`duration` for `duration_minutes`) must not silently become a default.
#[serde(deny_unknown_fields)]
pub struct DenyRequest {
    /// Why, shown to the requester: not blank, up to 4000 characters.
    #[cfg_attr(
        feature = "server",
        schema(
            min_length = 1,
            max_length = 4000,
            example = "not during the release freeze"
        )
    )]
    pub reason: String,
}

/// `POST /sessions/{id}/extend`: more time for one's own running session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ExtendRequest {
    /// Minutes to add: at least 1; with what the session had, at most its tier's
    /// `max_minutes`.
    #[cfg_attr(feature = "server", schema(minimum = 1, example = 15))]
    pub minutes: u32,
    /// Why more time is needed: as a request's reason (10 to 1000 characters).
    #[cfg_attr(
        feature = "server",
        schema(
            min_length = 10,
            max_length = 1000,
            example = "the heap dump is still being written"
        )
    )]
    pub reason: String,
}

impl ExtendRequest {
    /// Checks the fields the request alone decides; what fits the session is the state
    /// machine's to say.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.minutes == 0 {
            return Err(FieldError::new("minutes", "must be at least 1"));
        }
        validate::reason(&self.reason)
    }
}

/// `POST /sessions/{id}/review`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
// A typo (`duration` for `duration_minutes`) must not silently become a default.
#[serde(deny_unknown_fields)]
pub struct ReviewRequest {
    /// `ok` or `concern`.
    pub verdict: Verdict,
    /// Free text, up to 4000 characters.
    #[serde(default)]
    #[cfg_attr(feature = "server", schema(max_length = 4000))]
    pub notes: String,
}

/// `GET /sessions` query.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "server", into_params(parameter_in = Query))]
pub struct ListQuery {
    /// Only this environment.
    pub environment: Option<String>,
    /// Only this state.
    pub state: Option<SessionState>,
    /// Only this requester.
    pub requester: Option<String>,
    /// Only requests the caller may approve now.
    #[serde(default)]
    pub awaiting_me: Option<bool>,
    /// With `true`, only sessions between approval and their end
    /// ([`SessionState::IN_PROGRESS`]); combined with `state`, that state must be one of them.
    #[serde(default)]
    pub in_progress: Option<bool>,
    /// With `true`, only glass-broken sessions that finished without a review
    /// ([`Session::review_due`](crate::Session::review_due)).
    #[serde(default)]
    pub review_due: Option<bool>,
    /// Only sessions this person approved or denied.
    pub approver: Option<String>,
    /// Page size, 1 to 200 (default 50).
    #[cfg_attr(feature = "server", param(minimum = 1, maximum = 200))]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// One page of sessions, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct SessionPage {
    /// The sessions.
    pub items: Vec<Session>,
    /// Pass as `cursor` for the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// One row of the append-only events table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct SessionEventRecord {
    /// Sequence number.
    pub id: i64,
    /// The session.
    pub session_id: Uuid,
    /// Who caused it (`system` for the server).
    pub actor: String,
    /// When.
    #[serde(with = "time::serde::rfc3339")]
    #[cfg_attr(feature = "server", schema(value_type = String, format = DateTime))]
    pub at: OffsetDateTime,
    /// State before (absent for the creation).
    pub from_state: Option<SessionState>,
    /// State after.
    pub to_state: SessionState,
    /// Event kind (`create`, `approve`, `progress`, ...).
    pub kind: String,
    /// Free-text detail.
    pub detail: Option<String>,
}

/// `GET /sessions/{id}`: the session and its history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct SessionDetail {
    /// The session.
    pub session: Session,
    /// Its events, oldest first.
    pub events: Vec<SessionEventRecord>,
    /// People who may approve it now (Flight, pending), for "waiting for approval".
    pub approvers: Vec<String>,
}

/// A configured environment as the signed-in user sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct EnvironmentInfo {
    /// Name.
    pub name: String,
    /// Tier.
    pub tier: Tier,
    /// What the caller may do there.
    pub permissions: PermissionSet,
    /// Duration bounds for requests there.
    pub durations: DurationBounds,
    /// The cluster behind it, or why there is none.
    pub cluster: ClusterStatus,
    /// The lock in force there, if an admin locked it: nothing runs until it is lifted.
    #[serde(default)]
    pub lock: Option<crate::lock::Lock>,
    /// Whether approving, breaking the glass, terminating and approving more time here need a
    /// security key (`crate::step_up`).
    #[serde(default)]
    pub step_up: bool,
    /// Whether a running session's input here waits for an approver watching it live.
    #[serde(default)]
    pub moderated: bool,
    /// Whether auditors may watch running sessions here (`Session::may_watch`).
    #[serde(default)]
    pub auditors_watch: bool,
}

/// Whether an environment has a cluster behind it, as the UI shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ClusterStatus {
    /// Credentials are configured; `reached_through` says how (a kubeconfig context, the
    /// in-cluster service account, a token minted by a home cluster).
    Configured {
        /// How the server reaches it.
        reached_through: String,
    },
    /// Credentials are configured but the API server did not answer lately: requests will
    /// fail in activation until it does.
    Unreachable {
        /// How the server reaches it.
        reached_through: String,
        /// What went wrong, as the server's client saw it.
        error: String,
        /// What to check, and the command that checks it.
        fix: String,
    },
    /// No cluster: requests fail at once. `fix` names the configuration key and the check.
    Missing {
        /// What to change, and the command that checks it.
        fix: String,
    },
    /// No cluster, and the server runs with `--no-clusters`: requests wait in `Approved` (an
    /// API-only demo); nothing ever activates.
    ApiOnly,
}

/// The signed-in user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct UserInfo {
    /// User name.
    pub name: String,
    /// Groups.
    pub groups: Vec<String>,
    /// How many security keys they registered (for step-up).
    #[serde(default)]
    pub security_keys: u32,
}

/// `GET /whoami`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct WhoAmI {
    /// The signed-in user, if any.
    pub user: Option<UserInfo>,
    /// Dev login is on: demo users, not for production.
    pub dev_mode: bool,
    /// Demo users to pick from when `dev_mode`.
    pub dev_users: Vec<String>,
    /// Environments and the caller's permissions there.
    pub environments: Vec<EnvironmentInfo>,
    /// Token to send in `x-csrf-token` on state-changing requests.
    pub csrf_token: Option<String>,
    /// The OIDC login is configured: sign in at [`OIDC_LOGIN_PATH`].
    #[serde(default)]
    pub oidc_login: bool,
}

/// Where the browser goes to sign in through the OIDC provider (a page, not an API call);
/// `?return_to=/path` comes back to that page afterwards.
pub const OIDC_LOGIN_PATH: &str = "/api/breakglass/auth/oidc/login";

/// `POST /auth/logout`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct LogoutResponse {
    /// Where to send the browser so the identity provider ends its session too
    /// (RP-initiated logout); absent when the login was not an OIDC one or the provider
    /// offers no logout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_session_url: Option<String>,
}

/// `POST /auth/dev-login`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
// A typo (`duration` for `duration_minutes`) must not silently become a default.
#[serde(deny_unknown_fields)]
pub struct DevLoginRequest {
    /// One of the configured demo users (`dev_users` of `GET /whoami`).
    #[cfg_attr(feature = "server", schema(example = "bob"))]
    pub user: String,
}

/// One message of the live event stream (`GET /events`, SSE event name `session`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct SessionChange {
    /// The session as it is now.
    pub session: Session,
    /// The event kind that changed it.
    pub kind: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> CreateSessionRequest {
        CreateSessionRequest {
            environment: "prod".into(),
            namespace: "shop".into(),
            pod: "web-1".into(),
            mode: Mode::Live,
            target_container: Some("app".into()),
            reason: "checking a stuck worker".into(),
            ticket: Some("https://t.example/INC-1".into()),
            duration_minutes: Some(30),
            recycle: false,
        }
    }

    #[test]
    fn each_bad_field_is_named() {
        let b = DurationBounds::default();
        assert_eq!(good().validate(&b), Ok(()));
        type Mutate = Box<dyn Fn(&mut CreateSessionRequest)>;
        let cases: Vec<(&str, Mutate)> = vec![
            ("environment", Box::new(|r| r.environment = " ".into())),
            ("namespace", Box::new(|r| r.namespace = "Shop".into())),
            ("pod", Box::new(|r| r.pod = "".into())),
            (
                "target_container",
                Box::new(|r| r.target_container = Some("a_b".into())),
            ),
            ("reason", Box::new(|r| r.reason = "short".into())),
            ("ticket", Box::new(|r| r.ticket = Some("INC-1".into()))),
            (
                "duration_minutes",
                Box::new(|r| r.duration_minutes = Some(600)),
            ),
        ];
        for (field, mutate) in cases {
            let mut r = good();
            mutate(&mut r);
            assert_eq!(r.validate(&b).err().map(|e| e.field), Some(field));
        }
    }

    #[test]
    fn unknown_mode_is_refused_by_serde() {
        let v = serde_json::json!({"environment":"p","namespace":"n","pod":"p","mode":"exec","reason":"0123456789"});
        assert!(serde_json::from_value::<CreateSessionRequest>(v).is_err());
    }
}
