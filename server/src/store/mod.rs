//! Session storage: one trait, two backends (SQLite, the embedded default, and PostgreSQL).
//!
//! The only way to change a session row is [`Store::compare_and_set`]: it writes the next row
//! only if the stored one still has the version and state the change was computed from, and
//! appends the event in the same transaction.

use std::sync::Arc;

use async_trait::async_trait;
use breakglass_shared::api::SessionEventRecord;
use breakglass_shared::{Session, SessionState};
use time::OffsetDateTime;
use uuid::Uuid;

mod postgres;
mod sqlite;

pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

/// Storage failures.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The row moved on since it was read: someone else changed it first.
    #[error("the session changed meanwhile (it is now {current:?})")]
    Conflict {
        /// The state found, if the row exists.
        current: Option<SessionState>,
    },
    /// A session with this id exists already.
    #[error("a session with this id exists already")]
    Duplicate,
    /// The database could not be reached or refused the query.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// Migrations failed.
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A stored value does not parse (the row was edited by hand?).
    #[error("stored session {id} has an invalid {column}: {value:?}")]
    Corrupt {
        /// The row.
        id: String,
        /// The column.
        column: &'static str,
        /// What was found.
        value: String,
    },
}

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
}

/// What to list. Results come newest first.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Only this environment.
    pub environment: Option<String>,
    /// Only this state.
    pub state: Option<SessionState>,
    /// Only this requester.
    pub requester: Option<String>,
    /// Only these environments (visibility); `None` means all.
    pub environments_in: Option<Vec<String>>,
    /// Exclude this requester (for "awaiting my approval").
    pub requester_not: Option<String>,
    /// Only ids older than this one (paging).
    pub before: Option<Uuid>,
    /// Page size.
    pub limit: u32,
}

/// Session storage.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Checks the database answers.
    async fn ping(&self) -> Result<(), StoreError>;
    /// Stores a new session with its creation event.
    async fn insert(&self, session: &Session, event: &EventDraft) -> Result<(), StoreError>;
    /// Reads one session.
    async fn get(&self, id: Uuid) -> Result<Option<Session>, StoreError>;
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
    /// Gives lease `name` up if `holder` holds it (so another holder need not wait for it to
    /// expire).
    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError>;
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

fn corrupt(id: Uuid, column: &'static str, value: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        id: id.to_string(),
        column,
        value: value.into(),
    }
}

fn parse_state(id: Uuid, s: &str) -> Result<SessionState, StoreError> {
    SessionState::parse(s).ok_or_else(|| corrupt(id, "state", s))
}

