//! Locks, the security team's switch, on both engines: an admin locks an environment and
//! nothing runs or starts there (requests expire, new ones and decisions are refused with the
//! lock's reason, every page's environment list shows it) until it is unlocked, by two admins
//! on Flight; a person's lock does the same for them everywhere; a lock written by the command
//! line (only the database tells the server) is enforced within a pass; all of it is in the
//! history.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use axum::http::{Method, StatusCode};
use breakglass_shared::lock::LockScope;
use common::{Caller, Resp, TestServer};
use serde_json::{json, Value};

/// The demo users and environments, plus dan, a second admin.
async fn servers() -> Vec<TestServer> {
    common::servers_with(|| {
        common::dev_users(&[
            ("alice", "engineers"),
            ("bob", "sre"),
            ("carol", "admins"),
            ("dan", "admins"),
        ])
    })
    .await
}

async fn post(s: &TestServer, who: &Caller, path: &str, reason: &str) -> Resp {
    s.send(
        who,
        Method::POST,
        &format!("/api/breakglass{path}"),
        Some(json!({ "reason": reason })),
    )
    .await
}

async fn state_of(s: &TestServer, who: &Caller, id: &str) -> Value {
    let r = s
        .send(
            who,
            Method::GET,
            &format!("/api/breakglass/sessions/{id}"),
            None,
        )
        .await;
    r.body["session"]["state"].clone()
}

/// The lock `whoami` shows on environment `env`.
async fn shown_lock(s: &TestServer, who: &Caller, env: &str) -> Value {
    let me = s
        .send(who, Method::GET, "/api/breakglass/whoami", None)
        .await;
    me.body["environments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == env)
        .map(|e| e["lock"].clone())
        .unwrap()
}

#[tokio::test]
async fn an_environment_lock_stops_everything_there_until_two_admins_lift_it() {
    for s in servers().await {
        let b = s.backend;
        let (alice, bob) = (s.login("alice").await, s.login("bob").await);
        let (carol, dan) = (s.login("carol").await, s.login("dan").await);
        let waiting = s.create(&alice, "prod").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        let elsewhere = s.create(&alice, "dev").await["id"]
            .as_str()
            .unwrap()
            .to_string();

        // Only an admin of prod may lock it; a reason is required.
        let r = post(&s, &bob, "/environments/prod/lock", "incident").await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{b}: {:?}", r.body);
        let r = post(&s, &carol, "/environments/prod/lock", " ").await;
        assert_eq!(
            (r.status, r.body["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("reason")),
            "{b}"
        );
        let r = post(
            &s,
            &carol,
            "/environments/prod/lock",
            "INC-7 credential leak",
        )
        .await;
        assert_eq!(r.status, StatusCode::CREATED, "{b}: {:?}", r.body);
        let r = post(&s, &dan, "/environments/prod/lock", "again").await;
        assert_eq!(r.status, StatusCode::CONFLICT, "{b}: {:?}", r.body);

        // What waited there expired at once; what is elsewhere goes on.
        assert_eq!(state_of(&s, &alice, &waiting).await, "Expired", "{b}");
        assert_eq!(state_of(&s, &alice, &elsewhere).await, "Approved", "{b}");
        // Nothing new starts: a request is refused with the lock's reason, nothing written.
        let before = s.counts().await;
        let r = s.try_create(&alice, common::request_body("prod")).await;
        assert_eq!(
            (r.status.as_u16(), r.code()),
            (423, "locked"),
            "{b}: {:?}",
            r.body
        );
        assert!(
            r.body["message"]
                .as_str()
                .unwrap()
                .contains("INC-7 credential leak"),
            "{b}"
        );
        assert_eq!(s.counts().await, before, "{b}: nothing written");
        // Everyone who sees prod sees the lock.
        assert_eq!(
            shown_lock(&s, &alice, "prod").await["reason"],
            "INC-7 credential leak",
            "{b}"
        );
        assert_eq!(shown_lock(&s, &alice, "dev").await, Value::Null, "{b}");

        // Flight: the first admin asks, the same admin cannot confirm, a second one does.
        let r = post(&s, &carol, "/environments/prod/unlock", "contained").await;
        assert_eq!(
            (r.status, &r.body["lifted"]),
            (StatusCode::OK, &json!(false)),
            "{b}: {:?}",
            r.body
        );
        let r = post(&s, &carol, "/environments/prod/unlock", "contained").await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{b}: {:?}", r.body);
        assert_eq!(
            shown_lock(&s, &alice, "prod").await["unlock"]["by"],
            "carol",
            "{b}"
        );
        let r = post(
            &s,
            &dan,
            "/environments/prod/unlock",
            "confirmed, contained",
        )
        .await;
        assert_eq!(
            (r.status, &r.body["lifted"]),
            (StatusCode::OK, &json!(true)),
            "{b}: {:?}",
            r.body
        );
        assert_eq!(shown_lock(&s, &alice, "prod").await, Value::Null, "{b}");
        s.create(&alice, "prod").await;
        let r = post(&s, &dan, "/environments/prod/unlock", "twice").await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{b}: {:?}", r.body);

        // Ground: one admin lifts it.
        assert_eq!(
            post(&s, &carol, "/environments/dev/lock", "drill")
                .await
                .status,
            StatusCode::CREATED
        );
        assert_eq!(state_of(&s, &alice, &elsewhere).await, "Expired", "{b}");
        let r = post(&s, &carol, "/environments/dev/unlock", "drill over").await;
        assert_eq!(r.body["lifted"], true, "{b}: {:?}", r.body);

        let history: Vec<(LockScope, String, String, String)> = s
            .ctx
            .store
            .lock_events()
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.scope, e.target, e.kind, e.actor))
            .collect();
        let env =
            |t: &str, k: &str, a: &str| (LockScope::Environment, t.into(), k.into(), a.into());
        assert_eq!(
            history,
            [
                env("prod", "locked", "carol"),
                env("prod", "unlock_asked", "carol"),
                env("prod", "unlocked", "dan"),
                env("dev", "locked", "carol"),
                env("dev", "unlocked", "carol"),
            ],
            "{b}"
        );
    }
}

/// A person's lock, written as the command line writes it (straight into the database, which
/// is all the server hears): their approved session expires at the server's next check, and
/// they may start nothing anywhere; others go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_s_lock_from_the_command_line_stops_them_everywhere() {
    for s in servers().await {
        let b = s.backend;
        let (alice, bob, carol) = (
            s.login("alice").await,
            s.login("bob").await,
            s.login("carol").await,
        );
        let id = s.create(&alice, "dev").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        let now = time::OffsetDateTime::now_utc();
        breakglass_server::locks::lock(
            s.ctx.store.as_ref(),
            &s.ctx.config,
            LockScope::User,
            "alice",
            "security",
            "laptop stolen",
            now,
        )
        .await
        .unwrap();
        wait_state(&s, &alice, &id, "Expired").await;
        for env in ["dev", "prod"] {
            let r = s.try_create(&alice, common::request_body(env)).await;
            assert_eq!(r.status.as_u16(), 423, "{b} {env}: {:?}", r.body);
            assert!(
                r.body["message"]
                    .as_str()
                    .unwrap()
                    .contains("laptop stolen"),
                "{b}"
            );
        }
        s.create(&bob, "dev").await;
        // Only an admin of every environment may lock or unlock a person; on a server with a
        // Flight environment it takes two.
        let r = post(&s, &bob, "/users/alice/unlock", "found it").await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{b}: {:?}", r.body);
        let r = post(&s, &carol, "/users/alice/unlock", "found it").await;
        assert_eq!(r.body["lifted"], false, "{b}: {:?}", r.body);
        let r = s
            .send(&carol, Method::GET, "/api/breakglass/locks", None)
            .await;
        assert_eq!(r.body[0]["target"], "alice", "{b}: {:?}", r.body);
        let r = s
            .send(&bob, Method::GET, "/api/breakglass/locks", None)
            .await;
        assert_eq!(
            r.body,
            json!([]),
            "{b}: a person's lock is theirs and the admins' to see"
        );
        // A locked approver decides nothing anywhere: neither approves nor denies someone
        // else's request, which waits on for another approver.
        let waiting = s.create(&carol, "prod").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        breakglass_server::locks::lock(
            s.ctx.store.as_ref(),
            &s.ctx.config,
            LockScope::User,
            "bob",
            "security",
            "phished",
            now,
        )
        .await
        .unwrap();
        for (action, body) in [("approve", None), ("deny", Some(json!({"reason": "no"})))] {
            let r = s.act(&bob, &waiting, action, body).await;
            assert_eq!(r.status.as_u16(), 423, "{b} {action}: {:?}", r.body);
            assert!(
                r.body["message"].as_str().unwrap().contains("phished"),
                "{b}: {:?}",
                r.body
            );
        }
        assert_eq!(
            state_of(&s, &carol, &waiting).await,
            "PendingApproval",
            "{b}"
        );
    }
}

