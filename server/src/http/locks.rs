//! Locks over HTTP: `GET /locks`; `POST /environments/{env}/lock` and `/unlock` for those who
//! hold `terminate` there; `POST /users/{user}/lock` and `/unlock` for those who hold it in
//! every environment (a person's lock reaches all of them). Taking a lock stops what it covers
//! at once here, and on the other replicas at their next check.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use breakglass_shared::lock::{Lock, LockBody, LockScope, UnlockAnswer, UnlockStep};
use breakglass_shared::{names, ErrorBody, ErrorCode};

use super::extract::ApiJson;
use crate::auth::CurrentUser;
use crate::config::Config;
use crate::error::ApiError;
use crate::holds::Holds;
use crate::lifecycle::Lifecycle;
use crate::locks;
use crate::store::Store;

/// Whether `user` holds `terminate` in every environment: who may lock a person.
fn admin_everywhere(config: &Config, user: &CurrentUser) -> bool {
    config
        .environments
        .iter()
        .all(|e| e.permissions_of(&user.name, &user.groups).terminate)
}

/// The locks the caller may see: those of the environments they see, their own, and every
/// person's when they may lock people.
#[utoipa::path(get, path = "/api/breakglass/locks", tag = "locks",
    responses(
        (status = 200, description = "Locks in force", body = Vec<Lock>),
        (status = 401, description = "Not signed in", body = ErrorBody),
    ))]
pub async fn list(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    user: CurrentUser,
) -> Result<Json<Vec<Lock>>, ApiError> {
    let visible = user.visible_environments(&config);
    let admin = admin_everywhere(&config, &user);
    let locks = store.locks().await?;
    Ok(Json(
        locks
            .into_iter()
            .filter(|l| match l.scope {
                LockScope::Environment => visible.contains(&l.target),
                LockScope::User => admin || l.target == user.name,
            })
            .collect(),
    ))
}

/// The scope and target a path names, checked against what the caller may lock there.
fn target_of(
    config: &Config,
    user: &CurrentUser,
    scope: LockScope,
    raw: &str,
) -> Result<String, ApiError> {
    match scope {
        LockScope::Environment => {
            let (_, perms) = user.environment(config, raw)?;
            if !perms.terminate {
                return Err(ApiError::new(
                    ErrorCode::Forbidden,
                    format!("locking {raw} takes tower.breakglass.terminate there; ask one of its admins"),
                ));
            }
            Ok(raw.to_string())
        }
        LockScope::User => {
            if !admin_everywhere(config, user) {
                return Err(ApiError::new(
                    ErrorCode::Forbidden,
                    "locking a person takes tower.breakglass.terminate in every environment; ask an admin who holds it",
                ));
            }
            names::normalise(raw, config.fold_names)
                .map_err(|e| ApiError::invalid("user", format!("user: {e}")))
        }
    }
}

async fn lock(
    parts: (Arc<Config>, Arc<dyn Store>, Arc<Lifecycle>, Arc<Holds>),
    user: CurrentUser,
    scope: LockScope,
    raw: String,
    body: LockBody,
) -> Result<(StatusCode, Json<Lock>), ApiError> {
    let (config, store, lifecycle, holds) = parts;
    let target = target_of(&config, &user, scope, &raw)?;
    let now = time::OffsetDateTime::now_utc();
    let lock = locks::lock(
        store.as_ref(),
        &config,
        scope,
        &target,
        &user.name,
        &body.reason,
        now,
    )
    .await?;
    // What it covers stops now on this replica; the others see the row at their next check.
    if let Err(e) = lifecycle.enforce_locks(std::slice::from_ref(&lock)).await {
        tracing::warn!(error = %e, "not every locked session stopped at once; the checks go on");
    }
    holds.wake.notify_one();
    Ok((StatusCode::CREATED, Json(lock)))
}

async fn unlock(
    config: Arc<Config>,
    store: Arc<dyn Store>,
    user: CurrentUser,
    scope: LockScope,
    raw: String,
    body: LockBody,
) -> Result<Json<UnlockAnswer>, ApiError> {
    let target = target_of(&config, &user, scope, &raw)?;
    let now = time::OffsetDateTime::now_utc();
    let step = locks::unlock(
        store.as_ref(),
        &config,
        scope,
        &target,
        &user.name,
        &body.reason,
        now,
    )
    .await?;
    Ok(Json(UnlockAnswer {
        lifted: step == UnlockStep::Lifted,
        message: step.sentence(&target),
    }))
}

