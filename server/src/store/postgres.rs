//! PostgreSQL backend: the shared engine of several replicas, which hear each other through
//! `LISTEN/NOTIFY` on [`CHANNEL`](crate::store::CHANNEL).

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use sqlx::postgres::{PgListener, PgPoolOptions};
use sqlx::{Connection as _, PgConnection, PgPool};
use tokio::sync::broadcast;

use crate::store::notice::{self, Notice, CHANNEL};

/// Sessions in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pub(super) pool: PgPool,
    /// This process among the replicas: its own notices come back and are skipped.
    origin: Uuid,
    notices: broadcast::Sender<Notice>,
}

impl PostgresStore {
    /// A list's query as it is: PostgreSQL's driver reads rows without a handoff per row.
    fn page_around() -> (&'static str, &'static str) {
        ("", "")
    }

    /// The rows of a list's query, newest first.
    async fn fetch_page(
        &self,
        mut q: sqlx::QueryBuilder<'_, sqlx::Postgres>,
    ) -> Result<Vec<SessionRow>, StoreError> {
        Ok(q.build_query_as::<SessionRow>()
            .fetch_all(&self.pool)
            .await?)
    }

    /// After a bulk import: both tables vacuumed and their planner statistics brought up to
    /// date now, as PostgreSQL's documentation asks after a bulk load, rather than whenever
    /// autovacuum gets to them. Without statistics the planner guesses the tables' sizes (the
    /// list queries of 100,000 freshly imported sessions took 74 ms at p99 instead of a few),
    /// and without the vacuum the first reads of each imported page write its hint bits
    /// (BENCHMARKS.md). `VACUUM` cannot run in a transaction: a plain statement of its own.
    async fn after_import(&self) -> Result<(), StoreError> {
        sqlx::raw_sql("VACUUM (ANALYZE) breakglass_sessions, breakglass_events")
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Connects to `url` and migrates the schema.
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            // sqlx pings every connection it hands out by default: a round trip before each
            // query, a tenth of a replica's CPU with 333 terminals printing on it (BENCHMARKS.md,
            // "Three replicas"). A connection used within the last second is taken as alive;
            // one idle longer (the database may have restarted meanwhile) is still checked.
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for > PING_AFTER_IDLE {
                        conn.ping().await?;
                    }
                    Ok(true)
                })
            })
            .connect(url)
            .await?;
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        Ok(PostgresStore {
            pool,
            origin: Uuid::now_v7(),
            notices: broadcast::channel(1024).0,
        })
    }

    /// Tells the other replicas that `id` reached `version`, in the transaction `conn` is in
    /// (delivered at its commit, dropped with its rollback).
    async fn announce_change(
        &self,
        conn: &mut PgConnection,
        id: Uuid,
        version: i64,
        kind: &str,
    ) -> Result<(), StoreError> {
        let change = Notice::Changed {
            id,
            version,
            kind: kind.to_string(),
        };
        self.announce_in(conn, &change).await
    }

    /// Sends `notice` to the other replicas now.
    async fn announce(&self, notice: &Notice) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?;
        self.announce_in(&mut conn, notice).await
    }

    async fn announce_in(&self, conn: &mut PgConnection, n: &Notice) -> Result<(), StoreError> {
        if let Some(payload) = notice::encode(self.origin, n) {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(CHANNEL)
                .bind(payload)
                .execute(conn)
                .await?;
        }
        Ok(())
    }

    async fn join_replicas(&self) -> Result<broadcast::Receiver<Notice>, StoreError> {
        let listener = listen(&self.pool).await?;
        let rx = self.notices.subscribe();
        tokio::spawn(follow(
            self.pool.clone(),
            listener,
            self.origin,
            self.notices.clone(),
        ));
        Ok(rx)
    }
}

async fn listen(pool: &PgPool) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(CHANNEL).await?;
    Ok(listener)
}

/// Forwards the other replicas' notices until nobody listens here any more. A lost connection
/// is replaced (with backoff while the database is away) and reported as [`Notice::Missed`]
/// once listening again, so whoever re-reads then sees everything committed meanwhile.
async fn follow(
    pool: PgPool,
    mut listener: PgListener,
    origin: Uuid,
    notices: broadcast::Sender<Notice>,
) {
    let schedule = ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(5))
        .without_max_times();
    loop {
        let lost = match listener.try_recv().await {
            Ok(Some(n)) => {
                if let Some(notice) = notice::decode(origin, n.payload()) {
                    if notices.send(notice).is_err() {
                        return;
                    }
                }
                continue;
            }
            Ok(None) => "the connection closed".to_string(),
            Err(e) => e.to_string(),
        };
        tracing::warn!(error = %lost, "listening for the other replicas' changes stopped; reconnecting");
        let mut delays = schedule.build();
        listener = loop {
            match listen(&pool).await {
                Ok(l) => break l,
                Err(e) => {
                    let wait = delays.next().unwrap_or(Duration::from_secs(5));
                    tracing::warn!(error = %e, ?wait, "cannot listen for the other replicas' changes yet");
                    tokio::time::sleep(wait).await;
                }
            }
        };
        tracing::info!("listening for the other replicas' changes again; live views re-read");
        if notices.send(Notice::Missed).is_err() {
            return;
        }
    }
}

/// How long a pooled connection may sit unused before it is pinged on its next use.
const PING_AFTER_IDLE: Duration = Duration::from_secs(1);

/// How the outbox claim's select ends: each due row has one worker: a claim passes over rows another replica is claiming.
const CLAIM_LOCK: &str = " FOR UPDATE SKIP LOCKED";

/// How a worker takes staged notices: by their place in the heap (the table has no index, so
/// a change writes one tuple), passing over those another replica is taking.
const STAGED_TAKE: &str = "DELETE FROM breakglass_outbox_staged WHERE ctid = ANY(ARRAY(\
     SELECT ctid FROM breakglass_outbox_staged LIMIT $1 FOR UPDATE SKIP LOCKED)) \
     RETURNING event_key, kind, session_id, receivers, payload, created_at_ms";

/// How a change's event and notification INSERTs become one statement: the event INSERT as
/// a data-modifying WITH (run whether or not the outer INSERT reads it).
const EVENT_WITH_NOTICES: (&str, &str) = ("WITH event AS (", ") ");

crate::store::sql_store!(PostgresStore, sqlx::Postgres);