/// The body of both backends, written once: the SQL is the same text (`$n` placeholders work
/// in SQLite and PostgreSQL) and only the driver types differ.
macro_rules! sql_store {
    ($store:ident, $db:ty) => {
        use async_trait::async_trait;
        use breakglass_shared::api::SessionEventRecord;
        use breakglass_shared::session::{
            EndReason, Mode, RecordingRef, RekorEntry, Review, Tier, Verdict,
        };
        use breakglass_shared::Session;
        use sqlx::{QueryBuilder, Row};
        use time::OffsetDateTime;
        use uuid::Uuid;

        use crate::store::{corrupt, parse_state, EventDraft, ListFilter, Store, StoreError};

        type Row_ = <$db as sqlx::Database>::Row;
        type Query<'q> = sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments<'q>>;

        const UPDATE: &str = "UPDATE breakglass_sessions SET \
            approver = $1, glass_broken_by = $2, state = $3, end_reason = $4, end_reason_by = $5, \
            denial_reason = $6, failure = $7, version = $8, decided_at = $9, activating_at = $10, \
            active_at = $11, expires_at = $12, ending_at = $13, finished_at = $14, grant_name = $15, \
            debug_container = $16, copy_pod = $17, process_access_annotated = $18, \
            recording_key = $19, recording_version = $20, recording_sha256 = $21, \
            recording_bytes = $22, rekor_uuid = $23, rekor_log_index = $24, review_reviewer = $25, \
            review_at = $26, review_verdict = $27, review_notes = $28 \
            WHERE id = $29 AND version = $30 AND state = $31";

        const INSERT: &str = "INSERT INTO breakglass_sessions (\
            approver, glass_broken_by, state, end_reason, end_reason_by, denial_reason, failure, \
            version, decided_at, activating_at, active_at, expires_at, ending_at, finished_at, \
            grant_name, debug_container, copy_pod, process_access_annotated, recording_key, \
            recording_version, recording_sha256, recording_bytes, rekor_uuid, rekor_log_index, \
            review_reviewer, review_at, review_verdict, review_notes, id, environment, tier, \
            namespace, pod, target_container, mode, reason, ticket, duration_minutes, recycle, \
            requester, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, \
            $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, \
            $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40, $41)";

        const INSERT_EVENT: &str = "INSERT INTO breakglass_events \
            (session_id, actor, at, from_state, to_state, kind, detail) \
            VALUES ($1, $2, $3, $4, $5, $6, $7)";

        /// Binds the columns that change over a session's life, in `UPDATE`'s order ($1..$28).
        fn bind_mutable<'q>(q: Query<'q>, s: &'q Session) -> Query<'q> {
            let rec = s.recording.as_ref();
            let review = s.review.as_ref();
            q.bind(s.approver.as_deref())
                .bind(s.glass_broken_by.as_deref())
                .bind(s.state.as_str())
                .bind(s.end_reason.as_ref().map(EndReason::kind))
                .bind(s.end_reason.as_ref().and_then(EndReason::by))
                .bind(s.denial_reason.as_deref())
                .bind(s.failure.as_deref())
                .bind(s.version)
                .bind(s.decided_at)
                .bind(s.activating_at)
                .bind(s.active_at)
                .bind(s.expires_at)
                .bind(s.ending_at)
                .bind(s.finished_at)
                .bind(s.grant_name.as_deref())
                .bind(s.debug_container.as_deref())
                .bind(s.copy_pod.as_deref())
                .bind(s.process_access_annotated)
                .bind(rec.map(|r| r.key.as_str()))
                .bind(rec.map(|r| r.version.as_str()))
                .bind(rec.map(|r| r.sha256.as_str()))
                .bind(rec.map(|r| i64::try_from(r.bytes).unwrap_or(i64::MAX)))
                .bind(s.rekor.as_ref().map(|e| e.uuid.as_str()))
                .bind(s.rekor.as_ref().map(|e| e.log_index))
                .bind(review.map(|r| r.reviewer.as_str()))
                .bind(review.map(|r| r.at))
                .bind(review.map(|r| r.verdict.as_str()))
                .bind(review.map(|r| r.notes.as_str()))
        }

        fn decode(row: &Row_) -> Result<Session, StoreError> {
            let id: Uuid = row.try_get("id")?;
            let text = |c: &'static str| -> Result<String, StoreError> { Ok(row.try_get::<String, _>(c)?) };
            let opt = |c: &'static str| -> Result<Option<String>, StoreError> {
                Ok(row.try_get::<Option<String>, _>(c)?)
            };
            let ts = |c: &'static str| -> Result<Option<OffsetDateTime>, StoreError> {
                Ok(row.try_get::<Option<OffsetDateTime>, _>(c)?)
            };
            let tier = text("tier")?;
            let mode = text("mode")?;
            let state = parse_state(id, &text("state")?)?;
            let end_reason = match opt("end_reason")? {
                Some(kind) => Some(
                    EndReason::from_parts(&kind, opt("end_reason_by")?.as_deref())
                        .ok_or_else(|| corrupt(id, "end_reason", kind))?,
                ),
                None => None,
            };
            let recording = match (opt("recording_key")?, opt("recording_sha256")?) {
                (Some(key), Some(sha256)) => Some(RecordingRef {
                    key,
                    version: opt("recording_version")?.unwrap_or_default(),
                    sha256,
                    bytes: u64::try_from(row.try_get::<Option<i64>, _>("recording_bytes")?.unwrap_or(0)).unwrap_or(0),
                }),
                _ => None,
            };
            let rekor = match opt("rekor_uuid")? {
                Some(uuid) => Some(RekorEntry {
                    uuid,
                    log_index: row.try_get::<Option<i64>, _>("rekor_log_index")?.unwrap_or(0),
                }),
                None => None,
            };
            let review = match (opt("review_reviewer")?, ts("review_at")?, opt("review_verdict")?) {
                (Some(reviewer), Some(at), Some(v)) => Some(Review {
                    reviewer,
                    at,
                    verdict: v.parse::<Verdict>().ok().ok_or_else(|| corrupt(id, "review_verdict", v))?,
                    notes: opt("review_notes")?.unwrap_or_default(),
                }),
                _ => None,
            };
            let duration: i64 = row.try_get("duration_minutes")?;
            Ok(Session {
                id,
                environment: text("environment")?,
                tier: tier.parse::<Tier>().ok().ok_or_else(|| corrupt(id, "tier", tier.clone()))?,
                namespace: text("namespace")?,
                pod: text("pod")?,
                target_container: opt("target_container")?,
                mode: mode.parse::<Mode>().ok().ok_or_else(|| corrupt(id, "mode", mode.clone()))?,
                reason: text("reason")?,
                ticket: opt("ticket")?,
                duration_minutes: u32::try_from(duration)
                    .map_err(|_| corrupt(id, "duration_minutes", duration.to_string()))?,
                recycle: row.try_get("recycle")?,
                requester: text("requester")?,
                approver: opt("approver")?,
                glass_broken_by: opt("glass_broken_by")?,
                state,
                end_reason,
                denial_reason: opt("denial_reason")?,
                failure: opt("failure")?,
                version: row.try_get("version")?,
                created_at: row.try_get("created_at")?,
                decided_at: ts("decided_at")?,
                activating_at: ts("activating_at")?,
                active_at: ts("active_at")?,
                expires_at: ts("expires_at")?,
                ending_at: ts("ending_at")?,
                finished_at: ts("finished_at")?,
                grant_name: opt("grant_name")?,
                debug_container: opt("debug_container")?,
                copy_pod: opt("copy_pod")?,
                process_access_annotated: row.try_get("process_access_annotated")?,
                recording,
                rekor,
                review,
            })
        }

        fn decode_event(row: &Row_) -> Result<SessionEventRecord, StoreError> {
            let session_id: Uuid = row.try_get("session_id")?;
            let from: Option<String> = row.try_get("from_state")?;
            let to: String = row.try_get("to_state")?;
            Ok(SessionEventRecord {
                id: row.try_get("id")?,
                session_id,
                actor: row.try_get("actor")?,
                at: row.try_get("at")?,
                from_state: match from {
                    Some(f) => Some(parse_state(session_id, &f)?),
                    None => None,
                },
                to_state: parse_state(session_id, &to)?,
                kind: row.try_get("kind")?,
                detail: row.try_get("detail")?,
            })
        }

        fn is_unique_violation(e: &sqlx::Error) -> bool {
            matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
        }

        #[async_trait]
        impl Store for $store {
            async fn ping(&self) -> Result<(), StoreError> {
                sqlx::query("SELECT 1").execute(&self.pool).await?;
                Ok(())
            }

            async fn insert(&self, s: &Session, ev: &EventDraft) -> Result<(), StoreError> {
                let mut tx = self.pool.begin().await?;
                let q = bind_mutable(sqlx::query(INSERT), s)
                    .bind(s.id)
                    .bind(s.environment.as_str())
                    .bind(s.tier.as_str())
                    .bind(s.namespace.as_str())
                    .bind(s.pod.as_str())
                    .bind(s.target_container.as_deref())
                    .bind(s.mode.as_str())
                    .bind(s.reason.as_str())
                    .bind(s.ticket.as_deref())
                    .bind(i64::from(s.duration_minutes))
                    .bind(s.recycle)
                    .bind(s.requester.as_str())
                    .bind(s.created_at);
                if let Err(e) = q.execute(&mut *tx).await {
                    return Err(if is_unique_violation(&e) { StoreError::Duplicate } else { e.into() });
                }
                sqlx::query(INSERT_EVENT)
                    .bind(s.id)
                    .bind(ev.actor.as_str())
                    .bind(ev.at)
                    .bind(None::<&str>)
                    .bind(s.state.as_str())
                    .bind(ev.kind.as_str())
                    .bind(ev.detail.as_deref())
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(())
            }

            async fn get(&self, id: Uuid) -> Result<Option<Session>, StoreError> {
                let row = sqlx::query("SELECT * FROM breakglass_sessions WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(decode).transpose()
            }

            async fn compare_and_set(
                &self,
                prev: &Session,
                next: &Session,
                ev: &EventDraft,
            ) -> Result<(), StoreError> {
                let mut tx = self.pool.begin().await?;
                let done = bind_mutable(sqlx::query(UPDATE), next)
                    .bind(prev.id)
                    .bind(prev.version)
                    .bind(prev.state.as_str())
                    .execute(&mut *tx)
                    .await?;
                if done.rows_affected() != 1 {
                    tx.rollback().await?;
                    let current = self.get(prev.id).await?.map(|s| s.state);
                    return Err(StoreError::Conflict { current });
                }
                sqlx::query(INSERT_EVENT)
                    .bind(prev.id)
                    .bind(ev.actor.as_str())
                    .bind(ev.at)
                    .bind(Some(prev.state.as_str()))
                    .bind(next.state.as_str())
                    .bind(ev.kind.as_str())
                    .bind(ev.detail.as_deref())
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(())
            }

            async fn list(&self, f: &ListFilter) -> Result<Vec<Session>, StoreError> {
                if f.environments_in.as_ref().is_some_and(|v| v.is_empty()) {
                    return Ok(Vec::new());
                }
                let mut q: QueryBuilder<'_, $db> =
                    QueryBuilder::new("SELECT * FROM breakglass_sessions WHERE 1 = 1");
                if let Some(e) = &f.environment {
                    q.push(" AND environment = ").push_bind(e.as_str());
                }
                if let Some(s) = f.state {
                    q.push(" AND state = ").push_bind(s.as_str());
                }
                if let Some(r) = &f.requester {
                    q.push(" AND requester = ").push_bind(r.as_str());
                }
                if let Some(r) = &f.requester_not {
                    q.push(" AND requester <> ").push_bind(r.as_str());
                }
                if let Some(envs) = &f.environments_in {
                    q.push(" AND environment IN (");
                    let mut sep = q.separated(", ");
                    for e in envs {
                        sep.push_bind(e.as_str());
                    }
                    q.push(")");
                }
                if let Some(b) = f.before {
                    q.push(" AND id < ").push_bind(b);
                }
                q.push(" ORDER BY id DESC LIMIT ").push_bind(i64::from(f.limit));
                let rows = q.build().fetch_all(&self.pool).await?;
                rows.iter().map(decode).collect()
            }

            async fn events(&self, id: Uuid) -> Result<Vec<SessionEventRecord>, StoreError> {
                let rows = sqlx::query("SELECT * FROM breakglass_events WHERE session_id = $1 ORDER BY id")
                    .bind(id)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(decode_event).collect()
            }

            async fn try_lease(
                &self,
                name: &str,
                holder: &str,
                now_ms: i64,
                ttl_ms: i64,
            ) -> Result<bool, StoreError> {
                let done = sqlx::query(
                    "INSERT INTO breakglass_leases (name, holder, expires_at_ms) VALUES ($1, $2, $3) \
                     ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, \
                     expires_at_ms = excluded.expires_at_ms \
                     WHERE breakglass_leases.holder = excluded.holder \
                     OR breakglass_leases.expires_at_ms < $4",
                )
                .bind(name)
                .bind(holder)
                .bind(now_ms.saturating_add(ttl_ms))
                .bind(now_ms)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
                sqlx::query("DELETE FROM breakglass_leases WHERE name = $1 AND holder = $2")
                    .bind(name)
                    .bind(holder)
                    .execute(&self.pool)
                    .await?;
                Ok(())
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
