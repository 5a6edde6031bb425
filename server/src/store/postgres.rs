//! PostgreSQL backend.

use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;

/// Sessions in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
}

impl PostgresStore {
    /// Connects to `url` and migrates the schema.
    pub async fn connect(url: &str) -> Result<PostgresStore, crate::store::StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await?;
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        Ok(PostgresStore { pool })
    }
}

crate::store::sql_store!(PostgresStore, sqlx::Postgres);
