//! `GET /sessions/{id}/watch`: a running session's terminal, live and read-only
//! (`crate::watching` serves it).

use std::sync::Arc;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;

use crate::auth::CurrentUser;
use crate::config::Config;
use crate::error::ApiError;
use crate::http::extract::SessionId;
use crate::watching::{Pass, Watching, PASS_HEADER};
use breakglass_shared::ErrorCode;

/// Upgrades to a watch socket of a running session: its terminal live and read-only, for the
/// environment's approvers and admins. Refusals after the upgrade are close frames with a
/// code from `terminal::close` and a reason.
#[utoipa::path(get, path = "/api/breakglass/sessions/{id}/watch", tag = "sessions",
    params(("id" = String, Path, description = "The session id.")),
    responses(
        (status = 101, description = "A WebSocket of binary frames (`shared::terminal::Frame`): the terminal's size and screen, then its output and status frames naming who watches. Whatever the watcher sends is read and dropped."),
        (status = 400, description = "Not a WebSocket upgrade.", body = breakglass_shared::ErrorBody),
        (status = 401, description = "Not signed in.", body = breakglass_shared::ErrorBody),
        (status = 403, description = "The Origin is not this server's page.", body = breakglass_shared::ErrorBody),
        (status = 404, description = "Not a session id (they are UUIDs).", body = breakglass_shared::ErrorBody),
    ))]
pub async fn watch(
    State(config): State<Arc<Config>>,
    State(watching): State<Arc<Watching>>,
    user: CurrentUser,
    headers: HeaderMap,
    SessionId(id): SessionId,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
    busy: Option<axum::Extension<crate::http::idle::Busy>>,
) -> Result<Response, ApiError> {
    let ws = super::terminal::checked_upgrade(&config, &headers, ws)?;
    let holder = crate::revocation::holder_of(&config, &user);
    let host = headers.get(axum::http::header::HOST).cloned();
    Ok(ws.on_upgrade(move |socket| async move {
        let _open = busy;
        watching.serve(socket, id, holder, host).await;
    }))
}

/// The watch socket one replica opens to another for a watcher it checked (the terminal is
/// served there): no cookie and no Origin, a pass signed with the key the replicas share.
/// Documented so an operator reading the API (or a proxy's allow list) knows it exists and
/// that no browser has any use for it.
#[utoipa::path(get, path = "/api/breakglass/replica/watch/{id}", tag = "replicas",
    params(
        ("id" = String, Path, description = "The session id."),
        ("x-breakglass-watch-pass" = String, Header, description = "The watcher as the forwarding replica checked them (session, name, whether they count for a moderated session, expiry), signed with the replicas' shared key; good for one session and 30 seconds."),
    ),
    responses(
        (status = 101, description = "The watch socket's frames, as `GET /sessions/{id}/watch` sends them, for the forwarding replica to pass on; a terminal not served here is a close frame with the MOVED code."),
        (status = 400, description = "Not a WebSocket upgrade.", body = breakglass_shared::ErrorBody),
        (status = 403, description = "No pass, or a pass that is forged, for another session or expired: the route is for the server's replicas only.", body = breakglass_shared::ErrorBody),
        (status = 404, description = "Not a session id (they are UUIDs).", body = breakglass_shared::ErrorBody),
    ))]
pub async fn replica_watch(
    State(watching): State<Arc<Watching>>,
    headers: HeaderMap,
    SessionId(id): SessionId,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
    busy: Option<axum::Extension<crate::http::idle::Busy>>,
) -> Result<Response, ApiError> {
    let sealed = headers
        .get(PASS_HEADER)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::Forbidden,
                format!("{PASS_HEADER}: this route is for the server's replicas"),
            )
        })?;
    let pass = Pass::open(&watching.key, sealed, id).map_err(|why| {
        tracing::warn!(%id, why, "a replica watch socket refused");
        ApiError::new(ErrorCode::Forbidden, format!("{PASS_HEADER}: {why}"))
    })?;
    let ws = ws.map_err(|e| {
        ApiError::invalid(
            "upgrade",
            format!("upgrade: this route is a WebSocket: {e}"),
        )
    })?;
    Ok(ws
        .max_message_size(breakglass_shared::terminal::MAX_FRAME * 2)
        .on_upgrade(move |socket| async move {
            let _open = busy;
            watching.serve_forwarded(socket, pass).await;
        }))
}
