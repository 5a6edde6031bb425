//! The live event stream (`GET /events`, Server-Sent Events) over a real TCP listener, on both
//! databases: a change reaches the people who may see its environment and nobody else, and the
//! open-streams gauge follows the streams that are open.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use breakglass_server::config::{demo_environments, FileConfig};
use breakglass_shared::Permission;
use common::sse::{serve, Live};
use common::TestServer;
use serde_json::Value;
use tokio::time::{timeout, Instant};

/// The demo environments, with alice (engineers: request), bob (sre: request and approve) and
/// dave, whose group may only request in `dev`: nothing of `prod` is his to see, and his own
/// `dev` request is the sentinel that proves his stream skipped what came before it.
fn file() -> FileConfig {
    FileConfig {
        environments: demo_environments()
            .into_iter()
            .map(|mut e| {
                if e.name == "dev" {
                    if let Some(h) = e.permissions.get_mut(Permission::Request.name()) {
                        h.groups.push("visitors".into());
                    }
                }
                e
            })
            .collect(),
        ..common::dev_users(&[("alice", "engineers"), ("bob", "sre"), ("dave", "visitors")])
    }
}

/// One server per backend, as `common::servers` but over [`file`].
async fn servers() -> Vec<TestServer> {
    common::servers_with(file).await
}

impl Live {
    /// The `breakglass_sse_streams_open` gauge as `/metrics` shows it.
    async fn open_streams(&self) -> i64 {
        let text = self
            .client
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("breakglass_sse_streams_open "))
            .map(|v| v.trim().parse().unwrap())
            .expect("the gauge is exported")
    }

    /// Polls the gauge until it reads `want`, for at most `within`.
    async fn wait_open_streams(&self, want: i64, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let now = self.open_streams().await;
            if now == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "breakglass_sse_streams_open stayed at {now}, expected {want}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_reaches_those_who_may_see_it_and_nobody_else() {
    for s in servers().await {
        let live = serve(&s).await;
        let alice = s.login("alice").await;
        let bob = s.login("bob").await;
        let dave = s.login("dave").await;
        assert_eq!(live.open_streams().await, 0, "{}", s.backend);

        let mut bob_events = live.events(&bob).await;
        live.wait_open_streams(1, Duration::from_secs(5)).await;
        let mut dave_events = live.events(&dave).await;
        live.wait_open_streams(2, Duration::from_secs(5)).await;

        let created = s.create(&alice, "prod").await;
        let id = created["id"].as_str().unwrap().to_string();
        assert_eq!(created["state"], "PendingApproval");

        let change = bob_events
            .session_event(&id, "create", Duration::from_secs(10))
            .await
            .unwrap_or_else(|| panic!("{}: bob got no `session` event for {id}", s.backend));
        assert_eq!(change["session"]["id"], id.as_str());
        assert_eq!(change["kind"], "create");
        assert_eq!(change["session"]["environment"], "prod");
        assert_eq!(change["session"]["state"], "PendingApproval");
        assert_eq!(change["session"]["requester"], "alice");

        // Dave holds nothing in prod. Changes reach every stream in order, so the first event
        // dave gets must be his own later request in dev: had alice's reached him, it would
        // come first (no wait on a clock decides this).
        let sentinel = s.create(&dave, "dev").await;
        let sentinel = sentinel["id"].as_str().unwrap().to_string();
        let first = dave_events
            .next(Duration::from_secs(10))
            .await
            .unwrap_or_else(|| panic!("{}: dave got not even his own request", s.backend));
        assert_eq!(first.event, "session", "{}: {first:?}", s.backend);
        let first: Value = serde_json::from_str(&first.data).unwrap();
        assert_eq!(
            first["session"]["id"],
            sentinel.as_str(),
            "{}: dave, who may see nothing of prod, got {first}",
            s.backend
        );

        // A later change (bob approves) arrives as well, in order.
        let r = s.act(&bob, &id, "approve", None).await;
        assert_eq!(r.status, 200, "{}: {:?}", s.backend, r.body);
        let change = bob_events
            .session_event(&id, "approve", Duration::from_secs(10))
            .await
            .unwrap_or_else(|| panic!("{}: bob got no approve event", s.backend));
        assert_eq!(change["session"]["state"], "Approved");
        assert_eq!(change["session"]["approver"], "bob");

        // Clients that go away are noticed (at the latest at the next keep-alive, 15 s).
        drop(bob_events);
        drop(dave_events);
        live.wait_open_streams(0, Duration::from_secs(25)).await;
    }
}

