//! Who is calling: the signed session cookie (set by the dev login or the OIDC login, see
//! [`oidc`]), or a trusted auth proxy's headers.
//!
//! CSRF: every state-changing request must carry `x-csrf-token`, a MAC of the user and their
//! login nonce under the server key, which only same-origin script can read (from `whoami`);
//! cookies are also `SameSite=Strict`, and a present `Origin` must be our own.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method};
use axum_extra::extract::cookie::{Cookie, SameSite, SignedCookieJar};
use breakglass_shared::access::{Action, Refusal};
use breakglass_shared::api::CSRF_HEADER;
use breakglass_shared::{ErrorCode, PermissionSet, Session};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use uuid::Uuid;

use crate::config::Environment;
use crate::error::ApiError;
use crate::state::AppState;

pub mod oidc;

/// Name of the session cookie.
pub const SESSION_COOKIE: &str = "breakglass_session";
/// Proxy header carrying the user name.
pub const PROXY_USER: &str = "x-auth-request-user";
/// Proxy header carrying comma-separated groups.
pub const PROXY_GROUPS: &str = "x-auth-request-groups";

/// How the caller was identified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The dev login's cookie.
    DevCookie,
    /// A trusted auth proxy's headers.
    Proxy,
    /// The OIDC login's cookie.
    Oidc,
}

/// Which login issued a session cookie.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CookieLogin {
    /// The dev login (cookies from before the OIDC login carry no `login` and are these).
    #[default]
    Dev,
    /// The OIDC login.
    Oidc,
}

/// What the session cookie holds (signed, so the client cannot change it).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CookieClaims {
    /// User name.
    pub user: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Random per login, so each login gets its own CSRF token.
    pub nonce: String,
    /// Unix seconds after which the cookie is refused.
    pub exp: i64,
    /// The login that issued it; each is honoured only while that login is configured.
    #[serde(default)]
    pub login: CookieLogin,
    /// The OIDC ID token, the hint of an RP-initiated logout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_token: Option<String>,
}

/// The signed-in caller. As an extractor it answers 401 when nobody is signed in, and checks
/// CSRF on every state-changing method.
#[derive(Debug, Clone)]
pub struct CurrentUser {
    /// User name.
    pub name: String,
    /// Groups.
    pub groups: Vec<String>,
    /// The CSRF token this caller must send.
    pub csrf_token: String,
    /// The login's nonce the token is a MAC of (empty behind the proxy).
    pub nonce: String,
    /// How they were identified.
    pub source: Source,
}

impl CurrentUser {
    /// Permissions in environment `env` (none for an unknown environment).
    pub fn permissions(&self, state: &AppState, env: &str) -> PermissionSet {
        state
            .config
            .environment(env)
            .map(|e| e.permissions_of(&self.name, &self.groups))
            .unwrap_or(PermissionSet::NONE)
    }

    /// Environments where the caller holds any permission (so may see their sessions).
    pub fn visible_environments(&self, state: &AppState) -> Vec<String> {
        state
            .config
            .environments
            .iter()
            .filter(|e| e.permissions_of(&self.name, &self.groups).any())
            .map(|e| e.name.clone())
            .collect()
    }

    /// Environment `name` and the caller's permissions there, if they may see it; an unknown
    /// environment and one where they hold nothing both answer 404, so others' environments
    /// look as if they did not exist.
    pub fn environment<'a>(
        &self,
        state: &'a AppState,
        name: &str,
    ) -> Result<(&'a Environment, PermissionSet), ApiError> {
        state
            .config
            .environment(name)
            .map(|e| (e, e.permissions_of(&self.name, &self.groups)))
            .filter(|(_, p)| p.any())
            .ok_or_else(|| ApiError::not_found(format!("no environment {name}")))
    }

    /// Session `id` and the caller's permissions in its environment, if [`Session::may`] lets
    /// them do `action` to it; a session they may not even see answers 404, as if it did not
    /// exist.
    pub async fn session(
        &self,
        state: &AppState,
        id: Uuid,
        action: Action,
    ) -> Result<(Session, PermissionSet), ApiError> {
        let hidden = || ApiError::not_found(format!("no session {id}"));
        let s = state.store.get(id).await?.ok_or_else(hidden)?;
        let perms = self.permissions(state, &s.environment);
        match s.may(action, &self.name, &perms) {
            Ok(()) => Ok((s, perms)),
            Err(Refusal::Hidden) => Err(hidden()),
            Err(refusal) => Err(ApiError {
                body: refusal.into(),
                source: None,
            }),
        }
    }
}

/// The caller if signed in; never fails (for `whoami`).
#[derive(Debug, Clone)]
pub struct MaybeUser(pub Option<CurrentUser>);

