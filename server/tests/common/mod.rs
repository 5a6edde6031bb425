//! Test harness: a server on each database backend (SQLite always, PostgreSQL from
//! `BREAKGLASS_TEST_POSTGRES_URL`, a fresh database per test), and a small client that signs in
//! as the demo users and calls the router in-process with `oneshot`.
#![allow(dead_code, clippy::unwrap_used)]

pub mod audit;
pub mod metrics;
pub mod sse;
pub mod syslog;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use breakglass_server::config::{Config, FileConfig, ServeArgs};
use breakglass_server::state::{AppState, Context};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

/// One server under test.
pub struct TestServer {
    /// Which database backs it.
    pub backend: &'static str,
    /// The context (store, config).
    pub ctx: Arc<Context>,
    /// The router.
    pub app: Router,
    /// Data directory, removed on drop.
    pub dir: tempfile::TempDir,
}

/// Every backend the suite must pass on: SQLite, and PostgreSQL from [`postgres_admin`].
pub async fn servers() -> Vec<TestServer> {
    let mut out = vec![server("sqlite", None).await];
    if let Some(admin) = postgres_admin() {
        let url = fresh_pg_database(&admin).await;
        out.push(server("postgres", Some(url)).await);
    }
    out
}

/// The PostgreSQL admin URL (`BREAKGLASS_TEST_POSTGRES_URL`), which every test that runs on
/// both engines asks for. Without it the test fails, saying how to start PostgreSQL, so a
/// missing database cannot silently shrink the suite; only the explicit opt-out
/// `BREAKGLASS_TEST_SKIP_POSTGRES` gives `None`, and then the test says loudly, by name, that it
/// proved nothing about PostgreSQL.
pub fn postgres_admin() -> Option<String> {
    match std::env::var("BREAKGLASS_TEST_POSTGRES_URL") {
        Ok(admin) => Some(admin),
        Err(_) if std::env::var("BREAKGLASS_TEST_SKIP_POSTGRES").is_ok() => {
            let thread = std::thread::current();
            eprintln!(
                "WARNING: {} ran on SQLite only: PostgreSQL skipped because \
                 BREAKGLASS_TEST_SKIP_POSTGRES is set; nothing about PostgreSQL was tested",
                thread.name().unwrap_or("this test")
            );
            None
        }
        Err(_) => panic!(
            "BREAKGLASS_TEST_POSTGRES_URL is not set: start PostgreSQL with `scripts/postgres.sh start` \
             and export the URL it prints (or set BREAKGLASS_TEST_SKIP_POSTGRES=1 to skip it locally)"
        ),
    }
}

/// A new, empty PostgreSQL database next to `admin`'s; its URL.
pub async fn fresh_pg_database(admin: &str) -> String {
    use sqlx::Connection;
    let name = format!("bg_test_{}", uuid::Uuid::now_v7().simple());
    let mut conn = sqlx::PgConnection::connect(admin).await.unwrap();
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .unwrap();
    let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(admin);
    format!("{base}/{name}")
}

/// A configuration whose dev login lists `users` (name, group).
pub fn dev_users(users: &[(&str, &str)]) -> FileConfig {
    FileConfig {
        dev_login: breakglass_server::config::DevLoginConfig {
            enabled: true,
            users: users
                .iter()
                .map(|(name, group)| breakglass_server::config::DevUser {
                    name: (*name).into(),
                    groups: vec![(*group).into()],
                })
                .collect(),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// One server per backend (as [`servers`]) over the configuration `file` makes.
pub async fn servers_with(file: impl Fn() -> FileConfig) -> Vec<TestServer> {
    let mut out = vec![server_with("sqlite", None, file()).await];
    if let Some(admin) = postgres_admin() {
        let url = fresh_pg_database(&admin).await;
        out.push(server_with("postgres", Some(url), file()).await);
    }
    out
}

/// A dev-mode server with the demo users and environments: alice (engineers: request),
/// bob (sre: request, approve), carol (admins: everything); `dev` is Ground, `prod` Flight.
pub async fn server(backend: &'static str, database_url: Option<String>) -> TestServer {
    server_with(backend, database_url, FileConfig::default()).await
}

/// Like [`server`], over a given file configuration.
pub async fn server_with(
    backend: &'static str,
    database_url: Option<String>,
    file: FileConfig,
) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let args = ServeArgs {
        dev: true,
        // These tests run the API without clusters: requests wait in `Approved`.
        no_clusters: true,
        data_dir: Some(dir.path().to_path_buf()),
        database_url,
        static_dir: Some(dir.path().join("dist")),
        ..Default::default()
    };
    let config = Config::resolve(&args, file).unwrap();
    let ctx = Context::new(config, None).await.unwrap();
    let app = breakglass_server::app(AppState(ctx.clone()));
    TestServer {
        backend,
        ctx,
        app,
        dir,
    }
}

/// A response, decoded.
#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub body: Value,
    pub headers: axum::http::HeaderMap,
}

impl Resp {
    /// The error code of an error body.
    pub fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }
}

