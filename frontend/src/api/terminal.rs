//! The WebSockets of a session's terminal: the requester's own (`/terminal`) and a watcher's
//! read-only live view (`/watch`). Both speak the binary frames of `shared::terminal` and pass
//! the same Origin and cookie checks, so they are opened the same way.

use uuid::Uuid;

use super::{url, ApiError};

/// Opens the terminal WebSocket of session `id` (binary frames, see `shared::terminal`).
pub fn open_terminal(id: Uuid) -> Result<web_sys::WebSocket, ApiError> {
    open_socket("connect the terminal", &format!("/sessions/{id}/terminal"))
}

/// Opens the watch WebSocket of session `id`: the requester's screen and then its output,
/// resizes and who watches, as binary frames (see `shared::terminal`). The server reads and
/// drops whatever is sent on it, so the live view can never type into the session.
pub fn open_watch(id: Uuid) -> Result<web_sys::WebSocket, ApiError> {
    open_socket("watch the terminal", &format!("/sessions/{id}/watch"))
}

/// A binary WebSocket to the API's `path` on the page's own host (`wss:` under `https:`), so
/// the browser sends the session cookie and the Origin the server checks. `what` names the
/// attempt in the error when it cannot be made.
fn open_socket(what: &str, path: &str) -> Result<web_sys::WebSocket, ApiError> {
    let location = web_sys::window()
        .map(|w| w.location())
        .ok_or_else(|| ApiError::network(what, "no window"))?;
    let scheme = match location.protocol().as_deref() {
        Ok("https:") => "wss:",
        _ => "ws:",
    };
    let host = location
        .host()
        .map_err(|e| ApiError::network(what, format!("{e:?}")))?;
    let ws = web_sys::WebSocket::new(&format!("{scheme}//{host}{}", url(path)))
        .map_err(|e| ApiError::network(what, format!("{e:?}")))?;
    ws.set_binary_type(web_sys::BinaryType::Arraybuffer);
    Ok(ws)
}
