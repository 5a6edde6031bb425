//! What a session change writes into the outbox, on both engines: one staged row per notice,
//! whatever the number of its receivers, in the change's transaction (a change refused by the
//! compare-and-set stages nothing); a claim moves each notice into one delivery per receiver,
//! each with its own id, exactly once (a notice staged again under the same event key adds no
//! delivery); and the pending gauge counts staged notices per receiver from the commit on.
#![allow(clippy::unwrap_used)]

mod common;

use breakglass_server::store::{Delivery, EventDraft, OutboxDraft, StoreError};
use breakglass_shared::{Actor, PermissionSet, Session, SessionEvent};
use time::OffsetDateTime;
use uuid::Uuid;

fn notice(s: &Session, key: &str, receiver: &str, payload: &str, at: i64) -> OutboxDraft {
    OutboxDraft {
        id: Uuid::now_v7(),
        event_key: format!("{}/{key}", s.id),
        receiver: receiver.into(),
        kind: key.into(),
        session_id: s.id,
        payload: payload.into(),
        created_at_ms: at,
    }
}

/// A Ground request by alice, as stored, and the time (ms) just after.
async fn request(t: &common::TestServer) -> (Session, i64) {
    let alice = t.login("alice").await;
    let created = t.create(&alice, "dev").await;
    let id: Uuid = created["id"].as_str().unwrap().parse().unwrap();
    let s = t.ctx.store.get(id).await.unwrap().unwrap();
    (
        s,
        breakglass_server::outbox::unix_ms(OffsetDateTime::now_utc()),
    )
}

/// What worker `w` claims at `ms` (for a minute), up to `limit`.
async fn claim(t: &common::TestServer, ms: i64, limit: i64) -> Vec<Delivery> {
    t.ctx
        .store
        .claim_deliveries("w", ms, ms + 60_000, limit)
        .await
        .unwrap()
}

/// Ends `s` (a Ground request, approved at creation) with `notices`.
async fn end(
    t: &common::TestServer,
    s: &Session,
    notices: Vec<OutboxDraft>,
) -> Result<Session, StoreError> {
    let now = OffsetDateTime::now_utc();
    let e = SessionEvent::End {
        by: Actor::User {
            name: "alice".into(),
            permissions: PermissionSet::ALL,
        },
        recycle: false,
    };
    let next = s.apply(&e, now).unwrap();
    let ev = EventDraft {
        actor: "alice".into(),
        kind: e.kind().into(),
        detail: None,
        at: now,
        notices,
    };
    t.ctx.store.compare_and_set(s, &next, &ev).await?;
    Ok(next)
}

#[tokio::test]
async fn a_change_stages_each_notice_once_and_a_claim_gives_each_receiver_one_delivery() {
    for t in common::servers().await {
        let b = t.backend;
        let (s, at) = request(&t).await;
        let id = s.id;
        let mut notices: Vec<_> = ["a", "b", "c"]
            .iter()
            .map(|r| notice(&s, "ended", r, "{\"n\":1}", at))
            .collect();
        notices.push(notice(&s, "ocsf.end", "siem", "{\"n\":2}", at + 1));

        // A change refused by the compare-and-set stages nothing.
        let stale = Session {
            version: s.version + 7,
            ..s.clone()
        };
        assert!(matches!(
            end(&t, &stale, notices.clone()).await,
            Err(StoreError::Conflict { .. })
        ));
        assert_eq!(t.ctx.store.outbox_stats().await.unwrap().pending, 0, "{b}");

        let ended = end(&t, &s, notices).await.unwrap();
        // Counted from the commit on, once per receiver, before any worker came by.
        let stats = t.ctx.store.outbox_stats().await.unwrap();
        assert_eq!(stats.pending, 4, "{b}");
        assert_eq!(stats.oldest_pending_ms, Some(at), "{b}");
        assert!(t.ctx.store.deliveries(None, 10).await.unwrap().is_empty());

        let ms = at + 10;
        let taken = claim(&t, ms, 10).await;
        let mut got: Vec<_> = taken
            .iter()
            .map(|d| (d.receiver.as_str(), d.kind.as_str(), d.payload.as_str()))
            .collect();
        got.sort_unstable();
        assert_eq!(
            got,
            [
                ("a", "ended", "{\"n\":1}"),
                ("b", "ended", "{\"n\":1}"),
                ("c", "ended", "{\"n\":1}"),
                ("siem", "ocsf.end", "{\"n\":2}"),
            ],
            "{b}"
        );
        let mut ids: Vec<_> = taken.iter().map(|d| d.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 4, "{b}: each delivery has its own id");
        assert!(taken
            .iter()
            .all(|d| d.created_at_ms >= at && d.session_id == id));
        assert_eq!(t.ctx.store.outbox_stats().await.unwrap().pending, 4, "{b}");

        // The same notice staged again (another path to the same moment) adds nothing.
        let again = vec![notice(&ended, "ended", "a", "{\"n\":3}", at + 2)];
        let next = Session {
            version: ended.version + 1,
            ..ended.clone()
        };
        let ev = EventDraft {
            actor: "system".into(),
            kind: "note".into(),
            detail: None,
            at: OffsetDateTime::now_utc(),
            notices: again,
        };
        t.ctx
            .store
            .compare_and_set(&ended, &next, &ev)
            .await
            .unwrap();
        assert_eq!(t.ctx.store.outbox_stats().await.unwrap().pending, 5, "{b}");
        let more = claim(&t, ms, 10).await;
        assert!(more.is_empty(), "{b}: {more:#?}");
        let rows = t.ctx.store.deliveries(None, 10).await.unwrap();
        assert_eq!(rows.len(), 4, "{b}");
        assert!(
            rows.iter().all(|d| d.payload != "{\"n\":3}"),
            "{b}: the first stays"
        );
        assert_eq!(t.ctx.store.outbox_stats().await.unwrap().pending, 4, "{b}");
    }
}

#[tokio::test]
async fn a_burst_larger_than_one_claim_is_moved_over_several_without_loss() {
    for t in common::servers().await {
        let b = t.backend;
        let (s, at) = request(&t).await;
        // 1,300 notices of two receivers each: more than a statement and a claim take.
        let notices: Vec<_> = (0..1_300)
            .flat_map(|i| {
                let key = format!("n{i}");
                ["a", "b"].map(|r| notice(&s, &key, r, "{}", at))
            })
            .collect();
        end(&t, &s, notices).await.unwrap();
        assert_eq!(
            t.ctx.store.outbox_stats().await.unwrap().pending,
            2_600,
            "{b}"
        );
        let mut seen = std::collections::HashSet::new();
        let ms = at + 10;
        for _ in 0..20 {
            let taken = claim(&t, ms, 1_000).await;
            if taken.is_empty() {
                break;
            }
            for d in taken {
                assert!(seen.insert((d.event_key, d.receiver)), "{b}: twice");
            }
        }
        assert_eq!(seen.len(), 2_600, "{b}");
    }
}
