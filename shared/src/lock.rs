//! Locks: the security team's switch. An environment lock stops all break-glass there (active
//! sessions end, new requests and decisions are refused with the lock's reason); a user lock
//! does the same for one person in every environment. Unlocking is explicit and, where the
//! stakes are high (a Flight environment, or a person, who may work in one), needs a second
//! admin: the first asks, another confirms. The rules are here so the server, its command line
//! and the page say the same thing.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// What a lock covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::Display)]
#[strum(serialize_all = "snake_case")]
pub enum LockScope {
    /// One environment: nobody's session runs there.
    Environment,
    /// One person: none of their sessions runs anywhere.
    User,
}

/// A first admin's request to lift a lock that needs a second.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct UnlockRequest {
    /// Who asked.
    pub by: String,
    /// Why.
    pub reason: String,
    /// When.
    #[serde(with = "time::serde::rfc3339")]
    #[cfg_attr(feature = "server", schema(value_type = String, format = DateTime))]
    pub at: OffsetDateTime,
}

/// A lock in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Lock {
    /// Environment or user.
    pub scope: LockScope,
    /// The environment's or the user's name.
    pub target: String,
    /// Why it was locked, shown wherever it refuses something.
    pub reason: String,
    /// Who locked it.
    pub locked_by: String,
    /// When.
    #[serde(with = "time::serde::rfc3339")]
    #[cfg_attr(feature = "server", schema(value_type = String, format = DateTime))]
    pub locked_at: OffsetDateTime,
    /// A request to unlock waiting for a second admin, if any.
    #[serde(default)]
    pub unlock: Option<UnlockRequest>,
}

/// What one admin's unlock does to a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnlockStep {
    /// The lock is lifted.
    Lifted,
    /// The request is recorded; a second admin must confirm it.
    AwaitingSecond,
}

impl UnlockStep {
    /// What an unlock of `target` did, for the person who asked.
    pub fn sentence(&self, target: &str) -> String {
        match self {
            UnlockStep::Lifted => format!("{target} is unlocked"),
            UnlockStep::AwaitingSecond => {
                format!("your unlock of {target} is recorded; a second admin must confirm it")
            }
        }
    }
}

/// Why an unlock is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnlockRefusal {
    /// The admin who asked cannot be the one who confirms.
    #[error("{0} already asked to unlock this; a second admin must confirm it")]
    SamePerson(String),
}

impl Lock {
    /// The sentence shown wherever the lock refuses something.
    pub fn sentence(&self) -> String {
        match self.scope {
            LockScope::Environment => format!(
                "environment {} is locked by {}: {}; nothing runs there until an admin unlocks it",
                self.target, self.locked_by, self.reason
            ),
            LockScope::User => format!(
                "{} is locked by {}: {}; none of their sessions runs until an admin unlocks them",
                self.target, self.locked_by, self.reason
            ),
        }
    }

    /// What `by` unlocking does, when the lock needs two admins (`needs_second`) or one.
    pub fn unlock_step(&self, by: &str, needs_second: bool) -> Result<UnlockStep, UnlockRefusal> {
        if !needs_second {
            return Ok(UnlockStep::Lifted);
        }
        match &self.unlock {
            None => Ok(UnlockStep::AwaitingSecond),
            Some(asked) if asked.by == by => Err(UnlockRefusal::SamePerson(asked.by.clone())),
            Some(_) => Ok(UnlockStep::Lifted),
        }
    }
}

/// The lock among `locks` on `target` in `scope`, if there is one.
pub fn find<'a>(locks: &'a [Lock], scope: LockScope, target: &str) -> Option<&'a Lock> {
    locks
        .iter()
        .find(|l| l.scope == scope && l.target == target)
}

/// The locks among `locks` that stop `user`'s work in `environment`: the environment's, then
/// the person's.
pub fn blocking<'a>(locks: &'a [Lock], environment: &str, user: &str) -> Option<&'a Lock> {
    find(locks, LockScope::Environment, environment).or_else(|| find(locks, LockScope::User, user))
}

/// One entry of the locks' history (append-only): a lock, a request to unlock, an unlock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct LockEvent {
    /// Environment or user.
    pub scope: LockScope,
    /// The environment's or the user's name.
    pub target: String,
    /// `locked`, `unlock_asked` or `unlocked`.
    pub kind: String,
    /// Who.
    pub actor: String,
    /// Why.
    pub reason: String,
    /// When.
    #[serde(with = "time::serde::rfc3339")]
    #[cfg_attr(feature = "server", schema(value_type = String, format = DateTime))]
    pub at: OffsetDateTime,
}

/// The body of a lock or an unlock: why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct LockBody {
    /// Why (required; shown to everyone it stops).
    pub reason: String,
}

/// The answer to an unlock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct UnlockAnswer {
    /// Whether the lock is gone; `false` when it waits for a second admin.
    pub lifted: bool,
    /// What happened, for people.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(unlock: Option<&str>) -> Lock {
        Lock {
            scope: LockScope::Environment,
            target: "prod".into(),
            reason: "incident 42".into(),
            locked_by: "carol".into(),
            locked_at: OffsetDateTime::UNIX_EPOCH,
            unlock: unlock.map(|by| UnlockRequest {
                by: by.into(),
                reason: "over".into(),
                at: OffsetDateTime::UNIX_EPOCH,
            }),
        }
    }

    #[test]
    fn a_second_admin_confirms_what_the_first_asked() {
        assert_eq!(
            lock(None).unlock_step("carol", false),
            Ok(UnlockStep::Lifted)
        );
        assert_eq!(
            lock(None).unlock_step("carol", true),
            Ok(UnlockStep::AwaitingSecond)
        );
        assert_eq!(
            lock(Some("carol")).unlock_step("carol", true),
            Err(UnlockRefusal::SamePerson("carol".into()))
        );
        assert_eq!(
            lock(Some("carol")).unlock_step("dan", true),
            Ok(UnlockStep::Lifted)
        );
    }

    #[test]
    fn the_environment_lock_comes_before_the_person_s() {
        let mut user = lock(None);
        user.scope = LockScope::User;
        user.target = "alice".into();
        let locks = [user.clone(), lock(None)];
        assert_eq!(
            blocking(&locks, "prod", "alice").map(|l| l.scope),
            Some(LockScope::Environment)
        );
        assert_eq!(blocking(&locks, "dev", "alice"), Some(&user));
        assert_eq!(blocking(&locks, "dev", "bob"), None);
        assert!(lock(None).sentence().contains("incident 42"));
    }
}
