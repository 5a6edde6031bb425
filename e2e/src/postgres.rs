//! PostgreSQL for tests of several replicas: a fresh, empty database per test on the server
//! `scripts/postgres.sh start` runs (`BREAKGLASS_TEST_POSTGRES_URL`, the admin URL it prints),
//! or a private server for a test that restarts the database.

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

/// Drops a database [`fresh_database`] made, closing what is still connected to it: the
/// benchmarks' stores of a million sessions are a gigabyte each, too much to leave behind on
/// every run. Tests leave theirs, to be read after a failure.
pub async fn drop_database(url: &str) -> anyhow::Result<()> {
    let admin = std::env::var("BREAKGLASS_TEST_POSTGRES_URL")
        .context("BREAKGLASS_TEST_POSTGRES_URL is not set")?;
    let name = url
        .rsplit_once('/')
        .map(|(_, n)| n)
        .filter(|n| {
            n.starts_with("bg_e2e_") && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
        .ok_or_else(|| anyhow!("{url} is not a database fresh_database made"))?;
    let mut conn = sqlx::PgConnection::connect(&admin).await?;
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .execute(&mut conn)
        .await?;
    Ok(())
}

/// A PostgreSQL server of one test's own (`scripts/postgres.sh` with a private directory and a
/// free port), for a test that stops and starts the database under a running server, which
/// the shared one, used by every other test, must never be. Stopped when dropped.
pub struct PrivatePostgres {
    dir: tempfile::TempDir,
    port: u16,
    /// The URL of its `postgres` database.
    pub url: String,
}

impl PrivatePostgres {
    /// Initialises and starts one.
    pub fn start() -> anyhow::Result<PrivatePostgres> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let pg = PrivatePostgres {
            dir: tempfile::tempdir()?,
            port,
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
        };
        pg.run("start")?;
        Ok(pg)
    }

    /// Stops it (fast shutdown: connections are cut, as in a database restart).
    pub fn stop(&self) -> anyhow::Result<()> {
        self.run("stop")
    }

    /// Starts it again after [`PrivatePostgres::stop`], on the same data and port.
    pub fn restart(&self) -> anyhow::Result<()> {
        self.run("start")
    }

    fn run(&self, cmd: &str) -> anyhow::Result<()> {
        let script = crate::script("postgres.sh");
        let out = std::process::Command::new(&script)
            .arg(cmd)
            .env("BREAKGLASS_PG_DIR", self.dir.path())
            .env("BREAKGLASS_PG_PORT", self.port.to_string())
            .output()
            .with_context(|| format!("running {}", script.display()))?;
        if !out.status.success() {
            anyhow::bail!(
                "scripts/postgres.sh {cmd} (port {}): {}",
                self.port,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
