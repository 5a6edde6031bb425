//! The one place that knows URLs and talks to the server: fetch, the live event stream (SSE) and
//! the terminal WebSocket, plus the app's own page links. Components call these functions; they
//! never build a URL themselves.
//!
//! Request and response bodies are the `breakglass_shared` types. The guardrail report is
//! declared here until `shared` carries it (the server's type lives in its `guardrails`
//! module); it is decoded leniently (unknown fields ignored, missing ones defaulted).

use std::cell::RefCell;
use std::fmt::Write as _;

use breakglass_shared::api::{
    CreateSessionRequest, DenyRequest, DevLoginRequest, ListQuery, LogoutResponse, ReviewRequest,
    SessionChange, SessionDetail, SessionPage, WhoAmI, API_PREFIX, CSRF_HEADER,
};
use breakglass_shared::listing::{NamespaceInfo, PodInfo};
use breakglass_shared::recording::VerifyResult;
use breakglass_shared::{ErrorBody, ErrorCode, Session};
use gloo_net::http::{Request, RequestBuilder, Response};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use uuid::Uuid;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::RequestCredentials;

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

impl ApiError {
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

/// The query string of `GET /sessions`.
pub fn list_query_string(q: &ListQuery) -> String {
    query_string(&[
        ("environment", q.environment.clone()),
        ("state", q.state.map(|s| s.as_str().to_string())),
        ("requester", q.requester.clone()),
        ("awaiting_me", q.awaiting_me.map(|b| b.to_string())),
        ("in_progress", q.in_progress.map(|b| b.to_string())),
        ("review_due", q.review_due.map(|b| b.to_string())),
        ("approver", q.approver.clone()),
        ("limit", q.limit.map(|l| l.to_string())),
        ("cursor", q.cursor.clone()),
    ])
}

async fn send(what: &str, req: Result<Request, gloo_net::Error>) -> Result<Response, ApiError> {
    let req = req.map_err(|e| ApiError::network(what, e))?;
    let res = req.send().await.map_err(|e| ApiError::network(what, e))?;
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
    let body = res.text().await.map_err(|e| ApiError {
        status: Some(status),
        code: None,
        message: format!("{what}: the server's answer could not be read ({e})"),
        field: None,
    })?;
    Ok((status, body))
}

fn get(path: &str) -> RequestBuilder {
    Request::get(&url(path))
        .credentials(RequestCredentials::SameOrigin)
        .header("Accept", "application/json")
}

fn post(path: &str) -> RequestBuilder {
    let b = Request::post(&url(path))
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

/// A POST with `body` (JSON, already encoded), if any.
async fn post_text(
    what: &str,
    path: &str,
    body: Option<String>,
) -> Result<(u16, String), ApiError> {
    let build = || match &body {
        Some(b) => post(path)
            .header("Content-Type", "application/json")
            .body(b.as_str()),
        None => post(path).build(),
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
    decode(what, post_text(what, path, body).await?)
}

// ---- auth ---------------------------------------------------------------------------------

/// `GET /whoami` (never 401); remembers the CSRF token.
pub async fn whoami() -> Result<WhoAmI, ApiError> {
    let me: WhoAmI = get_json("who am I", "/whoami").await?;
    set_csrf(me.csrf_token.clone());
    Ok(me)
}

/// `POST /auth/dev-login`: sign in as a demo user; remembers the new CSRF token.
pub async fn dev_login(user: &str) -> Result<WhoAmI, ApiError> {
    let body = DevLoginRequest { user: user.into() };
    let me: WhoAmI = post_json("sign in", "/auth/dev-login", Some(&body)).await?;
    set_csrf(me.csrf_token.clone());
    Ok(me)
}

/// `POST /auth/logout`; after an OIDC login, the provider's logout page to go to next.
pub async fn logout() -> Result<LogoutResponse, ApiError> {
    let out: LogoutResponse = post_json::<(), _>("sign out", "/auth/logout", None).await?;
    set_csrf(None);
    Ok(out)
}

// ---- sessions -------------------------------------------------------------------------------

/// `GET /sessions?...`: one page, newest first.
pub async fn list_sessions(q: &ListQuery) -> Result<SessionPage, ApiError> {
    get_json(
        "list sessions",
        &format!("/sessions{}", list_query_string(q)),
    )
    .await
}

/// `GET /sessions/{id}`.
pub async fn session(id: Uuid) -> Result<SessionDetail, ApiError> {
    get_json("load the session", &format!("/sessions/{id}")).await
}

/// `POST /sessions`.
pub async fn create_session(req: &CreateSessionRequest) -> Result<Session, ApiError> {
    post_json("request access", "/sessions", Some(req)).await
}

/// A bodiless change of a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// `POST /sessions/{id}/approve`.
    Approve,
    /// `POST /sessions/{id}/break-glass`.
    BreakGlass,
    /// `POST /sessions/{id}/end` (withdraws before activation).
    End,
    /// `POST /sessions/{id}/terminate`.
    Terminate,
}

impl Action {
    fn path(self) -> &'static str {
        match self {
            Action::Approve => "approve",
            Action::BreakGlass => "break-glass",
            Action::End => "end",
            Action::Terminate => "terminate",
        }
    }

    /// What the action does, for error messages.
    pub fn verb(self) -> &'static str {
        match self {
            Action::Approve => "approve",
            Action::BreakGlass => "break the glass",
            Action::End => "end the session",
            Action::Terminate => "terminate the session",
        }
    }
}

