//! SQLite backend: the embedded default, a file in the data directory, served by one server
//! process at a time.
//!
//! The single-replica rule is an exclusive `flock` on `<database>.lock`, taken by
//! [`Store::join`](crate::store::Store::join) (so the command-line tools that read the same
//! file while the server runs are not refused). The kernel drops the lock with its process, so
//! a server killed with SIGKILL never blocks the next start: a stale lock cannot exist, only
//! its text (the last holder's pid), which is overwritten.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{SqliteConnection, SqlitePool};
use tokio::sync::broadcast;

use crate::store::Notice;

/// How long a start waits for the previous holder of the lock to be gone before refusing.
const LOCK_GRACE: Duration = Duration::from_secs(3);

/// Sessions in a SQLite file.
#[derive(Debug)]
pub struct SqliteStore {
    pub(super) pool: SqlitePool,
    /// The database file; `None` in memory (nothing to share).
    file: Option<PathBuf>,
    /// The single-replica lock, once joined; released when the store is dropped.
    lock: Mutex<Option<File>>,
    /// Never sent on: there are no other replicas. Kept so receivers wait instead of closing.
    notices: broadcast::Sender<Notice>,
}

/// SQLite's expression of a session row as one JSON array of its columns, in [`FIXED`] then
/// [`MUTABLE`] order, which [`SessionRow`]'s `Deserialize` reads: the id, a BLOB, as hex
/// (JSON has no bytes); the rest as stored.
static JSON_ROW: LazyLock<String> = LazyLock::new(|| {
    let columns: Vec<&str> = FIXED
        .iter()
        .chain(MUTABLE)
        .map(|&c| if c == "id" { "hex(id)" } else { c })
        .collect();
    format!("json_array({})", columns.join(", "))
});

/// The frame of a list's query on SQLite: the page comes back as one JSON array of rows
/// ([`JSON_ROW`]), one value in one row (`store/page.rs` says why).
static PAGE_OPEN: LazyLock<String> =
    LazyLock::new(|| format!("SELECT json_group_array({}) FROM (", *JSON_ROW));

impl SqliteStore {
    /// See [`PAGE_OPEN`].
    fn page_around() -> (&'static str, &'static str) {
        (&PAGE_OPEN, ")")
    }

    /// The rows of a list's query framed by [`SqliteStore::page_around`], newest first.
    async fn fetch_page(
        &self,
        mut q: sqlx::QueryBuilder<'_, sqlx::Sqlite>,
    ) -> Result<Vec<SessionRow>, StoreError> {
        let page: String = q.build_query_scalar().fetch_one(&self.pool).await?;
        let mut rows: Vec<SessionRow> =
            serde_json::from_str(&page).map_err(|e| StoreError::Page(e.to_string()))?;
        // An aggregate's order is not the subquery's by any promise of SQL's: the ids' order
        // is (a BLOB compares as its bytes, as a `Uuid` does).
        rows.sort_unstable_by_key(|r| std::cmp::Reverse(r.id));
        Ok(rows)
    }

    /// After a bulk import: nothing. The list queries' plans were chosen for SQLite without
    /// statistics (`ANALYZE` is never run on this database), so gathering them here would
    /// change the plans the store was measured with.
    async fn after_import(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

impl SqliteStore {
    /// Opens (creating on first run) the database at `url` and migrates it.
    pub async fn connect(url: &str) -> Result<SqliteStore, StoreError> {
        let opts = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10));
        let path = opts.get_filename().to_path_buf();
        let in_memory = path.as_os_str().is_empty() || path.as_os_str() == ":memory:";
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir).map_err(sqlx::Error::Io)?;
            }
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(opts)
            .await?;
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        Ok(SqliteStore {
            pool,
            file: (!in_memory).then_some(path),
            lock: Mutex::new(None),
            notices: broadcast::channel(1).0,
        })
    }

    /// One replica: nobody to tell.
    async fn announce_change(
        &self,
        _conn: &mut SqliteConnection,
        _id: Uuid,
        _version: i64,
        _kind: &str,
    ) -> Result<(), StoreError> {
        Ok(())
    }

    /// One replica: nobody to tell.
    async fn announce(&self, _notice: &Notice) -> Result<(), StoreError> {
        Ok(())
    }

    async fn join_replicas(&self) -> Result<broadcast::Receiver<Notice>, StoreError> {
        if let Some(db) = &self.file {
            // A server that was just killed (a restart) may take a moment to be gone.
            let deadline = tokio::time::Instant::now() + LOCK_GRACE;
            let file = loop {
                match lock_single_replica(db) {
                    Err(StoreError::SingleReplica { .. })
                        if tokio::time::Instant::now() < deadline =>
                    {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    other => break other?,
                }
            };
            if let Ok(mut held) = self.lock.lock() {
                *held = Some(file);
            }
        }
        Ok(self.notices.subscribe())
    }
}

/// Takes the exclusive lock next to `db` and writes this process into it.
fn lock_single_replica(db: &std::path::Path) -> Result<File, StoreError> {
    let mut name = db.as_os_str().to_owned();
    name.push(".lock");
    let path = PathBuf::from(name);
    let err = |source| StoreError::Lock {
        path: path.display().to_string(),
        source,
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(err)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            let holder = match text.trim() {
                "" => "its process is unknown".to_string(),
                t => t.to_string(),
            };
            return Err(StoreError::SingleReplica {
                path: db.display().to_string(),
                holder,
            });
        }
        Err(TryLockError::Error(e)) => return Err(err(e)),
    }
    file.set_len(0).map_err(err)?;
    file.rewind().map_err(err)?;
    write!(file, "pid {}", std::process::id()).map_err(err)?;
    Ok(file)
}

/// How the outbox claim's select ends: SQLite serves one replica: nothing to skip.
const CLAIM_LOCK: &str = "";

/// How a worker takes staged notices: in their order of arrival; one replica, nothing to skip.
const STAGED_TAKE: &str = "DELETE FROM breakglass_outbox_staged WHERE seq IN \
     (SELECT seq FROM breakglass_outbox_staged ORDER BY seq LIMIT $1) \
     RETURNING event_key, kind, session_id, receivers, payload, created_at_ms";

/// How a change's event and notification INSERTs become one statement: SQLite runs the two
/// statements of one query in turn, its `?` parameters numbered on across them.
const EVENT_WITH_NOTICES: (&str, &str) = ("", "; ");

crate::store::sql_store!(SqliteStore, sqlx::Sqlite);
