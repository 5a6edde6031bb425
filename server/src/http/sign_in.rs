//! The OIDC login's routes (`GET /auth/oidc/login`, `GET /auth/oidc/callback`), the logout
//! every login shares (`POST /auth/logout`), and the pages a person sees when a sign-in does
//! not complete. The flow itself is `crate::auth::oidc`'s; the cookie and CSRF rules are
//! `crate::auth`'s.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::{Extension, Json};
use axum_extra::extract::cookie::{Cookie, Key, PrivateCookieJar, SameSite, SignedCookieJar};
use breakglass_shared::api::{LogoutResponse, OIDC_LOGIN_PATH};
use breakglass_shared::ErrorBody;
use serde::Deserialize;

use super::extract::ApiQuery;
pub use crate::auth::oidc::OidcProvider;
use crate::auth::oidc::{safe_return_path, OidcError, PendingLogin, Provider, LOGIN_SECONDS};
use crate::auth::tokens::TokenSeal;
use crate::auth::{
    begin_login, is_https, session_cookie_removal, CurrentUser, NewLogin, ProviderTokens, Source,
};
use crate::config::Config;
use crate::error::ApiError;
use crate::holds::Holds;
use crate::store::{LoginSelector, LoginSource, Store};
use breakglass_shared::names;

/// The cookie holding a started sign-in until the provider sends the browser back.
pub const PENDING_COOKIE: &str = "breakglass_oidc_login";
/// Its name on https (see `auth::SESSION_COOKIE_HOST` for why).
pub const PENDING_COOKIE_HOST: &str = "__Host-breakglass_oidc_login";
/// Its path on plain http: only the OIDC routes ever see it. A `__Host-` cookie must have
/// `Path=/`, so on https the prefix's guarantee is taken over the narrower path.
const PENDING_PATH: &str = "/api/breakglass/auth/oidc";

/// The pending cookie's name and path for this server.
fn pending_cookie(config: &Config) -> (&'static str, &'static str) {
    if is_https(config) {
        (PENDING_COOKIE_HOST, "/")
    } else {
        (PENDING_COOKIE, PENDING_PATH)
    }
}

/// Query of `GET /auth/oidc/login`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
pub struct LoginQuery {
    /// Path on this server to come back to once signed in (default `/`).
    pub return_to: Option<String>,
}

/// Query of `GET /auth/oidc/callback`, as the provider sends it.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
pub struct CallbackQuery {
    /// The authorization code.
    pub code: Option<String>,
    /// The state sent with the authorization request.
    pub state: Option<String>,
    /// The provider's error code (e.g. `access_denied`).
    pub error: Option<String>,
    /// The provider's description of the error.
    pub error_description: Option<String>,
}

/// `GET /auth/oidc/login`: send the browser to the provider.
#[utoipa::path(get, path = "/api/breakglass/auth/oidc/login", tag = "auth",
    params(LoginQuery),
    responses(
        (status = 303, description = "To the provider's authorization endpoint"),
        (status = 404, description = "No OIDC login on this server (an HTML page)"),
        (status = 502, description = "The provider is unreachable or misconfigured (an HTML page)"),
    ))]
pub async fn oidc_login(
    State(config): State<Arc<Config>>,
    Extension(OidcProvider(provider)): Extension<OidcProvider>,
    jar: PrivateCookieJar,
    ApiQuery(q): ApiQuery<LoginQuery>,
) -> Result<(PrivateCookieJar, Redirect), SignInPage> {
    let provider = provider.ok_or(SignInPage::NotConfigured)?;
    let (url, pending) = provider
        .begin(safe_return_path(q.return_to.as_deref()))
        .await?;
    let (name, path) = pending_cookie(&config);
    let cookie = Cookie::build((name, serde_json::to_string(&pending).unwrap_or_default()))
        .http_only(true)
        // Lax, not Strict: the provider's redirect back is a cross-site navigation.
        .same_site(SameSite::Lax)
        .secure(is_https(&config))
        .path(path)
        .max_age(time::Duration::seconds(LOGIN_SECONDS))
        .build();
    Ok((jar.add(cookie), Redirect::to(url.as_str())))
}