/// MAC of the user and nonce under the server key.
pub fn csrf_token(state: &AppState, user: &str, nonce: &str) -> String {
    hex::encode(csrf_mac(state, user, nonce).finalize().into_bytes())
}

fn csrf_mac(state: &AppState, user: &str, nonce: &str) -> Hmac<Sha256> {
    let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(state.key.signing()) else {
        unreachable!("HMAC accepts keys of any length")
    };
    mac.update(b"csrf\0");
    mac.update(user.as_bytes());
    mac.update(b"\0");
    mac.update(nonce.as_bytes());
    mac
}

/// Whether `sent` is the CSRF token of `user`'s login (compared in constant time by `hmac`).
fn csrf_matches(state: &AppState, user: &CurrentUser, sent: &str) -> bool {
    hex::decode(sent).is_ok_and(|bytes| {
        csrf_mac(state, &user.name, &user.nonce)
            .verify_slice(&bytes)
            .is_ok()
    })
}

fn peer_is_trusted(state: &AppState, parts: &Parts) -> bool {
    let Some(ConnectInfo(addr)) = parts.extensions.get::<ConnectInfo<SocketAddr>>() else {
        return false;
    };
    state
        .config
        .trusted_proxies
        .iter()
        .any(|net| net.contains(&addr.ip()))
}

/// Identifies the caller without checking CSRF.
pub fn identify(state: &AppState, parts: &Parts) -> Option<CurrentUser> {
    if peer_is_trusted(state, parts) {
        if let Some(user) = parts
            .headers
            .get(PROXY_USER)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|u| !u.is_empty())
        {
            // oauth2-proxy sends one header line per group; others one comma-separated line.
            let groups = parts
                .headers
                .get_all(PROXY_GROUPS)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|g| g.split(','))
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            return Some(CurrentUser {
                name: user.to_string(),
                groups,
                csrf_token: csrf_token(state, user, ""),
                nonce: String::new(),
                source: Source::Proxy,
            });
        }
    }
    let jar = SignedCookieJar::from_headers(&parts.headers, state.key.clone());
    let claims: CookieClaims = serde_json::from_str(jar.get(SESSION_COOKIE)?.value()).ok()?;
    if claims.exp < time::OffsetDateTime::now_utc().unix_timestamp() {
        return None;
    }
    let source = match claims.login {
        // A demo user is only honoured while the dev login is on and still lists them.
        CookieLogin::Dev => {
            let listed = state.config.dev_users.iter().any(|u| u.name == claims.user);
            (state.config.dev_login && listed).then_some(Source::DevCookie)?
        }
        CookieLogin::Oidc => state.config.oidc.is_some().then_some(Source::Oidc)?,
    };
    Some(CurrentUser {
        csrf_token: csrf_token(state, &claims.user, &claims.nonce),
        nonce: claims.nonce,
        name: claims.user,
        groups: claims.groups,
        source,
    })
}

/// Refuses a request whose `Origin` is present and not ours.
pub fn check_origin(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or_default();
    let ok = match &state.config.public_url {
        Some(p) => origin == p.origin,
        None => {
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or_default();
            !host.is_empty()
                && (origin == format!("http://{host}") || origin == format!("https://{host}"))
        }
    };
    if ok {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::CsrfFailed,
            format!(
                "requests from origin {origin} are not accepted; use the break-glass page itself"
            ),
        ))
    }
}

fn is_state_changing(m: &Method) -> bool {
    !matches!(*m, Method::GET | Method::HEAD | Method::OPTIONS)
}

impl FromRequestParts<AppState> for CurrentUser {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let user = identify(state, parts).ok_or_else(ApiError::unauthenticated)?;
        if is_state_changing(&parts.method) {
            check_origin(state, &parts.headers)?;
            let sent = parts
                .headers
                .get(CSRF_HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            if !csrf_matches(state, &user, sent) {
                return Err(ApiError::new(
                    ErrorCode::CsrfFailed,
                    format!("missing or wrong {CSRF_HEADER} header; reload the page and try again"),
                ));
            }
        }
        Ok(user)
    }
}

impl FromRequestParts<AppState> for MaybeUser {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Ok(MaybeUser(identify(state, parts)))
    }
}

/// Builds the session cookie for `claims`.
pub fn session_cookie(state: &AppState, claims: &CookieClaims) -> Cookie<'static> {
    let secure = state.config.public_url.as_ref().is_some_and(|p| p.secure);
    Cookie::build((
        SESSION_COOKIE,
        serde_json::to_string(claims).unwrap_or_default(),
    ))
    .http_only(true)
    .same_site(SameSite::Strict)
    .secure(secure)
    .path("/")
    .build()
}
