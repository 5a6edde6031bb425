//! `/sessions/{id}/extend` and `/sessions/{id}/extension/approve|deny`: more time for a
//! running session, under the rules of its request (the state machine's, in
//! `breakglass_shared::session::Extensions`). On Ground the requester's ask is given at once;
//! on Flight it waits for the session's quorum of approvers.

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use breakglass_shared::access::Action;
use breakglass_shared::api::{DenyRequest, ExtendRequest};
use breakglass_shared::{Actor, ErrorBody, Session, SessionEvent};

use crate::auth::CurrentUser;
use crate::config::Config;
use crate::error::ApiError;
use crate::http::extract::{ApiJson, SessionId};
use crate::http::sessions::{actor_for, refuse};
use crate::http::step_up::confirmed_session;
use crate::lifecycle::Lifecycle;
use crate::step_up::StepUp;
use crate::store::Store;

/// Ask for more time on your own running session: given at once on Ground, waiting for
/// approval on Flight.
#[utoipa::path(post, path = "/api/breakglass/sessions/{id}/extend", tag = "sessions",
    params(("id" = String, Path, description = "Session id (UUID)")),
    request_body = ExtendRequest,
    responses(
        (status = 200, description = "The session after the ask: on Ground with the new `expires_at`, on Flight with `extensions.pending`", body = Session),
        (status = 400, description = "A field is invalid (`minutes` more than fit under the tier's maximum, or a short `reason`); `field` names it", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Not your session (or CSRF)", body = ErrorBody),
        (status = 404, description = "No such session", body = ErrorBody),
        (status = 409, description = "Not running, past its deadline, an ask already waiting, or no extension left", body = ErrorBody),
        (status = 423, description = "Locked: the message gives the lock's reason", body = ErrorBody),
        (status = 503, description = "The cluster could not take the new time; nothing changed", body = ErrorBody),
    ))]
pub async fn extend(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    State(lifecycle): State<Arc<Lifecycle>>,
    user: CurrentUser,
    SessionId(id): SessionId,
    ApiJson(req): ApiJson<ExtendRequest>,
) -> Result<Json<Session>, ApiError> {
    req.validate()?;
    let by = actor_for(&config, store.as_ref(), &user, id, Action::Extend).await?;
    let event = SessionEvent::AskExtension {
        by,
        minutes: req.minutes,
        reason: req.reason.trim().to_string(),
    };
    Ok(Json(lifecycle.act(id, event).await?))
}

/// Approve the waiting extension of someone else's running Flight session (needs `approve`);
/// with the session's quorum reached, the time is given.
#[utoipa::path(post, path = "/api/breakglass/sessions/{id}/extension/approve", tag = "sessions",
    params(("id" = String, Path, description = "Session id (UUID)")),
    responses(
        (status = 200, description = "The session after the approval", body = Session),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Not allowed for you: your own session, no `approve`, or your group counted already (or CSRF); or, where the environment asks for a security key, no fresh assertion for this in the `breakglass-step-up` header (`step_up_required`)", body = ErrorBody),
        (status = 404, description = "No such session", body = ErrorBody),
        (status = 409, description = "Not running, no extension waiting, you approved already, or a lost race", body = ErrorBody),
        (status = 423, description = "Locked: the message gives the lock's reason", body = ErrorBody),
        (status = 503, description = "The cluster could not take the new time; nothing changed", body = ErrorBody),
    ))]
pub async fn approve_extension(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    State(lifecycle): State<Arc<Lifecycle>>,
    State(step_up): State<Arc<StepUp>>,
    user: CurrentUser,
    SessionId(id): SessionId,
    headers: HeaderMap,
) -> Result<Json<Session>, ApiError> {
    let action = Action::ApproveExtension;
    let (session, permissions) = confirmed_session(
        &config,
        store.as_ref(),
        &step_up,
        &user,
        id,
        action,
        &headers,
    )
    .await?;
    let by = Actor::User {
        name: user.name.clone(),
        permissions,
    };
    // The groups an approval can count through, for a quorum of distinct groups.
    let groups = config
        .environment(&session.environment)
        .map(|e| e.approving_groups(&user.groups))
        .unwrap_or_default();
    let event = SessionEvent::ApproveExtension { by, groups };
    Ok(Json(lifecycle.act(id, event).await?))
}

/// Refuse the waiting extension of someone else's running Flight session, with a reason for
/// the requester; the session keeps its deadline.
#[utoipa::path(post, path = "/api/breakglass/sessions/{id}/extension/deny", tag = "sessions",
    params(("id" = String, Path, description = "Session id (UUID)")),
    request_body = DenyRequest,
    responses(
        (status = 200, description = "Refused", body = Session),
        (status = 400, description = "Missing reason", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Not allowed for you (or CSRF)", body = ErrorBody),
        (status = 404, description = "No such session", body = ErrorBody),
        (status = 409, description = "Not running, no extension waiting, or a lost race", body = ErrorBody),
    ))]
pub async fn deny_extension(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    State(lifecycle): State<Arc<Lifecycle>>,
    user: CurrentUser,
    SessionId(id): SessionId,
    ApiJson(req): ApiJson<DenyRequest>,
) -> Result<Json<Session>, ApiError> {
    let deny = |by, reason| SessionEvent::DenyExtension { by, reason };
    let action = Action::DenyExtension;
    refuse(
        &config,
        store.as_ref(),
        &lifecycle,
        &user,
        id,
        &req,
        action,
        deny,
    )
    .await
}
