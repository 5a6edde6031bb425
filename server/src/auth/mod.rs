//! Who is calling: the signed session cookie naming a login record (made by the dev login or
//! the OIDC login, see [`oidc`]), or a trusted auth proxy's headers. The record, not the
//! cookie, says who it is and whether it still holds, so logout and an administrator end every
//! copy of a cookie at once; names are normalised here once (`shared::names`).
//!
//! CSRF: every state-changing request must carry `x-csrf-token`, a MAC of the user and their
//! login nonce (behind the proxy: the hour) under the server key, which only same-origin
//! script can read (from `whoami`); cookies are also `SameSite=Strict`, and a present `Origin`
//! must be our own.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRef, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method};
use axum_extra::extract::cookie::{Cookie, Key, SameSite, SignedCookieJar};
use breakglass_shared::access::{Action, Refusal};
use breakglass_shared::api::CSRF_HEADER;
use breakglass_shared::names::{self, NameError};
use breakglass_shared::{ErrorCode, PermissionSet, Session};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use uuid::Uuid;

use crate::config::{Config, Environment};
use crate::error::ApiError;
use crate::store::Store;

mod login;
pub mod oidc;
mod resolve;
pub mod tokens;

pub use login::{begin_login, current_of, NewLogin, ProviderTokens};
pub use resolve::resolve_login;

/// Name of the session cookie on plain http; see [`session_cookie_name`].
pub const SESSION_COOKIE: &str = "breakglass_session";
/// Its name on https: a browser takes a `__Host-` cookie only when it is `Secure`, for
/// `Path=/` and without `Domain`, set by this very host, so neither a sibling subdomain nor a
/// plain-http page on the same name can plant or overwrite it (a planted login would act as
/// someone else).
pub const SESSION_COOKIE_HOST: &str = "__Host-breakglass_session";
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

/// What the session cookie holds (signed, so the client cannot change it): only the login's
/// id. Who the login is, its groups and whether it still holds are the login record's
/// ([`crate::store::Login`]), read on every request, so ending it ends every copy of the
/// cookie at once.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CookieClaims {
    /// The login record.
    pub login: Uuid,
}

/// How long a proxy user's CSRF token holds: it is a MAC of the user and the current hour
/// (the previous hour's is still accepted), so a token that leaks stops working within two
/// hours; the page fetches the new one when the old one is refused.
const PROXY_CSRF_SECONDS: i64 = 3600;

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
    /// The login's nonce the token is a MAC of (behind the proxy: the current hour).
    pub nonce: String,
    /// How they were identified.
    pub source: Source,
    /// The login record, for cookie logins (none behind the proxy).
    pub login: Option<Uuid>,
}

impl CurrentUser {
    /// Permissions in environment `env` (none for an unknown environment).
    pub fn permissions(&self, config: &Config, env: &str) -> PermissionSet {
        config
            .environment(env)
            .map(|e| e.permissions_of(&self.name, &self.groups))
            .unwrap_or(PermissionSet::NONE)
    }

