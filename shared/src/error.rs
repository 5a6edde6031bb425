//! The one error body every API error uses.

use serde::{Deserialize, Serialize};

use crate::access::Refusal;
use crate::session::{ReviewError, SessionState, TransitionError};
use crate::validate::FieldError;

/// Stable, machine-readable error codes. Clients branch on these, never on the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// A request field is missing or malformed (400); `field` names it.
    InvalidInput,
    /// The body is larger than the server takes (413); `field` is `body`.
    TooLarge,
    /// The request body did not arrive in time (408); `field` is `body`.
    Timeout,
    /// Not signed in (401).
    Unauthenticated,
    /// Signed in but not allowed (403).
    Forbidden,
    /// The CSRF token or Origin check failed (403).
    CsrfFailed,
    /// No such session, environment or route (404).
    NotFound,
    /// The route exists but not with this HTTP method (405); `Allow` lists the methods.
    MethodNotAllowed,
    /// The session is not in a state that allows this (409); `state` names the current one.
    WrongState,
    /// Someone else changed the session first (409); reload and retry.
    Conflict,
    /// The caller holds as much of the server as one user may (429), e.g. open live-update
    /// streams; the message says what to close.
    TooManyRequests,
    /// A dependency (database, cluster, recording store) is unreachable (503).
    Unavailable,
    /// A bug or unexpected failure on the server (500); details are in its logs.
    Internal,
    /// The request named a host this server does not answer to (421); the message names the
    /// one it does.
    MisdirectedRequest,
    /// The environment or the person is locked (423); the message gives the lock's reason.
    Locked,
    /// The environment asks for a security key for this action and none confirmed it (403):
    /// the assertion is missing, was used before, was issued for another action or session,
    /// or did not verify. The message says which and what to do.
    StepUpRequired,
    /// The person has no security key to confirm with (403); the message says where to add
    /// one.
    NoSecurityKey,
}

impl ErrorCode {
    /// The HTTP status that goes with the code.
    pub fn status(self) -> u16 {
        match self {
            ErrorCode::InvalidInput => 400,
            ErrorCode::TooLarge => 413,
            ErrorCode::Timeout => 408,
            ErrorCode::TooManyRequests => 429,
            ErrorCode::Unauthenticated => 401,
            ErrorCode::Forbidden
            | ErrorCode::CsrfFailed
            | ErrorCode::StepUpRequired
            | ErrorCode::NoSecurityKey => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::WrongState | ErrorCode::Conflict => 409,
            ErrorCode::Unavailable => 503,
            ErrorCode::Internal => 500,
            ErrorCode::MisdirectedRequest => 421,
            ErrorCode::Locked => 423,
        }
    }
}

/// The JSON body of every error response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// Stable code.
    pub code: ErrorCode,
    /// A sentence for people: what was wrong and what to do.
    pub message: String,
    /// The request field at fault, for `invalid_input`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The session's current state, for `wrong_state`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<SessionState>,
}

impl ErrorBody {
    /// A body with just a code and a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorBody {
        ErrorBody {
            code,
            message: message.into(),
            field: None,
            state: None,
        }
    }
}

impl From<FieldError> for ErrorBody {
    fn from(e: FieldError) -> Self {
        ErrorBody {
            code: ErrorCode::InvalidInput,
            message: e.to_string(),
            field: Some(e.field.to_string()),
            state: None,
        }
    }
}

impl From<TransitionError> for ErrorBody {
    fn from(e: TransitionError) -> Self {
        let state = match &e {
            TransitionError::Final { state } | TransitionError::WrongState { state, .. } => {
                Some(*state)
            }
            _ => None,
        };
        let code = if e.field().is_some() {
            ErrorCode::InvalidInput
        } else if e.is_forbidden() {
            ErrorCode::Forbidden
        } else {
            ErrorCode::WrongState
        };
        ErrorBody {
            code,
            message: e.to_string(),
            field: e.field().map(str::to_string),
            state,
        }
    }
}

impl From<ReviewError> for ErrorBody {
    fn from(e: ReviewError) -> Self {
        let (code, state) = match &e {
            ReviewError::NotFinished(s) => (ErrorCode::WrongState, Some(*s)),
            ReviewError::AlreadyReviewed(_) => (ErrorCode::WrongState, None),
            ReviewError::OwnSession
            | ReviewError::OwnDecision(_)
            | ReviewError::MissingPermission(_) => (ErrorCode::Forbidden, None),
        };
        ErrorBody {
            code,
            message: e.to_string(),
            field: None,
            state,
        }
    }
}

impl From<Refusal> for ErrorBody {
    fn from(e: Refusal) -> Self {
        let (code, state) = match e {
            Refusal::Change(e) => return e.into(),
            Refusal::Review(e) => return e.into(),
            Refusal::Hidden => (ErrorCode::NotFound, None),
            Refusal::NotRecordingReader | Refusal::NotTerminalUser | Refusal::NotWatcher => {
                (ErrorCode::Forbidden, None)
            }
            Refusal::TerminalClosed(s) => (ErrorCode::WrongState, Some(s)),
        };
        ErrorBody {
            code,
            message: e.to_string(),
            field: None,
            state,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permissions::Permission;

    #[test]
    fn mapping() {
        let b: ErrorBody = FieldError::new("reason", "is required").into();
        assert_eq!(
            (b.code, b.field.as_deref()),
            (ErrorCode::InvalidInput, Some("reason"))
        );
        assert_eq!(b.code.status(), 400);
        let b: ErrorBody = TransitionError::Final {
            state: SessionState::Ended,
        }
        .into();
        assert_eq!(
            (b.code, b.state),
            (ErrorCode::WrongState, Some(SessionState::Ended))
        );
        assert_eq!(b.code.status(), 409);
        let b: ErrorBody = TransitionError::MissingPermission(Permission::Approve).into();
        assert_eq!(b.code.status(), 403);
        assert!(b.message.contains("tower.breakglass.approve"));
        let b: ErrorBody = Refusal::NotRecordingReader.into();
        assert_eq!(b.code.status(), 403);
        let b: ErrorBody = Refusal::Change(TransitionError::OwnRequest).into();
        assert_eq!(b, TransitionError::OwnRequest.into());
        let json =
            serde_json::to_string(&ErrorBody::new(ErrorCode::NotFound, "x")).unwrap_or_default();
        assert_eq!(json, r#"{"code":"not_found","message":"x"}"#);
    }
}
