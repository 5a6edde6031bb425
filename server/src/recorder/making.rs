//! One session's writer made at a time on this replica, any number of sessions at once
//! ([`Recorder::making`]).

use std::sync::Arc;

use uuid::Uuid;

use super::Recorder;

impl Recorder {
    /// Holds the making of the writer of `id` on this replica: one at a time per session,
    /// any number of sessions at once.
    pub(super) async fn making(&self, id: Uuid) -> Making<'_> {
        let lock = {
            let mut making = self
                .making
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Arc::clone(making.entry(id).or_default())
        };
        Making {
            recorder: self,
            id,
            held: Some(lock.lock_owned().await),
        }
    }
}

/// The making of one session's writer, held ([`Recorder::making`]); the last holder removes
/// the session's lock.
pub(super) struct Making<'r> {
    recorder: &'r Recorder,
    id: Uuid,
    held: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for Making<'_> {
    fn drop(&mut self) {
        let mut making = self
            .recorder
            .making
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Released first, so the count below is the map's and the waiters' (under the map's
        // lock, so no new waiter takes it meanwhile).
        self.held = None;
        if making
            .get(&self.id)
            .is_some_and(|l| Arc::strong_count(l) == 1)
        {
            making.remove(&self.id);
        }
    }
}
