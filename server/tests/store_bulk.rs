//! The store's bulk insert (`Store::insert_many`, what an import and the benchmarks use), on
//! both engines: every session arrives with its whole history, the rows cross the statement
//! chunks, a duplicate anywhere stores nothing, and the lists the web app asks for find them
//! newest first through the combined filters' indexes.
#![allow(clippy::unwrap_used)]

mod common;

use axum::http::Method;
use breakglass_server::store::{EventDraft, ListFilter, StoreError};
use breakglass_shared::session::NewSession;
use breakglass_shared::{Actor, Mode, PermissionSet, Session, SessionEvent, SessionState, Tier};
use time::OffsetDateTime;
use uuid::Uuid;

/// More than two statements' worth of sessions (500 a statement).
const N: usize = 1_201;

/// Session `i`: on `dev` (Ground, withdrawn by its requester, or in progress: one in 100) or
/// `prod` (Flight, denied by bob, still waiting, or, one in 100, broken glass that failed and
/// is due a review); its history.
fn history(i: usize, now: OffsetDateTime) -> Vec<(Session, EventDraft)> {
    let prod = i.is_multiple_of(2);
    let requester = format!("person{}", i % 7);
    let new = NewSession {
        environment: if prod { "prod" } else { "dev" }.into(),
        tier: if prod { Tier::Flight } else { Tier::Ground },
        namespace: "payments".into(),
        pod: format!("worker-{i}"),
        target_container: None,
        mode: Mode::Live,
        reason: "investigating stuck payment worker".into(),
        ticket: None,
        duration_minutes: 30,
        recycle: false,
        requester: requester.clone(),
        quorum: breakglass_shared::session::Quorum::default(),
        extension_limits: breakglass_shared::session::ExtensionLimits::default(),
    };
    let first = Session::new_request(Uuid::now_v7(), new, now);
    let create = EventDraft {
        actor: requester.clone(),
        kind: "create".into(),
        detail: None,
        at: now,
        notices: Vec::new(),
    };
    let by = |name: &str| Actor::User {
        name: name.into(),
        permissions: PermissionSet {
            request: true,
            approve: true,
            terminate: false,
            self_approve: false,
            audit: false,
        },
    };
    let events = match (prod, i % 3) {
        _ if i % 100 == 3 => vec![],
        (true, _) if i % 100 == 2 => vec![
            SessionEvent::BreakGlass {
                by: Actor::User {
                    name: requester.clone(),
                    permissions: PermissionSet::ALL,
                },
            },
            SessionEvent::BeginActivation,
            SessionEvent::ActivationFailed {
                error: "pod is gone".into(),
            },
        ],
        (true, 0) => vec![],
        (true, _) => vec![SessionEvent::Deny {
            by: by("bob"),
            reason: "use the runbook first".into(),
        }],
        (false, _) => vec![SessionEvent::End {
            by: by(&requester),
            recycle: false,
        }],
    };
    let mut h = vec![(first, create)];
    for e in events {
        let next = h[h.len() - 1].0.apply(&e, now).unwrap();
        let ev = EventDraft {
            actor: e.actor().name().into(),
            kind: e.kind().into(),
            detail: e.detail(),
            at: now,
            notices: Vec::new(),
        };
        h.push((next, ev));
    }
    h
}

