//! The live terminal connections of this replica, one per session. A new connection of the
//! requester takes over (the previous one is told to close with [`close::TAKEN_OVER`]),
//! because after a network blip the old socket may be half-dead and the person should get
//! their terminal back at once. The relay registers connections; the lifecycle (at End) and the
//! recorder (a lost lease, a handover to another replica) close them, without either importing
//! the relay.

use std::collections::HashMap;

use async_trait::async_trait;
use breakglass_shared::terminal::close;
use tokio::sync::{oneshot, Mutex};
use uuid::Uuid;

use crate::ports::Terminals;

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

/// The registry of open terminals.
#[derive(Default)]
pub struct Connections {
    open: Mutex<HashMap<Uuid, Open>>,
}

impl Connections {
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
        if let Some(open) = self.open.lock().await.remove(&id) {
            let _ = open.close.send(CloseReason { code, reason });
        }
    }
}
