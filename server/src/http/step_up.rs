//! `/account/keys` (a person's security keys) and `/step-up/options` (a challenge for one
//! action on one session), and [`require`], which the handlers of the actions that need a key
//! call before they act. The ceremony is `crate::step_up`'s.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use breakglass_shared::access::Action;
use breakglass_shared::step_up::{
    self, RegisterKeyRequest, SecurityKeyInfo, StepUpAction, StepUpOptionsRequest, STEP_UP_HEADER,
};
use breakglass_shared::{ErrorBody, ErrorCode, PermissionSet, Session};
use uuid::Uuid;

use crate::auth::CurrentUser;
use crate::config::Config;
use crate::error::ApiError;
use crate::http::extract::ApiJson;
use crate::step_up::{StepUp, StepUpError};
use crate::store::Store;

impl From<StepUpError> for ApiError {
    fn from(e: StepUpError) -> ApiError {
        let code = match &e {
            StepUpError::Store(_) => {
                return ApiError::internal(anyhow::anyhow!("step-up: {e}"));
            }
            StepUpError::NoKey(_) => ErrorCode::NoSecurityKey,
            StepUpError::Registered => ErrorCode::Conflict,
            StepUpError::Unavailable(_) => ErrorCode::Forbidden,
            _ => ErrorCode::StepUpRequired,
        };
        ApiError::new(code, e.to_string())
    }
}

/// The session `id` and the caller's permissions there, when they may do `action` to it now
/// and, where its environment asks for a key, the request carries a fresh assertion issued for
/// exactly this (see `crate::step_up`). An assertion that came is judged before a refusal for
/// the session's state: a replayed one is refused as such, whatever became of the session.
pub async fn confirmed_session(
    config: &Config,
    store: &dyn Store,
    step_up: &StepUp,
    user: &CurrentUser,
    id: Uuid,
    action: Action,
    headers: &HeaderMap,
) -> Result<(Session, PermissionSet), ApiError> {
    let allowed = user.session(config, store, id, action).await;
    let answer = headers
        .get(STEP_UP_HEADER)
        .map(|v| v.to_str().unwrap_or_default());
    let environment = match &allowed {
        Ok((s, _)) => s.environment.clone(),
        Err(e) if e.body.code == ErrorCode::WrongState && answer.is_some() => {
            user.session(config, store, id, Action::View)
                .await?
                .0
                .environment
        }
        Err(_) => return allowed,
    };
    let asks = config.environment(&environment).is_some_and(|e| e.step_up);
    if let Some(action) = StepUpAction::of(action).filter(|_| asks) {
        step_up.confirm(&user.name, action, id, answer).await?;
    }
    allowed
}

/// A ceremony's options as the JSON the browser's side reads.
fn options_json(options: impl serde::Serialize) -> Result<Json<serde_json::Value>, ApiError> {
    serde_json::to_value(options)
        .map(Json)
        .map_err(|e| ApiError::internal(anyhow::anyhow!("WebAuthn options: {e}")))
}

/// Your security keys.
#[utoipa::path(get, path = "/api/breakglass/account/keys", tag = "account",
    responses(
        (status = 200, description = "Your keys, oldest first", body = Vec<SecurityKeyInfo>),
        (status = 401, description = "Not signed in", body = ErrorBody),
    ))]
pub async fn list_keys(
    State(step_up): State<Arc<StepUp>>,
    user: CurrentUser,
) -> Result<Json<Vec<SecurityKeyInfo>>, ApiError> {
    Ok(Json(step_up.keys(&user.name).await?))
}

/// What the browser needs to register a new key (`navigator.credentials.create`).
#[utoipa::path(post, path = "/api/breakglass/account/keys/options", tag = "account",
    responses(
        (status = 200, description = "The creation options (`publicKey`; binary fields in unpadded base64url)", body = Object),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Security keys are not available with this server's address (or CSRF)", body = ErrorBody),
    ))]
pub async fn key_options(
    State(step_up): State<Arc<StepUp>>,
    user: CurrentUser,
) -> Result<Json<serde_json::Value>, ApiError> {
    options_json(step_up.registration_options(&user.name).await?)
}

/// Register a key: the browser's answer to the options, with a name.
#[utoipa::path(post, path = "/api/breakglass/account/keys", tag = "account",
    request_body = RegisterKeyRequest,
    responses(
        (status = 201, description = "Registered", body = SecurityKeyInfo),
        (status = 400, description = "A field is invalid; `field` names it", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "The answer did not verify, was for another ceremony or came too late (or CSRF)", body = ErrorBody),
        (status = 409, description = "This key is registered already", body = ErrorBody),
    ))]
pub async fn register_key(
    State(step_up): State<Arc<StepUp>>,
    user: CurrentUser,
    ApiJson(req): ApiJson<RegisterKeyRequest>,
) -> Result<(StatusCode, Json<SecurityKeyInfo>), ApiError> {
    step_up::key_name(&req.name)?;
    let key = match step_up
        .register(&user.name, &req.name, req.credential)
        .await
    {
        Err(StepUpError::Malformed(why)) => {
            return Err(ApiError::invalid(
                "credential",
                format!("credential: not a WebAuthn registration ({why})"),
            ))
        }
        other => other?,
    };
    Ok((StatusCode::CREATED, Json(key)))
}

/// Remove one of your keys.
#[utoipa::path(delete, path = "/api/breakglass/account/keys/{key}", tag = "account",
    params(("key" = String, Path, description = "Key id (UUID)")),
    responses(
        (status = 204, description = "Removed"),
        (status = 400, description = "Not a key id", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "CSRF", body = ErrorBody),
        (status = 404, description = "You have no key by that id", body = ErrorBody),
    ))]
pub async fn remove_key(
    State(step_up): State<Arc<StepUp>>,
    user: CurrentUser,
    Path(key): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = Uuid::parse_str(&key)
        .map_err(|_| ApiError::invalid("key", "key: pass the id of one of your keys"))?;
    if step_up.remove(&user.name, id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("you have no key {id}")))
    }
}

/// A challenge to confirm one action on one session with one of your keys
/// (`navigator.credentials.get`); the answer goes in the `breakglass-step-up` header of that
/// action, once.
#[utoipa::path(post, path = "/api/breakglass/step-up/options", tag = "account",
    request_body = StepUpOptionsRequest,
    responses(
        (status = 200, description = "The request options (`publicKey`; binary fields in unpadded base64url)", body = Object),
        (status = 400, description = "A field is invalid; `field` names it", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "You may not do this (the message says why), you have no key yet (`no_security_key`), or CSRF", body = ErrorBody),
        (status = 404, description = "No such session", body = ErrorBody),
        (status = 409, description = "The session is not in a state that allows this", body = ErrorBody),
    ))]
pub async fn options(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    State(step_up): State<Arc<StepUp>>,
    user: CurrentUser,
    ApiJson(req): ApiJson<StepUpOptionsRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    // Nobody is asked to touch their key for what would be refused anyway.
    user.session(&config, store.as_ref(), req.session, req.action.action())
        .await?;
    let options = step_up.options(&user.name, req.action, req.session).await?;
    Ok(Json(serde_json::to_value(options).map_err(|e| {
        ApiError::internal(anyhow::anyhow!("request options: {e}"))
    })?))
}
