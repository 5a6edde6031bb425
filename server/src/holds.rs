//! What people hold open on this replica: each terminal socket and each live-update stream,
//! with who opened it (their login, their name, what they were allowed then). A request is
//! checked when it comes in, but these last for hours; `crate::revocation` checks them again
//! every second and ends a hold here, which its socket or stream answers by closing with the
//! sentence it is given. Kept apart from the checker so the relay and the streams depend on
//! this small registry, not on the authentication that feeds it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use breakglass_shared::PermissionSet;
use tokio::sync::{watch, Notify};
use uuid::Uuid;

/// What is held open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// The terminal of a session, in its environment.
    Terminal {
        /// The session.
        session: Uuid,
        /// Its environment (a session never moves).
        environment: String,
    },
    /// A watch socket of a session, in its environment.
    Watch {
        /// The session.
        session: Uuid,
        /// Its environment.
        environment: String,
    },
    /// A live-update stream.
    Events,
}

/// Who holds it, as the request that opened it was identified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The login record behind the cookie; `None` behind a trusted proxy, whose headers are
    /// only seen on requests.
    pub login: Option<Uuid>,
    /// The user name.
    pub name: String,
    /// Their groups when it was opened.
    pub groups: Vec<String>,
    /// What they held in each environment when it was opened (environments where they hold
    /// nothing are left out): what the check compares with.
    pub access: Vec<(String, PermissionSet)>,
}

/// One hold as the checker sees it.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Registry key, for [`Holds::end`].
    pub key: u64,
    /// Who.
    pub holder: Holder,
    /// What.
    pub held: Held,
}

struct Entry {
    holder: Holder,
    held: Held,
    end: watch::Sender<Option<String>>,
}

/// The registry of this replica's holds.
#[derive(Default)]
pub struct Holds {
    next: AtomicU64,
    open: Mutex<HashMap<u64, Entry>>,
    /// Asks the checker for a pass now (a logout on this replica), not at its next tick.
    pub wake: Notify,
}

impl Holds {
    /// Registers what `holder` opens; the hold is gone when the returned [`Hold`] is dropped.
    pub fn open(self: &Arc<Self>, holder: Holder, held: Held) -> Hold {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        let (end, ended) = watch::channel(None);
        self.lock().insert(key, Entry { holder, held, end });
        Hold {
            key,
            holds: self.clone(),
            ended,
        }
    }

    /// Every open hold, for one pass of the checker.
    pub fn snapshot(&self) -> Vec<Snapshot> {
        self.lock()
            .iter()
            .map(|(key, e)| Snapshot {
                key: *key,
                holder: e.holder.clone(),
                held: e.held.clone(),
            })
            .collect()
    }

    /// Ends hold `key` with `why` (a sentence for the person); a hold already closed is left.
    pub fn end(&self, key: u64, why: &str) {
        if let Some(e) = self.lock().get(&key) {
            e.end.send_if_modified(|v| {
                let first = v.is_none();
                if first {
                    *v = Some(why.to_string());
                }
                first
            });
        }
    }

    /// How many holds are open.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Entry>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An open hold: the socket or stream keeps it while it is open and closes when
/// [`Hold::ended`] answers.
pub struct Hold {
    key: u64,
    holds: Arc<Holds>,
    ended: watch::Receiver<Option<String>>,
}

impl Hold {
    /// Why the server ended this hold, once it does; pending until then.
    pub async fn ended(&mut self) -> String {
        let why = match self.ended.wait_for(Option::is_some).await {
            Ok(why) => why.clone(),
            // The registry's entry goes only with this hold, so its sender outlives the wait.
            Err(_) => None,
        };
        match why {
            Some(why) => why,
            None => std::future::pending().await,
        }
    }

    /// Whether the server ended it already.
    pub fn is_ended(&self) -> bool {
        self.ended.borrow().is_some()
    }

    /// Why the server ended it, if it did already. A socket checks this before each step as
    /// well as waiting on [`Hold::ended`]: a select picks among ready branches at random, so
    /// without it a keystroke or a frame could still pass after the end.
    pub fn ended_now(&self) -> Option<String> {
        self.ended.borrow().clone()
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.holds.lock().remove(&self.key);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn holder() -> Holder {
        Holder {
            login: Some(Uuid::new_v4()),
            name: "alice".into(),
            groups: vec![],
            access: vec![],
        }
    }

    #[tokio::test]
    async fn an_ended_hold_says_why_once_and_leaves_the_registry_when_dropped() {
        let holds = Arc::new(Holds::default());
        let mut a = holds.open(holder(), Held::Events);
        let b = holds.open(holder(), Held::Events);
        assert_eq!(holds.len(), 2);
        let key = holds.snapshot().iter().map(|s| s.key).min().unwrap();
        holds.end(key, "your sign-in ended");
        holds.end(key, "a second reason is not taken");
        assert_eq!(a.ended().await, "your sign-in ended");
        assert!(a.is_ended() && !b.is_ended());
        drop(a);
        assert_eq!(holds.len(), 1);
        drop(b);
        assert!(holds.is_empty());
    }
}