/// Applies `action` to session `id`; the session after the change.
pub async fn act(id: Uuid, action: Action) -> Result<Session, ApiError> {
    post_json::<(), _>(
        action.verb(),
        &format!("/sessions/{id}/{}", action.path()),
        None,
    )
    .await
}

/// `POST /sessions/{id}/deny`.
pub async fn deny(id: Uuid, reason: &str) -> Result<Session, ApiError> {
    let body = DenyRequest {
        reason: reason.into(),
    };
    post_json("deny", &format!("/sessions/{id}/deny"), Some(&body)).await
}

/// `POST /sessions/{id}/review`.
pub async fn review(id: Uuid, req: &ReviewRequest) -> Result<Session, ApiError> {
    post_json(
        "record the review",
        &format!("/sessions/{id}/review"),
        Some(req),
    )
    .await
}

// ---- cluster listings and guardrails ---------------------------------------------------------

pub use breakglass_shared::listing::{GuardrailReport, ItemStatus};

/// Namespaces of `env`.
pub async fn namespaces(env: &str) -> Result<Vec<NamespaceInfo>, ApiError> {
    get_json(
        "list namespaces",
        &format!("/environments/{}/namespaces", encode(env)),
    )
    .await
}

/// Pods of `ns` in `env`.
pub async fn pods(env: &str, ns: &str) -> Result<Vec<PodInfo>, ApiError> {
    get_json(
        "list pods",
        &format!(
            "/environments/{}/namespaces/{}/pods",
            encode(env),
            encode(ns)
        ),
    )
    .await
}

/// Guardrail health of `env`.
pub async fn guardrails(env: &str) -> Result<GuardrailReport, ApiError> {
    get_json(
        "check guardrails",
        &format!("/environments/{}/guardrails", encode(env)),
    )
    .await
}

// ---- recordings ------------------------------------------------------------------------------

/// Where the `.cast` of session `id` is.
pub fn recording_url(id: Uuid) -> String {
    url(&format!("/sessions/{id}/recording"))
}

/// The same, served as an attachment (the download link).
pub fn recording_download_url(id: Uuid) -> String {
    format!("{}?download=true", recording_url(id))
}

/// The raw bytes of the recording (asciicast v2).
pub async fn recording(id: Uuid) -> Result<Vec<u8>, ApiError> {
    let what = "load the recording";
    let res = send(
        what,
        Request::get(&recording_url(id))
            .credentials(RequestCredentials::SameOrigin)
            .build(),
    )
    .await?;
    res.binary().await.map_err(|e| ApiError::network(what, e))
}

/// The server's integrity check of the stored recording.
pub async fn verify_recording(id: Uuid) -> Result<VerifyResult, ApiError> {
    get_json(
        "verify the recording",
        &format!("/sessions/{id}/recording/verify"),
    )
    .await
}

// ---- live event stream (SSE) -----------------------------------------------------------------

/// What the live stream reports.
pub enum StreamEvent {
    /// The stream is (again) connected.
    Open,
    /// A session changed.
    Session(Box<SessionChange>),
    /// We missed events: reload lists.
    Lagged,
    /// The connection broke; `closed` when the browser will not retry by itself.
    Error {
        /// The browser gave up (e.g. 401); the caller reconnects later.
        closed: bool,
    },
}

/// An open `GET /events` stream; closed when dropped.
pub struct EventStream {
    source: web_sys::EventSource,
    _handlers: Vec<Closure<dyn FnMut(web_sys::Event)>>,
}

impl Drop for EventStream {
    fn drop(&mut self) {
        self.source.close();
    }
}

