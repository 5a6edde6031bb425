//! The recordings' search index in the database: chunks of each ended recording's lines (their
//! text compressed, each line's moment), the words of each chunk (SQLite FTS5, PostgreSQL
//! full-text search), which recordings are indexed, and the queue of those waiting (filled by
//! the database's own trigger when a session ends with a recording, migration 0016).
//!
//! The store finds candidate chunks by their words; which lines match, and so the hits, is the
//! caller's reading of the chunks (`crate::search`), the same on both engines.

use async_trait::async_trait;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::store::StoreError;

/// What a chunk holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum ChunkKind {
    /// Lines that were on the screen.
    Screen,
    /// Command lines the shell ran (the recording's `$ ...` markers).
    Command,
}

/// One chunk to store.
#[derive(Debug, Clone)]
pub struct NewChunk {
    /// Its place in the recording's chunks.
    pub seq: i64,
    /// What it holds.
    pub kind: ChunkKind,
    /// Each line's moment (the caller's encoding).
    pub lines_ms: Vec<u8>,
    /// The lines (the caller's encoding).
    pub body: Vec<u8>,
    /// The words the chunk is found by, separated by spaces.
    pub words: String,
}

/// A recording's index, written at once.
#[derive(Debug, Clone)]
pub struct IndexedRecording {
    /// The session.
    pub session_id: Uuid,
    /// When.
    pub at: OffsetDateTime,
    /// Size of the cast read.
    pub cast_bytes: i64,
    /// Lines stored.
    pub lines: i64,
    /// `indexed`, or why nothing was taken (`no recording`, ...).
    pub outcome: String,
    /// The chunks (none when nothing was taken).
    pub chunks: Vec<NewChunk>,
}

/// A term a chunk must hold (letters and digits only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// The term.
    pub text: String,
    /// Any term beginning with it matches.
    pub prefix: bool,
}

/// A chunk found by its terms.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct FoundChunk {
    /// The chunk's id: a page of candidates goes on below the last one's.
    pub id: i64,
    /// The session.
    pub session_id: Uuid,
    /// What it holds (`screen`, `command`).
    pub kind: String,
    /// Each line's moment.
    pub lines_ms: Vec<u8>,
    /// The lines.
    pub body: Vec<u8>,
}

/// Who may read which recordings: those of sessions in `environments`, and the caller's own.
#[derive(Debug, Clone)]
pub struct Readable {
    /// Environments whose recordings the caller may read.
    pub environments: Vec<String>,
    /// The caller (their own sessions' recordings).
    pub requester: String,
}

/// How much the index holds, for operators and the benchmark.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// Recordings indexed.
    pub recordings: i64,
    /// Recordings waiting.
    pub pending: i64,
    /// Cast bytes read by the indexer.
    pub cast_bytes: i64,
    /// Bytes the index takes in the database (tables and indexes).
    pub index_bytes: i64,
}

/// The search index's storage.
#[async_trait]
pub trait SearchStore: Send + Sync {
    /// Up to `limit` sessions whose recordings wait to be indexed, oldest queued first.
    async fn pending_recordings(&self, limit: i64) -> Result<Vec<Uuid>, StoreError>;
    /// Stores a recording's chunks and takes it off the queue, in one transaction (replacing
    /// chunks of an earlier version); `false` when it was no longer queued (another replica
    /// indexed it first: nothing written).
    async fn store_index(&self, index: &IndexedRecording) -> Result<bool, StoreError>;
    /// The chunks that hold every one of `terms`, of the recordings `readable` allows, the
    /// latest indexed first, at most `limit`, below chunk id `below` when given (the next page).
    async fn find_chunks(
        &self,
        terms: &[Term],
        readable: &Readable,
        below: Option<i64>,
        limit: i64,
    ) -> Result<Vec<FoundChunk>, StoreError>;
    /// How many recordings wait to be indexed.
    async fn pending_count(&self) -> Result<i64, StoreError>;
    /// The index's size (reads every page of the index on SQLite: for operators and the
    /// benchmark, not for each request).
    async fn index_stats(&self) -> Result<IndexStats, StoreError>;
}

/// The readable sessions' condition, `s` being the sessions table.
fn push_readable<'a, DB: sqlx::Database>(q: &mut sqlx::QueryBuilder<'a, DB>, readable: &'a Readable)
where
    String: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    q.push(" AND (s.requester = ")
        .push_bind(readable.requester.clone());
    if !readable.environments.is_empty() {
        q.push(" OR s.environment IN (");
        let mut list = q.separated(", ");
        for e in &readable.environments {
            list.push_bind(e.clone());
        }
        q.push(")");
    }
    q.push(")");
}

#[async_trait]
impl SearchStore for crate::store::SqliteStore {
    async fn pending_recordings(&self, limit: i64) -> Result<Vec<Uuid>, StoreError> {
        pending(&self.pool, limit).await
    }

    async fn pending_count(&self) -> Result<i64, StoreError> {
        pending_count(&self.pool).await
    }