    /// Environments where the caller holds any permission (so may see their sessions).
    pub fn visible_environments(&self, config: &Config) -> Vec<String> {
        config
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
        config: &'a Config,
        name: &str,
    ) -> Result<(&'a Environment, PermissionSet), ApiError> {
        config
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
        config: &Config,
        store: &dyn Store,
        id: Uuid,
        action: Action,
    ) -> Result<(Session, PermissionSet), ApiError> {
        let hidden = || ApiError::not_found(format!("no session {id}"));
        let s = store.get(id).await?.ok_or_else(hidden)?;
        let perms = self.permissions(config, &s.environment);
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

/// MAC of the user and nonce under the server key; `key` is the key or what holds it (the
/// router's state).
pub fn csrf_token<K>(key: &K, user: &str, nonce: &str) -> String
where
    Key: FromRef<K>,
{
    hex::encode(
        csrf_mac(&Key::from_ref(key), user, nonce)
            .finalize()
            .into_bytes(),
    )
}

fn csrf_mac(key: &Key, user: &str, nonce: &str) -> Hmac<Sha256> {
    let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(key.signing()) else {
        unreachable!("HMAC accepts keys of any length")
    };
    mac.update(b"csrf\0");
    mac.update(user.as_bytes());
    mac.update(b"\0");
    mac.update(nonce.as_bytes());
    mac
}

/// Whether `sent` is the CSRF token of `user`'s login (compared in constant time by `hmac`);
/// behind the proxy, the previous hour's token counts too.
fn csrf_matches(key: &Key, user: &CurrentUser, sent: &str) -> bool {
    let Ok(bytes) = hex::decode(sent) else {
        return false;
    };
    let matches = |nonce: &str| {
        csrf_mac(key, &user.name, nonce)
            .verify_slice(&bytes)
            .is_ok()
    };
    match user.source {
        Source::Proxy => {
            let now = time::OffsetDateTime::now_utc().unix_timestamp();
            matches(&proxy_nonce(now)) || matches(&proxy_nonce(now - PROXY_CSRF_SECONDS))
        }
        _ => matches(&user.nonce),
    }
}

/// The nonce of a proxy user's CSRF token at unix time `at`: its hour.
pub fn proxy_nonce(at: i64) -> String {
    format!("proxy:{}", at.div_euclid(PROXY_CSRF_SECONDS))
}

/// Identity headers in other spellings that proxies and clients use: beside ours, each means
/// the request carries an identity the proxy did not set (or set twice).
const FORWARDED_IDENTITY: [&str; 6] = [
    "x-forwarded-user",
    "x-forwarded-groups",
    "x-forwarded-preferred-username",
    "x-remote-user",
    "x-remote-group",
    "remote-user",
];

/// Why a trusted proxy's identity headers cannot be read as one identity: the user header on
/// more than one line, or another spelling of an identity header beside it.
fn ambiguous_proxy_headers(headers: &HeaderMap) -> Option<String> {
    let users = headers.get_all(PROXY_USER).iter().count();
    if users > 1 {
        return Some(format!("{PROXY_USER} on {users} lines"));
    }
    FORWARDED_IDENTITY
        .iter()
        .find(|h| users > 0 && headers.contains_key(**h))
        .map(|h| format!("{h} beside {PROXY_USER}"))
}

fn peer_is_trusted(config: &Config, parts: &Parts) -> bool {
    let Some(ConnectInfo(addr)) = parts.extensions.get::<ConnectInfo<SocketAddr>>() else {
        return false;
    };
    config
        .trusted_proxies
        .iter()
        .any(|net| net.contains(&addr.ip()))
}

/// A signed-in name the server will not use (reserved, empty, invisible characters): 403 with
/// the reason, so the person (or the proxy's operator) knows why.
fn refused_name(e: &NameError) -> ApiError {
    ApiError::new(
        ErrorCode::Forbidden,
        format!("{e}; break-glass cannot let this identity in, ask your platform team to sign in under another name"),
    )
}

/// Identifies the caller without checking CSRF: a trusted proxy's headers, else the session
/// cookie's login record, live and of a login still configured. `Ok(None)` when nobody is
/// signed in; an error for a name the server refuses or a database that does not answer.
pub async fn identify(
    config: &Config,
    key: &Key,
    store: &dyn Store,
    parts: &Parts,
) -> Result<Option<CurrentUser>, ApiError> {
    if peer_is_trusted(config, parts) {
        if let Some(why) = ambiguous_proxy_headers(&parts.headers) {
            // The proxy passed on what a client wrote (it should replace these headers, not
            // add to them): whichever line the server chose could be the client's.
            tracing::warn!(%why, "a trusted proxy's request authenticates nobody");
            return Ok(None);
        }
        // Names and groups may be UTF-8 (`zoë`): read as such, then held to the name rules,
        // rather than only as visible ASCII, which would turn such a person away as nobody.
        if let Some(raw) = parts
            .headers
            .get(PROXY_USER)
            .and_then(|v| std::str::from_utf8(v.as_bytes()).ok())
            .filter(|u| !u.trim().is_empty())
        {
            let name = names::normalise(raw, config.fold_names).map_err(|e| refused_name(&e))?;
            // oauth2-proxy sends one header line per group; others one comma-separated line.
            let groups = parts
                .headers
                .get_all(PROXY_GROUPS)
                .iter()
                .filter_map(|v| std::str::from_utf8(v.as_bytes()).ok())
                .flat_map(|g| g.split(','))
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            let nonce = proxy_nonce(time::OffsetDateTime::now_utc().unix_timestamp());
            return Ok(Some(CurrentUser {
                csrf_token: csrf_token(key, &name, &nonce),
                name,
                groups,
                nonce,
                source: Source::Proxy,
                login: None,
            }));
        }
    }
    let jar = SignedCookieJar::from_headers(&parts.headers, key.clone());
    let Some(claims) = jar
        .get(session_cookie_name(config))
        .and_then(|c| serde_json::from_str::<CookieClaims>(c.value()).ok())
    else {
        return Ok(None);
    };
    let provider = parts
        .extensions
        .get::<oidc::OidcProvider>()
        .and_then(|p| p.0.clone());
    resolve_login(config, key, store, provider, claims.login).await
}

/// Refuses a request whose `Origin` is present and not ours.
pub fn check_origin(config: &Config, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or_default();
    let ok = match &config.public_url {
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

/// What identifying a caller reads, taken from the router's state `S`.
fn gate<S>(state: &S) -> (Arc<Config>, Key, Arc<dyn Store>)
where
    Arc<Config>: FromRef<S>,
    Key: FromRef<S>,
    Arc<dyn Store>: FromRef<S>,
{
    (
        Arc::<Config>::from_ref(state),
        Key::from_ref(state),
        Arc::<dyn Store>::from_ref(state),
    )
}

impl<S> FromRequestParts<S> for CurrentUser
where
    S: Send + Sync,
    Arc<Config>: FromRef<S>,
    Key: FromRef<S>,
    Arc<dyn Store>: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let (config, key, store) = gate(state);
        let user = identify(&config, &key, store.as_ref(), parts)
            .await?
            .ok_or_else(ApiError::unauthenticated)?;
        if is_state_changing(&parts.method) {
            check_origin(&config, &parts.headers)?;
            let sent = parts
                .headers
                .get(CSRF_HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            if !csrf_matches(&key, &user, sent) {
                return Err(ApiError::new(
                    ErrorCode::CsrfFailed,
                    format!("missing or wrong {CSRF_HEADER} header; reload the page and try again"),
                ));
            }
        }
        Ok(user)
    }
}

impl<S> FromRequestParts<S> for MaybeUser
where
    S: Send + Sync,
    Arc<Config>: FromRef<S>,
    Key: FromRef<S>,
    Arc<dyn Store>: FromRef<S>,
{
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let (config, key, store) = gate(state);
        let user = identify(&config, &key, store.as_ref(), parts).await;
        Ok(MaybeUser(user.ok().flatten()))
    }
}

/// Whether the server is reached over https (its `public_url` says so): cookies are then
/// `Secure` and `__Host-` named.
pub fn is_https(config: &Config) -> bool {
    config.public_url.as_ref().is_some_and(|p| p.secure)
}

/// The session cookie's name for this server: [`SESSION_COOKIE_HOST`] on https.
pub fn session_cookie_name(config: &Config) -> &'static str {
    if is_https(config) {
        SESSION_COOKIE_HOST
    } else {
        SESSION_COOKIE
    }
}

/// Builds the session cookie for `claims`.
pub fn session_cookie(config: &Config, claims: &CookieClaims) -> Cookie<'static> {
    Cookie::build((
        session_cookie_name(config),
        serde_json::to_string(claims).unwrap_or_default(),
    ))
    .http_only(true)
    .same_site(SameSite::Strict)
    .secure(is_https(config))
    .path("/")
    .build()
}

/// What removes the session cookie: the same name, path and `Secure` it was set with (a
/// browser ignores a `__Host-` removal that is not `Secure`).
pub fn session_cookie_removal(config: &Config) -> Cookie<'static> {
    Cookie::build(session_cookie_name(config))
        .path("/")
        .secure(is_https(config))
        .build()
}
