//! Extensions, on both engines: the requester of a running session asks for more time with a
//! reason; Ground gives it at once, Flight waits for the session's quorum; the deadline moves,
//! each step is an event, the bounds the session was made under hold, a lock refuses, and bad
//! input changes nothing.
#![allow(clippy::unwrap_used)]

mod common;

use axum::http::{Method, StatusCode};
use breakglass_server::config::{Config, FileConfig};
use breakglass_shared::SessionEvent;
use common::{Caller, Resp, TestServer};
use serde_json::{json, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use uuid::Uuid;

/// A running session of alice in `env` (approved by bob on Flight): no cluster runs here, so
/// the lifecycle takes it to `Active` the way activation would.
async fn running(s: &TestServer, env: &str) -> String {
    let alice = s.login("alice").await;
    let id = s.create(&alice, env).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    if env == "prod" {
        let bob = s.login("bob").await;
        assert_eq!(
            s.act(&bob, &id, "approve", None).await.status,
            StatusCode::OK
        );
    }
    let uuid = Uuid::parse_str(&id).unwrap();
    for e in [SessionEvent::BeginActivation, SessionEvent::Activated] {
        s.ctx.lifecycle.apply_event(uuid, e).await.unwrap();
    }
    id
}

async fn extend(s: &TestServer, who: &Caller, id: &str, minutes: u32) -> Resp {
    let body = json!({ "minutes": minutes, "reason": "the heap dump is still being written" });
    s.act(who, id, "extend", Some(body)).await
}

fn deadline(session: &Value) -> OffsetDateTime {
    OffsetDateTime::parse(session["expires_at"].as_str().unwrap(), &Rfc3339).unwrap()
}

async fn detail(s: &TestServer, who: &Caller, id: &str) -> Value {
    let path = format!("/api/breakglass/sessions/{id}");
    s.send(who, Method::GET, &path, None).await.body
}

#[tokio::test]
async fn ground_gives_more_time_at_once_within_the_tiers_maximum() {
    for s in common::servers().await {
        let b = s.backend;
        let (alice, bob) = (s.login("alice").await, s.login("bob").await);
        let id = running(&s, "dev").await;
        let before = detail(&s, &alice, &id).await["session"].clone();

        // Only the requester asks; bad input changes nothing and names its field.
        assert_eq!(
            extend(&s, &bob, &id, 5).await.status,
            StatusCode::FORBIDDEN,
            "{b}"
        );
        let r = extend(&s, &alice, &id, 31).await;
        assert_eq!(
            (r.status, r.body["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("minutes")),
            "{b}: {:?}",
            r.body
        );
        assert!(
            r.body["message"]
                .as_str()
                .unwrap()
                .contains("1 to 30 minutes"),
            "{b}: {:?}",
            r.body
        );
        let r = s
            .act(
                &alice,
                &id,
                "extend",
                Some(json!({ "minutes": 5, "reason": "x" })),
            )
            .await;
        assert_eq!(
            (r.status, r.body["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("reason")),
            "{b}"
        );
        assert_eq!(
            detail(&s, &alice, &id).await["session"],
            before,
            "{b}: refusals wrote nothing"
        );

        let r = extend(&s, &alice, &id, 15).await;
        assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);
        assert_eq!(
            deadline(&r.body) - deadline(&before),
            time::Duration::minutes(15),
            "{b}"
        );
        assert_eq!(r.body["extensions"]["granted"][0]["minutes"], 15, "{b}");
        assert_eq!(r.body["state"], "Active", "{b}");

        // The second of two; then none is left, and the session says so.
        assert_eq!(
            extend(&s, &alice, &id, 15).await.status,
            StatusCode::OK,
            "{b}"
        );
        let r = extend(&s, &alice, &id, 1).await;
        assert_eq!(r.status, StatusCode::CONFLICT, "{b}: {:?}", r.body);
        assert!(
            r.body["message"]
                .as_str()
                .unwrap()
                .contains("had its 2 extensions"),
            "{b}"
        );

        let events = detail(&s, &alice, &id).await["events"].clone();
        let asks: Vec<&Value> = events
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "ask_extension")
            .collect();
        assert_eq!(asks.len(), 2, "{b}: each extension is an event");
        assert_eq!(asks[0]["actor"], "alice", "{b}");
        assert_eq!(
            asks[0]["detail"], "15 min: the heap dump is still being written",
            "{b}"
        );
    }
}

#[tokio::test]
async fn flight_waits_for_an_approver_and_a_refusal_keeps_the_deadline() {
    for s in common::servers().await {
        let b = s.backend;
        let (alice, bob, carol) = (
            s.login("alice").await,
            s.login("bob").await,
            s.login("carol").await,
        );
        let id = running(&s, "prod").await;
        let before = deadline(&detail(&s, &alice, &id).await["session"]);

        let r = extend(&s, &alice, &id, 10).await;
        assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);
        assert_eq!(
            deadline(&r.body),
            before,
            "{b}: nothing given before approval"
        );
        assert_eq!(r.body["extensions"]["pending"]["minutes"], 10, "{b}");
        assert_eq!(
            extend(&s, &alice, &id, 10).await.status,
            StatusCode::CONFLICT,
            "{b}: one ask at a time"
        );

        // The requester cannot approve their own; an approver refuses with a reason.
        let r = s.act(&alice, &id, "extension/approve", None).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{b}: {:?}", r.body);
        let r = s
            .act(
                &carol,
                &id,
                "extension/deny",
                Some(json!({ "reason": "hand over to the day shift" })),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);
        assert_eq!(r.body["extensions"]["denied"]["by"], "carol", "{b}");
        assert_eq!(deadline(&r.body), before, "{b}");
        let r = s.act(&bob, &id, "extension/approve", None).await;
        assert_eq!(
            r.status,
            StatusCode::CONFLICT,
            "{b}: nothing waits now: {:?}",
            r.body
        );

        // Asked again, approved: the time is given, with who approved it.
        assert_eq!(
            extend(&s, &alice, &id, 10).await.status,
            StatusCode::OK,
            "{b}"
        );
        let r = s.act(&bob, &id, "extension/approve", None).await;
        assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);
        assert_eq!(
            deadline(&r.body) - before,
            time::Duration::minutes(10),
            "{b}"
        );
        assert_eq!(
            r.body["extensions"]["granted"][0]["approvals"][0]["by"], "bob",
            "{b}"
        );
        assert_eq!(r.body["extensions"]["denied"], Value::Null, "{b}");
    }
}

#[tokio::test]
async fn a_lock_refuses_an_extension_and_ground_asks_nothing_of_approvers() {
    for s in common::servers().await {
        let b = s.backend;
        let (alice, bob, carol) = (
            s.login("alice").await,
            s.login("bob").await,
            s.login("carol").await,
        );
        let id = running(&s, "dev").await;
        let r = s.act(&bob, &id, "extension/approve", None).await;
        assert_eq!(
            (
                r.status,
                r.body["message"].as_str().unwrap().contains("Ground")
            ),
            (StatusCode::CONFLICT, true),
            "{b}: Ground has no approval: {:?}",
            r.body
        );
        let lock = s
            .send(
                &carol,
                Method::POST,
                "/api/breakglass/users/alice/lock",
                Some(json!({ "reason": "laptop reported stolen" })),
            )
            .await;
        assert_eq!(lock.status, StatusCode::CREATED, "{b}: {:?}", lock.body);
        let r = extend(&s, &alice, &id, 5).await;
        assert!(
            r.status == StatusCode::from_u16(423).unwrap() || r.status == StatusCode::CONFLICT,
            "{b}: {:?}",
            r.body
        );
        let row = s
            .ctx
            .store
            .get(Uuid::parse_str(&id).unwrap())
            .await
            .unwrap()
            .unwrap();
        assert!(row.extensions.granted.is_empty(), "{b}");
    }
}

#[test]
fn the_bound_is_configuration_and_at_most_ten() {
    let dir = tempfile::tempdir().unwrap();
    let args = common::dev_args(dir.path());
    let file: FileConfig = toml::from_str(
        "[durations.flight]\nmin_minutes = 5\ndefault_minutes = 30\nmax_minutes = 60\nmax_extensions = 11",
    )
    .unwrap();
    let e = Config::resolve(&args, file).unwrap_err();
    assert!(
        e.to_string().contains("durations.flight.max_extensions"),
        "{e}"
    );
}

#[tokio::test]
async fn where_the_bound_is_zero_the_session_says_it_cannot_be_extended() {
    let file: FileConfig = toml::from_str(
        "[durations.ground]\nmin_minutes = 5\ndefault_minutes = 30\nmax_minutes = 60\nmax_extensions = 0",
    )
    .unwrap();
    let s = common::server_with("sqlite", None, file).await;
    let alice = s.login("alice").await;
    let id = running(&s, "dev").await;
    let r = extend(&s, &alice, &id, 5).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{:?}", r.body);
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .contains("cannot be extended"),
        "{:?}",
        r.body
    );
}
