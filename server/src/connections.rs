//! The live terminal connections of this replica, one per session. A new connection of the
//! requester takes over (the previous one is told to close with [`close::TAKEN_OVER`]),
//! because after a network blip the old socket may be half-dead and the person should get
//! their terminal back at once. The relay registers connections; the lifecycle (at End) and the
//! recorder (a lost lease) close them, without either importing the relay.

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

/// The registry of open terminals.
#[derive(Default)]
pub struct Connections {
    open: Mutex<HashMap<Uuid, oneshot::Sender<CloseReason>>>,
}

impl Connections {
    /// Registers a new connection for `id`, closing the previous one (takeover). The receiver
    /// fires when the server closes this connection.
    pub async fn take_over(&self, id: Uuid) -> oneshot::Receiver<CloseReason> {
        let (tx, rx) = oneshot::channel();
        if let Some(old) = self.open.lock().await.insert(id, tx) {
            let _ = old.send(CloseReason {
                code: close::TAKEN_OVER,
                reason: "this terminal was opened elsewhere".into(),
            });
        }
        rx
    }
}

#[async_trait]
impl Terminals for Connections {
    async fn close(&self, id: Uuid, code: u16, reason: String) {
        if let Some(tx) = self.open.lock().await.remove(&id) {
            let _ = tx.send(CloseReason { code, reason });
        }
    }
}
