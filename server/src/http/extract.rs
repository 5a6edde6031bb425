//! Extractors whose rejections are our error body, naming the field at fault.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use super::limits::RequestTimeout;
use crate::error::ApiError;

/// Largest JSON body accepted.
pub const MAX_JSON: usize = 64 * 1024;

/// How long a body may take when no `[limits]` timeout is on the request (a router built
/// without the limits layer).
const DEFAULT_BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A JSON body; a bad one answers 400 naming the field.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

/// A JSON body that may be left out (no body and no Content-Type: `T::default()`); one that
/// is sent is read as [`ApiJson`] reads it.
#[derive(Debug)]
pub struct OptionalJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for OptionalJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let headers = req.headers();
        let no_body = !headers.contains_key(header::CONTENT_TYPE)
            && headers
                .get(header::CONTENT_LENGTH)
                .is_none_or(|v| v.as_bytes() == b"0")
            && !headers.contains_key(header::TRANSFER_ENCODING);
        if no_body {
            return Ok(OptionalJson(T::default()));
        }
        ApiJson::from_request(req, state)
            .await
            .map(|ApiJson(v)| OptionalJson(v))
    }
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, ApiError> {
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
        let timeout = req
            .extensions()
            .get::<RequestTimeout>()
            .map_or(DEFAULT_BODY_TIMEOUT, |t| t.0);
        // Read at most one byte more than allowed: a larger body is refused without buffering
        // it (and a lying Content-Length changes nothing). A body that trickles in is cut off
        // at the request timeout, whatever its pace.
        let read = axum::body::to_bytes(req.into_body(), MAX_JSON + 1);
        let bytes = tokio::time::timeout(timeout, read)
            .await
            .map_err(|_| {
                let mut e = ApiError::new(
                    breakglass_shared::ErrorCode::Timeout,
                    format!(
                        "body: did not arrive within {} s; send it at once",
                        timeout.as_secs()
                    ),
                );
                e.body.field = Some("body".into());
                e
            })?
            .map_err(|e| {
                let too_large = std::error::Error::source(&e)
                    .is_some_and(<dyn std::error::Error>::is::<http_body_util::LengthLimitError>);
                if too_large {
                    too_large_body()
                } else {
                    ApiError::invalid("body", format!("cannot read the body: {e}"))
                }
            })?;
        if bytes.len() > MAX_JSON {
            return Err(too_large_body());
        }
        let de = &mut serde_json::Deserializer::from_slice(&bytes);
        serde_path_to_error::deserialize(de)
            .map(ApiJson)
            .map_err(|e| {
                if matches!(
                    e.inner().classify(),
                    serde_json::error::Category::Syntax | serde_json::error::Category::Eof
                ) {
                    // Broken JSON has no field to name: where serde stopped is no field of ours.
                    let message = e.inner().to_string();
                    return ApiError::invalid(
                        "body",
                        format!(
                            "body: not valid JSON ({}); send one JSON object",
                            strip_position(&message)
                        ),
                    );
                }
                field_error(e.path().to_string(), e.inner().to_string(), "body")
            })
    }
}

/// 413 naming the body.
fn too_large_body() -> ApiError {
    let mut e = ApiError::new(
        breakglass_shared::ErrorCode::TooLarge,
        format!("body: larger than {MAX_JSON} bytes; send less"),
    );
    e.body.field = Some("body".into());
    e
}

/// A serde message without the " at line L column C" that means nothing to users.
fn strip_position(message: &str) -> &str {
    message.split(" at line ").next().unwrap_or(message)
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
                ["missing field", "duplicate field", "unknown field"]
                    .iter()
                    .any(|p| message.starts_with(p))
            })
            .map_or_else(|| whole.to_string(), str::to_string)
    };
    let message = strip_position(&message);
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
