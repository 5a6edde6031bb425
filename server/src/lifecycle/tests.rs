//! The approval deadline as the lifecycle keeps it, over a real SQLite store and stand-in
//! ports (no cluster: an approved request waits in `Approved`).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use async_trait::async_trait;
use breakglass_shared::session::{Mode, NewSession, RecordingRef, RekorEntry, Tier};
use breakglass_shared::{Actor, PermissionSet, Session, SessionEvent, SessionState};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use super::{Commit, Error, Lifecycle, Ports};
use crate::ports::{Recording, RecordingError, Recordings, Terminals};
use crate::store::{EventDraft, Store};

/// Records nothing: these sessions never activate.
struct NoRecordings;

#[async_trait]
impl Recordings for NoRecordings {
    async fn start(&self, _: &Session) -> Result<Recording, RecordingError> {
        Err(RecordingError::Resume(
            "nothing is recorded in this test".into(),
        ))
    }
    async fn marker(&self, _: Uuid, _: &str) {}
    async fn finish(&self, _: &Session, _: &str) -> Option<RecordingRef> {
        None
    }
    async fn anchor(&self, _: &Session, _: u32) -> Option<RekorEntry> {
        None
    }
    fn anchors(&self) -> bool {
        false
    }
}

/// Has no terminals open.
struct NoTerminals;

#[async_trait]
impl Terminals for NoTerminals {
    async fn close(&self, _: Uuid, _: u16, _: String) {}
}

const EXPIRY: Duration = Duration::minutes(1);

async fn lifecycle(dir: &std::path::Path) -> (Arc<Lifecycle>, Arc<dyn Store>) {
    let url = format!("sqlite://{}", dir.join("lifecycle.db").display());
    let store = crate::store::connect(&url).await.unwrap();
    let metrics = crate::metrics::Metrics::new().unwrap();
    let (_recorder, events) = tokio::sync::mpsc::channel(1);
    let lifecycle = Lifecycle::new(
        Ports {
            store: store.clone(),
            changes: tokio::sync::broadcast::channel(16).0,
            transitions: metrics.transitions,
            cluster: None,
            recorder: Arc::new(NoRecordings),
            terminals: Arc::new(NoTerminals),
            park_without_cluster: true,
            approval_expiry: EXPIRY,
            outbox: Arc::new(crate::outbox::Outbox::new(Arc::new(
                crate::config::Config::resolve(&Default::default(), Default::default()).unwrap(),
            ))),
        },
        events,
    );
    (lifecycle, store)
}

/// A Flight request by alice, stored as if made `age` ago.
async fn request(store: &dyn Store, age: Duration) -> Uuid {
    let made = OffsetDateTime::now_utc() - age;
    let new = NewSession {
        environment: "prod".into(),
        tier: Tier::Flight,
        namespace: "shop".into(),
        pod: "web-0".into(),
        target_container: None,
        mode: Mode::Live,
        reason: "the checkout is down".into(),
        ticket: None,
        duration_minutes: 30,
        recycle: false,
        requester: "alice".into(),
        quorum: breakglass_shared::session::Quorum::default(),
        extension_limits: breakglass_shared::session::ExtensionLimits::default(),
    };
    let s = Session::new_request(Uuid::now_v7(), new, made);
    let draft = EventDraft {
        actor: "alice".into(),
        kind: Commit::Create.label().into(),
        detail: None,
        at: made,
        notices: Vec::new(),
    };
    store.insert(&s, &draft).await.unwrap();
    s.id
}

fn bob() -> Actor {
    Actor::User {
        name: "bob".into(),
        permissions: PermissionSet::ALL,
    }
}

#[tokio::test]
async fn a_decision_past_the_deadline_is_refused_and_leaves_the_request_expired() {
    let dir = tempfile::tempdir().unwrap();
    let (lifecycle, store) = lifecycle(dir.path()).await;
    let decisions = [
        SessionEvent::Approve {
            by: bob(),
            groups: vec![],
        },
        SessionEvent::Deny {
            by: bob(),
            reason: "not now".into(),
        },
        SessionEvent::BreakGlass { by: bob() },
    ];
    for event in decisions {
        let id = request(store.as_ref(), EXPIRY + Duration::seconds(1)).await;
        let refused = lifecycle.act(id, event.clone()).await;
        assert!(
            matches!(refused, Err(Error::Expired(d)) if d == EXPIRY),
            "{event:?}: {refused:?}"
        );
        let row = store.get(id).await.unwrap().unwrap();
        assert_eq!(row.state, SessionState::Expired, "{event:?}");
        assert!(row.approver.is_none() && row.glass_broken_by.is_none());
        let events = store.events(id).await.unwrap();
        let last = events.last().unwrap();
        assert_eq!(
            (last.actor.as_str(), last.kind.as_str()),
            ("system", "expire")
        );
    }
}

#[tokio::test]
async fn decisions_in_time_and_withdrawals_after_the_deadline_go_through() {
    let dir = tempfile::tempdir().unwrap();
    let (lifecycle, store) = lifecycle(dir.path()).await;
    let id = request(store.as_ref(), EXPIRY - Duration::seconds(5)).await;
    let approved = lifecycle
        .act(
            id,
            SessionEvent::Approve {
                by: bob(),
                groups: vec![],
            },
        )
        .await
        .unwrap();
    assert_eq!(approved.state, SessionState::Approved);
    assert_eq!(approved.approver.as_deref(), Some("bob"));
    // The deadline is for a decision: the requester may still withdraw an overdue request.
    let id = request(store.as_ref(), EXPIRY + Duration::seconds(1)).await;
    let alice = Actor::User {
        name: "alice".into(),
        permissions: PermissionSet::ALL,
    };
    let withdrawn = lifecycle
        .act(
            id,
            SessionEvent::End {
                by: alice,
                recycle: false,
            },
        )
        .await
        .unwrap();
    assert_eq!(withdrawn.state, SessionState::Withdrawn);
}