/// The streams share one rendering of each change (`http::events::Fanout`): every open stream
/// gets it once, and the rendering outlives a time with no stream open, so a stream opened
/// afterwards is served too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_stream_gets_each_change_once_even_after_none_was_open() {
    for s in servers().await {
        let live = serve(&s).await;
        let alice = s.login("alice").await;
        let bob = s.login("bob").await;
        let mut first = live.events(&bob).await;
        live.wait_open_streams(1, Duration::from_secs(5)).await;
        let id = s.create(&alice, "prod").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        first
            .session_event(&id, "create", Duration::from_secs(10))
            .await
            .unwrap_or_else(|| panic!("{}: the first stream got no event", s.backend));
        drop(first);
        live.wait_open_streams(0, Duration::from_secs(25)).await;

        // A change while nobody listens, then three streams of two people.
        let unseen = s.create(&alice, "prod").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        let mut streams = [
            live.events(&bob).await,
            live.events(&bob).await,
            live.events(&alice).await,
        ];
        live.wait_open_streams(3, Duration::from_secs(5)).await;
        let id = s.create(&alice, "prod").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        for (i, st) in streams.iter_mut().enumerate() {
            // The first event is this change: not the one made while no stream was open.
            let ev = st
                .next(Duration::from_secs(10))
                .await
                .unwrap_or_else(|| panic!("{}: stream {i} got no event for {id}", s.backend));
            assert_eq!(ev.event, "session", "{}: stream {i}: {ev:?}", s.backend);
            let change: Value = serde_json::from_str(&ev.data).unwrap();
            assert_eq!(
                change["session"]["id"],
                id.as_str(),
                "{}: stream {i}",
                s.backend
            );
            assert_eq!(change["session"]["state"], "PendingApproval");
            // And it came once.
            if let Some(ev) = st.next(Duration::from_millis(500)).await {
                panic!(
                    "{}: stream {i} got a second event {ev:?} ({unseen} was unseen)",
                    s.backend
                );
            }
        }
    }
}

#[tokio::test]
async fn the_stream_needs_a_sign_in() {
    for s in servers().await {
        let live = serve(&s).await;
        let r = timeout(
            Duration::from_secs(10),
            live.client
                .get(format!("{}/api/breakglass/events", live.base))
                .send(),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(r.status(), 401, "{}", s.backend);
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["code"], "unauthenticated", "{}", s.backend);
        assert_eq!(live.open_streams().await, 0, "{}", s.backend);
    }
}

/// Two replicas on one PostgreSQL database, each with its own data directory (so nothing but
/// the database is shared): alice's request on A reaches bob's stream on B, bob's approval on
/// B reaches alice's stream on A. When the database drops the connections the replicas listen
/// on, every stream is told `lagged` (refetch), and changes flow again once they reconnected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_on_one_replica_reach_the_streams_of_the_other() {
    let Some(admin) = common::postgres_admin() else {
        return;
    };
    let url = common::fresh_pg_database(&admin).await;
    let a = common::server_with("postgres", Some(url.clone()), file()).await;
    let b = common::server_with("postgres", Some(url.clone()), file()).await;
    let (live_a, live_b) = (serve(&a).await, serve(&b).await);
    let alice = a.login("alice").await;
    let bob = b.login("bob").await;
    let mut alice_events = live_a.events(&alice).await;
    let mut bob_events = live_b.events(&bob).await;
    live_a.wait_open_streams(1, Duration::from_secs(5)).await;
    live_b.wait_open_streams(1, Duration::from_secs(5)).await;

    let created = a.create(&alice, "prod").await;
    let id = created["id"].as_str().unwrap().to_string();
    let change = bob_events
        .session_event(&id, "create", Duration::from_secs(10))
        .await
        .expect("bob, on B, sees alice's request made on A");
    assert_eq!(change["session"]["state"], "PendingApproval");
    assert_eq!(change["session"]["requester"], "alice");

    let r = b.act(&bob, &id, "approve", None).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let change = alice_events
        .session_event(&id, "approve", Duration::from_secs(10))
        .await
        .expect("alice, on A, sees bob's approval made on B");
    assert_eq!(change["session"]["state"], "Approved");
    assert_eq!(change["session"]["approver"], "bob");

    // The database ends the listening connections (a failover, a proxy's idle cut): what was
    // committed meanwhile may be lost, so every stream is told to refetch.
    let db = url.rsplit('/').next().unwrap().to_string();
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&admin)
        .await
        .unwrap();
    let cut: Vec<(bool,)> = sqlx::query_as(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = $1 AND query LIKE 'LISTEN%'",
    )
    .bind(&db)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(cut.len(), 2, "one listening connection per replica");
    for (who, events) in [("alice", &mut alice_events), ("bob", &mut bob_events)] {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let ev = events
                .next(left)
                .await
                .unwrap_or_else(|| panic!("{who}'s stream was never told `lagged`"));
            if ev.event == "lagged" {
                break;
            }
        }
    }
    // Listening again: a change on A reaches B.
    let second = a.create(&alice, "prod").await;
    let id = second["id"].as_str().unwrap().to_string();
    bob_events
        .session_event(&id, "create", Duration::from_secs(10))
        .await
        .expect("after the reconnect, changes on A reach B again");
}

