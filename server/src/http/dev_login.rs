//! `POST /auth/dev-login`: pick a demo user, no password. Only when enabled,
//! and loudly marked in the UI. The cookie and CSRF rules it issues are `crate::auth`'s.

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum_extra::extract::cookie::{Key, SignedCookieJar};
use breakglass_shared::api::{DevLoginRequest, WhoAmI};
use breakglass_shared::{ErrorBody, ErrorCode};

use super::extract::ApiJson;
use super::whoami_for;
use crate::auth::{begin_login, check_origin, current_of, NewLogin, ProviderTokens};
use crate::cluster::Clusters;
use crate::config::Config;
use crate::error::ApiError;
use crate::store::{LoginSource, Store};

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
    State(config): State<Arc<Config>>,
    State(key): State<Key>,
    State(store): State<Arc<dyn Store>>,
    State(clusters): State<Option<Arc<Clusters>>>,
    headers: HeaderMap,
    jar: SignedCookieJar,
    ApiJson(req): ApiJson<DevLoginRequest>,
) -> Result<impl IntoResponse, ApiError> {
    check_origin(&config, &headers)?;
    if !config.dev_login {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "the dev login is off on this server; sign in through your organisation's login",
        ));
    }
    let user = config
        .dev_users
        .iter()
        .find(|u| {
            breakglass_shared::names::normalise(&req.user, config.fold_names)
                .is_ok_and(|n| n == u.name)
        })
        .ok_or_else(|| {
            let names: Vec<&str> = config.dev_users.iter().map(|u| u.name.as_str()).collect();
            ApiError::invalid(
                "user",
                format!("not a demo user; pick one of {}", names.join(", ")),
            )
        })?;
    let (login, cookie) = begin_login(
        &config,
        &key,
        store.as_ref(),
        NewLogin {
            user: &user.name,
            source: LoginSource::Dev,
            groups: Vec::new(),
            lifetime: time::Duration::seconds(DEV_LOGIN_SECONDS),
            tokens: ProviderTokens::default(),
        },
    )
    .await?;
    let current = current_of(&key, &login, user.groups.clone());
    let jar = jar.add(cookie);
    let whoami = whoami_for(&config, clusters.as_ref(), store.as_ref(), Some(&current)).await?;
    Ok((jar, axum::Json(whoami)))
}
