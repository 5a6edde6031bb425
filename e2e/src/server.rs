//! The break-glass server under test: the real binary as a child process (so tests can kill
//! and restart it), configured against the test control plane, and a small HTTP client that
//! signs in as the demo users.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Path of the server binary: `BREAKGLASS_SERVER_BIN`, else built with cargo once, with the
/// `failpoints` feature the crash tests use (as scripts/test-env.sh builds it).
pub fn server_binary() -> anyhow::Result<PathBuf> {
    if let Ok(p) = std::env::var("BREAKGLASS_SERVER_BIN") {
        return Ok(PathBuf::from(p));
    }
    let root = crate::workspace_root();
    let status = std::process::Command::new(env!("CARGO"))
        .args([
            "build",
            "-q",
            "-p",
            "breakglass-server",
            "--features",
            "failpoints",
        ])
        .current_dir(&root)
        .status()
        .context("running cargo build -p breakglass-server --features failpoints")?;
    if !status.success() {
        bail!("cargo build -p breakglass-server --features failpoints failed");
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("target"));
    Ok(target.join("debug").join("breakglass-server"))
}

/// The variables of this process's environment that configure the server (`BREAKGLASS_*`,
/// `TOWER_*`): a server under test must see only what its test gives it, not what the shell
/// that ran the tests happened to export. Remove each from the child's command.
pub fn leaked_env() -> Vec<std::ffi::OsString> {
    std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| {
            let k = k.to_string_lossy();
            k.starts_with("BREAKGLASS_") || k.starts_with("TOWER_")
        })
        .collect()
}

/// The variable choosing the database engine the end-to-end servers run on: unset or `sqlite`
/// (each server's own file), or `postgres` (a fresh database per data directory on the test
/// PostgreSQL; `scripts/test.sh` runs the end-to-end suite once more this way).
pub const ENGINE_ENV: &str = "BREAKGLASS_E2E_ENGINE";

/// Under `BREAKGLASS_E2E_ENGINE=postgres`, the database of the server in `data_dir`: made on
/// its first start and kept in the directory, so a restarted server finds its data again.
/// `None` when the engine is SQLite, or when the test chose a database itself (in `env` or in
/// the `config` file).
async fn engine_database(
    config: &Path,
    data_dir: &Path,
    env: &[(&str, &str)],
) -> anyhow::Result<Option<String>> {
    match std::env::var(ENGINE_ENV).as_deref() {
        Ok("postgres") => {}
        Ok("sqlite") | Err(_) => return Ok(None),
        Ok(other) => bail!("{ENGINE_ENV}={other}: use sqlite or postgres"),
    }
    let chosen = env.iter().any(|(k, _)| *k == "BREAKGLASS_DATABASE_URL")
        || std::fs::read_to_string(config)?
            .lines()
            .any(|l| l.trim_start().starts_with("database_url"));
    if chosen {
        return Ok(None);
    }
    let kept = data_dir.join("e2e-database-url");
    if let Ok(url) = std::fs::read_to_string(&kept) {
        return Ok(Some(url));
    }
    let url = crate::postgres::fresh_database().await?;
    std::fs::write(&kept, &url)?;
    Ok(Some(url))
}

/// Under `BREAKGLASS_E2E_STORE=s3`, the bucket the server in `data_dir` records to; `None`
/// when recordings stay local, or when the test chose a store itself (`local_dir` in the
/// `config`, or the S3 variables in `env`).
fn engine_bucket(
    config: &Path,
    data_dir: &Path,
    env: &[(&str, &str)],
) -> anyhow::Result<Option<std::sync::Arc<crate::s3::Bucket>>> {
    if !crate::s3::wanted()? {
        return Ok(None);
    }
    let chosen = env
        .iter()
        .any(|(k, _)| k.starts_with("TOWER_BREAKGLASS_MINIO_"))
        || std::fs::read_to_string(config)?
            .lines()
            .any(|l| l.trim_start().starts_with("local_dir"));
    if chosen {
        return Ok(None);
    }
    crate::s3::bucket_for(data_dir).map(Some)
}

/// The server binary as a command-line tool (`verify-recording`, `logins`...) on the data of
/// the server in `data_dir`: a clean environment, plus the database and bucket that server
/// was given by the engine switches (`BREAKGLASS_E2E_ENGINE`, `BREAKGLASS_E2E_STORE`).
pub fn cli_command(data_dir: &Path) -> anyhow::Result<std::process::Command> {
    let mut cmd = std::process::Command::new(server_binary()?);
    for k in leaked_env() {
        cmd.env_remove(k);
    }
    if let Ok(url) = std::fs::read_to_string(data_dir.join("e2e-database-url")) {
        cmd.env("BREAKGLASS_DATABASE_URL", url);
    }
    cmd.envs(crate::s3::env_of(data_dir));
    Ok(cmd)
}

