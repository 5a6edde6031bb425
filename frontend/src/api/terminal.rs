//! The terminal WebSocket of a session.

use uuid::Uuid;

use super::{url, ApiError};

/// Opens the terminal WebSocket of session `id` (binary frames, see `shared::terminal`).
pub fn open_terminal(id: Uuid) -> Result<web_sys::WebSocket, ApiError> {
    let what = "connect the terminal";
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
    let ws = web_sys::WebSocket::new(&format!(
        "{scheme}//{host}{}",
        url(&format!("/sessions/{id}/terminal"))
    ))
    .map_err(|e| ApiError::network(what, format!("{e:?}")))?;
    ws.set_binary_type(web_sys::BinaryType::Arraybuffer);
    Ok(ws)
}
