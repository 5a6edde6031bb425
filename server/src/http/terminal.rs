//! `GET /sessions/{id}/terminal`: the WebSocket to the session's debug container (and the
//! checks the watch socket shares).

use std::sync::Arc;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use breakglass_shared::ErrorCode;

use crate::auth::{check_origin, CurrentUser};
use crate::config::Config;
use crate::error::ApiError;
use crate::http::extract::SessionId;
use crate::relay::Relay;

/// What the terminal socket reads from the browser at once.
const READ_BUFFER: usize = 8 * 1024;

/// Upgrades to the terminal WebSocket. Refusals after the upgrade (not the requester, not
/// active, ended) are close frames with a code from `terminal::close` and a reason.
#[utoipa::path(get, path = "/api/breakglass/sessions/{id}/terminal", tag = "sessions",
    params(("id" = String, Path, description = "The session id.")),
    responses(
        (status = 101, description = "A WebSocket of binary frames (`shared::terminal::Frame`, a tag byte and a payload) attached to the session's debug container: the browser sends keystrokes, sizes and heartbeats, the server output, heartbeats and status frames. Only the requester of an active session is served; anything else is a close frame with a code from `shared::terminal::close` (4000-4013) and a reason. A newer socket of the requester takes the terminal over."),
        (status = 400, description = "Not a WebSocket upgrade.", body = breakglass_shared::ErrorBody),
        (status = 401, description = "Not signed in.", body = breakglass_shared::ErrorBody),
        (status = 403, description = "No Origin, or an Origin that is not this server's page.", body = breakglass_shared::ErrorBody),
        (status = 404, description = "Not a session id (they are UUIDs).", body = breakglass_shared::ErrorBody),
    ))]
pub async fn terminal(
    State(config): State<Arc<Config>>,
    State(relay): State<Arc<Relay>>,
    user: CurrentUser,
    headers: HeaderMap,
    SessionId(id): SessionId,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
    busy: Option<axum::Extension<crate::http::idle::Busy>>,
) -> Result<Response, ApiError> {
    let ws = checked_upgrade(&config, &headers, ws)?;
    let holder = crate::revocation::holder_of(&config, &user);
    Ok(ws.on_upgrade(move |socket| async move {
        // Over HTTP/2 the socket is a stream of its connection: open while it is.
        let _open = busy;
        relay.serve(socket, id, holder).await;
    }))
}

/// The checks every session socket passes before its upgrade (the terminal's and the watch
/// socket's), and the socket's bounds.
pub(super) fn checked_upgrade(
    config: &Config,
    headers: &HeaderMap,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<WebSocketUpgrade, ApiError> {
    // Without the upgrade headers axum answers in plain text; this API answers in its body.
    let ws = ws.map_err(|e| {
        ApiError::invalid(
            "upgrade",
            format!("upgrade: this route is a WebSocket (GET with `Upgrade: websocket`): {e}"),
        )
    })?;
    // Browsers send cookies with cross-site WebSocket upgrades: the Origin check is the guard,
    // and every browser sends one with an upgrade, so an upgrade without one is refused too
    // (a script may name the server's own origin, as the page does).
    if !headers.contains_key(axum::http::header::ORIGIN) {
        return Err(ApiError::new(
            ErrorCode::CsrfFailed,
            "a terminal WebSocket must carry the Origin of the break-glass page; open it from the page",
        ));
    }
    check_origin(config, headers)?;
    Ok(ws
        .max_message_size(breakglass_shared::terminal::MAX_FRAME * 2)
        // The browser sends keystrokes and resizes, a few bytes each: tungstenite's default
        // 128 KiB read buffer is zero-filled on the first read and then held by every open
        // terminal, idle or not (BENCHMARKS.md, "Relay and recording").
        .read_buffer_size(READ_BUFFER))
}