/// SQLite serves one replica: a second server on the same file is refused with a message that
/// says why and what to use instead; the lock a crashed server leaves (its file, no holder)
/// does not block the next start.
#[tokio::test]
async fn a_second_server_on_one_sqlite_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let args = breakglass_server::config::ServeArgs {
        data_dir: Some(dir.path().to_path_buf()),
        no_clusters: true,
        ..Default::default()
    };
    let config = || breakglass_server::config::Config::resolve(&args, file()).unwrap();
    // What a server killed with SIGKILL leaves behind: the lock file, held by nobody.
    std::fs::write(dir.path().join("breakglass.db.lock"), "pid 4194304").unwrap();
    let first = breakglass_server::state::Context::new(config(), None)
        .await
        .expect("a lock file without a live holder does not block the start");
    let Err(e) = breakglass_server::state::Context::new(config(), None).await else {
        panic!("a second server on the same SQLite file started");
    };
    let msg = e.to_string();
    assert!(msg.contains("SQLite serves one replica only"), "{msg}");
    assert!(msg.contains("PostgreSQL"), "{msg}");
    assert!(
        msg.contains(&format!("pid {}", std::process::id())),
        "names the holder: {msg}"
    );
    drop(first);
}

/// Requests succeed after the database dropped every connection of the server (a restart, a
/// failover, a proxy's idle cut), now that the pool no longer pings each connection before
/// every query (`store/postgres.rs`, `PING_AFTER_IDLE`: only one unused for a second). In a
/// run with that ping disabled altogether this passed too: the dead connections are also
/// found and replaced by the server's own background queries before these requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_succeed_after_the_database_dropped_every_connection() {
    let Some(admin) = common::postgres_admin() else {
        return;
    };
    let url = common::fresh_pg_database(&admin).await;
    let s = common::server_with("postgres", Some(url.clone()), file()).await;
    let alice = s.login("alice").await;
    s.create(&alice, "dev").await;
    let db = url.rsplit('/').next().unwrap().to_string();
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&admin)
        .await
        .unwrap();
    let cut: Vec<(i32,)> = sqlx::query_as(
        "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
    )
    .bind(&db)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert!(!cut.is_empty(), "the server holds connections to {db}");
    let pids: Vec<i32> = cut.into_iter().map(|(p,)| p).collect();
    sqlx::query("SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid")
        .bind(&pids)
        .execute(&mut conn)
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (left,): (i64,) =
            sqlx::query_as("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)")
                .bind(&pids)
                .fetch_one(&mut conn)
                .await
                .unwrap();
        if left == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{left} backends still there");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The pool's connections are dead now, and each has sat unused for longer than the
    // second after which it is pinged before use (this wait is that condition itself).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Each asserts its 201.
    for _ in 0..3 {
        s.create(&alice, "dev").await;
    }
}
