//! The one place that knows URLs and talks to the server: fetch, the live event stream (SSE),
//! the terminal and watch WebSockets, plus the app's own page links. Components call these
//! functions; they never build a URL themselves. This file is the HTTP core (requests, the CSRF
//! token, errors); each noun of the API has its module, re-exported here as `api::...`.
//!
//! Request and response bodies are the `breakglass_shared` types, the guardrail report
//! (`listing::GuardrailReport`) included.

use std::cell::RefCell;
use std::fmt::Write as _;

use breakglass_shared::api::{API_PREFIX, CSRF_HEADER};
use breakglass_shared::step_up::STEP_UP_HEADER;
use breakglass_shared::{ErrorBody, ErrorCode};
use gloo_net::http::{Request, RequestBuilder, Response};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use web_sys::RequestCredentials;

mod auth;
mod cluster;
mod events;
pub mod links;
mod locks;
mod notifications;
mod recordings;
mod sessions;
mod step_up;
mod terminal;

pub use auth::{dev_login, logout, whoami};
pub use cluster::{guardrails, namespaces, pods, ItemStatus};
pub use events::{open_events, EventStream, StreamEvent};
pub use locks::{lock_environment, unlock_environment};
pub use notifications::deliveries;
pub use recordings::{
    evidence_url, recording, recording_download_url, recording_retention, search_recordings,
    verify_recording,
};
pub use sessions::{
    act, approve_extension, create_session, deny, deny_extension, end_recycling, extend,
    list_sessions, review, session, Action,
};
pub use step_up::{add_key, confirm, keys, remove_key};
pub use terminal::{open_terminal, open_watch};

thread_local! {
    /// The CSRF token of the signed-in user (from `whoami` / `dev-login`).
    static CSRF: RefCell<Option<String>> = const { RefCell::new(None) };
}

thread_local! {
    /// Called when the server says we are not signed in (any more).
    static ON_SIGNED_OUT: RefCell<Option<Box<dyn Fn()>>> = const { RefCell::new(None) };
}

/// Registers what to do when a call answers 401 (the shell shows the sign-in page).
pub fn on_signed_out(f: impl Fn() + 'static) {
    ON_SIGNED_OUT.with(|c| *c.borrow_mut() = Some(Box::new(f)));
}

/// Remembers the CSRF token sent on every state-changing request.
pub fn set_csrf(token: Option<String>) {
    CSRF.with(|c| *c.borrow_mut() = token);
}

/// A failed call: the HTTP status (if the server answered) and the server's error body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status; `None` when the request never got an answer.
    pub status: Option<u16>,
    /// The server's stable code, when it sent an [`ErrorBody`] we know.
    pub code: Option<ErrorCode>,
    /// A sentence for people: the server's message when it sent one.
    pub message: String,
    /// The request field at fault (`invalid_input`).
    pub field: Option<String>,
}

/// How long a call may take before the page gives up on it and says so: a connection that
/// stalls (dropped without the browser noticing, a proxy holding the request) would otherwise
/// leave "Loading …" up for good. Every answer of the API is small; the recording, which may
/// be large, has [`RECORDING_WITHIN_MS`].
const ANSWER_WITHIN_MS: u32 = 30_000;

/// [`ANSWER_WITHIN_MS`] for the recording's bytes (a long cast over a slow link).
const RECORDING_WITHIN_MS: u32 = 300_000;

/// `b` given up after `ms` milliseconds (the request and the reading of its answer).
fn within(b: RequestBuilder, ms: u32) -> RequestBuilder {
    b.abort_signal(Some(&web_sys::AbortSignal::timeout_with_u32(ms)))
}

/// Whether `e` is the browser giving up on a call at its time limit ([`within`]).
fn timed_out(e: &gloo_net::Error) -> bool {
    matches!(e, gloo_net::Error::JsError(j) if j.name == "TimeoutError")
}

