//! Which sessions this replica is driving right now. A drive asked for while one runs does not
//! run beside it (the sweep passing by while a slow activation runs must not start a second
//! one): it leaves a note, and the running drive goes round once more when it is done, so a
//! change made meanwhile (an End during activation) is acted on at once. Across replicas the
//! recording's database lease already lets only one replica activate a session (the other
//! sees `Recording::Elsewhere`).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use uuid::Uuid;

/// Claimed sessions, each with whether another drive was asked for meanwhile.
#[derive(Debug, Default)]
pub(super) struct Claims(Mutex<HashMap<Uuid, bool>>);

/// One session claimed until [`Claim::again`] says no more, or until dropped.
pub(super) struct Claim<'a> {
    claims: &'a Claims,
    id: Uuid,
    released: bool,
}

impl Claims {
    fn lock(&self) -> MutexGuard<'_, HashMap<Uuid, bool>> {
        // Only inserts and removes: a panic elsewhere leaves the map usable.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Claims `id`; when it is claimed already, notes that its drive must go round again and
    /// returns `None`.
    pub(super) fn take(&self, id: Uuid) -> Option<Claim<'_>> {
        let mut held = self.lock();
        if let Some(again) = held.get_mut(&id) {
            *again = true;
            return None;
        }
        held.insert(id, false);
        Some(Claim {
            claims: self,
            id,
            released: false,
        })
    }

    /// Whether `id` is claimed.
    pub(super) fn holds(&self, id: Uuid) -> bool {
        self.lock().contains_key(&id)
    }
}

impl Claim<'_> {
    /// True (and the note cleared) when another drive was asked for since the claim was taken
    /// or last asked; otherwise releases the claim, in the same step, so no request between the
    /// answer and the release is lost.
    pub(super) fn again(&mut self) -> bool {
        let mut held = self.claims.lock();
        match held.get_mut(&self.id) {
            Some(again) if *again => {
                *again = false;
                true
            }
            _ => {
                held.remove(&self.id);
                self.released = true;
                false
            }
        }
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if !self.released {
            self.claims.lock().remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_is_exclusive_and_a_request_meanwhile_is_kept() {
        let claims = Claims::default();
        let id = Uuid::now_v7();
        let mut first = claims.take(id).expect("free at first");
        assert!(claims.holds(id));
        assert!(claims.take(id).is_none(), "exclusive");
        assert!(
            first.again(),
            "the request meanwhile makes it go round again"
        );
        assert!(claims.holds(id), "still held while it does");
        assert!(!first.again(), "nothing asked since: released");
        assert!(!claims.holds(id));
        drop(first);
        let dropped = claims.take(id);
        assert!(dropped.is_some());
        drop(dropped);
        assert!(!claims.holds(id), "dropping releases too");
    }
}