/// `GET /auth/oidc/callback`: the provider sends the browser back here; on success the
/// session cookie is set and the browser returns to where it started.
#[utoipa::path(get, path = "/api/breakglass/auth/oidc/callback", tag = "auth",
    params(CallbackQuery),
    responses(
        (status = 303, description = "Signed in; back to the page the sign-in started from"),
        (status = 400, description = "Expired, replayed or foreign sign-in (an HTML page)"),
        (status = 403, description = "Consent denied, or no permission anywhere (an HTML page)"),
        (status = 404, description = "No OIDC login on this server (an HTML page)"),
        (status = 502, description = "The provider failed or its ID token did not verify (an HTML page)"),
    ))]
pub async fn oidc_callback(
    State(config): State<Arc<Config>>,
    State(key): State<Key>,
    State(store): State<Arc<dyn Store>>,
    Extension(OidcProvider(provider)): Extension<OidcProvider>,
    pending_jar: PrivateCookieJar,
    jar: SignedCookieJar,
    ApiQuery(q): ApiQuery<CallbackQuery>,
) -> Response {
    let (name, path) = pending_cookie(&config);
    let pending = pending_jar
        .get(name)
        .and_then(|c| serde_json::from_str::<PendingLogin>(c.value()).ok());
    // A sign-in is completed (or fails) once: the same callback again finds nothing pending.
    let pending_jar = pending_jar.remove(Cookie::build(name).path(path).secure(is_https(&config)));
    match complete(&config, &key, store.as_ref(), provider, pending, q).await {
        Ok((cookie, return_to)) => {
            (pending_jar, jar.add(cookie), Redirect::to(&return_to)).into_response()
        }
        Err(page) => (pending_jar, page).into_response(),
    }
}

async fn complete(
    config: &Config,
    key: &Key,
    store: &dyn Store,
    provider: Option<Arc<Provider>>,
    pending: Option<PendingLogin>,
    q: CallbackQuery,
) -> Result<(Cookie<'static>, String), SignInPage> {
    let provider = provider.ok_or(SignInPage::NotConfigured)?;
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let pending = pending
        .filter(|p| p.exp >= now && q.state.as_deref() == Some(p.state.as_str()))
        .ok_or(OidcError::Expired)?;
    if let Some(error) = q.error {
        return Err(match error.as_str() {
            "access_denied" => OidcError::Denied,
            _ => OidcError::Refused(match q.error_description {
                Some(d) => format!("{error}: {d}"),
                None => error,
            }),
        }
        .into());
    }
    let code = q
        .code
        .ok_or_else(|| OidcError::Refused("the callback carries no code".into()))?;
    let finished = provider.finish(&pending, code).await?;
    let who = &finished.claimed;
    let user =
        names::normalise(&who.user, config.fold_names).map_err(|e| SignInPage::RefusedName {
            user: who.user.clone(),
            reason: e.to_string(),
        })?;
    let lifetime = provider.settings().session_lifetime;
    let granted = config
        .environments
        .iter()
        .any(|e| e.permissions_of(&user, &who.groups).any());
    if !granted {
        return Err(SignInPage::NoPermission {
            user,
            groups: who.groups.clone(),
        });
    }
    // One name, one person: a name another subject holds is theirs.
    let now = time::OffsetDateTime::now_utc();
    let bound = store
        .bind_identity(&who.subject, &user, now)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "cannot record whose name this is");
            SignInPage::Unavailable
        })?;
    if !bound {
        tracing::warn!(%user, subject = %who.subject, "sign-in refused: the name belongs to another subject at the provider");
        return Err(SignInPage::NameTaken { user });
    }
    tracing::info!(%user, groups = ?who.groups, "signed in through OIDC");
    let (_, cookie) = begin_login(
        config,
        key,
        store,
        NewLogin {
            user: &user,
            source: LoginSource::Oidc,
            groups: who.groups.clone(),
            lifetime,
            tokens: ProviderTokens {
                id_token: Some(finished.id_token),
                refresh_token: finished.refresh_token,
            },
        },
    )
    .await
    .map_err(|e| {
        tracing::error!(error = ?e.source, "cannot store the login");
        SignInPage::Unavailable
    })?;
    Ok((cookie, pending.return_to))
}

