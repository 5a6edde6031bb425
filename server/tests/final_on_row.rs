//! A session becomes final only with its row naming the recording's final version. The
//! writer reports each stored version itself, but that report is lost when the database is
//! down at that moment; a final row takes no more progress, so the lifecycle puts the version
//! `finish` returns on the row before `Ended` or `Failed`. Everything here is real (recorder,
//! local recording store, SQLite, state machine) but the cluster; the recorder's reports are
//! dropped on cue.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use breakglass_server::config::Config;
use breakglass_server::connections::Connections;
use breakglass_server::lifecycle::{Lifecycle, Ports};
use breakglass_server::ports::{AttachedTerminal, ClusterError, ClusterOps, ProgressSink};
use breakglass_server::recorder::{Recorder, RecorderParts};
use breakglass_server::recording::segment::{parse_segment_key, read_recording};
use breakglass_server::recording::RecordingConfig;
use breakglass_shared::session::{EndReason, NewSession};
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
    async fn spec(
        &self,
        s: &Session,
    ) -> Result<breakglass_shared::session::SessionSpec, ClusterError> {
        Ok(common::stand_in_spec(s))
    }
    async fn extend(&self, _: &Session) -> Result<(), ClusterError> {
        Ok(())
    }
    async fn cleanup(&self, _: &Session, _: &dyn ProgressSink) -> Result<(), ClusterError> {
        Ok(())
    }
    async fn containers_of(
        &self,
        _: &str,
        _: &str,
        _: &str,
    ) -> Result<Option<Vec<String>>, ClusterError> {
        Ok(Some(vec!["app".into()]))
    }
    async fn pod_gone(&self, _: &Session) -> Result<bool, ClusterError> {
        Ok(false)
    }
    async fn reconcile(&self, _: &str, _: &HashSet<Uuid>) -> Result<usize, ClusterError> {
        Ok(0)
    }
    async fn attach(&self, s: &Session) -> Result<Box<dyn AttachedTerminal>, ClusterError> {
        Err(refused(s))
    }
}

fn refused(s: &Session) -> ClusterError {
    ClusterError::config(&s.environment, "refused in this test")
}

/// The lifecycle over the real recorder, store and state machine, with every report the
/// recorder sends dropped: each stored version is lost on its way to the row, as when the
/// database is down at that moment.
async fn lifecycle(dir: &std::path::Path, refuse: bool) -> (Arc<Lifecycle>, Arc<Recorder>) {
    let config = Config::resolve(&common::dev_args(dir), Default::default()).unwrap();
    let store = breakglass_server::store::connect(&config.database_url)
        .await
        .unwrap();
    let metrics = breakglass_server::metrics::Metrics::new().unwrap();
    let changes = tokio::sync::broadcast::channel(64).0;
    let (recorder, lost) = Recorder::new(RecorderParts {
        config: RecordingConfig::from_settings(&config.recording).unwrap(),
        db: store.clone(),
        connections: Arc::new(Connections::default()),
        changes: changes.clone(),
        missed: tokio::sync::watch::channel(0).1,
        anchors: metrics.anchors.clone(),
        advertise: None,
    })
    .unwrap();
    drop(lost);
    let (_none, rx) = tokio::sync::mpsc::channel(1);
    let lifecycle = Lifecycle::new(
        Ports {
            store,
            changes,
            transitions: metrics.transitions,
            cluster: Some(Arc::new(Cluster { refuse })),
            recorder: recorder.clone(),
            terminals: Arc::new(Connections::default()),
            park_without_cluster: false,
            approval_expiry: config.approval_expiry,
            outbox: Arc::new(breakglass_server::outbox::Outbox::new(Arc::new(
                config.clone(),
            ))),
        },
        rx,
    );
    (lifecycle, recorder)
}

/// The row names the final cast as stored: the whole cast's key, not a segment's, whose
/// stored bytes are as long as the row says and end with `ended: <reason>`.
async fn assert_final_on_row(recorder: &Recorder, s: &Session, reason: &str) {
    let rec = s.recording.as_ref().expect("the row names a recording");
    assert!(parse_segment_key(&rec.key).is_none(), "{rec:?}");
    let cast = read_recording(recorder.store().as_ref(), rec, false)
        .await
        .unwrap();
    assert_eq!(cast.len() as u64, rec.bytes, "{rec:?}");
    let end = String::from_utf8_lossy(&cast[cast.len().saturating_sub(200)..]).into_owned();
    assert!(end.contains(&format!("ended: {reason}")), "{end}");
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
        quorum: breakglass_shared::session::Quorum::default(),
        extension_limits: breakglass_shared::session::ExtensionLimits::default(),
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
    let (lifecycle, recorder) = lifecycle(dir.path(), false).await;
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
    assert_final_on_row(&recorder, &ended, "TtlExpired").await;
}

#[tokio::test]
async fn a_failed_activation_names_the_final_version_its_writer_could_not_report() {
    let dir = tempfile::tempdir().unwrap();
    let (lifecycle, recorder) = lifecycle(dir.path(), true).await;
    let id = approved(&lifecycle).await;
    let failed = lifecycle.drive(id).await.unwrap();
    assert_eq!(failed.state, SessionState::Failed);
    assert_final_on_row(&recorder, &failed, "activation failed").await;
}
