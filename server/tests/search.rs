//! The recording search on both engines: a session that ends with a recording is queued for the
//! index by the database itself, the indexer reads what the screen showed (after edits and
//! redraws) and the commands the shell ran, and `GET /recordings/search` finds the moments,
//! only in the recordings the caller may read.
#![allow(clippy::unwrap_used)]

mod common;

use axum::http::{Method, StatusCode};
use breakglass_server::recording::CastBody;
use breakglass_server::search::Indexer;
use breakglass_server::store::EventDraft;
use breakglass_shared::recording::{Code, Event, Header};
use breakglass_shared::session::{NewSession, Progress, RecordingRef};
use breakglass_shared::{Actor, Mode, PermissionSet, Session, SessionEvent, Tier};
use common::{Caller, TestServer};
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

/// A cast of `events` on an 80x24 terminal.
fn cast(events: &[(f64, Code, &str)]) -> Vec<u8> {
    let header = Header {
        version: 2,
        width: 80,
        height: 24,
        timestamp: None,
        title: None,
    };
    let mut out = header.to_line();
    for &(time, code, data) in events {
        out.push_str(
            &Event {
                time,
                code,
                data: data.into(),
            }
            .to_line(),
        );
    }
    out.into_bytes()
}

/// What alice's shell showed in `dev`: a command (typed with a slip, rubbed out), its colored
/// output, and a status line drawn over itself.
fn alice_cast() -> Vec<u8> {
    cast(&[
        (0.5, Code::Output, "\x1b]133;A\x07$ \x1b]133;B\x07"),
        (1.0, Code::Output, "kubectl get podz"),
        (2.0, Code::Output, "\x08 \x08s -n kube-system"),
        (3.2, Code::Marker, "$ kubectl get pods -n kube-system"),
        (3.2, Code::Output, "\r\n"),
        (4.0, Code::Output, "coredns-7c6 \x1b[32mRunning\x1b[0m\r\n"),
        (5.0, Code::Output, "loading\rfinished\r\n"),
        (6.0, Code::Output, "\x1b]133;A\x07$ \x1b]133;B\x07"),
    ])
}

/// Stores an ended session of `requester` in `env` whose recording is `cast` (stored in the
/// server's recording store under the session's key); its id.
async fn ended(s: &TestServer, requester: &str, env: &str, cast: Option<Vec<u8>>) -> Uuid {
    let now = OffsetDateTime::now_utc();
    let tier = if env == "prod" {
        Tier::Flight
    } else {
        Tier::Ground
    };
    let new = NewSession {
        environment: env.into(),
        tier,
        namespace: "payments".into(),
        pod: "worker-0".into(),
        target_container: None,
        mode: Mode::Live,
        reason: "stuck payment worker".into(),
        ticket: None,
        duration_minutes: 30,
        recycle: false,
        requester: requester.into(),
        quorum: Default::default(),
        extension_limits: Default::default(),
    };
    let first = Session::new_request(Uuid::now_v7(), new, now);
    let id = first.id;
    let key = format!("sessions/{id}.cast");
    let recording = match cast {
        Some(bytes) => s
            .ctx
            .recorder
            .store()
            .put_version(&key, CastBody::new(bytes))
            .await
            .unwrap()
            .to_ref(&key),
        // A row naming a recording the store never took.
        None => RecordingRef {
            key,
            version: "1".into(),
            sha256: "0".repeat(64),
            bytes: 10,
        },
    };
    let person = |name: &str| Actor::User {
        name: name.into(),
        permissions: PermissionSet::ALL,
    };
    let mut events = vec![];
    if tier == Tier::Flight {
        events.push(SessionEvent::Approve {
            by: person("bob"),
            groups: vec!["sre".into()],
        });
    }
    events.extend([
        SessionEvent::BeginActivation,
        SessionEvent::Progress(Progress::RecordingStored(recording)),
        SessionEvent::Activated,
        SessionEvent::End {
            by: person(requester),
            recycle: false,
        },
        SessionEvent::CleanupDone,
    ]);
    let draft = |kind: &str| EventDraft {
        actor: requester.into(),
        kind: kind.into(),
        detail: None,
        at: now,
        notices: Vec::new(),
    };
    let mut history = vec![(first, draft("create"))];
    for e in &events {
        let next = history.last().unwrap().0.apply(e, now).unwrap();
        history.push((next, draft("change")));
    }
    assert_eq!(history.last().unwrap().0.state.to_string(), "Ended");
    s.ctx.store.insert_many(&[history]).await.unwrap();
    id
}

async fn search(s: &TestServer, who: &Caller, query: &str) -> (StatusCode, Value) {
    let r = s
        .send(
            who,
            Method::GET,
            &format!("/api/breakglass/recordings/search?{query}"),
            None,
        )
        .await;
    (r.status, r.body)
}

