//! The live terminal connections of this replica, one per session. A new connection of the
//! requester takes over (the previous one is told to close with [`close::TAKEN_OVER`]),
//! because after a network blip the old socket may be half-dead and the person should get
//! their terminal back at once. The relay registers connections; the lifecycle (at End) and the
//! recorder (a lost lease, a handover to another replica) close them, without either importing
//! the relay.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use axum::extract::ws::{CloseFrame, Message};
use breakglass_shared::terminal::close;
use tokio::sync::{oneshot, Mutex};
use uuid::Uuid;

use crate::ports::Terminals;
use crate::watch::Watches;

/// A close frame; the reason is cut to the 123 bytes a close frame can carry (at a character
/// boundary, marked with `…`), since a longer one breaks the browser's socket instead.
pub fn close_frame(code: u16, reason: &str) -> Message {
    const MAX: usize = 123;
    let reason = if reason.len() <= MAX {
        reason.to_string()
    } else {
        let mut end = MAX - '…'.len_utf8();
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &reason[..end])
    };
    Message::Close(Some(CloseFrame {
        code,
        reason: reason.into(),
    }))
}

/// Why a connection is being closed by the server.
#[derive(Debug, Clone)]
pub struct CloseReason {
    /// WebSocket close code (see [`close`]).
    pub code: u16,
    /// Text for the person.
    pub reason: String,
}

/// One open terminal as the registry holds it.
struct Open {
    /// Tells the relay to close.
    close: oneshot::Sender<CloseReason>,
    /// Resolves (with an error) once the relay's [`Served`] is dropped: it stopped pumping.
    served: oneshot::Receiver<()>,
}

/// Held by the relay while it serves a connection; dropping it tells the registry the relay
/// stopped (nothing more read from the pod, everything read teed into the recording).
pub struct Served {
    _done: oneshot::Sender<()>,
}

/// The registry of open terminals, and of the watchers of each: whatever closes a terminal
/// here (the session's end, its move to another replica) closes its watchers too.
#[derive(Default)]
pub struct Connections {
    open: Mutex<HashMap<Uuid, Open>>,
    watches: Arc<Watches>,
}

impl Connections {
    /// The watched sessions of this replica.
    pub fn watches(&self) -> &Arc<Watches> {
        &self.watches
    }

    /// Registers a new connection for `id`, closing the previous one (takeover). The receiver
    /// fires when the server closes this connection; the relay keeps [`Served`] until it stops.
    pub async fn take_over(&self, id: Uuid) -> (oneshot::Receiver<CloseReason>, Served) {
        let (tx, rx) = oneshot::channel();
        let (done, served) = oneshot::channel();
        let entry = Open { close: tx, served };
        if let Some(old) = self.open.lock().await.insert(id, entry) {
            let _ = old.close.send(CloseReason {
                code: close::TAKEN_OVER,
                reason: "this terminal was opened elsewhere".into(),
            });
        }
        (rx, Served { _done: done })
    }

    /// Closes the terminal of `id` and waits until its relay stopped, so that the caller may
    /// hand the recording over knowing no byte more is written into it here.
    pub async fn close_and_wait(&self, id: Uuid, code: u16, reason: String) {
        self.watches.close(id, close::MOVED, &reason);
        let open = self.open.lock().await.remove(&id);
        if let Some(open) = open {
            let _ = open.close.send(CloseReason { code, reason });
            let _ = open.served.await;
        }
    }
}

#[async_trait]
impl Terminals for Connections {
    async fn close(&self, id: Uuid, code: u16, reason: String) {
        self.watches.close(id, code, &reason);
        if let Some(open) = self.open.lock().await.remove(&id) {
            let _ = open.close.send(CloseReason { code, reason });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_reasons_fit_a_close_frame() {
        let short = close_frame(4000, "fine");
        assert!(matches!(short, Message::Close(Some(ref c)) if c.reason.as_str() == "fine"));
        let long = "é".repeat(200);
        let Message::Close(Some(c)) = close_frame(4000, &long) else {
            panic!("not a close frame")
        };
        assert!(c.reason.len() <= 123, "{}", c.reason.len());
        assert!(c.reason.ends_with('…'));
    }
}