impl ApiError {
    /// A call that failed in the browser: given up on ([`within`]) or, for any other reason,
    /// without an answer.
    fn failed(what: &str, e: gloo_net::Error) -> ApiError {
        if !timed_out(&e) {
            return ApiError::network(what, e);
        }
        ApiError {
            status: None,
            code: None,
            message: format!(
                "{what}: the server did not answer in time; check your connection and try again"
            ),
            field: None,
        }
    }

    fn network(what: &str, e: impl std::fmt::Display) -> ApiError {
        ApiError {
            status: None,
            code: None,
            message: format!("{what}: the server could not be reached ({e})"),
            field: None,
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Decodes an error response: our [`ErrorBody`], or at least its `message`, or the status line.
pub fn error_from_body(status: u16, status_text: &str, body: &str) -> ApiError {
    if let Ok(b) = serde_json::from_str::<ErrorBody>(body) {
        return ApiError {
            status: Some(status),
            code: Some(b.code),
            message: b.message,
            field: b.field,
        };
    }
    // A code this build does not know yet: keep the message and field anyway.
    #[derive(Deserialize)]
    struct Loose {
        message: Option<String>,
        field: Option<String>,
    }
    let loose = serde_json::from_str::<Loose>(body).ok();
    let (message, field) = loose.map_or((None, None), |l| (l.message, l.field));
    ApiError {
        status: Some(status),
        code: None,
        message: message.unwrap_or_else(|| {
            let body = body.trim();
            if body.is_empty() || body.len() > 300 {
                format!("the server answered HTTP {status} {status_text}")
            } else {
                format!("the server answered HTTP {status}: {body}")
            }
        }),
        field,
    }
}

/// Percent-encodes one path segment or query value (RFC 3986 unreserved characters kept).
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn url(path: &str) -> String {
    format!("{API_PREFIX}{path}")
}

/// `?a=1&b=2` from the present pairs (empty when none).
pub fn query_string(pairs: &[(&str, Option<String>)]) -> String {
    let mut out = String::new();
    for (k, v) in pairs {
        if let Some(v) = v {
            out.push(if out.is_empty() { '?' } else { '&' });
            out.push_str(k);
            out.push('=');
            out.push_str(&encode(v));
        }
    }
    out
}

async fn send(what: &str, req: Result<Request, gloo_net::Error>) -> Result<Response, ApiError> {
    let req = req.map_err(|e| ApiError::network(what, e))?;
    let res = req.send().await.map_err(|e| ApiError::failed(what, e))?;
    if res.ok() {
        return Ok(res);
    }
    let body = res.text().await.unwrap_or_default();
    if res.status() == 401 {
        ON_SIGNED_OUT.with(|c| {
            if let Some(f) = c.borrow().as_ref() {
                f();
            }
        });
    }
    Err(error_from_body(res.status(), &res.status_text(), &body))
}

/// `body`, an answer with HTTP `status`, as a `T`. The one generic step of a call: everything
/// before it (sending, the status, the CSRF retry, reading the body) is the same code for
/// every answer type rather than a copy of the whole future per type.
fn decode<T: DeserializeOwned>(what: &str, (status, body): (u16, String)) -> Result<T, ApiError> {
    serde_json::from_str(&body).map_err(|e| ApiError {
        status: Some(status),
        code: None,
        message: format!("{what}: the server's answer could not be read ({e})"),
        field: None,
    })
}

/// The status and body of a successful answer.
async fn read(what: &str, res: Response) -> Result<(u16, String), ApiError> {
    let status = res.status();
    let body = res.text().await.map_err(|e| {
        if timed_out(&e) {
            return ApiError::failed(what, e);
        }
        ApiError {
            status: Some(status),
            code: None,
            message: format!("{what}: the server's answer could not be read ({e})"),
            field: None,
        }
    })?;
    Ok((status, body))
}

fn get(path: &str) -> RequestBuilder {
    within(Request::get(&url(path)), ANSWER_WITHIN_MS)
        .credentials(RequestCredentials::SameOrigin)
        .header("Accept", "application/json")
}

fn post(path: &str) -> RequestBuilder {
    let b = within(Request::post(&url(path)), ANSWER_WITHIN_MS)
        .credentials(RequestCredentials::SameOrigin)
        .header("Accept", "application/json");
    match CSRF.with(|c| c.borrow().clone()) {
        Some(token) => b.header(CSRF_HEADER, &token),
        None => b,
    }
}

async fn get_text(what: &str, path: &str) -> Result<(u16, String), ApiError> {
    read(what, send(what, get(path).build()).await?).await
}

async fn get_json<T: DeserializeOwned>(what: &str, path: &str) -> Result<T, ApiError> {
    decode(what, get_text(what, path).await?)
}

/// A POST with `body` (JSON, already encoded), if any, and a security key's answer for it
/// (`step_up`), where its environment asks for one.
async fn post_text(
    what: &str,
    path: &str,
    body: Option<String>,
    step_up: Option<&str>,
) -> Result<(u16, String), ApiError> {
    let start = || match step_up {
        Some(answer) => post(path).header(STEP_UP_HEADER, answer),
        None => post(path),
    };
    let build = || match &body {
        Some(b) => start()
            .header("Content-Type", "application/json")
            .body(b.as_str()),
        None => start().build(),
    };
    let res = match send(what, build()).await {
        // The CSRF token rotates (behind an auth proxy, every hour): fetch the current one
        // and send once more, so a page left open does not fail its next click.
        Err(e) if e.code == Some(ErrorCode::CsrfFailed) => {
            whoami().await?;
            send(what, build()).await?
        }
        other => other?,
    };
    read(what, res).await
}

async fn post_json<B: Serialize, T: DeserializeOwned>(
    what: &str,
    path: &str,
    body: Option<&B>,
) -> Result<T, ApiError> {
    let body = body
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| ApiError::network(what, e))?;
    decode(what, post_text(what, path, body, None).await?)
}

/// [`post_json`] with a security key's answer (see [`post_text`]).
async fn post_json_confirmed<T: DeserializeOwned>(
    what: &str,
    path: &str,
    step_up: Option<&str>,
) -> Result<T, ApiError> {
    decode(what, post_text(what, path, None, step_up).await?)
}

/// A DELETE, whose answer has no body.
async fn delete(what: &str, path: &str) -> Result<(), ApiError> {
    let mut b = within(Request::delete(&url(path)), ANSWER_WITHIN_MS)
        .credentials(RequestCredentials::SameOrigin)
        .header("Accept", "application/json");
    if let Some(token) = CSRF.with(|c| c.borrow().clone()) {
        b = b.header(CSRF_HEADER, &token);
    }
    send(what, b.build()).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_segments_and_queries() {
        assert_eq!(encode("web-1.a_b~"), "web-1.a_b~");
        assert_eq!(encode("a b/c?d&é"), "a%20b%2Fc%3Fd%26%C3%A9");
    }

    #[test]
    fn error_bodies() {
        let e = error_from_body(
            400,
            "Bad Request",
            r#"{"code":"invalid_input","message":"reason: too short","field":"reason"}"#,
        );
        assert_eq!(e.code, Some(ErrorCode::InvalidInput));
        assert_eq!(e.field.as_deref(), Some("reason"));
        assert_eq!(e.message, "reason: too short");
        // A code this build does not know still gives its message and field.
        let e = error_from_body(
            418,
            "",
            r#"{"code":"brand_new","message":"hm","field":"x"}"#,
        );
        assert_eq!(
            (e.code, e.message.as_str(), e.field.as_deref()),
            (None, "hm", Some("x"))
        );
        let e = error_from_body(502, "Bad Gateway", "<html>proxy</html>");
        assert!(e.message.contains("502"), "{}", e.message);
        let e = error_from_body(404, "Not Found", "");
        assert_eq!(e.status, Some(404));
    }
}