fn found_ids(body: &Value) -> Vec<String> {
    body["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["session"]["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn the_index_finds_what_was_on_the_screen_and_the_commands() {
    for s in common::servers().await {
        let b = s.backend;
        let mine = ended(&s, "alice", "dev", Some(alice_cast())).await;
        let theirs = ended(
            &s,
            "carol",
            "prod",
            Some(cast(&[(7.5, Code::Output, "token: prod-secret-4711\r\n")])),
        )
        .await;
        ended(&s, "alice", "dev", None).await;
        let alice = s.login("alice").await;
        let bob = s.login("bob").await;

        // Queued by the database as they ended; nothing found before the indexer ran.
        let (status, body) = search(&s, &alice, "q=coredns").await;
        assert_eq!(status, StatusCode::OK, "{b}: {body}");
        assert_eq!(body["pending"], 3, "{b}: {body}");
        assert!(found_ids(&body).is_empty(), "{b}: {body}");

        let indexer = Indexer::new(s.ctx.store.clone(), s.ctx.recorder.clone());
        assert_eq!(indexer.drain().await, 3, "{b}");
        assert_eq!(indexer.drain().await, 0, "{b}: nothing is indexed twice");

        // The command, from its marker, at the moment it ran; the screen line it showed as
        // typed after the rub-out.
        let (_, body) = search(&s, &alice, "q=kube-system").await;
        assert_eq!(found_ids(&body), [mine.to_string()], "{b}: {body}");
        let hits = body["sessions"][0]["hits"].as_array().unwrap();
        assert_eq!(hits[0]["kind"], "command", "{b}: {body}");
        assert_eq!(hits[0]["text"], "$ kubectl get pods -n kube-system");
        assert_eq!(hits[0]["at"], 3.2);
        assert_eq!(hits[0]["link"], format!("/sessions/{mine}/recording?t=3.2"));
        assert_eq!(hits[1]["kind"], "screen", "{b}: {body}");
        assert_eq!(hits[1]["text"], "$ kubectl get pods -n kube-system");
        assert_eq!(
            hits[1]["at"], 0.5,
            "{b}: the prompt line showed first at 0.5"
        );

        // What the screen showed, not the bytes that drew it: colours gone, a word drawn
        // over is not there, the word over it is, each at its moment.
        let (_, body) = search(&s, &alice, "q=COREDNS+running").await;
        assert_eq!(
            body["sessions"][0]["hits"][0]["text"], "coredns-7c6 Running",
            "{b}: {body}"
        );
        assert_eq!(body["sessions"][0]["hits"][0]["at"], 4.0);
        let (_, body) = search(&s, &alice, "q=loading").await;
        assert!(found_ids(&body).is_empty(), "{b}: {body}");
        let (_, body) = search(&s, &alice, "q=finish").await;
        assert_eq!(
            body["sessions"][0]["hits"][0]["at"], 5.0,
            "{b}: a word's beginning finds it: {body}"
        );
        let (_, body) = search(&s, &alice, "q=podz").await;
        assert!(
            found_ids(&body).is_empty(),
            "{b}: the slip was rubbed out: {body}"
        );

        // Only the recordings one may read: alice holds nothing in prod but her own; bob
        // approves there.
        let (_, body) = search(&s, &alice, "q=prod-secret").await;
        assert!(found_ids(&body).is_empty(), "{b}: {body}");
        let (_, body) = search(&s, &bob, "q=prod-secret").await;
        assert_eq!(found_ids(&body), [theirs.to_string()], "{b}: {body}");
        assert_eq!(body["sessions"][0]["hits"][0]["at"], 7.5);

        // The row that named a recording the store never had is done with, and found by
        // nothing.
        assert_eq!(s.ctx.store.pending_count().await.unwrap(), 0, "{b}");
        let stats = s.ctx.store.index_stats().await.unwrap();
        assert_eq!(stats.recordings, 3, "{b}");
        assert!(stats.index_bytes > 0, "{b}");
    }
}

#[tokio::test]
async fn a_bad_query_names_its_field_and_strangers_are_refused() {
    for s in common::servers().await {
        let b = s.backend;
        let alice = s.login("alice").await;
        for (query, field) in [
            ("", "q"),
            ("q=", "q"),
            ("q=---", "q"),
            ("q=a+b+c+d+e+f+g+h+i", "q"),
            ("q=pods&limit=0", "limit"),
            ("q=pods&limit=51", "limit"),
        ] {
            let (status, body) = search(&s, &alice, query).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{b} {query}: {body}");
            assert_eq!(body["field"], field, "{b} {query}: {body}");
        }
        let (status, _) = search(&s, &Caller::default(), "q=pods").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{b}");
    }
}

/// A search pages through its candidates: the index holds each word's first four characters,
/// so hundreds of newer chunks that share `paym` with the word asked (`payments`) but not the
/// word itself come first, and do not hide the older recording that holds it.
#[tokio::test]
async fn a_search_pages_past_chunks_that_share_only_the_term() {
    for s in common::servers().await {
        let b = s.backend;
        let indexer = Indexer::new(s.ctx.store.clone(), s.ctx.recorder.clone());
        let older = ended(
            &s,
            "alice",
            "dev",
            Some(cast(&[(1.5, Code::Output, "payments settled\r\n")])),
        )
        .await;
        // Indexed one after the other, so the newer recording's chunks are the newer ones.
        assert_eq!(indexer.drain().await, 1, "{b}");
        // More than one page of candidates: 27,000 lines in chunks of at most 128.
        let ledger: String = (0..27_000)
            .map(|i| format!("paymaster ledger {i:05}\r\n"))
            .collect();
        let newer = ended(
            &s,
            "alice",
            "dev",
            Some(cast(&[(2.0, Code::Output, &ledger)])),
        )
        .await;
        assert_eq!(indexer.drain().await, 1, "{b}");
        let alice = s.login("alice").await;

        let (status, body) = search(&s, &alice, "q=payments").await;
        assert_eq!(status, StatusCode::OK, "{b}: {body}");
        assert_eq!(found_ids(&body), [older.to_string()], "{b}: {body}");
        assert_eq!(body["sessions"][0]["hits"][0]["at"], 1.5, "{b}: {body}");
        let (_, body) = search(&s, &alice, "q=paymaster+26999").await;
        assert_eq!(found_ids(&body), [newer.to_string()], "{b}: {body}");
        assert_eq!(
            body["sessions"][0]["hits"][0]["text"], "paymaster ledger 26999",
            "{b}: {body}"
        );
    }
}