    async fn store_index(&self, index: &IndexedRecording) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        if !take_queued(&mut tx, index.session_id).await? {
            return Ok(false);
        }
        sqlx::query(
            "DELETE FROM breakglass_recording_words WHERE rowid IN \
             (SELECT id FROM breakglass_recording_chunks WHERE session_id = $1)",
        )
        .bind(index.session_id)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM breakglass_recording_chunks WHERE session_id = $1")
            .bind(index.session_id)
            .execute(&mut *tx)
            .await?;
        for c in &index.chunks {
            let kind: &'static str = c.kind.into();
            let (id,): (i64,) = sqlx::query_as(
                "INSERT INTO breakglass_recording_chunks (session_id, seq, kind, lines_ms, body) \
                 VALUES ($1, $2, $3, $4, $5) RETURNING id",
            )
            .bind(index.session_id)
            .bind(c.seq)
            .bind(kind)
            .bind(&c.lines_ms)
            .bind(&c.body)
            .fetch_one(&mut *tx)
            .await?;
            sqlx::query("INSERT INTO breakglass_recording_words (rowid, words) VALUES ($1, $2)")
                .bind(id)
                .bind(c.words.as_str())
                .execute(&mut *tx)
                .await?;
        }
        insert_index_row(&mut tx, index).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn find_chunks(
        &self,
        terms: &[Term],
        readable: &Readable,
        below: Option<i64>,
        limit: i64,
    ) -> Result<Vec<FoundChunk>, StoreError> {
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        // Each term quoted (a `"` doubled); FTS5 walks the matching rowids newest first, so
        // the limit stops it early.
        let matching = terms
            .iter()
            .map(|t| {
                let quoted = format!("\"{}\"", t.text.replace('"', "\"\""));
                if t.prefix {
                    quoted + "*"
                } else {
                    quoted
                }
            })
            .collect::<Vec<_>>()
            .join(" AND ");
        let mut q = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
            "SELECT c.id, c.session_id, c.kind, c.lines_ms, c.body \
             FROM breakglass_recording_words w \
             JOIN breakglass_recording_chunks c ON c.id = w.rowid \
             JOIN breakglass_sessions s ON s.id = c.session_id \
             WHERE breakglass_recording_words MATCH ",
        );
        q.push_bind(matching);
        if let Some(below) = below {
            q.push(" AND w.rowid < ").push_bind(below);
        }
        push_readable(&mut q, readable);
        q.push(" ORDER BY w.rowid DESC LIMIT ").push_bind(limit);
        Ok(q.build_query_as().fetch_all(&self.pool).await?)
    }

    async fn index_stats(&self) -> Result<IndexStats, StoreError> {
        let (recordings, cast_bytes): (i64, Option<i64>) =
            sqlx::query_as("SELECT COUNT(*), SUM(cast_bytes) FROM breakglass_recording_index")
                .fetch_one(&self.pool)
                .await?;
        let pending = self.pending_count().await?;
        // The FTS5 table's own shadow tables are named after it.
        let (index_bytes,): (Option<i64>,) = sqlx::query_as(
            "SELECT SUM(pgsize) FROM dbstat WHERE name LIKE 'breakglass_recording_words%' \
             OR name = 'breakglass_recording_chunks' \
             OR name LIKE 'sqlite_autoindex_breakglass_recording_chunks%'",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(IndexStats {
            recordings,
            pending,
            cast_bytes: cast_bytes.unwrap_or(0),
            index_bytes: index_bytes.unwrap_or(0),
        })
    }
}

#[async_trait]
impl SearchStore for crate::store::PostgresStore {
    async fn pending_recordings(&self, limit: i64) -> Result<Vec<Uuid>, StoreError> {
        pending(&self.pool, limit).await
    }

    async fn pending_count(&self) -> Result<i64, StoreError> {
        pending_count(&self.pool).await
    }

