//! Handing the writer of a recording to the replica that serves its terminal now. The request
//! is a row (the asker's `handover:<id>` lease), the `NOTIFY` only a hint to read it: a
//! notice nobody's request stands behind, forged or stale, hands nothing over.

use uuid::Uuid;

use super::{now_ms, Recorder};

/// The lease a replica holds while it asks for the writer of `id`: the request is this row,
/// the notice only a hint to look at it, so a forged notice hands nothing over.
pub(super) fn name(id: Uuid) -> String {
    format!("handover:{id}")
}

impl Recorder {
    /// Hands the writer of `id` over to the replica that asked for it: this replica's terminal
    /// is closed and its relay stopped first (every byte it read from the pod is then in the
    /// cast), the cast is stored with a `handed over` marker and its version put on the row,
    /// and the lease is given up. Nothing to do when this replica does not write `id`.
    pub async fn hand_over(&self, id: Uuid) {
        let live = self.writers.lock().await.get(&id).cloned();
        let Some(writer) = live.filter(|w| !w.is_closed()) else {
            return;
        };
        if !self.handover_requested(id).await {
            tracing::warn!(%id, "a handover notice that no replica's request in the database stands behind; ignored");
            return;
        }
        self.connections
            .close_and_wait(
                id,
                breakglass_shared::terminal::close::TAKEN_OVER,
                "this terminal was opened through another server replica".into(),
            )
            .await;
        match writer
            .hand_off("the terminal moved to another server replica")
            .await
        {
            Ok(v) => {
                tracing::info!(%id, bytes = v.bytes, "recording handed over to another replica");
            }
            Err(e) => {
                tracing::warn!(%id, error = %e, "the recording's last part was not stored before the handover");
            }
        }
        self.writers.lock().await.remove(&id);
        self.release(id).await;
    }

    /// Whether another replica's request for the writer of `id` is in the database: its
    /// handover lease is held by someone else. Taking that lease ourselves means nobody holds
    /// it, and it is given back at once.
    async fn handover_requested(&self, id: Uuid) -> bool {
        match self
            .db
            .try_lease(&name(id), &self.holder, now_ms(), 1)
            .await
        {
            Ok(false) => true,
            Ok(true) => {
                let _ = self.db.release_lease(&name(id), &self.holder).await;
                false
            }
            Err(e) => {
                tracing::warn!(%id, error = %e, "cannot read whether a handover was asked for; the writer stays");
                false
            }
        }
    }
}
