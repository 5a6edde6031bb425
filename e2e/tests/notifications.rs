//! Notifications across process deaths, with real server processes on PostgreSQL and the real
//! receivers (`breakglass_e2e::receivers`): a replica killed while it holds undelivered
//! messages leaves them to the other replica, and a database restarted in the middle of a
//! delivery loses nothing; in both, every message arrives, each `webhook-id` once, verified by
//! the independent Standard Webhooks implementation.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use breakglass_e2e::postgres::{fresh_database, PrivatePostgres};
use breakglass_e2e::receivers::{clean, hooks, Receivers, SECRET};
use breakglass_e2e::server::{ApiClient, ServerProcess};
use serde_json::json;

/// Demo users, `dev` (Ground) and `prod` (Flight) without clusters, every event of both to the
/// webhook receiver; attempts bounded at 2 s.
fn config(rx: &Receivers) -> String {
    let perms = r#"[environments.permissions]
"tower.breakglass.request" = { groups = ["engineers", "sre", "admins"] }
"tower.breakglass.approve" = { groups = ["sre", "admins"] }
"tower.breakglass.terminate" = { groups = ["admins"] }
"#;
    format!(
        "sweep_interval_seconds = 1\n[dev_login]\nenabled = true\n\
         [notifications]\ntimeout_seconds = 2\nfirst_retry_seconds = 1\n\
         [[notifications.webhooks]]\nname = \"siem\"\nurl = \"http://127.0.0.1:{}/webhook\"\nsecret = \"{SECRET}\"\n\
         [[environments]]\nname = \"dev\"\ntier = \"ground\"\nnotify = [\"siem\"]\n{perms}\
         [[environments]]\nname = \"prod\"\ntier = \"flight\"\nnotify = [\"siem\"]\n{perms}",
        rx.http
    )
}

async fn request(alice: &ApiClient, env: &str) -> String {
    alice
        .create(json!({
            "environment": env, "namespace": "shop", "pod": "web-1", "mode": "live",
            "reason": "orders stuck in the payment worker since 09:10",
        }))
        .await
        .unwrap()
}

async fn start(
    dir: &std::path::Path,
    name: &str,
    config: &std::path::Path,
    db: &str,
) -> ServerProcess {
    let env = [
        ("BREAKGLASS_DATABASE_URL", db),
        ("BREAKGLASS_NO_CLUSTERS", "true"),
    ];
    ServerProcess::start(config, &dir.join(name), &env)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_replica_killed_with_undelivered_messages_leaves_them_to_the_other() {
    let rx = Receivers::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("server.toml");
    std::fs::write(&file, config(&rx)).unwrap();
    let db = fresh_database().await.unwrap();
    let mut a = start(dir.path(), "a", &file, &db).await;
    // The receiver hangs: replica `a` claims the rows and holds them, undelivered ...
    rx.mode("hang").await;
    let alice = a.login("alice").await.unwrap();
    let ids = [request(&alice, "prod").await, request(&alice, "prod").await];
    rx.until("a delivery under way", |log| {
        log.iter().any(|e| e["kind"] == "hung")
    })
    .await;
    // ... when `b` joins, and `a` is killed with its claims and nothing recorded.
    let b = start(dir.path(), "b", &file, &db).await;
    a.kill().await.unwrap();
    rx.mode("up").await;
    let log = rx
        .until("both requests told by the replica left", |log| {
            ids.iter()
                .all(|id| hooks(log, id, "session.requested").len() == 1)
        })
        .await;
    clean(&log);
    // The one left lists them as sent (its outcome is written just after the receiver took it).
    let carol = b.login("carol").await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (status, rows) = carol.get("/notifications/deliveries").await.unwrap();
        assert_eq!(status, 200, "{rows}");
        let rows = rows.as_array().unwrap();
        assert_eq!(rows.len(), 2, "{rows:#?}");
        if rows.iter().all(|r| r["state"] == "sent") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{rows:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_database_restarted_mid_delivery_loses_nothing() {
    let rx = Receivers::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("server.toml");
    std::fs::write(&file, config(&rx)).unwrap();
    let pg = PrivatePostgres::start().unwrap();
    let server = start(dir.path(), "one", &file, &pg.url).await;
    rx.mode("hang").await;
    let alice = server.login("alice").await.unwrap();
    let id = request(&alice, "prod").await;
    rx.until("a delivery under way", |log| {
        log.iter().any(|e| e["kind"] == "hung")
    })
    .await;
    // The database goes away while the attempt waits, and comes back after it timed out.
    pg.stop().unwrap();
    rx.mode("up").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !server.log_text().contains("did not answer in time") {
        assert!(
            std::time::Instant::now() < deadline,
            "the attempt never timed out:\n{}",
            server.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    pg.restart().unwrap();
    let alice = server.login("alice").await.unwrap();
    let other = request(&alice, "prod").await;
    let log = rx
        .until("both requests told after the restart", |log| {
            [&id, &other]
                .iter()
                .all(|i| hooks(log, i, "session.requested").len() == 1)
        })
        .await;
    clean(&log);
    assert!(
        !server.log_text().contains("panicked"),
        "{}",
        server.log_text()
    );
}

#[tokio::test]
async fn notify_test_sends_one_message_and_prints_the_answer() {
    let rx = Receivers::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("server.toml");
    std::fs::write(&file, config(&rx)).unwrap();
    let run = |receiver: &str| {
        let out = breakglass_e2e::server::cli_command(dir.path())
            .unwrap()
            .args(["notify", "test", receiver, "--config"])
            .arg(&file)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    };
    let (code, text) = run("siem");
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("webhook `siem` took the test message msg_") && text.contains(" 200 ok"),
        "{text}"
    );
    let log = rx
        .until("the test message", |log| {
            log.iter().any(|e| {
                e["kind"] == "webhook"
                    && e["payload"]["session"]["requester"] == "notification-test"
            })
        })
        .await;
    clean(&log);
    rx.mode("down").await;
    let (code, text) = run("siem");
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("did not take the test message") && text.contains("503"),
        "{text}"
    );
    let (code, text) = run("nobody");
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("no receiver `nobody`") && text.contains("siem"),
        "{text}"
    );
}