/// Lock an environment: its sessions end, its requests expire, and nothing new starts there
/// until it is unlocked.
#[utoipa::path(post, path = "/api/breakglass/environments/{env}/lock", tag = "locks",
    params(("env" = String, Path, description = "Environment")),
    request_body = LockBody,
    responses(
        (status = 201, description = "Locked", body = Lock),
        (status = 400, description = "Missing reason", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Needs tower.breakglass.terminate there (or CSRF)", body = ErrorBody),
        (status = 404, description = "No such environment", body = ErrorBody),
        (status = 409, description = "Locked already", body = ErrorBody),
    ))]
pub async fn lock_environment(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    State(lifecycle): State<Arc<Lifecycle>>,
    State(holds): State<Arc<Holds>>,
    user: CurrentUser,
    Path(env): Path<String>,
    ApiJson(body): ApiJson<LockBody>,
) -> Result<(StatusCode, Json<Lock>), ApiError> {
    lock(
        (config, store, lifecycle, holds),
        user,
        LockScope::Environment,
        env,
        body,
    )
    .await
}

/// Unlock an environment (on Flight: a first admin asks, a second confirms).
#[utoipa::path(post, path = "/api/breakglass/environments/{env}/unlock", tag = "locks",
    params(("env" = String, Path, description = "Environment")),
    request_body = LockBody,
    responses(
        (status = 200, description = "Lifted, or waiting for a second admin", body = UnlockAnswer),
        (status = 400, description = "Missing reason", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Needs tower.breakglass.terminate there, or a second admin (or CSRF)", body = ErrorBody),
        (status = 404, description = "Not locked, or no such environment", body = ErrorBody),
        (status = 409, description = "Another admin changed the lock at the same moment", body = ErrorBody),
    ))]
pub async fn unlock_environment(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    user: CurrentUser,
    Path(env): Path<String>,
    ApiJson(body): ApiJson<LockBody>,
) -> Result<Json<UnlockAnswer>, ApiError> {
    unlock(config, store, user, LockScope::Environment, env, body).await
}

/// Lock a person: their sessions end and nothing of theirs starts, in every environment.
#[utoipa::path(post, path = "/api/breakglass/users/{user}/lock", tag = "locks",
    params(("user" = String, Path, description = "User name")),
    request_body = LockBody,
    responses(
        (status = 201, description = "Locked", body = Lock),
        (status = 400, description = "Missing reason, or a name the server will not use", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Needs tower.breakglass.terminate everywhere (or CSRF)", body = ErrorBody),
        (status = 409, description = "Locked already", body = ErrorBody),
    ))]
pub async fn lock_user(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    State(lifecycle): State<Arc<Lifecycle>>,
    State(holds): State<Arc<Holds>>,
    user: CurrentUser,
    Path(name): Path<String>,
    ApiJson(body): ApiJson<LockBody>,
) -> Result<(StatusCode, Json<Lock>), ApiError> {
    lock(
        (config, store, lifecycle, holds),
        user,
        LockScope::User,
        name,
        body,
    )
    .await
}

/// Unlock a person (a second admin confirms where any environment is Flight).
#[utoipa::path(post, path = "/api/breakglass/users/{user}/unlock", tag = "locks",
    params(("user" = String, Path, description = "User name")),
    request_body = LockBody,
    responses(
        (status = 200, description = "Lifted, or waiting for a second admin", body = UnlockAnswer),
        (status = 400, description = "Missing reason, or a name the server will not use", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Needs tower.breakglass.terminate everywhere, or a second admin", body = ErrorBody),
        (status = 404, description = "Not locked", body = ErrorBody),
        (status = 409, description = "Another admin changed the lock at the same moment", body = ErrorBody),
    ))]
pub async fn unlock_user(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    user: CurrentUser,
    Path(name): Path<String>,
    ApiJson(body): ApiJson<LockBody>,
) -> Result<Json<UnlockAnswer>, ApiError> {
    unlock(config, store, user, LockScope::User, name, body).await
}