/// Runs the server's command line (`args`, then `--config config --data-dir data_dir`) on the
/// data of the server in `data_dir`, as [`cli_command`] sets it up; what it printed and how it
/// exited.
pub fn run_cli(
    data_dir: &Path,
    config: &Path,
    args: &[&str],
) -> anyhow::Result<std::process::Output> {
    Ok(cli_command(data_dir)?
        .args(args)
        .arg("--config")
        .arg(config)
        .arg("--data-dir")
        .arg(data_dir)
        .output()?)
}

/// The database URL of the server in `data_dir`: the PostgreSQL one the engine switch made,
/// else its SQLite file.
pub fn database_url_of(data_dir: &Path) -> String {
    std::fs::read_to_string(data_dir.join("e2e-database-url"))
        .unwrap_or_else(|_| format!("sqlite://{}", data_dir.join("breakglass.db").display()))
}

/// The variables that arm the server's crash injection (`server/src/failpoint.rs`).
const FAILPOINT_VARS: [&str; 2] = ["BREAKGLASS_FAILPOINT", "BREAKGLASS_PAUSE_AT"];

/// The line a server built with the `failpoints` feature logs before listening when one of
/// [`FAILPOINT_VARS`] is set (`failpoint::ARMED`).
const ARMED: &str = "crash injection armed";

/// An error at once when `env` arms a failpoint the server just started (its log from byte
/// `from`) did not announce: a binary built without the `failpoints` feature ignores the
/// variable, and the test would otherwise wait in vain for a crash or a pause.
fn check_armed(log: &Path, from: u64, env: &[(&str, &str)]) -> anyhow::Result<()> {
    let Some((var, step)) = env.iter().find(|(k, _)| FAILPOINT_VARS.contains(k)) else {
        return Ok(());
    };
    let text = std::fs::read(log)?;
    let since = text.get(usize::try_from(from)?..).unwrap_or_default();
    if String::from_utf8_lossy(since).contains(ARMED) {
        return Ok(());
    }
    bail!(
        "{var}={step} is set but the server binary did not arm it: it was built without the \
         `failpoints` cargo feature. Build it with `cargo build -p breakglass-server --features \
         failpoints` (scripts/test-env.sh does) or point BREAKGLASS_SERVER_BIN at such a build."
    )
}

/// A running server process.
pub struct ServerProcess {
    child: Child,
    /// The bucket it records to under `BREAKGLASS_E2E_STORE=s3` (kept running while it is).
    _bucket: Option<std::sync::Arc<crate::s3::Bucket>>,
    /// Base URL, e.g. `http://127.0.0.1:40123`.
    pub url: String,
    /// Everything it printed on stderr so far is appended here (for failure messages).
    pub log: PathBuf,
}

impl ServerProcess {
    /// Starts the binary with `config` (a TOML file) and `data_dir`, and optional extra
    /// environment variables (e.g. a failpoint); waits for its "listening" line.
    pub async fn start(
        config: &Path,
        data_dir: &Path,
        env: &[(&str, &str)],
    ) -> anyhow::Result<ServerProcess> {
        ServerProcess::start_on(config, data_dir, env, "127.0.0.1:0").await
    }

