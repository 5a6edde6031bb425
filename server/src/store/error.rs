//! [`StoreError`]: what storage can fail with, for both backends.

use breakglass_shared::SessionState;

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
    /// A page of sessions read as one JSON value (SQLite's list) does not read back: a stored
    /// value is not one the store writes (the row was edited by hand?). The text names the
    /// session's column.
    #[error("a listed session does not read back: {0}")]
    Page(String),
    /// Another server process already serves this SQLite database.
    #[error(
        "another break-glass server already serves the SQLite database {path} ({holder}); \
         SQLite serves one replica only: stop that server, or run several replicas on \
         PostgreSQL (database_url = \"postgres://...\")"
    )]
    SingleReplica {
        /// The database file.
        path: String,
        /// What the lock file says about its holder.
        holder: String,
    },
    /// The lock file of a SQLite database could not be used.
    #[error("cannot lock the SQLite database with {path}: {source}")]
    Lock {
        /// The lock file.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
}
