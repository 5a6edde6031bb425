//! What a lock (`breakglass_shared::lock`) means for sessions: nothing new starts under one
//! (a request, a decision, an activation is refused with its reason) and whatever runs under
//! one ends. The lock itself is a row any process may write (the server's handlers, its
//! command line on another machine); every replica enforces what it reads, once a second
//! (`crate::revocation`), so a lock taken anywhere stops everything within about a second.

use breakglass_shared::lock::{blocking, Lock, LockScope};
use breakglass_shared::{EndReason, Session, SessionEvent, SessionState};

use super::{Error, Lifecycle};
use crate::store::ListFilter;

impl Lifecycle {
    /// Refuses work of `user` in `environment` while a lock stops it.
    pub async fn refuse_if_locked(&self, environment: &str, user: &str) -> Result<(), Error> {
        let locks = self.store.locks().await?;
        match blocking(&locks, environment, user) {
            Some(lock) => Err(Error::Locked(Box::new(lock.clone()))),
            None => Ok(()),
        }
    }

    /// Ends every session `locks` stop: requests expire, running sessions end `Locked` (with
    /// their cleanup, as any end); how many changed. A session someone else moved on meanwhile
    /// is left to the next pass.
    pub async fn enforce_locks(&self, locks: &[Lock]) -> Result<usize, Error> {
        let mut changed = 0;
        for lock in locks {
            let mut filter = ListFilter {
                in_progress: false,
                limit: 200,
                ..Default::default()
            };
            match lock.scope {
                LockScope::Environment => filter.environment = Some(lock.target.clone()),
                LockScope::User => filter.requester = Some(lock.target.clone()),
            }
            // The live ones: waiting, approved, starting, running.
            for state in [
                SessionState::PendingApproval,
                SessionState::Approved,
                SessionState::Activating,
                SessionState::Active,
            ] {
                filter.state = Some(state);
                for s in self.store.list(&filter).await? {
                    if self.stop_locked(&s).await {
                        changed += 1;
                    }
                }
            }
        }
        Ok(changed)
    }

    /// Stops `s` under a lock; whether it changed.
    pub(super) async fn stop_locked(&self, s: &Session) -> bool {
        let event = match s.state {
            SessionState::PendingApproval | SessionState::Approved => SessionEvent::Expire,
            _ => SessionEvent::SystemEnd {
                reason: EndReason::Locked,
            },
        };
        match self.apply_event(s.id, event).await {
            Ok(_) => {
                tracing::info!(id = %s.id, environment = %s.environment, requester = %s.requester, "session stopped by a lock");
                true
            }
            Err(e) => {
                tracing::debug!(id = %s.id, error = %e, "a locked session moved on meanwhile; the next pass looks again");
                false
            }
        }
    }
}
