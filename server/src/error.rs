//! The server's one error type and its HTTP response: the shared [`ErrorBody`], with a generic
//! message for 5xx (the detail goes to the logs, never to the client).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use breakglass_shared::session::{ReviewError, TransitionError};
use breakglass_shared::validate::FieldError;
use breakglass_shared::{ErrorBody, ErrorCode, SessionState};

use crate::store::StoreError;

/// An error on its way to becoming a response.
#[derive(Debug)]
pub struct ApiError {
    /// What the client sees (for 5xx replaced by a generic sentence).
    pub body: ErrorBody,
    /// What the logs see.
    pub source: Option<anyhow::Error>,
}

impl ApiError {
    /// An error with a code and a sentence.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            body: ErrorBody::new(code, message),
            source: None,
        }
    }

    /// 400 naming `field`.
    pub fn invalid(field: &str, message: impl Into<String>) -> ApiError {
        let mut e = ApiError::new(ErrorCode::InvalidInput, message);
        e.body.field = Some(field.to_string());
        e
    }

    /// 404.
    pub fn not_found(what: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::NotFound, what)
    }

    /// 401.
    pub fn unauthenticated() -> ApiError {
        ApiError::new(
            ErrorCode::Unauthenticated,
            "you are not signed in; sign in and try again",
        )
    }

    /// 403.
    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Forbidden, message)
    }

    /// 500 with the cause kept for the logs.
    pub fn internal(source: impl Into<anyhow::Error>) -> ApiError {
        ApiError {
            body: ErrorBody::new(ErrorCode::Internal, "internal error"),
            source: Some(source.into()),
        }
    }

    /// 409 for a session that moved on.
    pub fn conflict(current: Option<SessionState>) -> ApiError {
        let mut e = ApiError::new(
            ErrorCode::Conflict,
            "someone else changed this session at the same moment; reload it and try again",
        );
        e.body.state = current;
        e
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.body.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut body = self.body;
        if status.is_server_error() {
            tracing::error!(code = ?body.code, error = ?self.source, message = %body.message, "request failed");
            body.message = match body.code {
                ErrorCode::Unavailable => {
                    "a service the server depends on is unavailable; try again shortly".to_string()
                }
                _ => "internal error; the server logged the details".to_string(),
            };
        }
        (status, Json(body)).into_response()
    }
}

impl From<FieldError> for ApiError {
    fn from(e: FieldError) -> Self {
        ApiError {
            body: e.into(),
            source: None,
        }
    }
}

impl From<TransitionError> for ApiError {
    fn from(e: TransitionError) -> Self {
        ApiError {
            body: e.into(),
            source: None,
        }
    }
}

impl From<ReviewError> for ApiError {
    fn from(e: ReviewError) -> Self {
        ApiError {
            body: e.into(),
            source: None,
        }
    }
}

impl From<crate::lifecycle::Error> for ApiError {
    fn from(e: crate::lifecycle::Error) -> Self {
        use crate::lifecycle::Error;
        match e {
            Error::NotFound(id) => ApiError::not_found(format!("no session {id}")),
            Error::Transition(e) => e.into(),
            Error::Review(e) => e.into(),
            e @ Error::Expired(_) => {
                let mut out = ApiError::new(ErrorCode::WrongState, e.to_string());
                out.body.state = Some(SessionState::Expired);
                out
            }
            Error::Conflict(state) => ApiError::conflict(state),
            Error::Store(e) => e.into(),
            Error::Cluster(e) => ApiError::new(ErrorCode::Unavailable, e.to_string()),
            Error::Invalid(e) => e.into(),
            e @ Error::Locked(_) => ApiError::new(ErrorCode::Locked, e.to_string()),
        }
    }
}

impl From<crate::locks::LockError> for ApiError {
    fn from(e: crate::locks::LockError) -> Self {
        use crate::locks::LockError as E;
        match e {
            E::Invalid(f) => f.into(),
            e @ (E::AlreadyLocked(_) | E::Conflict) => {
                ApiError::new(ErrorCode::Conflict, e.to_string())
            }
            e @ E::NotLocked(_) => ApiError::not_found(e.to_string()),
            e @ E::Refused(_) => ApiError::new(ErrorCode::Forbidden, e.to_string()),
            E::Store(e) => e.into(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict { current } => ApiError::conflict(current),
            StoreError::Duplicate => {
                ApiError::new(ErrorCode::Conflict, "this session exists already")
            }
            StoreError::Database(
                ref inner @ (sqlx::Error::PoolTimedOut
                | sqlx::Error::Io(_)
                | sqlx::Error::PoolClosed),
            ) => {
                let msg = inner.to_string();
                ApiError {
                    body: ErrorBody::new(ErrorCode::Unavailable, msg),
                    source: Some(e.into()),
                }
            }
            other => ApiError::internal(other),
        }
    }
}
