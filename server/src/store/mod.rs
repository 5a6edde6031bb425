//! Session storage: one trait, two backends (SQLite, the embedded default, and PostgreSQL).
//!
//! The only way to change a session row is [`Store::compare_and_set`]: it writes the next row
//! only if the stored one still has the version and state the change was computed from, and
//! appends the event in the same transaction.

use std::sync::Arc;

use async_trait::async_trait;
use breakglass_shared::api::SessionEventRecord;
use breakglass_shared::lock::{Lock, LockEvent, LockScope, UnlockRequest};
use breakglass_shared::Session;
use time::OffsetDateTime;
use tokio::sync::broadcast;
use uuid::Uuid;

mod bulk;
mod error;
mod events;
mod keys;
mod leases;
mod list;
mod live;
mod locks;
mod logins;
mod notice;
mod outbox;
mod page;
mod postgres;
mod row;
mod search;
mod sqlite;

pub use error::StoreError;
pub use events::events_as_of;
pub use keys::{Challenge, KeyStore, SecurityKey};
pub use leases::LEASE_BATCH;
pub use list::ListFilter;
pub use logins::{Login, LoginSelector, LoginSource};
pub use notice::{Notice, CHANNEL};
pub use outbox::{Attempt, Delivery, OutboxDraft, OutboxStats, OutboxStore};
pub use postgres::PostgresStore;
pub use search::{
    ChunkKind, FoundChunk, IndexStats, IndexedRecording, NewChunk, Readable, SearchStore, Term,
};
pub use sqlite::SqliteStore;

/// One event to append with a write.
#[derive(Debug, Clone)]
pub struct EventDraft {
    /// Who caused it.
    pub actor: String,
    /// Event kind.
    pub kind: String,
    /// Detail text.
    pub detail: Option<String>,
    /// When.
    pub at: OffsetDateTime,
    /// The notifications the change causes, written in its transaction (ignored by
    /// [`Store::insert_many`], whose imports tell nobody).
    pub notices: Vec<OutboxDraft>,
}