/// `POST /auth/logout`: forget the session cookie; after an OIDC login, also name the
/// provider's logout page so the browser ends the provider's session too.
#[utoipa::path(post, path = "/api/breakglass/auth/logout", tag = "auth",
    responses(
        (status = 200, description = "Signed out; the cookie is removed", body = LogoutResponse),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "CSRF check failed", body = ErrorBody),
    ))]
pub async fn logout(
    State(config): State<Arc<Config>>,
    State(key): State<Key>,
    State(store): State<Arc<dyn Store>>,
    State(holds): State<Arc<Holds>>,
    user: CurrentUser,
    Extension(OidcProvider(provider)): Extension<OidcProvider>,
    jar: SignedCookieJar,
) -> Result<(SignedCookieJar, Json<LogoutResponse>), ApiError> {
    // The record goes first: once it is ended, every copy of the cookie is worthless, so a
    // logout that could not end it must say so rather than only forget this browser's copy.
    let mut id_token = None;
    if let Some(id) = user.login {
        let seal = TokenSeal::new(&config, &key);
        id_token = store
            .get_login(id)
            .await?
            .and_then(|l| l.id_token)
            .and_then(|t| seal.open(id, &t));
        store
            .revoke_logins(
                &LoginSelector::Id(id),
                &user.name,
                time::OffsetDateTime::now_utc(),
            )
            .await?;
        // What this login holds open here ends now, not at the next check.
        holds.wake.notify_one();
    }
    let end_session_url = match (user.source, provider) {
        (Source::Oidc, Some(p)) => p
            .end_session_url(id_token.as_deref())
            .await
            .map(String::from),
        _ => None,
    };
    Ok((
        jar.remove(session_cookie_removal(&config)),
        Json(LogoutResponse { end_session_url }),
    ))
}

/// A sign-in that did not complete, as the page the person sees: what happened and what to
/// do.
#[derive(Debug)]
pub enum SignInPage {
    /// The flow failed (see [`OidcError`]).
    Flow(OidcError),
    /// Signed in at the provider, but no environment grants them anything.
    NoPermission {
        /// User name.
        user: String,
        /// Their groups.
        groups: Vec<String>,
    },
    /// This server has no `[auth.oidc]`.
    NotConfigured,
    /// The provider names the person with a name the server will not use (e.g. one the
    /// server keeps for itself).
    RefusedName {
        /// The name as the provider sent it.
        user: String,
        /// Why.
        reason: String,
    },
    /// The name the provider gives belongs to another person there (another subject).
    NameTaken {
        /// The name.
        user: String,
    },
    /// The login could not be stored (the database did not answer).
    Unavailable,
}

impl From<OidcError> for SignInPage {
    fn from(e: OidcError) -> SignInPage {
        SignInPage::Flow(e)
    }
}

