//! Races with real concurrent HTTP requests over TCP, on both databases: exactly one of two
//! conflicting actions wins, the other gets 409, and the events table shows one decision.
#![allow(clippy::unwrap_used)]

mod common;

use breakglass_server::state::AppState;
use serde_json::{json, Value};

struct Live {
    base: String,
    client: reqwest::Client,
}

async fn serve(s: &common::TestServer) -> Live {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = breakglass_server::app(AppState(s.ctx.clone()));
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
        )
        .await
        .unwrap();
    });
    Live {
        base: format!("http://{addr}"),
        client: reqwest::Client::new(),
    }
}

impl Live {
    async fn post(&self, who: &common::Caller, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .client
            .post(format!("{}{path}", self.base))
            .header("cookie", who.cookie.clone().unwrap())
            .header("x-csrf-token", who.csrf.clone().unwrap())
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }
}

const ROUNDS: usize = 15;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_approvers_racing_exactly_one_wins() {
    for s in common::servers().await {
        let live = serve(&s).await;
        let alice = s.login("alice").await;
        let bob = s.login("bob").await;
        let carol = s.login("carol").await;
        for _ in 0..ROUNDS {
            let id = s.create(&alice, "prod").await["id"]
                .as_str()
                .unwrap()
                .to_string();
            let path = format!("/api/breakglass/sessions/{id}/approve");
            let (a, b) = tokio::join!(
                live.post(&bob, &path, json!({})),
                live.post(&carol, &path, json!({}))
            );
            let mut statuses = [a.0, b.0];
            statuses.sort();
            assert_eq!(statuses, [200, 409], "{}: {a:?} {b:?}", s.backend);
            let loser = if a.0 == 409 { &a.1 } else { &b.1 };
            assert!(
                matches!(loser["code"].as_str(), Some("wrong_state" | "conflict")),
                "{loser:?}"
            );
            let events = s.ctx.store.events(id.parse().unwrap()).await.unwrap();
            assert_eq!(events.iter().filter(|e| e.kind == "approve").count(), 1);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn approve_racing_deny_exactly_one_decides() {
    for s in common::servers().await {
        let live = serve(&s).await;
        let alice = s.login("alice").await;
        let bob = s.login("bob").await;
        let carol = s.login("carol").await;
        for _ in 0..ROUNDS {
            let id = s.create(&alice, "prod").await["id"]
                .as_str()
                .unwrap()
                .to_string();
            let approve = format!("/api/breakglass/sessions/{id}/approve");
            let deny = format!("/api/breakglass/sessions/{id}/deny");
            let (a, d) = tokio::join!(
                live.post(&bob, &approve, json!({})),
                live.post(&carol, &deny, json!({"reason": "not during the freeze"})),
            );
            let mut statuses = [a.0, d.0];
            statuses.sort();
            assert_eq!(statuses, [200, 409], "{}: {a:?} {d:?}", s.backend);
            let stored = s.ctx.store.get(id.parse().unwrap()).await.unwrap().unwrap();
            let expected = if a.0 == 200 { "Approved" } else { "Denied" };
            assert_eq!(stored.state.as_str(), expected);
            let events = s.ctx.store.events(stored.id).await.unwrap();
            assert_eq!(events.len(), 2, "create + one decision");
        }
    }
}

/// Leases (the sweep's leader and each recording's writer): one holder at a time, renewable by
/// that holder, free for another after expiry or release; on both databases.
#[tokio::test]
async fn leases_have_one_holder_expire_and_release() {
    for s in common::servers().await {
        let store = &s.ctx.store;
        let b = s.backend;
        assert!(
            store
                .try_lease("recording:x", "a", 1_000, 500)
                .await
                .unwrap(),
            "{b}"
        );
        assert!(
            !store
                .try_lease("recording:x", "b", 1_200, 500)
                .await
                .unwrap(),
            "{b}: held"
        );
        assert!(
            store
                .try_lease("recording:x", "a", 1_400, 500)
                .await
                .unwrap(),
            "{b}: renewed"
        );
        assert!(
            !store
                .try_lease("recording:x", "b", 1_800, 500)
                .await
                .unwrap(),
            "{b}: renewal counts"
        );
        assert!(
            store
                .try_lease("recording:x", "b", 2_000, 500)
                .await
                .unwrap(),
            "{b}: expired"
        );
        // Only the holder releases.
        store.release_lease("recording:x", "a").await.unwrap();
        assert!(
            !store
                .try_lease("recording:x", "a", 2_100, 500)
                .await
                .unwrap(),
            "{b}"
        );
        store.release_lease("recording:x", "b").await.unwrap();
        assert!(
            store
                .try_lease("recording:x", "a", 2_100, 500)
                .await
                .unwrap(),
            "{b}: released"
        );
        // Other names are independent.
        assert!(
            store
                .try_lease("recording:y", "b", 2_100, 500)
                .await
                .unwrap(),
            "{b}"
        );
    }
}

/// Renewing many leases at once (the recording keeper's pass): only the holder's are renewed,
/// each until the new time, and one held elsewhere, released, or never taken is reported
/// missing and never taken; on both databases, across more names than one statement holds.
#[tokio::test]
async fn many_leases_renew_in_one_pass_and_name_the_lost_ones() {
    use breakglass_server::store::LEASE_BATCH;
    for s in common::servers().await {
        let store = &s.ctx.store;
        let b = s.backend;
        let names: Vec<String> = (0..LEASE_BATCH + 5)
            .map(|i| format!("recording:{i}"))
            .collect();
        for n in &names {
            assert!(store.try_lease(n, "a", 1_000, 500).await.unwrap(), "{b}");
        }
        // One taken over by b after it expired, one released, one never taken.
        assert!(store.try_lease(&names[3], "b", 2_000, 500).await.unwrap());
        store.release_lease(&names[7], "a").await.unwrap();
        let mut asked = names.clone();
        asked.push("recording:never".into());

        let mut renewed = store.renew_leases(&asked, "a", 9_000).await.unwrap();
        renewed.sort();
        let mut want: Vec<String> = names
            .iter()
            .filter(|n| *n != &names[3] && *n != &names[7])
            .cloned()
            .collect();
        want.sort();
        assert_eq!(renewed, want, "{b}");

        // Renewed until 9,000: b cannot take one at 8,000, but can after 9,000.
        let last = names.last().unwrap();
        assert!(
            !store.try_lease(last, "b", 8_000, 500).await.unwrap(),
            "{b}"
        );
        assert!(store.try_lease(last, "b", 9_001, 500).await.unwrap(), "{b}");
        // b still holds the one it took; the released and unknown ones were not created.
        assert!(
            !store.try_lease(&names[3], "a", 2_100, 100).await.unwrap(),
            "{b}"
        );
        assert!(
            store.try_lease(&names[7], "c", 1_100, 100).await.unwrap(),
            "{b}: free"
        );
        assert!(
            store
                .try_lease("recording:never", "c", 1_100, 100)
                .await
                .unwrap(),
            "{b}: free"
        );
        assert!(
            store
                .renew_leases(&[], "a", 9_000)
                .await
                .unwrap()
                .is_empty(),
            "{b}"
        );
    }
}