/// A signed-in (or anonymous) caller.
#[derive(Clone, Debug, Default)]
pub struct Caller {
    pub cookie: Option<String>,
    pub csrf: Option<String>,
}

/// The arguments of a dev-mode server whose data (SQLite included) lives in `dir`.
pub fn dev_args(dir: &std::path::Path) -> ServeArgs {
    ServeArgs {
        dev: true,
        data_dir: Some(dir.to_path_buf()),
        static_dir: Some(dir.join("dist")),
        ..Default::default()
    }
}

impl TestServer {
    /// The router over `ctx`, whose SQLite data lives in `dir`.
    pub fn over(ctx: Arc<Context>, dir: tempfile::TempDir) -> TestServer {
        TestServer {
            backend: "sqlite",
            app: breakglass_server::app(AppState(ctx.clone())),
            ctx,
            dir,
        }
    }

    /// POSTs a create request with `body`, whatever the answer.
    pub async fn try_create(&self, caller: &Caller, body: Value) -> Resp {
        self.send(caller, Method::POST, "/api/breakglass/sessions", Some(body))
            .await
    }

    /// Sends one request through the router.
    pub async fn send(
        &self,
        caller: &Caller,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Resp {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, "localhost");
        if let Some(c) = &caller.cookie {
            req = req.header(header::COOKIE, c);
        }
        if let Some(t) = &caller.csrf {
            req = req.header("x-csrf-token", t);
        }
        let req = match body {
            Some(b) => req
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(b.to_string()))
                .unwrap(),
            None => req.body(Body::empty()).unwrap(),
        };
        self.raw(req).await
    }

    /// Sends a prepared request.
    pub async fn raw(&self, req: Request<Body>) -> Resp {
        let res = self.app.clone().oneshot(req).await.unwrap();
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = res.into_body().collect().await.unwrap().to_bytes();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Resp {
            status,
            body,
            headers,
        }
    }

    /// Signs in as a demo user.
    pub async fn login(&self, user: &str) -> Caller {
        let r = self
            .send(
                &Caller::default(),
                Method::POST,
                "/api/breakglass/auth/dev-login",
                Some(serde_json::json!({ "user": user })),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "login {user}: {:?}", r.body);
        let cookie = r
            .headers
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or("").to_string())
            .collect::<Vec<_>>()
            .join("; ");
        Caller {
            cookie: Some(cookie),
            csrf: r.body["csrf_token"].as_str().map(String::from),
        }
    }

    /// Row counts of both tables.
    pub async fn counts(&self) -> (i64, i64) {
        self.ctx.store.counts().await.unwrap()
    }

    /// Creates a request as `caller` and returns the session JSON.
    pub async fn create(&self, caller: &Caller, env: &str) -> Value {
        let r = self
            .send(
                caller,
                Method::POST,
                "/api/breakglass/sessions",
                Some(request_body(env)),
            )
            .await;
        assert_eq!(
            r.status,
            StatusCode::CREATED,
            "{}: {:?}",
            self.backend,
            r.body
        );
        r.body
    }

    /// POSTs an action on a session.
    pub async fn act(&self, caller: &Caller, id: &str, action: &str, body: Option<Value>) -> Resp {
        self.send(
            caller,
            Method::POST,
            &format!("/api/breakglass/sessions/{id}/{action}"),
            body,
        )
        .await
    }
}