#[tokio::test]
async fn bulk_insert_stores_every_history_and_the_lists_find_it() {
    for s in common::servers().await {
        let now = OffsetDateTime::now_utc();
        let batch: Vec<_> = (0..N).map(|i| history(i, now)).collect();
        let before = s.counts().await;
        s.ctx.store.insert_many(&batch).await.unwrap();
        let events: usize = batch.iter().map(Vec::len).sum();
        assert_eq!(
            s.counts().await,
            (before.0 + N as i64, before.1 + events as i64),
            "{}",
            s.backend
        );

        // The row is the last version; the events are the history, each from the state before.
        let denied = &batch[4];
        let (last, _) = denied.last().unwrap();
        assert_eq!(last.state, SessionState::Denied);
        let stored = s.ctx.store.get(last.id).await.unwrap().unwrap();
        assert_eq!(stored.version, last.version, "{}", s.backend);
        assert_eq!(stored.state, SessionState::Denied, "{}", s.backend);
        let evs = s.ctx.store.events(last.id).await.unwrap();
        let steps: Vec<_> = evs
            .iter()
            .map(|e| (e.from_state, e.to_state, e.kind.as_str(), e.actor.as_str()))
            .collect();
        assert_eq!(
            steps,
            [
                (None, SessionState::PendingApproval, "create", "person4"),
                (
                    Some(SessionState::PendingApproval),
                    SessionState::Denied,
                    "deny",
                    "bob"
                ),
            ],
            "{}",
            s.backend
        );

        // The web app's lists: each combined filter, newest first, nothing else in it.
        let carol = s.login("carol").await;
        let expect = |keep: &dyn Fn(&Session) -> bool, limit: usize| -> Vec<String> {
            let mut ids: Vec<Uuid> = batch
                .iter()
                .filter_map(|h| h.last())
                .map(|(s, _)| s)
                .filter(|s| keep(s))
                .map(|s| s.id)
                .collect();
            ids.sort();
            ids.reverse();
            ids.into_iter().take(limit).map(|u| u.to_string()).collect()
        };
        for (path, keep, limit) in [
            (
                "/sessions?limit=200",
                Box::new(|_: &Session| true) as Box<dyn Fn(&Session) -> bool>,
                200,
            ),
            (
                "/sessions?environment=prod&state=Denied&limit=20",
                Box::new(|s: &Session| s.environment == "prod" && s.state == SessionState::Denied),
                20,
            ),
            (
                "/sessions?environment=dev&state=Denied&limit=20",
                Box::new(|_: &Session| false),
                20,
            ),
            (
                "/sessions?environment=dev&requester=person3&limit=20",
                Box::new(|s: &Session| s.environment == "dev" && s.requester == "person3"),
                20,
            ),
            (
                "/sessions?approver=bob&limit=10",
                Box::new(|s: &Session| s.approver.as_deref() == Some("bob")),
                10,
            ),
            (
                "/sessions?environment=dev&in_progress=true&limit=200",
                Box::new(|s: &Session| s.environment == "dev" && s.state.is_in_progress()),
                200,
            ),
            (
                "/sessions?review_due=true&limit=200",
                Box::new(|s: &Session| s.review_due()),
                200,
            ),
        ] {
            let r = s
                .send(&carol, Method::GET, &format!("/api/breakglass{path}"), None)
                .await;
            assert!(r.status.is_success(), "{}: {path}: {:?}", s.backend, r.body);
            let got: Vec<String> = r.body["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["id"].as_str().unwrap().to_string())
                .collect();
            let want = expect(&*keep, limit);
            // The rare filters (in progress, reviews due) find some rows here, not none.
            assert!(
                !want.is_empty() || path.contains("dev&state=Denied"),
                "{path}"
            );
            assert_eq!(got, want, "{}: {path}", s.backend);
        }
    }
}

#[tokio::test]
async fn a_duplicate_anywhere_in_the_batch_stores_none_of_it() {
    for s in common::servers().await {
        let now = OffsetDateTime::now_utc();
        let mut batch: Vec<_> = (0..N).map(|i| history(i, now)).collect();
        // The last statement repeats the first session: the rows before it were written by
        // then, and must go with the rest.
        batch.push(batch[0].clone());
        let before = s.counts().await;
        let refused = s.ctx.store.insert_many(&batch).await;
        assert!(
            matches!(refused, Err(StoreError::Duplicate)),
            "{}: {refused:?}",
            s.backend
        );
        assert_eq!(s.counts().await, before, "{}", s.backend);
        assert!(s
            .ctx
            .store
            .get(batch[1].last().unwrap().0.id)
            .await
            .unwrap()
            .is_none());
    }
}

#[tokio::test]
async fn a_list_of_one_environment_keeps_to_the_visible_ones() {
    for s in common::servers().await {
        let now = OffsetDateTime::now_utc();
        let batch: Vec<_> = (0..40).map(|i| history(i, now)).collect();
        s.ctx.store.insert_many(&batch).await.unwrap();
        let ours: Vec<Uuid> = batch.iter().map(|h| h[0].0.id).collect();
        let list = |environment: &str, visible: &[&str]| ListFilter {
            environment: Some(environment.into()),
            requester: Some("person3".into()),
            environments_in: Some(visible.iter().map(ToString::to_string).collect()),
            limit: 500,
            ..Default::default()
        };
        let found = |page: Vec<Session>| -> Vec<Uuid> {
            page.into_iter()
                .map(|s| s.id)
                .filter(|id| ours.contains(id))
                .collect()
        };

        // Named and visible: that environment's rows of the requester, newest first.
        let got = found(
            s.ctx
                .store
                .list(&list("prod", &["dev", "prod"]))
                .await
                .unwrap(),
        );
        let mut want: Vec<Uuid> = batch
            .iter()
            .map(|h| &h[0].0)
            .filter(|x| x.environment == "prod" && x.requester == "person3")
            .map(|x| x.id)
            .collect();
        want.sort();
        want.reverse();
        assert!(!want.is_empty());
        assert_eq!(got, want, "{}", s.backend);

        // Named but not visible to the reader: nothing, though the rows are there.
        let got = found(s.ctx.store.list(&list("prod", &["dev"])).await.unwrap());
        assert!(got.is_empty(), "{}: {got:?}", s.backend);
        let got = found(s.ctx.store.list(&list("prod", &[])).await.unwrap());
        assert!(got.is_empty(), "{}: {got:?}", s.backend);
    }
}

/// A session with every column set, its texts holding what JSON must escape.
fn every_column(now: OffsetDateTime) -> Session {
    use breakglass_shared::session::{
        Approval, EndReason, Extension, ExtensionAsk, ExtensionDenial, Quorum, RecordingRef,
        RekorEntry, Review, Verdict,
    };
    let awkward = "quotes \" and \\ back\\slash, a\nnew line, a\ttab, \u{1} \u{7f} \u{2028} \
                   ünïcödé, 日本語, 🔥";
    let new = NewSession {
        environment: "prod".into(),
        tier: Tier::Flight,
        namespace: "payments".into(),
        pod: "worker-0".into(),
        target_container: Some("app".into()),
        mode: Mode::Copy,
        reason: awkward.into(),
        ticket: Some("https://tickets.example/INC-1?a=1&b=\"2\"".into()),
        duration_minutes: 45,
        recycle: true,
        requester: "person1".into(),
        quorum: Quorum {
            required: 2,
            distinct_groups: true,
        },
        extension_limits: breakglass_shared::session::ExtensionLimits {
            max_count: 3,
            max_total_minutes: 90,
        },
    };
    let mut s = Session::new_request(Uuid::now_v7(), new, now);
    // Times with fractions of a second and an offset other than UTC, as RFC 3339 keeps them.
    let t = |secs: i64| {
        (now + time::Duration::seconds(secs) + time::Duration::microseconds(123_456))
            .to_offset(time::macros::offset!(+5:30))
    };
    let approval = |by: &str| Approval {
        by: by.into(),
        group: Some(format!("{by}'s \"group\"")),
        at: t(1),
    };
    s.approvals = vec![approval("bob"), approval("carol")];
    s.extensions.granted.push(Extension {
        minutes: 10,
        reason: awkward.into(),
        asked_at: t(2),
        granted_at: t(3),
        approvals: vec![approval("bob")],
    });
    s.extensions.pending = Some(ExtensionAsk {
        minutes: 5,
        reason: "more".into(),
        at: t(4),
        approvals: vec![],
    });
    s.extensions.denied = Some(ExtensionDenial {
        by: "carol".into(),
        reason: awkward.into(),
        at: t(5),
    });
    s.approver = Some("bob".into());
    s.glass_broken_by = Some("person1".into());
    s.state = SessionState::Ended;
    s.end_reason = Some(EndReason::Terminated { by: "dave".into() });
    s.denial_reason = Some(awkward.into());
    s.failure = Some(awkward.into());
    s.version = 11;
    s.decided_at = Some(t(6));
    s.activating_at = Some(t(7));
    s.active_at = Some(t(8));
    s.expires_at = Some(t(9));
    s.ending_at = Some(t(10));
    s.finished_at = Some(t(11));
    s.grant_name = Some("breakglass-grant-1".into());
    s.debug_container = Some("debugger-1".into());
    s.copy_pod = Some("worker-0-debug".into());
    s.process_access_annotated = true;
    s.recording = Some(RecordingRef {
        key: "sessions/x/final.cast".into(),
        version: "v\"3\"".into(),
        sha256: "ab".repeat(32),
        bytes: 9_007_199_254_740_993,
    });
    s.rekor = Some(RekorEntry {
        uuid: "cd".repeat(40),
        log_index: i64::MAX,
    });
    s.review = Some(Review {
        reviewer: "erin".into(),
        at: t(12),
        verdict: Verdict::Concern,
        notes: awkward.into(),
    });
    s.spec = Some(common::stand_in_spec(&s));
    s
}

#[tokio::test]
async fn a_listed_session_is_the_stored_one_every_column_on_either_database() {
    for s in common::servers().await {
        // Microseconds: what PostgreSQL's timestamptz keeps (SQLite keeps the text sqlx wrote).
        let now = OffsetDateTime::now_utc();
        let now = now.replace_microsecond(now.microsecond()).unwrap();
        let full = every_column(now);
        // A request as it is made: most columns NULL, the flags false.
        let bare = history(1, now).remove(0).0;
        let create = |x: &Session| EventDraft {
            actor: x.requester.clone(),
            kind: "create".into(),
            detail: None,
            at: now,
            notices: Vec::new(),
        };
        let batch = vec![
            vec![(full.clone(), create(&full))],
            vec![(bare.clone(), create(&bare))],
        ];
        s.ctx.store.insert_many(&batch).await.unwrap();
        let mine = ListFilter {
            requester: Some("person1".into()),
            limit: 10,
            ..Default::default()
        };
        let listed = s.ctx.store.list(&mine).await.unwrap();
        let ours: Vec<&Session> = listed
            .iter()
            .filter(|x| x.id == full.id || x.id == bare.id)
            .collect();
        // Newest first, each the session stored and the one a get by id reads.
        assert_eq!(ours, [&bare, &full], "{}", s.backend);
        for x in ours {
            let got = s.ctx.store.get(x.id).await.unwrap().unwrap();
            assert_eq!(&got, x, "{}", s.backend);
        }

        // A value the store never writes (a hand-edited row) is an error that names the
        // column and the value, not a page without that session. (PostgreSQL's typed columns
        // refuse such an edit themselves.)
        if s.backend == "sqlite" {
            let raw = sqlx::SqlitePool::connect(&s.ctx.config.database_url)
                .await
                .unwrap();
            sqlx::query(
                "UPDATE breakglass_sessions SET finished_at = 'last tuesday' WHERE id = $1",
            )
            .bind(full.id)
            .execute(&raw)
            .await
            .unwrap();
            match s.ctx.store.list(&mine).await {
                Err(StoreError::Page(why)) => assert!(
                    why.contains("finished_at") && why.contains("last tuesday"),
                    "{why}"
                ),
                other => panic!("a hand-edited time listed as {other:?}"),
            }
        }
    }
}
