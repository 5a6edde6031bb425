//! `POST /auth/dev-login`: pick a demo user, no password. Only when enabled,
//! and loudly marked in the UI. The cookie and CSRF rules it issues are `crate::auth`'s.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum_extra::extract::cookie::SignedCookieJar;
use breakglass_shared::api::{DevLoginRequest, WhoAmI};
use breakglass_shared::{ErrorBody, ErrorCode};
use rand::RngCore;

use super::extract::ApiJson;
use super::whoami_for;
use crate::auth::{
    check_origin, csrf_token, session_cookie, CookieClaims, CookieLogin, CurrentUser, Source,
};
use crate::error::ApiError;
use crate::state::AppState;

/// Seconds a dev login lasts.
const DEV_LOGIN_SECONDS: i64 = 12 * 3600;

/// `POST /auth/dev-login`: sign in as a demo user.
#[utoipa::path(post, path = "/api/breakglass/auth/dev-login", tag = "auth",
    request_body = DevLoginRequest,
    responses(
        (status = 200, description = "Signed in; the cookie is set", body = WhoAmI),
        (status = 400, description = "Unknown demo user", body = ErrorBody),
        (status = 403, description = "Dev login is off, or a foreign Origin", body = ErrorBody),
    ))]
pub async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    jar: SignedCookieJar,
    ApiJson(req): ApiJson<DevLoginRequest>,
) -> Result<impl IntoResponse, ApiError> {
    check_origin(&state, &headers)?;
    if !state.config.dev_login {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "the dev login is off on this server; sign in through your organisation's login",
        ));
    }
    let user = state
        .config
        .dev_users
        .iter()
        .find(|u| u.name == req.user)
        .ok_or_else(|| {
            let names: Vec<&str> = state
                .config
                .dev_users
                .iter()
                .map(|u| u.name.as_str())
                .collect();
            ApiError::invalid(
                "user",
                format!("not a demo user; pick one of {}", names.join(", ")),
            )
        })?;
    let mut nonce = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut nonce);
    let claims = CookieClaims {
        user: user.name.clone(),
        groups: user.groups.clone(),
        nonce: hex::encode(nonce),
        exp: time::OffsetDateTime::now_utc().unix_timestamp() + DEV_LOGIN_SECONDS,
        login: CookieLogin::Dev,
        id_token: None,
    };
    let current = CurrentUser {
        name: claims.user.clone(),
        groups: claims.groups.clone(),
        csrf_token: csrf_token(&state, &claims.user, &claims.nonce),
        nonce: claims.nonce.clone(),
        source: Source::DevCookie,
    };
    let jar = jar.add(session_cookie(&state, &claims));
    Ok((jar, axum::Json(whoami_for(&state, Some(&current)).await)))
}