/// Opens the live event stream; `on_event` gets every event.
pub fn open_events(on_event: impl Fn(StreamEvent) + 'static) -> Result<EventStream, ApiError> {
    let source = web_sys::EventSource::new(&url("/events"))
        .map_err(|e| ApiError::network("open the live stream", format!("{e:?}")))?;
    let on_event = std::rc::Rc::new(on_event);
    let mut handlers = Vec::new();
    let mut listen = |name: &str, f: Box<dyn FnMut(web_sys::Event)>| {
        let closure = Closure::wrap(f);
        let _ = source.add_event_listener_with_callback(name, closure.as_ref().unchecked_ref());
        handlers.push(closure);
    };
    let cb = on_event.clone();
    listen("open", Box::new(move |_| cb(StreamEvent::Open)));
    let cb = on_event.clone();
    listen(
        "session",
        Box::new(move |e| {
            let Some(data) = e
                .dyn_ref::<web_sys::MessageEvent>()
                .and_then(|m| m.data().as_string())
            else {
                return;
            };
            match serde_json::from_str::<SessionChange>(&data) {
                Ok(change) => cb(StreamEvent::Session(Box::new(change))),
                // A shape we cannot read: treat it like a gap and reload.
                Err(_) => cb(StreamEvent::Lagged),
            }
        }),
    );
    let cb = on_event.clone();
    listen("lagged", Box::new(move |_| cb(StreamEvent::Lagged)));
    let cb = on_event;
    let src = source.clone();
    listen(
        "error",
        Box::new(move |_| {
            cb(StreamEvent::Error {
                closed: src.ready_state() == web_sys::EventSource::CLOSED,
            });
        }),
    );
    Ok(EventStream {
        source,
        _handlers: handlers,
    })
}

// ---- terminal WebSocket ----------------------------------------------------------------------

/// Opens the terminal WebSocket of session `id` (binary frames, see `shared::terminal`).
pub fn open_terminal(id: Uuid) -> Result<web_sys::WebSocket, ApiError> {
    let what = "connect the terminal";
    let location = web_sys::window()
        .map(|w| w.location())
        .ok_or_else(|| ApiError::network(what, "no window"))?;
    let scheme = match location.protocol().as_deref() {
        Ok("https:") => "wss:",
        _ => "ws:",
    };
    let host = location
        .host()
        .map_err(|e| ApiError::network(what, format!("{e:?}")))?;
    let ws = web_sys::WebSocket::new(&format!(
        "{scheme}//{host}{}",
        url(&format!("/sessions/{id}/terminal"))
    ))
    .map_err(|e| ApiError::network(what, format!("{e:?}")))?;
    ws.set_binary_type(web_sys::BinaryType::Arraybuffer);
    Ok(ws)
}

// ---- the app's own pages -------------------------------------------------------------------

/// Links to the app's pages (router paths).
pub mod links {
    use uuid::Uuid;

    use super::encode;

    /// Home: environments and the queue strip.
    pub fn home() -> String {
        "/".into()
    }

    /// The wall display.
    pub fn ops_wall() -> String {
        "/ops-wall".into()
    }

    /// An environment's page.
    pub fn environment(env: &str) -> String {
        format!("/env/{}", encode(env))
    }

    /// An environment's page with one namespace open.
    pub fn namespace(env: &str, ns: &str) -> String {
        format!("/env/{}/ns/{}", encode(env), encode(ns))
    }

    /// A pod's Debug panel.
    pub fn pod(env: &str, ns: &str, pod: &str) -> String {
        format!("/env/{}/ns/{}/pod/{}", encode(env), encode(ns), encode(pod))
    }

    /// A session's page.
    pub fn session(id: Uuid) -> String {
        format!("/sessions/{id}")
    }

    /// A session's recording, optionally at a moment (seconds of recording time).
    pub fn recording(id: Uuid, t: Option<f64>) -> String {
        match t {
            Some(t) if t > 0.0 => {
                format!("/sessions/{id}/recording?t={}", crate::format::tenths(t))
            }
            _ => format!("/sessions/{id}/recording"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use breakglass_shared::SessionState;

    #[test]
    fn encodes_segments_and_queries() {
        assert_eq!(encode("web-1.a_b~"), "web-1.a_b~");
        assert_eq!(encode("a b/c?d&é"), "a%20b%2Fc%3Fd%26%C3%A9");
        let q = ListQuery {
            environment: Some("prod".into()),
            state: Some(SessionState::PendingApproval),
            requester: Some("al ice".into()),
            awaiting_me: None,
            in_progress: Some(true),
            review_due: None,
            approver: Some("bob".into()),
            limit: Some(20),
            cursor: None,
        };
        assert_eq!(
            list_query_string(&q),
            "?environment=prod&state=PendingApproval&requester=al%20ice&in_progress=true\
             &approver=bob&limit=20"
        );
        assert_eq!(list_query_string(&ListQuery::default()), "");
    }

    #[test]
    fn links() {
        let id = Uuid::nil();
        assert_eq!(
            links::pod("prod", "shop", "web-1"),
            "/env/prod/ns/shop/pod/web-1"
        );
        assert_eq!(
            links::recording(id, Some(12.345)),
            format!("/sessions/{id}/recording?t=12.3")
        );
        assert_eq!(
            links::recording(id, Some(0.0)),
            format!("/sessions/{id}/recording")
        );
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