impl SignInPage {
    /// Status, a stable reason (the page's `data-reason`), what happened, what to do.
    fn parts(&self) -> (StatusCode, &'static str, String, &'static str) {
        use OidcError as E;
        match self {
            SignInPage::Flow(E::Unreachable(_)) => (
                StatusCode::BAD_GATEWAY,
                "provider-unreachable",
                "Your organisation's sign-in service could not be reached.".into(),
                "Try again in a minute. If it keeps failing, tell your platform team that the identity provider does not answer.",
            ),
            SignInPage::Flow(E::BadProvider(detail)) => (
                StatusCode::BAD_GATEWAY,
                "provider-misconfigured",
                format!("The sign-in service answered, but not as configured: {detail}."),
                "Tell your platform team; they should check auth.oidc.issuer_url against the provider's issuer.",
            ),
            SignInPage::Flow(E::Denied) => (
                StatusCode::FORBIDDEN,
                "access-denied",
                "Access was declined at your organisation's sign-in service, so break-glass does not know who you are.".into(),
                "Sign in again and allow break-glass to read your identity and groups.",
            ),
            SignInPage::Flow(E::Refused(detail)) => (
                StatusCode::BAD_GATEWAY,
                "provider-refused",
                format!("The sign-in service refused this sign-in ({detail})."),
                "Start again. If it keeps happening, tell your platform team.",
            ),
            SignInPage::Flow(E::Expired) => (
                StatusCode::BAD_REQUEST,
                "expired",
                "This sign-in expired, was already used, or was started in another browser.".into(),
                "Start again; a sign-in must be finished within 10 minutes, in the browser that started it.",
            ),
            SignInPage::Flow(E::TokenRejected(_)) => (
                StatusCode::BAD_GATEWAY,
                "token-rejected",
                "The sign-in service's answer failed verification (signature, issuer, audience, expiry or nonce), so nobody was signed in.".into(),
                "Start again. If it keeps happening, tell your platform team.",
            ),
            SignInPage::Flow(E::MissingClaim(claim)) => (
                StatusCode::BAD_GATEWAY,
                "missing-claim",
                format!("The sign-in service did not say who you are: its ID token has no `{claim}` claim."),
                "Tell your platform team: release that claim to break-glass, or set auth.oidc.username_claim.",
            ),
            SignInPage::NoPermission { user, groups } => (
                StatusCode::FORBIDDEN,
                "no-permission",
                format!(
                    "You are {user} (groups: {}), but break-glass grants you nothing in any environment.",
                    if groups.is_empty() { "none".to_string() } else { groups.join(", ") }
                ),
                "Ask your platform team to grant you or one of your groups a permission in an environment, then sign in again.",
            ),
            SignInPage::RefusedName { user, reason } => (
                StatusCode::FORBIDDEN,
                "refused-name",
                format!("The sign-in service names you {user:?}, which break-glass cannot use: {reason}."),
                "Ask your platform team to give you another user name at the identity provider, or to set auth.oidc.username_claim to a claim that names people.",
            ),
            SignInPage::Flow(E::UnverifiedEmail) => (
                StatusCode::FORBIDDEN,
                "unverified-email",
                "The sign-in service names you by an email address it has not verified, which anyone could have typed.".into(),
                "Verify your email address at your organisation's sign-in service, then sign in again.",
            ),
            SignInPage::NameTaken { user } => (
                StatusCode::FORBIDDEN,
                "name-taken",
                format!("The sign-in service names you {user:?}, but that name belongs to another account there; break-glass gives one name to one person."),
                "Ask your platform team: two accounts at the identity provider carry the same user name.",
            ),
            SignInPage::Unavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "You signed in, but break-glass could not record the login.".into(),
                "Try again in a minute. If it keeps failing, tell your platform team that break-glass cannot reach its database.",
            ),
            SignInPage::NotConfigured => (
                StatusCode::NOT_FOUND,
                "not-configured",
                "This server has no OIDC login.".into(),
                "Open break-glass's start page to see how to sign in here.",
            ),
        }
    }
}

impl IntoResponse for SignInPage {
    fn into_response(self) -> Response {
        let (status, reason, what, todo) = self.parts();
        match &self {
            SignInPage::Flow(e) => tracing::warn!(error = %e, reason, "OIDC sign-in failed"),
            other => tracing::info!(reason, page = ?other, "OIDC sign-in refused"),
        }
        let esc = |s: &str| html_escape::encode_text(s).into_owned();
        let page = format!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <title>Sign-in did not complete · Break-glass</title></head>\
             <body><main data-reason=\"{reason}\">\
             <h1>Sign-in did not complete</h1><p id=\"what\">{}</p><p id=\"todo\">{}</p>\
             <p><a href=\"{OIDC_LOGIN_PATH}\">Start again</a> · <a href=\"/\">Break-glass start page</a></p>\
             </main></body></html>\n",
            esc(&what),
            esc(todo),
        );
        (status, Html(page)).into_response()
    }
}