/// A valid request body for environment `env`.
pub fn request_body(env: &str) -> Value {
    serde_json::json!({
        "environment": env,
        "namespace": "shop",
        "pod": "web-7d9f-abcde",
        "mode": "live",
        "reason": "orders stuck in the payment worker since 09:10",
        "ticket": "https://tracker.example.com/INC-4711",
        "duration_minutes": 30,
    })
}

/// A kubeconfig for an API server at `server`, with a token (never sent anywhere real).
pub fn kubeconfig(dir: &std::path::Path, server: &str) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters: [{{name: c, cluster: {{server: \"{server}\", insecure-skip-tls-verify: true}}}}]\n\
             users: [{{name: u, user: {{token: t}}}}]\n\
             contexts: [{{name: c, context: {{cluster: c, user: u}}}}]\n"
        ),
    )
    .unwrap();
    path
}

/// A dev-mode server whose one environment, `dev` (Ground, alice may ask), is the cluster at
/// `api_server` (reached with a kubeconfig), with `extra` TOML before the environment.
pub async fn server_on_cluster(api_server: &str, extra: &str) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let path = kubeconfig(dir.path(), api_server);
    let file: FileConfig = toml::from_str(&format!(
        r#"{extra}
[[environments]]
name = "dev"
tier = "ground"
cluster = {{ kind = "kubeconfig", path = "{}" }}
[environments.permissions]
"tower.breakglass.request" = {{ groups = ["engineers"] }}
"tower.breakglass.terminate" = {{ groups = ["admins"] }}
"tower.breakglass.self" = {{ groups = ["admins"] }}
"#,
        path.display()
    ))
    .unwrap();
    let config = Config::resolve(&dev_args(dir.path()), file).unwrap();
    let clusters = breakglass_server::cluster::Clusters::from_config(&config);
    assert!(clusters.is_some(), "the environment has a cluster");
    let ctx = Context::with_clusters(config, clusters).await.unwrap();
    TestServer::over(ctx, dir)
}

/// The real server binary (`--dev --no-clusters`) on a loopback port with `config` as its
/// file, its data in `dir`: the process and the `host:port` it listens on. Kill it when done.
pub fn real_server(dir: &std::path::Path, config: &str) -> (std::process::Child, String) {
    use std::io::{BufRead as _, BufReader};
    use std::process::{Command, Stdio};

    let file = dir.join("breakglass.toml");
    std::fs::write(&file, config).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_breakglass-server"))
        .arg("--dev")
        .arg("--no-clusters")
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--data-dir")
        .arg(dir)
        .arg("--config")
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    // Read to the end: a closed pipe would fail the server's next line of output.
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(a) = line.strip_prefix("break-glass is listening: open http://") {
                let _ = tx.send(a.trim_end_matches('/').to_string());
            }
        }
    });
    let url = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the server says where it listens");
    (child, url)
}

/// The spec a stand-in cluster port gives a request: an empty document, hashed, admitted.
/// For tests whose cluster is not a real one; the rendering is tested in `cluster::spec`.
#[allow(dead_code)]
pub fn stand_in_spec(s: &breakglass_shared::Session) -> breakglass_shared::session::SessionSpec {
    let document = serde_json::json!({ "session": s.id.to_string() }).to_string();
    breakglass_shared::session::SessionSpec {
        sha256: breakglass_server::recording::sha256_hex(document.as_bytes()),
        document,
        summary: breakglass_shared::session::SpecSummary {
            image: "stand-in".into(),
            role: breakglass_shared::session::LIVE_ROLE.into(),
            subject: "stand-in".into(),
            target_container: s.target_container.clone(),
            process_access: false,
            privileged: false,
            ttl_minutes: s.granted_minutes(),
            pod_uid: String::new(),
            creates: "ephemeral container".into(),
        },
        dry_run: breakglass_shared::session::DryRun {
            admitted: Some(true),
            lines: vec![],
        },
    }
}
