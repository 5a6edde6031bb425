//! Taking and lifting locks, the same way from the page and from the command line: a lock is
//! one row and a history entry; lifting one follows `breakglass_shared::lock`'s rule (a second
//! admin where the stakes are high), each step a conditional write so two admins racing
//! cannot lift a lock that needed both with one of them. What a lock stops is the lifecycle's
//! (`lifecycle/locks.rs`), enforced by every replica.

use breakglass_shared::lock::{find, Lock, LockScope, UnlockRefusal, UnlockRequest, UnlockStep};
use breakglass_shared::validate::{self, FieldError};
use breakglass_shared::Tier;
use time::OffsetDateTime;

use crate::config::Config;
use crate::store::{Store, StoreError};

/// Why a lock or an unlock was not done.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// A field is wrong (the reason, the target).
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// Already locked (the lock in force).
    #[error("{} is locked already (by {}: {})", .0.target, .0.locked_by, .0.reason)]
    AlreadyLocked(Box<Lock>),
    /// Nothing to unlock.
    #[error("{0} is not locked")]
    NotLocked(String),
    /// The unlock needs another admin.
    #[error(transparent)]
    Refused(#[from] UnlockRefusal),
    /// Another admin changed the lock at the same moment.
    #[error("the lock changed at the same moment; look at it again and retry")]
    Conflict,
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Whether lifting a lock of `scope` on `target` needs a second admin: a Flight environment,
/// or a person while any environment is Flight (they may work there).
pub fn needs_second(config: &Config, scope: LockScope, target: &str) -> bool {
    match scope {
        LockScope::Environment => config
            .environment(target)
            .is_some_and(|e| e.tier == Tier::Flight),
        LockScope::User => config.environments.iter().any(|e| e.tier == Tier::Flight),
    }
}

/// Locks `target` as `by` for `reason`; the lock now in force.
pub async fn lock(
    store: &dyn Store,
    config: &Config,
    scope: LockScope,
    target: &str,
    by: &str,
    reason: &str,
    now: OffsetDateTime,
) -> Result<Lock, LockError> {
    validate::note("reason", reason, true)?;
    if scope == LockScope::Environment && config.environment(target).is_none() {
        return Err(FieldError::new("environment", format!("no environment {target}")).into());
    }
    let lock = Lock {
        scope,
        target: target.to_string(),
        reason: reason.trim().to_string(),
        locked_by: by.to_string(),
        locked_at: now,
        unlock: None,
    };
    if store.lock(&lock).await? {
        tracing::warn!(%scope, %target, %by, reason = %lock.reason, "locked");
        return Ok(lock);
    }
    let locks = store.locks().await?;
    Err(match find(&locks, scope, target).cloned() {
        Some(l) => LockError::AlreadyLocked(Box::new(l)),
        None => LockError::Conflict,
    })
}

/// What `by` unlocking `target` for `reason` did: lifted, or asked and waiting for a second
/// admin.
pub async fn unlock(
    store: &dyn Store,
    config: &Config,
    scope: LockScope,
    target: &str,
    by: &str,
    reason: &str,
    now: OffsetDateTime,
) -> Result<UnlockStep, LockError> {
    validate::note("reason", reason, true)?;
    let locks = store.locks().await?;
    let held =
        find(&locks, scope, target).ok_or_else(|| LockError::NotLocked(target.to_string()))?;
    let step = held.unlock_step(by, needs_second(config, scope, target))?;
    let reason = reason.trim();
    let done = match step {
        UnlockStep::AwaitingSecond => {
            let asked = UnlockRequest {
                by: by.to_string(),
                reason: reason.to_string(),
                at: now,
            };
            store.ask_unlock(scope, target, &asked).await?
        }
        UnlockStep::Lifted => {
            let asked_by = held.unlock.as_ref().map(|u| u.by.as_str());
            store
                .unlock(scope, target, asked_by, by, reason, now)
                .await?
        }
    };
    if !done {
        return Err(LockError::Conflict);
    }
    tracing::warn!(%scope, %target, %by, %reason, ?step, "unlock");
    Ok(step)
}
