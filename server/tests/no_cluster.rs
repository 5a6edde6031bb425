//! An environment with no cluster behind it: requests there fail at once, naming the
//! configuration key and the `doctor` command that fix it, and the sweep fails any left over;
//! `--no-clusters` keeps the old API-only behaviour (they wait in `Approved`), labelled as such.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use axum::http::Method;
use breakglass_server::config::{Config, ServeArgs};
use breakglass_server::state::Context;
use breakglass_shared::SessionState;
use serde_json::Value;

/// A server on the SQLite file in `dir`, with or without `--no-clusters`.
async fn server_in(dir: tempfile::TempDir, no_clusters: bool) -> common::TestServer {
    let args = ServeArgs {
        no_clusters,
        ..common::dev_args(dir.path())
    };
    let config = Config::resolve(&args, Default::default()).unwrap();
    let ctx = Context::new(config, None).await.unwrap();
    common::TestServer::over(ctx, dir)
}

const WHOAMI: &str = "/api/breakglass/whoami";

fn cluster_of(whoami: &Value, env: &str) -> Value {
    whoami["environments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == env)
        .unwrap()["cluster"]
        .clone()
}

#[tokio::test]
async fn a_request_where_no_cluster_is_configured_fails_at_once() {
    let s = server_in(tempfile::tempdir().unwrap(), false).await;
    let alice = s.login("alice").await;
    let whoami = s.send(&alice, Method::GET, WHOAMI, None).await.body;
    let cluster = cluster_of(&whoami, "dev");
    assert_eq!(cluster["status"], "missing", "{cluster}");
    assert!(
        cluster["fix"]
            .as_str()
            .unwrap()
            .contains("doctor --cluster dev"),
        "{cluster}"
    );

    let mut changes = s.ctx.changes.subscribe();
    let created = s.create(&alice, "dev").await;
    let id = created["id"].as_str().unwrap().to_string();
    let failed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let c = changes.recv().await.unwrap();
            if c.session.id.to_string() == id && c.session.state.is_final() {
                return c.session;
            }
        }
    })
    .await
    .expect("the request did not fail at once");
    assert_eq!(failed.state, SessionState::Failed);
    let failure = failed.failure.unwrap_or_default();
    assert!(
        failure.contains("no cluster configured") && failure.contains("doctor --cluster dev"),
        "{failure}"
    );
    assert!(failed.grant_name.is_none() && failed.recording.is_none());
}

#[tokio::test]
async fn no_clusters_keeps_requests_waiting_and_the_sweep_fails_them_once_it_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let parked = server_in(dir, true).await;
    let alice = parked.login("alice").await;
    let whoami = parked.send(&alice, Method::GET, WHOAMI, None).await.body;
    assert_eq!(cluster_of(&whoami, "dev")["status"], "api_only");
    let created = parked.create(&alice, "dev").await;
    let id: uuid::Uuid = created["id"].as_str().unwrap().parse().unwrap();
    let now = time::OffsetDateTime::now_utc();
    breakglass_server::sweep::sweep_once(&parked.ctx, now)
        .await
        .unwrap();
    let row = parked.ctx.store.get(id).await.unwrap().unwrap();
    assert_eq!(row.state, SessionState::Approved, "parked requests wait");

    // The same data without --no-clusters: the sweep fails the request left over. The first
    // server stops first (SQLite serves one server at a time).
    let common::TestServer { dir, ctx, app, .. } = parked;
    drop((ctx, app));
    let strict = server_in(dir, false).await;
    let report = breakglass_server::sweep::sweep_once(&strict.ctx, now)
        .await
        .unwrap();
    assert_eq!(report.driven, 1, "{report:?}");
    let row = strict.ctx.store.get(id).await.unwrap().unwrap();
    assert_eq!(row.state, SessionState::Failed);
    assert!(row
        .failure
        .unwrap_or_default()
        .contains("no cluster configured"));
}

#[tokio::test]
async fn a_configured_cluster_that_does_not_answer_says_so_with_the_fix() {
    // A port nobody listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let s = common::server_on_cluster(&format!("https://127.0.0.1:{port}"), "").await;
    // carol is an admin there (she may terminate and break the glass): she sees how the server
    // reaches the cluster, the client's error and the fix.
    let carol = s.login("carol").await;
    for _ in 0..2 {
        // The second look comes from the cache and says the same.
        let whoami = s.send(&carol, Method::GET, WHOAMI, None).await.body;
        let cluster = cluster_of(&whoami, "dev");
        assert_eq!(cluster["status"], "unreachable", "{cluster}");
        let through = cluster["reached_through"].as_str().unwrap();
        assert!(
            through.contains("kubeconfig /"),
            "an admin sees the kubeconfig's path: {cluster}"
        );
        assert!(!cluster["error"].as_str().unwrap().is_empty(), "{cluster}");
        assert!(
            cluster["fix"]
                .as_str()
                .unwrap()
                .contains("doctor --cluster dev"),
            "{cluster}"
        );
    }
    // alice only requests: she learns that it does not answer and whom to ask, not the
    // server's files or the cluster's address.
    let alice = s.login("alice").await;
    let whoami = s.send(&alice, Method::GET, WHOAMI, None).await.body;
    let cluster = cluster_of(&whoami, "dev");
    assert_eq!(cluster["status"], "unreachable", "{cluster}");
    assert_eq!(cluster["reached_through"], "a kubeconfig", "{cluster}");
    let text = cluster.to_string();
    let tmp = std::env::temp_dir();
    assert!(
        !text.contains(tmp.to_string_lossy().as_ref()),
        "a requester sees the server's files: {cluster}"
    );
    assert!(
        !text.contains("127.0.0.1") && !text.contains(&port.to_string()),
        "a requester sees the cluster's address: {cluster}"
    );
    assert!(
        cluster["fix"]
            .as_str()
            .unwrap()
            .contains("ask an administrator"),
        "{cluster}"
    );
}
