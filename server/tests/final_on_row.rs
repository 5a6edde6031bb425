//! A session becomes final only with its row naming the recording's final version. The
//! writer reports each stored version itself, but that report is lost when the database is
//! down at that moment; a final row takes no more progress, so the lifecycle puts the version
//! `finish` returns on the row before `Ended` or `Failed`. The recordings port here stores
//! nothing and never reports (the lost report, on cue); the store and the state machine are
//! the real ones.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use breakglass_server::lifecycle::{Lifecycle, Ports};
use breakglass_server::ports::{
    ClusterError, ClusterOps, ProgressSink, Recording, RecordingError, Recordings, Terminals,
};
use breakglass_shared::session::{EndReason, NewSession, RecordingRef, RekorEntry};
use breakglass_shared::{Mode, Session, SessionEvent, SessionState, Tier};
use uuid::Uuid;

/// A cluster where everything succeeds at once, or where every activation fails.
struct Cluster {
    refuse: bool,
}

#[async_trait]
impl ClusterOps for Cluster {
    fn serves(&self, _: &str) -> bool {
        true
    }
    async fn activate(&self, s: &Session, _: &dyn ProgressSink) -> Result<(), ClusterError> {
        if self.refuse {
            return Err(refused(s));
        }
        Ok(())
    }
    async fn cleanup(&self, _: &Session, _: &dyn ProgressSink) -> Result<(), ClusterError> {
        Ok(())
    }
    async fn pod_gone(&self, _: &Session) -> Result<bool, ClusterError> {
        Ok(false)
    }
    async fn reconcile(&self, _: &str, _: &HashSet<Uuid>) -> Result<usize, ClusterError> {
        Ok(0)
    }
    async fn attach(&self, s: &Session) -> Result<kube::api::AttachedProcess, ClusterError> {
        Err(refused(s))
    }
}

fn refused(s: &Session) -> ClusterError {
    ClusterError::Config {
        env: s.environment.clone(),
        message: "refused in this test".into(),
    }
}

/// The final version of every recording, as if stored while the database was down: returned
/// by `finish`, never reported.
fn final_of(id: Uuid) -> RecordingRef {
    RecordingRef {
        key: format!("sessions/{id}.cast"),
        version: "v-final".into(),
        sha256: "ab".repeat(32),
        bytes: 4242,
    }
}

struct LostReport;

#[async_trait]
impl Recordings for LostReport {
    async fn start(&self, _: &Session) -> Result<Recording, RecordingError> {
        Ok(Recording::Here)
    }
    async fn marker(&self, _: Uuid, _: &str) {}
    async fn finish(&self, s: &Session, _: &str) -> Option<RecordingRef> {
        Some(final_of(s.id))
    }
    async fn anchor(&self, _: &Session, _: u32) -> Option<RekorEntry> {
        None
    }
    fn anchors(&self) -> bool {
        false
    }
}

struct NoTerminals;

#[async_trait]
impl Terminals for NoTerminals {
    async fn close(&self, _: Uuid, _: u16, _: String) {}
}

async fn lifecycle(dir: &std::path::Path, refuse: bool) -> Arc<Lifecycle> {
    let url = format!("sqlite://{}", dir.join("breakglass.db").display());
    let store = breakglass_server::store::connect(&url).await.unwrap();
    let (_events, rx) = tokio::sync::mpsc::channel(8);
    Lifecycle::new(
        Ports {
            store,
            changes: tokio::sync::broadcast::channel(64).0,
            transitions: breakglass_server::metrics::Metrics::new()
                .unwrap()
                .transitions,
            cluster: Some(Arc::new(Cluster { refuse })),
            recorder: Arc::new(LostReport),
            terminals: Arc::new(NoTerminals),
            park_without_cluster: false,
        },
        rx,
    )
}

async fn approved(lifecycle: &Lifecycle) -> Uuid {
    let req = NewSession {
        environment: "dev".into(),
        tier: Tier::Ground,
        namespace: "shop".into(),
        pod: "web-1".into(),
        target_container: None,
        mode: Mode::Live,
        reason: "orders stuck in the payment worker".into(),
        ticket: None,
        duration_minutes: 30,
        recycle: false,
        requester: "alice".into(),
    };
    let s = lifecycle
        .create(req, time::OffsetDateTime::now_utc())
        .await
        .unwrap();
    assert_eq!(s.state, SessionState::Approved);
    s.id
}

#[tokio::test]
async fn an_ended_session_names_the_final_version_its_writer_could_not_report() {
    let dir = tempfile::tempdir().unwrap();
    let lifecycle = lifecycle(dir.path(), false).await;
    let id = approved(&lifecycle).await;
    assert_eq!(
        lifecycle.drive(id).await.unwrap().state,
        SessionState::Active
    );
    let ending = SessionEvent::SystemEnd {
        reason: EndReason::TtlExpired,
    };
    lifecycle.apply_event(id, ending).await.unwrap();
    let ended = lifecycle.drive(id).await.unwrap();
    assert_eq!(ended.state, SessionState::Ended);
    assert_eq!(ended.recording, Some(final_of(id)));
}

#[tokio::test]
async fn a_failed_activation_names_the_final_version_its_writer_could_not_report() {
    let dir = tempfile::tempdir().unwrap();
    let lifecycle = lifecycle(dir.path(), true).await;
    let id = approved(&lifecycle).await;
    let failed = lifecycle.drive(id).await.unwrap();
    assert_eq!(failed.state, SessionState::Failed);
    assert_eq!(failed.recording, Some(final_of(id)));
}
