//! The sweep never starts a second activation of a session whose first one still runs, and a
//! debug container that never starts does not hold the sweep: its pass returns, and TTL ends
//! and expiries go on. The cluster port here is a stand-in that blocks in `activate` until the
//! test lets it go (no API server can be made to hang on cue); it counts overlapping calls.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use breakglass_server::config::Config;
use breakglass_server::ports::{AttachedTerminal, ClusterError, ClusterOps, ProgressSink};
use breakglass_server::state::Context;
use breakglass_shared::{Session, SessionState};
use tokio::sync::Notify;
use uuid::Uuid;

#[derive(Default)]
struct Hanging {
    calls: AtomicUsize,
    running: AtomicUsize,
    most_at_once: AtomicUsize,
    release: Notify,
    entered: Notify,
}

#[async_trait]
impl ClusterOps for Hanging {
    fn serves(&self, _: &str) -> bool {
        true
    }
    async fn activate(&self, _: &Session, _: &dyn ProgressSink) -> Result<(), ClusterError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_at_once.fetch_max(now, Ordering::SeqCst);
        self.entered.notify_one();
        self.release.notified().await;
        self.running.fetch_sub(1, Ordering::SeqCst);
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
        Err(ClusterError::config(
            &s.environment,
            "no terminal in this test",
        ))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_activation_is_neither_doubled_nor_holding_the_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::resolve(&common::dev_args(dir.path()), Default::default()).unwrap();
    let cluster = Arc::new(Hanging::default());
    let ctx = Context::new(config, Some(cluster.clone() as Arc<dyn ClusterOps>))
        .await
        .unwrap();
    let s = common::TestServer::over(ctx, dir);
    let alice = s.login("alice").await;
    let entered = cluster.entered.notified();
    let id: Uuid = s.create(&alice, "dev").await["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(20), entered)
        .await
        .expect("activation did not start");

    // Two passes while it hangs: each returns, and neither starts a second activation.
    for _ in 0..2 {
        let now = time::OffsetDateTime::now_utc();
        let pass = breakglass_server::sweep::sweep_once(&s.ctx, now);
        let report = tokio::time::timeout(Duration::from_secs(30), pass)
            .await
            .expect("the sweep waited for the hanging activation")
            .unwrap();
        assert_eq!(report.driven, 0, "{report:?}");
    }
    assert_eq!(cluster.calls.load(Ordering::SeqCst), 1);
    assert_eq!(cluster.most_at_once.load(Ordering::SeqCst), 1);

    // Let it go: the one activation completes.
    let mut changes = s.ctx.changes.subscribe();
    cluster.release.notify_waiters();
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let c = changes.recv().await.unwrap();
            if c.session.id == id && c.session.state == SessionState::Active {
                return;
            }
        }
    })
    .await
    .expect("the activation did not complete");
    assert_eq!(cluster.calls.load(Ordering::SeqCst), 1);
}
