//! Extractors whose rejections are our error body, naming the field at fault.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::error::ApiError;

/// Largest JSON body accepted.
pub const MAX_JSON: usize = 64 * 1024;

/// A JSON body; a bad one answers 400 naming the field.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let is_json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| {
                ct.split(';')
                    .next()
                    .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
            });
        if !is_json {
            return Err(ApiError::invalid(
                "body",
                "send a JSON body with Content-Type: application/json",
            ));
        }
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::invalid("body", format!("cannot read the body: {e}")))?;
        if bytes.len() > MAX_JSON {
            return Err(ApiError::invalid(
                "body",
                format!("the body is larger than {MAX_JSON} bytes"),
            ));
        }
        let de = &mut serde_json::Deserializer::from_slice(&bytes);
        serde_path_to_error::deserialize(de)
            .map(ApiJson)
            .map_err(|e| field_error(e.path().to_string(), e.inner().to_string(), "body"))
    }
}

/// Query parameters; bad ones answer 400 naming the parameter.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let q = parts.uri.query().unwrap_or_default();
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(q.as_bytes()));
        serde_path_to_error::deserialize(de)
            .map(ApiQuery)
            .map_err(|e| field_error(e.path().to_string(), e.inner().to_string(), "query"))
    }
}

/// Names the field of a serde error: the path when serde knows it, else the field a
/// "missing field `x`" or "duplicate field `x`" message mentions, else `whole` (the body or the
/// query string as a whole).
fn field_error(path: String, message: String, whole: &str) -> ApiError {
    let field = if path != "." && !path.is_empty() {
        path
    } else {
        message
            .split('`')
            .nth(1)
            .filter(|_| {
                message.starts_with("missing field") || message.starts_with("duplicate field")
            })
            .map_or_else(|| whole.to_string(), str::to_string)
    };
    // serde's messages carry positions that mean nothing to users.
    let message = message
        .split(" at line ")
        .next()
        .unwrap_or(&message)
        .to_string();
    ApiError::invalid(&field, format!("{field}: {message}"))
}

/// The `{id}` path segment as a session id: 404 when it cannot name a session.
#[derive(Debug, Clone, Copy)]
pub struct SessionId(pub Uuid);

impl<S: Send + Sync> FromRequestParts<S> for SessionId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let axum::extract::Path(raw) =
            axum::extract::Path::<String>::from_request_parts(parts, state)
                .await
                .map_err(|_| ApiError::not_found("no such session"))?;
        Uuid::parse_str(&raw)
            .map(SessionId)
            .map_err(|_| ApiError::not_found(format!("no session {raw}: session ids are UUIDs")))
    }
}