/// Waits (bounded) until session `id` is in `state`, as `who` sees it.
async fn wait_state(s: &TestServer, who: &Caller, id: &str, state: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if state_of(s, who, id).await == state {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{}: session {id} never became {state}",
            s.backend
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A lock taken (here by the command line's way, straight into the database) reaches the open
/// pages: their live stream says `locks` within two seconds, so each page reads its banner
/// again; nothing is said while nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_pages_hear_of_a_lock_within_two_seconds() {
    use breakglass_shared::lock::Lock;
    use common::sse::serve;
    for s in servers().await {
        let b = s.backend;
        let alice = s.login("alice").await;
        let live = serve(&s).await;
        let mut events = live.events(&alice).await;
        let quiet = events.next(Duration::from_millis(2500)).await;
        assert!(
            quiet.as_ref().is_none_or(|e| e.event != "locks"),
            "{b}: {quiet:?}"
        );
        let lock = Lock {
            scope: LockScope::Environment,
            target: "prod".into(),
            reason: "INC-9".into(),
            locked_by: "security".into(),
            locked_at: time::OffsetDateTime::now_utc(),
            unlock: None,
        };
        assert!(s.ctx.store.lock(&lock).await.unwrap(), "{b}");
        let since = std::time::Instant::now();
        let mut heard = None;
        while let Some(e) = events.next(Duration::from_secs(3)).await {
            if e.event == "locks" {
                heard = Some(since.elapsed());
                break;
            }
        }
        let took = heard.unwrap_or_else(|| panic!("{b}: no `locks` event"));
        assert!(took <= Duration::from_secs(2), "{b}: after {took:?}");
    }
}
