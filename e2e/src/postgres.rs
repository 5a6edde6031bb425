//! PostgreSQL for tests of several replicas: a fresh, empty database per test on the server
//! `scripts/postgres.sh start` runs (`BREAKGLASS_TEST_POSTGRES_URL`, the admin URL it prints).

use anyhow::{anyhow, Context as _};
use sqlx::Connection;

/// A new, empty database next to the admin one; its URL.
pub async fn fresh_database() -> anyhow::Result<String> {
    let admin = std::env::var("BREAKGLASS_TEST_POSTGRES_URL").map_err(|_| {
        anyhow!(
            "BREAKGLASS_TEST_POSTGRES_URL is not set: start PostgreSQL with \
             `eval \"export $(scripts/postgres.sh start)\"` (scripts/test.sh does)"
        )
    })?;
    let name = format!("bg_e2e_{}", uuid::Uuid::now_v7().simple());
    let mut conn = sqlx::PgConnection::connect(&admin)
        .await
        .with_context(|| format!("connecting to {admin}"))?;
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await?;
    let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b);
    Ok(format!("{base}/{name}"))
}