    /// Like [`ServerProcess::start`], listening on `listen` (for a configuration that must name
    /// the server's own address, e.g. an OIDC redirect URL).
    pub async fn start_on(
        config: &Path,
        data_dir: &Path,
        env: &[(&str, &str)],
        listen: &str,
    ) -> anyhow::Result<ServerProcess> {
        let bin = server_binary()?;
        std::fs::create_dir_all(data_dir)?;
        let log = data_dir.join("server.log");
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let log_start = log_file.metadata()?.len();
        let mut cmd = Command::new(&bin);
        cmd.arg("--config")
            .arg(config)
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--listen")
            .arg(listen)
            .env("RUST_LOG", "info,breakglass_server=debug")
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .kill_on_drop(true);
        for k in leaked_env() {
            cmd.env_remove(k);
        }
        if let Some(url) = engine_database(config, data_dir, env).await? {
            cmd.env("BREAKGLASS_DATABASE_URL", url);
        }
        let bucket = engine_bucket(config, data_dir, env)?;
        if let Some(b) = &bucket {
            cmd.envs(b.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
        let mut lines = BufReader::new(stdout).lines();
        let url = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await? {
                if let Some(rest) = line.strip_prefix("break-glass is listening: open ") {
                    return Ok::<_, anyhow::Error>(rest.trim_end_matches('/').to_string());
                }
            }
            bail!("server exited before listening")
        })
        .await
        .map_err(|_| anyhow!("server did not start listening within 60 s"))?
        .with_context(|| {
            format!(
                "the server's log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        })?;
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        check_armed(&log, log_start, env)?;
        Ok(ServerProcess {
            child,
            _bucket: bucket,
            url,
            log,
        })
    }

    /// Waits for the process to exit by itself (e.g. at a failpoint); its exit code.
    pub async fn wait_exit(&mut self, timeout: Duration) -> anyhow::Result<Option<i32>> {
        let status = tokio::time::timeout(timeout, self.child.wait())
            .await
            .map_err(|_| {
                anyhow!(
                    "server still running after {timeout:?}; log:\n{}",
                    self.log_text()
                )
            })??;
        Ok(status.code())
    }

    /// Kills it (SIGKILL) and waits.
    pub async fn kill(&mut self) -> anyhow::Result<()> {
        self.child.kill().await?;
        Ok(())
    }

    /// The process id while it runs (the benchmarks read its memory and CPU from `/proc`).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// The server's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A client signed in as demo user `user`.
    pub async fn login(&self, user: &str) -> anyhow::Result<ApiClient> {
        ApiClient::login(&self.url, user).await
    }
}

/// An HTTP client of the API, signed in as one user.
#[derive(Clone)]
pub struct ApiClient {
    http: reqwest::Client,
    jar: std::sync::Arc<reqwest::cookie::Jar>,
    base: String,
    csrf: String,
    /// The user.
    pub user: String,
}

impl ApiClient {
    /// Signs in as demo user `user` on the server at `base`.
    pub async fn login(base: &str, user: &str) -> anyhow::Result<ApiClient> {
        let jar = std::sync::Arc::new(reqwest::cookie::Jar::default());
        let http = reqwest::Client::builder()
            .cookie_provider(jar.clone())
            .build()?;
        let r = http
            .post(format!("{base}/api/breakglass/auth/dev-login"))
            .json(&json!({ "user": user }))
            .send()
            .await?;
        if !r.status().is_success() {
            bail!(
                "login as {user}: {} {}",
                r.status(),
                r.text().await.unwrap_or_default()
            );
        }
        let body: Value = r.json().await?;
        let csrf = body["csrf_token"]
            .as_str()
            .ok_or_else(|| anyhow!("no csrf token"))?
            .to_string();
        Ok(ApiClient {
            http,
            jar,
            base: base.to_string(),
            csrf,
            user: user.to_string(),
        })
    }

    /// POSTs `body` to an API path (under `/api/breakglass`); returns status and JSON.
    pub async fn post(&self, path: &str, body: Value) -> anyhow::Result<(u16, Value)> {
        let r = self
            .http
            .post(format!("{}/api/breakglass{path}", self.base))
            .header("x-csrf-token", &self.csrf)
            .json(&body)
            .send()
            .await?;
        let status = r.status().as_u16();
        Ok((status, r.json().await.unwrap_or(Value::Null)))
    }

    /// GETs an API path; returns status and JSON.
    pub async fn get(&self, path: &str) -> anyhow::Result<(u16, Value)> {
        let r = self
            .http
            .get(format!("{}/api/breakglass{path}", self.base))
            .send()
            .await?;
        let status = r.status().as_u16();
        Ok((status, r.json().await.unwrap_or(Value::Null)))
    }

    /// The `Cookie` header this client sends (for WebSocket upgrades).
    pub fn cookie_header(&self) -> String {
        use reqwest::cookie::CookieStore;
        self.base
            .parse()
            .ok()
            .and_then(|u| self.jar.cookies(&u))
            .and_then(|v| v.to_str().ok().map(String::from))
            .unwrap_or_default()
    }

    /// GETs an API path as text.
    pub async fn get_text(&self, path: &str) -> anyhow::Result<String> {
        Ok(self
            .http
            .get(format!("{}/api/breakglass{path}", self.base))
            .send()
            .await?
            .text()
            .await?)
    }

    /// GETs an API path as bytes, with its status and content type.
    pub async fn get_bytes(&self, path: &str) -> anyhow::Result<(u16, String, Vec<u8>)> {
        let r = self
            .http
            .get(format!("{}/api/breakglass{path}", self.base))
            .send()
            .await?;
        let status = r.status().as_u16();
        let kind = r
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        Ok((status, kind, r.bytes().await?.to_vec()))
    }

    /// Creates a request; returns the session id.
    pub async fn create(&self, body: Value) -> anyhow::Result<String> {
        let (status, v) = self.post("/sessions", body).await?;
        if status != 201 {
            bail!("create as {}: {status} {v}", self.user);
        }
        v["id"]
            .as_str()
            .map(String::from)
            .ok_or_else(|| anyhow!("no id in {v}"))
    }

    /// Approves request `id` as this user (no step-up); fails naming the answer otherwise.
    pub async fn approve(&self, id: &str) -> anyhow::Result<()> {
        let (status, v) = self
            .post(&format!("/sessions/{id}/approve"), json!({}))
            .await?;
        if status != 200 {
            bail!("approve {id} as {}: {status} {v}", self.user);
        }
        Ok(())
    }

    /// The session JSON.
    pub async fn session(&self, id: &str) -> anyhow::Result<Value> {
        let (status, v) = self.get(&format!("/sessions/{id}")).await?;
        if status != 200 {
            bail!("get {id}: {status} {v}");
        }
        Ok(v)
    }

    /// Waits, bounded, until the session is in one of `states`; returns its detail JSON.
    pub async fn wait_state(
        &self,
        id: &str,
        states: &[&str],
        timeout: Duration,
    ) -> anyhow::Result<Value> {
        let what = format!("session {id} in {states:?}");
        crate::wait_until(&what, timeout, || async {
            let d = self.session(id).await?;
            let st = d["session"]["state"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if states.contains(&st.as_str()) {
                Ok(Some(d))
            } else {
                Err(anyhow!(
                    "state is {st}; failure: {}",
                    d["session"]["failure"]
                ))
            }
        })
        .await
    }
}

/// A server configuration (TOML) with demo users and one environment per `(name, tier,
/// kubeconfig)`; sweep every second.
pub fn config_toml(envs: &[(&str, &str, &Path)], extra: &str) -> String {
    // The servers of one test binary share its control plane, each with its own database: to
    // any of them another's grant is an orphan (no session of its own names it), and at the
    // default age of 60 s a reconcile pass deleted the grant of a neighbour's one-minute
    // session while it ran. Tests of the reconciler set their own age (`Rig::config_with`).
    let mut s = String::from(
        "sweep_interval_seconds = 1\nactivation_timeout_seconds = 30\napproval_expiry_minutes = 60\norphan_min_age_seconds = 3600\n\n[dev_login]\nenabled = true\n\n",
    );
    s.push_str(extra);
    for (name, tier, kubeconfig) in envs {
        s.push_str(&format!(
            "\n[[environments]]\nname = \"{name}\"\ntier = \"{tier}\"\ncluster = {{ kind = \"kubeconfig\", path = \"{}\" }}\n\
             [environments.permissions]\n\
             \"tower.breakglass.request\" = {{ groups = [\"engineers\", \"sre\", \"admins\"] }}\n\
             \"tower.breakglass.approve\" = {{ groups = [\"sre\", \"admins\"] }}\n\
             \"tower.breakglass.terminate\" = {{ groups = [\"admins\"] }}\n\
             \"tower.breakglass.self\" = {{ groups = [\"admins\"] }}\n",
            kubeconfig.display()
        ));
    }
    s
}

/// Renders the guardrails of environment `env` with the server's own CLI
/// (`policies render --cluster ENV --identity USER --config FILE`) and applies them as the
/// cluster's admin.
pub async fn install_guardrails(
    cp: &crate::ControlPlane,
    config: &Path,
    env: &str,
    identity: &str,
) -> anyhow::Result<()> {
    let bin = server_binary()?;
    let out = std::process::Command::new(&bin)
        .args([
            "policies",
            "render",
            "--cluster",
            env,
            "--identity",
            identity,
            "--config",
        ])
        .arg(config)
        .output()?;
    if !out.status.success() {
        bail!(
            "policies render {env}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let admin = cp.client(crate::Identity::Admin).await?;
    crate::apply::apply_yaml(&admin, &String::from_utf8(out.stdout)?).await?;
    Ok(())
}
