//! Locks (`breakglass_locks`) and their history (`breakglass_lock_events`, append-only): each
//! change and its history entry are one transaction, so the record never misses a lock that
//! held. The inherent methods here are what `Store`'s lock methods call.

use breakglass_shared::lock::{Lock, LockEvent, LockScope, UnlockRequest};
use time::OffsetDateTime;

/// A lock row as stored.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct LockRow {
    scope: String,
    target: String,
    reason: String,
    locked_by: String,
    locked_at: OffsetDateTime,
    unlock_by: Option<String>,
    unlock_reason: Option<String>,
    unlock_at: Option<OffsetDateTime>,
}

fn scope_of(target: &str, scope: &str) -> Result<LockScope, super::StoreError> {
    scope.parse().map_err(|_| super::StoreError::Corrupt {
        id: target.to_string(),
        column: "scope",
        value: scope.to_string(),
    })
}

impl TryFrom<LockRow> for Lock {
    type Error = super::StoreError;

    fn try_from(r: LockRow) -> Result<Lock, super::StoreError> {
        let unlock = match (r.unlock_by, r.unlock_reason, r.unlock_at) {
            (Some(by), Some(reason), Some(at)) => Some(UnlockRequest { by, reason, at }),
            _ => None,
        };
        Ok(Lock {
            scope: scope_of(&r.target, &r.scope)?,
            target: r.target,
            reason: r.reason,
            locked_by: r.locked_by,
            locked_at: r.locked_at,
            unlock,
        })
    }
}

/// A history row as stored.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct LockEventRow {
    scope: String,
    target: String,
    kind: String,
    actor: String,
    reason: String,
    at: OffsetDateTime,
}

impl TryFrom<LockEventRow> for LockEvent {
    type Error = super::StoreError;

    fn try_from(r: LockEventRow) -> Result<LockEvent, super::StoreError> {
        Ok(LockEvent {
            scope: scope_of(&r.target, &r.scope)?,
            target: r.target,
            kind: r.kind,
            actor: r.actor,
            reason: r.reason,
            at: r.at,
        })
    }
}

/// The inherent lock methods of a backend.
macro_rules! lock_sql {
    ($store:ident, $db:ty) => {
        impl $store {
            async fn lock_event(
                tx: &mut sqlx::Transaction<'_, $db>,
                scope: breakglass_shared::lock::LockScope,
                target: &str,
                kind: &str,
                actor: &str,
                reason: &str,
                at: time::OffsetDateTime,
            ) -> Result<(), crate::store::StoreError> {
                sqlx::query(
                    "INSERT INTO breakglass_lock_events (scope, target, kind, actor, reason, at) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(<&str>::from(scope))
                .bind(target)
                .bind(kind)
                .bind(actor)
                .bind(reason)
                .bind(at)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn all_locks(&self) -> Result<Vec<breakglass_shared::lock::Lock>, crate::store::StoreError> {
                sqlx::query_as::<_, crate::store::locks::LockRow>(
                    "SELECT * FROM breakglass_locks ORDER BY locked_at, scope, target",
                )
                .fetch_all(&self.pool)
                .await?
                .into_iter()
                .map(breakglass_shared::lock::Lock::try_from)
                .collect()
            }

            async fn insert_lock(
                &self,
                l: &breakglass_shared::lock::Lock,
            ) -> Result<bool, crate::store::StoreError> {
                let mut tx = self.pool.begin().await?;
                let done = sqlx::query(
                    "INSERT INTO breakglass_locks (scope, target, reason, locked_by, locked_at) \
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (scope, target) DO NOTHING",
                )
                .bind(<&str>::from(l.scope))
                .bind(l.target.as_str())
                .bind(l.reason.as_str())
                .bind(l.locked_by.as_str())
                .bind(l.locked_at)
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() == 0 {
                    return Ok(false);
                }
                Self::lock_event(&mut tx, l.scope, &l.target, "locked", &l.locked_by, &l.reason, l.locked_at).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn ask_unlock_row(
                &self,
                scope: breakglass_shared::lock::LockScope,
                target: &str,
                asked: &breakglass_shared::lock::UnlockRequest,
            ) -> Result<bool, crate::store::StoreError> {
                let mut tx = self.pool.begin().await?;
                let done = sqlx::query(
                    "UPDATE breakglass_locks SET unlock_by = $1, unlock_reason = $2, unlock_at = $3 \
                     WHERE scope = $4 AND target = $5 AND unlock_by IS NULL",
                )
                .bind(asked.by.as_str())
                .bind(asked.reason.as_str())
                .bind(asked.at)
                .bind(<&str>::from(scope))
                .bind(target)
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() == 0 {
                    return Ok(false);
                }
                Self::lock_event(&mut tx, scope, target, "unlock_asked", &asked.by, &asked.reason, asked.at).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn delete_lock(
                &self,
                scope: breakglass_shared::lock::LockScope,
                target: &str,
                asked_by: Option<&str>,
                by: &str,
                reason: &str,
                at: time::OffsetDateTime,
            ) -> Result<bool, crate::store::StoreError> {
                let mut tx = self.pool.begin().await?;
                let done = sqlx::query(
                    "DELETE FROM breakglass_locks WHERE scope = $1 AND target = $2 \
                     AND unlock_by IS NOT DISTINCT FROM $3",
                )
                .bind(<&str>::from(scope))
                .bind(target)
                .bind(asked_by)
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() == 0 {
                    return Ok(false);
                }
                Self::lock_event(&mut tx, scope, target, "unlocked", by, reason, at).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn lock_history(&self) -> Result<Vec<breakglass_shared::lock::LockEvent>, crate::store::StoreError> {
                sqlx::query_as::<_, crate::store::locks::LockEventRow>(
                    "SELECT scope, target, kind, actor, reason, at FROM breakglass_lock_events ORDER BY id",
                )
                .fetch_all(&self.pool)
                .await?
                .into_iter()
                .map(breakglass_shared::lock::LockEvent::try_from)
                .collect()
            }
        }
    };
}

pub(crate) use lock_sql;
