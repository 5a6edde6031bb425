//! `POST /auth/dev-login`: pick a demo user, no password. Only when enabled,
//! and loudly marked in the UI. The cookie and CSRF rules it issues are `crate::auth`'s.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum_extra::extract::cookie::SignedCookieJar;
use breakglass_shared::api::{DevLoginRequest, WhoAmI};
use breakglass_shared::{ErrorBody, ErrorCode};

use super::extract::ApiJson;
use super::whoami_for;
use crate::auth::{begin_login, check_origin, current_of, ProviderTokens};
use crate::error::ApiError;
use crate::state::AppState;
use crate::store::LoginSource;

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
        .find(|u| {
            breakglass_shared::names::normalise(&req.user, state.config.fold_names)
                .is_ok_and(|n| n == u.name)
        })
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
    let (login, cookie) = begin_login(
        &state,
        &user.name,
        LoginSource::Dev,
        Vec::new(),
        time::Duration::seconds(DEV_LOGIN_SECONDS),
        ProviderTokens::default(),
    )
    .await?;
    let current = current_of(&state, &login, user.groups.clone());
    let jar = jar.add(cookie);
    Ok((jar, axum::Json(whoami_for(&state, Some(&current)).await)))
}