    async fn store_index(&self, index: &IndexedRecording) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        if !take_queued(&mut tx, index.session_id).await? {
            return Ok(false);
        }
        sqlx::query("DELETE FROM breakglass_recording_chunks WHERE session_id = $1")
            .bind(index.session_id)
            .execute(&mut *tx)
            .await?;
        for c in &index.chunks {
            let kind: &'static str = c.kind.into();
            // The terms are already split as SQLite's tokenizer splits them, so the parser's
            // notion of paths or versions never joins what a query asks for apart.
            sqlx::query(
                "INSERT INTO breakglass_recording_chunks \
                 (session_id, seq, kind, lines_ms, body, words) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(index.session_id)
            .bind(c.seq)
            .bind(kind)
            .bind(&c.lines_ms)
            .bind(&c.body)
            .bind(c.words.as_str())
            .execute(&mut *tx)
            .await?;
        }
        insert_index_row(&mut tx, index).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn find_chunks(
        &self,
        terms: &[Term],
        readable: &Readable,
        below: Option<i64>,
        limit: i64,
    ) -> Result<Vec<FoundChunk>, StoreError> {
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        // The terms are letters and digits only (`breakglass_shared::search::words`), so they
        // need no quoting inside the query text.
        let matching = terms
            .iter()
            .map(|t| {
                if t.prefix {
                    format!("{}:*", t.text)
                } else {
                    t.text.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(" & ");
        // Two materialised steps: the chunks holding the terms, then the page, chosen by id
        // alone, so only the page's own chunks' texts are read out of TOAST, not those of every
        // chunk a common word matches. Left as one query, the planner may walk the primary key
        // backwards for `ORDER BY id DESC LIMIT` past thousands of chunks holding none of the
        // terms. The first step always goes through the GIN index: for a word on nearly every
        // screen the planner would rather scan the table, but that scan parses each chunk's
        // terms again (seconds at 1,000 recordings); the index's bitmap needs no parsing.
        let mut q = sqlx::QueryBuilder::<sqlx::Postgres>::new(
            "WITH hit AS MATERIALIZED (SELECT id, session_id FROM breakglass_recording_chunks \
             WHERE to_tsvector('simple'::regconfig, words) @@ to_tsquery('simple', ",
        );
        q.push_bind(matching).push(
            ")), page AS MATERIALIZED (SELECT hit.id FROM hit \
             JOIN breakglass_sessions s ON s.id = hit.session_id WHERE TRUE",
        );
        if let Some(below) = below {
            q.push(" AND hit.id < ").push_bind(below);
        }
        push_readable(&mut q, readable);
        q.push(" ORDER BY hit.id DESC LIMIT ").push_bind(limit);
        q.push(
            ") SELECT c.id, c.session_id, c.kind, c.lines_ms, c.body \
             FROM page JOIN breakglass_recording_chunks c ON c.id = page.id ORDER BY c.id DESC",
        );
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET LOCAL enable_seqscan = off")
            .execute(&mut *tx)
            .await?;
        let found = q.build_query_as().fetch_all(&mut *tx).await?;
        tx.commit().await?;
        Ok(found)
    }

    async fn index_stats(&self) -> Result<IndexStats, StoreError> {
        let (recordings, cast_bytes): (i64, Option<i64>) = sqlx::query_as(
            "SELECT COUNT(*), SUM(cast_bytes)::BIGINT FROM breakglass_recording_index",
        )
        .fetch_one(&self.pool)
        .await?;
        let pending = self.pending_count().await?;
        let (index_bytes,): (i64,) =
            sqlx::query_as("SELECT pg_total_relation_size('breakglass_recording_chunks')")
                .fetch_one(&self.pool)
                .await?;
        Ok(IndexStats {
            recordings,
            pending,
            cast_bytes: cast_bytes.unwrap_or(0),
            index_bytes,
        })
    }
}

/// The queue's head (both engines).
async fn pending<DB>(pool: &sqlx::Pool<DB>, limit: i64) -> Result<Vec<Uuid>, StoreError>
where
    DB: sqlx::Database,
    for<'c> &'c sqlx::Pool<DB>: sqlx::Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'r> (Uuid,): sqlx::FromRow<'r, DB::Row>,
{
    let rows: Vec<(Uuid,)> = sqlx::query_as::<DB, (Uuid,)>(
        "SELECT session_id FROM breakglass_recording_pending ORDER BY session_id LIMIT $1",
    )
    .bind(limit)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}

/// How many recordings wait (both engines).
async fn pending_count<DB>(pool: &sqlx::Pool<DB>) -> Result<i64, StoreError>
where
    DB: sqlx::Database,
    for<'c> &'c sqlx::Pool<DB>: sqlx::Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'r> (i64,): sqlx::FromRow<'r, DB::Row>,
{
    let (n,): (i64,) =
        sqlx::query_as::<DB, (i64,)>("SELECT COUNT(*) FROM breakglass_recording_pending")
            .fetch_one(pool)
            .await?;
    Ok(n)
}

/// Takes the recording off the queue in `tx`: false when it was not on it (another replica
/// stored it first, or it was queued again and taken since), and then nothing is stored.
async fn take_queued<DB>(tx: &mut sqlx::Transaction<'_, DB>, id: Uuid) -> Result<bool, StoreError>
where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> Uuid: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'r> (Uuid,): sqlx::FromRow<'r, DB::Row>,
{
    let queued: Option<(Uuid,)> = sqlx::query_as::<DB, (Uuid,)>(
        "DELETE FROM breakglass_recording_pending WHERE session_id = $1 RETURNING session_id",
    )
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(queued.is_some())
}

/// The recording's row in the list of those indexed (replacing an earlier version's).
async fn insert_index_row<DB>(
    tx: &mut sqlx::Transaction<'_, DB>,
    index: &IndexedRecording,
) -> Result<(), StoreError>
where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> Uuid: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> OffsetDateTime: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    sqlx::query::<DB>(
        "INSERT INTO breakglass_recording_index \
         (session_id, indexed_at, cast_bytes, lines, outcome) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (session_id) DO UPDATE SET indexed_at = excluded.indexed_at, \
         cast_bytes = excluded.cast_bytes, lines = excluded.lines, outcome = excluded.outcome",
    )
    .bind(index.session_id)
    .bind(index.at)
    .bind(index.cast_bytes)
    .bind(index.lines)
    .bind(index.outcome.as_str())
    .execute(&mut **tx)
    .await?;
    Ok(())
}