/// Session storage.
#[async_trait]
pub trait Store: KeyStore + OutboxStore + SearchStore + Send + Sync + 'static {
    /// Checks the database answers.
    async fn ping(&self) -> Result<(), StoreError>;
    /// Stores a new session with its creation event.
    async fn insert(&self, session: &Session, event: &EventDraft) -> Result<(), StoreError>;
    /// Stores many sessions in one transaction, each from its history: its versions in order,
    /// the first its creation, with the event that made each (an import: the other replicas
    /// are not told row by row).
    async fn insert_many(&self, batch: &[Vec<(Session, EventDraft)>]) -> Result<(), StoreError>;
    /// Reads one session.
    async fn get(&self, id: Uuid) -> Result<Option<Session>, StoreError>;
    /// The sessions of `ids` that exist, in no particular order.
    async fn get_many(&self, ids: &[Uuid]) -> Result<Vec<Session>, StoreError>;
    /// The id and version of every session not in a final state (what may own cluster
    /// objects), in one narrow statement: the sweep reads whole rows only of those it has not
    /// seen at that version.
    async fn live_versions(&self) -> Result<Vec<(Uuid, i64)>, StoreError>;
    /// Replaces `prev` with `next` if the row still has `prev`'s version and state, appending
    /// `event`; otherwise [`StoreError::Conflict`] and nothing is written.
    async fn compare_and_set(
        &self,
        prev: &Session,
        next: &Session,
        event: &EventDraft,
    ) -> Result<(), StoreError>;
    /// Lists sessions, newest first.
    async fn list(&self, filter: &ListFilter) -> Result<Vec<Session>, StoreError>;
    /// A session's events, oldest first.
    async fn events(&self, id: Uuid) -> Result<Vec<SessionEventRecord>, StoreError>;
    /// Who moved each of `ids` (the ones that got there) to `Ending`: the person or step that
    /// ended it, for the export. One query for a page of sessions.
    async fn enders(&self, ids: &[Uuid]) -> Result<Vec<(Uuid, String)>, StoreError>;
    /// Row counts of the sessions and events tables (operations and tests).
    async fn counts(&self) -> Result<(i64, i64), StoreError>;
    /// Takes or renews lease `name` for `holder` until `now_ms + ttl_ms` if it is free, expired
    /// or already ours; true when `holder` holds it afterwards.
    async fn try_lease(
        &self,
        name: &str,
        holder: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Result<bool, StoreError>;
    /// Renews, in one statement per [`LEASE_BATCH`] names, every lease of `names` that
    /// `holder` holds, until `until_ms`; returns the names renewed. A name left out was taken
    /// by another holder or released: whatever it guarded must stop here. Unlike
    /// [`Store::try_lease`] it never takes a lease, so it is only for renewing.
    async fn renew_leases(
        &self,
        names: &[String],
        holder: &str,
        until_ms: i64,
    ) -> Result<Vec<String>, StoreError>;
    /// Gives lease `name` up if `holder` holds it (so another holder need not wait for it to
    /// expire).
    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError>;
    /// Who holds lease `name` at `now_ms`, if anyone.
    async fn lease_holder(&self, name: &str, now_ms: i64) -> Result<Option<String>, StoreError>;
    /// Makes this process a server replica of the database and returns what the other
    /// replicas announce from now on. SQLite takes the database's single-replica lock
    /// ([`StoreError::SingleReplica`] when another live process holds it; the lock of a
    /// crashed one is gone with its process) and announces nothing; PostgreSQL starts
    /// listening on [`CHANNEL`] before returning, so nothing committed afterwards is missed.
    async fn join(&self) -> Result<broadcast::Receiver<Notice>, StoreError>;
    /// Asks the replica writing the recording of `id` to hand its writer over (this one holds
    /// the terminal). A no-op where there is one replica.
    async fn ask_handover(&self, id: Uuid) -> Result<(), StoreError>;
    /// Stores a new login.
    async fn insert_login(&self, login: &Login) -> Result<(), StoreError>;
    /// Reads one login, live or not.
    async fn get_login(&self, id: Uuid) -> Result<Option<Login>, StoreError>;
    /// Ends the live logins `which` selects at `at`, naming `by`; how many it ended.
    async fn revoke_logins(
        &self,
        which: &LoginSelector,
        by: &str,
        at: OffsetDateTime,
    ) -> Result<u64, StoreError>;
    /// The logins live at `now` (of `user` only, when given), newest first.
    async fn live_logins(
        &self,
        user: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<Vec<Login>, StoreError>;
    /// Claims the provider check of login `id` that was last checked at `checked_at`, moving
    /// that to `now`; false when another request (on any replica) claimed it first, so one
    /// refresh token is never spent twice.
    async fn claim_login_check(
        &self,
        id: Uuid,
        checked_at: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError>;
    /// Records what the provider said about live login `id`: its groups now and the refresh
    /// token to use next.
    async fn set_login_claims(
        &self,
        id: Uuid,
        groups: &[String],
        refresh_token: Option<&str>,
    ) -> Result<(), StoreError>;
    /// Deletes logins that expired before `before` (they can no longer be used, and the
    /// audit trail of sessions names users, not logins); how many.
    async fn prune_logins(&self, before: OffsetDateTime) -> Result<u64, StoreError>;
    /// Binds user name `user` to the provider's `subject` (issuer and `sub`), renaming the
    /// subject's earlier name; `false` when another subject holds the name (nothing written).
    async fn bind_identity(
        &self,
        subject: &str,
        user: &str,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError>;
    /// Every lock in force.
    async fn locks(&self) -> Result<Vec<Lock>, StoreError>;
    /// Puts `lock` in force (and in the history); `false` when that scope and target is
    /// locked already (nothing written).
    async fn lock(&self, lock: &Lock) -> Result<bool, StoreError>;
    /// Records a first admin's request to unlock; `false` when the lock is gone or another
    /// request waits already.
    async fn ask_unlock(
        &self,
        scope: LockScope,
        target: &str,
        asked: &UnlockRequest,
    ) -> Result<bool, StoreError>;
    /// Lifts the lock if its waiting request is still `asked_by`'s (none: no request), as
    /// `by` for `reason`; `false` when it changed meanwhile (nothing written).
    async fn unlock(
        &self,
        scope: LockScope,
        target: &str,
        asked_by: Option<&str>,
        by: &str,
        reason: &str,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError>;
    /// Every lock, unlock request and unlock, oldest first.
    async fn lock_events(&self) -> Result<Vec<LockEvent>, StoreError>;
}

/// Opens the store named by `url`, creating the SQLite file (and its directory) on first run,
/// and applies pending migrations.
pub async fn connect(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    if url.starts_with("sqlite:") {
        Ok(Arc::new(SqliteStore::connect(url).await?))
    } else {
        Ok(Arc::new(PostgresStore::connect(url).await?))
    }
}

/// The body of both backends, written once: the SQL is the same text (`$n` placeholders work
/// in SQLite and PostgreSQL) and only the driver types differ.
macro_rules! sql_store {
    ($store:ident, $db:ty) => {
        use async_trait::async_trait;
        use breakglass_shared::api::SessionEventRecord;
        use breakglass_shared::{Session, SessionState};
        use sqlx::query_builder::Separated;
        use sqlx::{QueryBuilder, Row};
        use uuid::Uuid;

        use crate::store::row::{Binder, EventRow, SessionRow, Value, FIXED, MUTABLE};
        use crate::store::{EventDraft, ListFilter, Store, StoreError};
        use breakglass_shared::lock::{Lock, LockEvent, LockScope, UnlockRequest};
        use time::OffsetDateTime;

        crate::store::list::list_query!($db);

        /// Binds each column as the next value of a comma-separated list (`VALUES (...)`).
        impl<'a> Binder<'a> for Separated<'_, 'a, $db, &'static str> {
            fn bind<T: Value<'a>>(&mut self, _column: &'static str, value: &'a T) {
                self.push_bind(value);
            }
        }

        /// Binds each column as `column = value` of an `UPDATE ... SET`.
        struct Assign<'s, 'a>(Separated<'s, 'a, $db, &'static str>);

        impl<'a> Binder<'a> for Assign<'_, 'a> {
            fn bind<T: Value<'a>>(&mut self, column: &'static str, value: &'a T) {
                self.0.push(column).push_unseparated(" = ").push_bind_unseparated(value);
            }
        }

        /// Writes the change's event and its notifications (`ev.notices`) in one statement,
        /// the same round trip to the database whether or not the change notifies anyone
        /// (`EVENT_WITH_NOTICES` says how the two INSERTs are joined on each engine): a
        /// statement of its own was most of what the outbox added to a change.
        async fn insert_event(
            conn: &mut <$db as sqlx::Database>::Connection,
            id: Uuid,
            ev: &EventDraft,
            from: Option<SessionState>,
            to: SessionState,
        ) -> Result<(), StoreError> {
            let mut first = crate::store::outbox::stage(&ev.notices);
            let rest = first.split_off(first.len().min(crate::store::outbox::OUTBOX_BATCH));
            let (open, join) = EVENT_WITH_NOTICES;
            let mut q: QueryBuilder<'_, $db> =
                QueryBuilder::new(if first.is_empty() { "" } else { open });
            q.push(
                "INSERT INTO breakglass_events \
                 (session_id, actor, at, from_state, to_state, kind, detail) VALUES (",
            );
            q.separated(", ")
                .push_bind(id)
                .push_bind(ev.actor.as_str())
                .push_bind(ev.at)
                .push_bind(from.map(SessionState::as_str))
                .push_bind(to.as_str())
                .push_bind(ev.kind.as_str())
                .push_bind(ev.detail.as_deref());
            q.push(")");
            if !first.is_empty() {
                q.push(join);
                push_staged(&mut q, first);
            }
            q.build().execute(&mut *conn).await?;
            insert_staged(conn, rest).await?;
            Ok(())
        }

        fn is_unique_violation(e: &sqlx::Error) -> bool {
            matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
        }

        crate::store::bulk::bulk_insert!($store, $db);
        crate::store::leases::lease_sql!($store, $db);
        crate::store::live::live_sql!($store, $db);
        crate::store::logins::login_sql!($store);
        crate::store::locks::lock_sql!($store, $db);
        crate::store::keys::key_sql!($store);
        crate::store::outbox::outbox_sql!($store, $db, CLAIM_LOCK);

        #[async_trait]
        impl Store for $store {
            async fn ping(&self) -> Result<(), StoreError> {
                sqlx::query("SELECT 1").execute(&self.pool).await?;
                Ok(())
            }

            async fn insert(&self, s: &Session, ev: &EventDraft) -> Result<(), StoreError> {
                let row = SessionRow::from(s);
                let columns = [FIXED, MUTABLE].concat().join(", ");
                let mut q: QueryBuilder<'_, $db> = QueryBuilder::new(format!(
                    "INSERT INTO breakglass_sessions ({columns}) VALUES ("
                ));
                let mut values = q.separated(", ");
                row.bind_fixed(&mut values);
                row.bind_mutable(&mut values);
                q.push(")");
                let mut tx = self.pool.begin().await?;
                if let Err(e) = q.build().execute(&mut *tx).await {
                    return Err(if is_unique_violation(&e) { StoreError::Duplicate } else { e.into() });
                }
                insert_event(&mut tx, s.id, ev, None, s.state).await?;
                self.announce_change(&mut tx, s.id, s.version, &ev.kind).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn insert_many(&self, batch: &[Vec<(Session, EventDraft)>]) -> Result<(), StoreError> {
                self.insert_rows(batch).await
            }

            async fn get(&self, id: Uuid) -> Result<Option<Session>, StoreError> {
                sqlx::query_as::<_, SessionRow>("SELECT * FROM breakglass_sessions WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
                    .map(Session::try_from)
                    .transpose()
            }

            async fn compare_and_set(
                &self,
                prev: &Session,
                next: &Session,
                ev: &EventDraft,
            ) -> Result<(), StoreError> {
                let row = SessionRow::from(next);
                let mut q: QueryBuilder<'_, $db> = QueryBuilder::new("UPDATE breakglass_sessions SET ");
                row.bind_mutable(&mut Assign(q.separated(", ")));
                q.push(" WHERE id = ")
                    .push_bind(prev.id)
                    .push(" AND version = ")
                    .push_bind(prev.version)
                    .push(" AND state = ")
                    .push_bind(prev.state.as_str());
                let mut tx = self.pool.begin().await?;
                let done = q.build().execute(&mut *tx).await?;
                if done.rows_affected() != 1 {
                    tx.rollback().await?;
                    let current = self.get(prev.id).await?.map(|s| s.state);
                    return Err(StoreError::Conflict { current });
                }
                insert_event(&mut tx, prev.id, ev, Some(prev.state), next.state).await?;
                self.announce_change(&mut tx, prev.id, next.version, &ev.kind).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn list(&self, f: &ListFilter) -> Result<Vec<Session>, StoreError> {
                let Some(q) = list_query(f, Self::page_around()) else {
                    return Ok(Vec::new());
                };
                let rows = self.fetch_page(q).await?;
                rows.into_iter().map(Session::try_from).collect()
            }

            async fn events(&self, id: Uuid) -> Result<Vec<SessionEventRecord>, StoreError> {
                let rows = sqlx::query_as::<_, EventRow>(
                    "SELECT * FROM breakglass_events WHERE session_id = $1 ORDER BY id",
                )
                .bind(id)
                .fetch_all(&self.pool)
                .await?;
                rows.into_iter().map(SessionEventRecord::try_from).collect()
            }

            async fn try_lease(
                &self,
                name: &str,
                holder: &str,
                now_ms: i64,
                ttl_ms: i64,
            ) -> Result<bool, StoreError> {
                self.take_lease(name, holder, now_ms, ttl_ms).await
            }

            async fn renew_leases(&self, names: &[String], holder: &str, until_ms: i64) -> Result<Vec<String>, StoreError> {
                self.renew_held(names, holder, until_ms).await
            }

            async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
                self.give_up_lease(name, holder).await
            }
            async fn lease_holder(&self, name: &str, now_ms: i64) -> Result<Option<String>, StoreError> {
                self.holder_of_lease(name, now_ms).await
            }

            async fn live_versions(&self) -> Result<Vec<(Uuid, i64)>, StoreError> {
                self.live_id_versions().await
            }

            async fn get_many(&self, ids: &[Uuid]) -> Result<Vec<Session>, StoreError> {
                self.rows_of(ids).await
            }

            async fn join(&self) -> Result<tokio::sync::broadcast::Receiver<crate::store::Notice>, StoreError> {
                self.join_replicas().await
            }

            async fn ask_handover(&self, id: Uuid) -> Result<(), StoreError> {
                self.announce(&crate::store::Notice::Handover { id }).await
            }

            async fn bind_identity(&self, subject: &str, user: &str, at: OffsetDateTime) -> Result<bool, StoreError> {
                let done = sqlx::query(
                    "INSERT INTO breakglass_identities (subject, user_name, seen_at) VALUES ($1, $2, $3) \
                     ON CONFLICT (subject) DO UPDATE SET user_name = excluded.user_name, seen_at = excluded.seen_at",
                )
                .bind(subject)
                .bind(user)
                .bind(at)
                .execute(&self.pool)
                .await;
                match done {
                    Ok(_) => Ok(true),
                    // The name is another subject's (the unique name).
                    Err(e) if is_unique_violation(&e) => Ok(false),
                    Err(e) => Err(e.into()),
                }
            }

            async fn locks(&self) -> Result<Vec<Lock>, StoreError> {
                self.all_locks().await
            }

            async fn lock(&self, lock: &Lock) -> Result<bool, StoreError> {
                self.insert_lock(lock).await
            }

            async fn ask_unlock(&self, scope: LockScope, target: &str, asked: &UnlockRequest) -> Result<bool, StoreError> {
                self.ask_unlock_row(scope, target, asked).await
            }

            async fn unlock(
                &self,
                scope: LockScope,
                target: &str,
                asked_by: Option<&str>,
                by: &str,
                reason: &str,
                at: OffsetDateTime,
            ) -> Result<bool, StoreError> {
                self.delete_lock(scope, target, asked_by, by, reason, at).await
            }

            async fn lock_events(&self) -> Result<Vec<LockEvent>, StoreError> {
                self.lock_history().await
            }

            async fn insert_login(&self, l: &crate::store::Login) -> Result<(), StoreError> {
                self.insert_login_row(l).await
            }

            async fn get_login(&self, id: Uuid) -> Result<Option<crate::store::Login>, StoreError> {
                sqlx::query_as::<_, crate::store::logins::LoginRow>(
                    "SELECT * FROM breakglass_logins WHERE id = $1",
                )
                .bind(id)
                .fetch_optional(&self.pool)
                .await?
                .map(crate::store::Login::try_from)
                .transpose()
            }

            async fn revoke_logins(
                &self,
                which: &crate::store::LoginSelector,
                by: &str,
                at: time::OffsetDateTime,
            ) -> Result<u64, StoreError> {
                use crate::store::LoginSelector as S;
                let column = match which {
                    S::Id(_) => "id",
                    S::User(_) => "user_name",
                };
                let sql = format!(
                    "UPDATE breakglass_logins SET revoked_at = $1, revoked_by = $2 \
                     WHERE {column} = $3 AND revoked_at IS NULL AND expires_at > $1"
                );
                let q = sqlx::query(&sql).bind(at).bind(by);
                let q = match which {
                    S::Id(id) => q.bind(*id),
                    S::User(u) => q.bind(u.as_str()),
                };
                Ok(q.execute(&self.pool).await?.rows_affected())
            }

            async fn live_logins(
                &self,
                user: Option<&str>,
                now: time::OffsetDateTime,
            ) -> Result<Vec<crate::store::Login>, StoreError> {
                let rows = sqlx::query_as::<_, crate::store::logins::LoginRow>(
                    "SELECT * FROM breakglass_logins WHERE revoked_at IS NULL AND expires_at > $1 \
                     AND ($2 IS NULL OR user_name = $2) ORDER BY created_at DESC",
                )
                .bind(now)
                .bind(user)
                .fetch_all(&self.pool)
                .await?;
                rows.into_iter().map(crate::store::Login::try_from).collect()
            }

            async fn claim_login_check(
                &self,
                id: Uuid,
                checked_at: time::OffsetDateTime,
                now: time::OffsetDateTime,
            ) -> Result<bool, StoreError> {
                let done = sqlx::query(
                    "UPDATE breakglass_logins SET claims_checked_at = $1 \
                     WHERE id = $2 AND claims_checked_at = $3 AND revoked_at IS NULL",
                )
                .bind(now)
                .bind(id)
                .bind(checked_at)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn set_login_claims(
                &self,
                id: Uuid,
                groups: &[String],
                refresh_token: Option<&str>,
            ) -> Result<(), StoreError> {
                let groups = serde_json::to_string(groups).unwrap_or_else(|_| "[]".into());
                sqlx::query(
                    "UPDATE breakglass_logins SET groups_json = $1, refresh_token = $2 \
                     WHERE id = $3 AND revoked_at IS NULL",
                )
                .bind(groups)
                .bind(refresh_token)
                .bind(id)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn prune_logins(&self, before: time::OffsetDateTime) -> Result<u64, StoreError> {
                let done = sqlx::query("DELETE FROM breakglass_logins WHERE expires_at < $1")
                    .bind(before)
                    .execute(&self.pool)
                    .await?;
                Ok(done.rows_affected())
            }

            async fn enders(&self, ids: &[Uuid]) -> Result<Vec<(Uuid, String)>, StoreError> {
                if ids.is_empty() {
                    return Ok(Vec::new());
                }
                let mut q: QueryBuilder<'_, $db> = QueryBuilder::new(
                    "SELECT session_id, actor FROM breakglass_events \
                     WHERE to_state = 'Ending' AND session_id IN (",
                );
                let mut sep = q.separated(", ");
                for id in ids {
                    sep.push_bind(*id);
                }
                q.push(") ORDER BY id");
                Ok(q.build_query_as::<(Uuid, String)>().fetch_all(&self.pool).await?)
            }

            async fn counts(&self) -> Result<(i64, i64), StoreError> {
                let row = sqlx::query(
                    "SELECT (SELECT COUNT(*) FROM breakglass_sessions) AS s, \
                     (SELECT COUNT(*) FROM breakglass_events) AS e",
                )
                .fetch_one(&self.pool)
                .await?;
                Ok((row.try_get("s")?, row.try_get("e")?))
            }
        }
    };
}

pub(crate) use sql_store;
