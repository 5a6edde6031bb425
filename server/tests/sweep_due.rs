//! The sweep sees every due session however many newer ones there are, and a decision on a
//! request past its approval deadline is refused even before the sweep came by.
#![allow(clippy::unwrap_used)]

mod common;

use axum::http::{Method, StatusCode};
use breakglass_shared::{SessionEvent, SessionState};
use futures::stream::{self, StreamExt};
use serde_json::Value;
use uuid::Uuid;

fn id_of(v: &Value) -> Uuid {
    v["id"].as_str().unwrap().parse().unwrap()
}

/// `n` requests by alice in `env`, made side by side.
async fn many(s: &common::TestServer, alice: &common::Caller, env: &str, n: usize) -> Vec<Uuid> {
    stream::iter(0..n)
        .map(|_| async { id_of(&s.create(alice, env).await) })
        .buffer_unordered(16)
        .collect()
        .await
}

#[tokio::test]
async fn an_old_request_behind_a_thousand_newer_ones_still_expires() {
    for s in common::servers().await {
        let alice = s.login("alice").await;
        let old = id_of(&s.create(&alice, "prod").await);
        // Newer ones, well inside their deadline when the sweep runs.
        let newer_from = time::OffsetDateTime::now_utc();
        many(&s, &alice, "prod", 1000).await;
        let when =
            s.ctx.store.get(old).await.unwrap().unwrap().created_at + s.ctx.config.approval_expiry;
        assert!(when < newer_from + s.ctx.config.approval_expiry);
        let report = breakglass_server::sweep::sweep_once(&s.ctx, when)
            .await
            .unwrap();
        assert_eq!(report.expired, 1, "{}: {report:?}", s.backend);
        let row = s.ctx.store.get(old).await.unwrap().unwrap();
        assert_eq!(row.state, SessionState::Expired, "{}", s.backend);
    }
}

#[tokio::test]
async fn every_session_past_its_time_box_ends_even_past_two_hundred() {
    for s in common::servers().await {
        let alice = s.login("alice").await;
        // Ground requests wait in `Approved` here (no cluster); the lifecycle takes them to
        // `Active` the way activation would.
        let ids = many(&s, &alice, "dev", 250).await;
        for id in &ids {
            for e in [SessionEvent::BeginActivation, SessionEvent::Activated] {
                s.ctx.lifecycle.apply_event(*id, e).await.unwrap();
            }
        }
        let latest = s.ctx.store.get(ids[0]).await.unwrap().unwrap();
        let after = latest.expires_at.unwrap() + time::Duration::minutes(5);
        let report = breakglass_server::sweep::sweep_once(&s.ctx, after)
            .await
            .unwrap();
        assert_eq!(report.ttl_ended, 250, "{}: {report:?}", s.backend);
        for id in &ids {
            let row = s.ctx.store.get(*id).await.unwrap().unwrap();
            assert_ne!(row.state, SessionState::Active, "{}: {id}", s.backend);
        }
    }
}

#[tokio::test]
async fn approving_a_request_past_its_deadline_is_refused_without_the_sweep() {
    // Requests expire after one minute here; the sweep never runs in these tests.
    let file: breakglass_server::config::FileConfig =
        toml::from_str("approval_expiry_minutes = 1").unwrap();
    let s = common::server_with("sqlite", None, file).await;
    let alice = s.login("alice").await;
    let bob = s.login("bob").await;
    let carol = s.login("carol").await;
    let fresh = s.create(&alice, "prod").await;
    // The same request as if made 61 s ago, stored as a new row (setup through the store, as
    // any test that moves time does).
    let mut aged = s.ctx.store.get(id_of(&fresh)).await.unwrap().unwrap();
    aged.id = Uuid::now_v7();
    aged.created_at -= time::Duration::seconds(61);
    let id = aged.id;
    s.ctx
        .store
        .insert(
            &aged,
            &breakglass_server::store::EventDraft {
                actor: "alice".into(),
                kind: "create".into(),
                detail: None,
                at: aged.created_at,
                notices: Vec::new(),
            },
        )
        .await
        .unwrap();

    for (who, action) in [(&bob, "approve"), (&carol, "break-glass")] {
        let r = s.act(who, &id.to_string(), action, None).await;
        assert_eq!(r.status, StatusCode::CONFLICT, "{action}: {:?}", r.body);
        assert_eq!(r.body["state"], "Expired", "{action}: {:?}", r.body);
        assert!(
            r.body["message"]
                .as_str()
                .unwrap()
                .to_lowercase()
                .contains("expired"),
            "{:?}",
            r.body
        );
    }
    let row = s.ctx.store.get(id).await.unwrap().unwrap();
    assert_eq!(row.state, SessionState::Expired);
    assert!(row.approver.is_none() && row.glass_broken_by.is_none());
    // The session page says so too.
    let r = s
        .send(
            &alice,
            Method::GET,
            &format!("/api/breakglass/sessions/{id}"),
            None,
        )
        .await;
    assert_eq!(r.body["session"]["state"], "Expired", "{:?}", r.body);
}
