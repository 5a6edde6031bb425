//! The shared context every handler and task gets, as `Arc`.

use std::path::Path;
use std::sync::Arc;

use axum::extract::FromRef;
use axum_extra::extract::cookie::Key;
use breakglass_shared::api::SessionChange;
use prometheus::{IntCounterVec, IntGauge, Opts, Registry};
use tokio::sync::broadcast;

use crate::config::Config;
use crate::fsutil::write_private;
use crate::lifecycle::ClusterOps;
use crate::store::Store;

/// Prometheus metrics of one server.
#[derive(Clone)]
pub struct Metrics {
    /// Registry served at `/metrics`.
    pub registry: Registry,
    /// HTTP requests by method, surface (api, ops, frontend) and status.
    pub requests: IntCounterVec,
    /// Session transitions by event kind.
    pub transitions: IntCounterVec,
    /// Open SSE streams.
    pub sse_open: IntGauge,
    /// Sweep actions by kind.
    pub sweep_actions: IntCounterVec,
    /// 1 while this replica holds the sweep lease.
    pub sweep_leader: IntGauge,
    /// Attempts to anchor a final recording hash, by outcome (anchored, failed).
    pub anchors: IntCounterVec,
}

impl Metrics {
    fn new() -> Result<Metrics, prometheus::Error> {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new("breakglass_http_requests_total", "HTTP requests served"),
            &["method", "surface", "status"],
        )?;
        let transitions = IntCounterVec::new(
            Opts::new(
                "breakglass_transitions_total",
                "Session state changes applied",
            ),
            &["kind"],
        )?;
        let sse_open = IntGauge::new("breakglass_sse_streams_open", "Open event streams")?;
        let sweep_actions = IntCounterVec::new(
            Opts::new(
                "breakglass_sweep_actions_total",
                "Actions taken by the sweep",
            ),
            &["action"],
        )?;
        let sweep_leader = IntGauge::new("breakglass_sweep_leader", "1 while this replica sweeps")?;
        registry.register(Box::new(sweep_leader.clone()))?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(transitions.clone()))?;
        registry.register(Box::new(sse_open.clone()))?;
        registry.register(Box::new(sweep_actions.clone()))?;
        let anchors = IntCounterVec::new(
            Opts::new(
                "breakglass_recording_anchors_total",
                "Final recording hashes submitted to the transparency log, by outcome",
            ),
            &["outcome"],
        )?;
        registry.register(Box::new(anchors.clone()))?;
        Ok(Metrics {
            anchors,
            registry,
            requests,
            transitions,
            sse_open,
            sweep_actions,
            sweep_leader,
        })
    }
}

/// Everything a request or task needs.
pub struct Context {
    /// Resolved configuration.
    pub config: Config,
    /// Session storage.
    pub store: Arc<dyn Store>,
    /// Live session changes for the SSE streams.
    pub changes: broadcast::Sender<SessionChange>,
    /// Metrics.
    pub metrics: Metrics,
    /// Cookie signing key.
    pub key: Key,
    /// Cluster activation and cleanup; `None` until a cluster driver is configured, in which
    /// case approved sessions wait in `Approved`.
    pub clusters: Option<Arc<dyn ClusterOps>>,
    /// Terminal relays and recordings.
    pub relays: Option<Arc<crate::relay::Relays>>,
    /// The concrete cluster driver (listings and guardrail reports), when configured.
    pub cluster_driver: Option<Arc<crate::cluster::Clusters>>,
}

/// Axum state: a cheap handle on the [`Context`].
#[derive(Clone)]
pub struct AppState(pub Arc<Context>);

impl std::ops::Deref for AppState {
    type Target = Context;
    fn deref(&self) -> &Context {
        &self.0
    }
}

impl FromRef<AppState> for Key {
    fn from_ref(s: &AppState) -> Key {
        s.0.key.clone()
    }
}

/// Errors while building the context.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The database could not be opened or migrated.
    #[error("cannot open the database: {0}")]
    Store(#[from] crate::store::StoreError),
    /// The cookie key could not be read or created.
    #[error("cannot read or create the cookie key {path}: {source}")]
    Key {
        /// Key file.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Metrics registration failed.
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    /// The recording store is misconfigured.
    #[error("recording store: {0}")]
    Recording(crate::recording::StoreError),
}

impl Context {
    /// Opens the store and builds the context.
    pub async fn new(
        config: Config,
        clusters: Option<Arc<dyn ClusterOps>>,
    ) -> Result<Arc<Context>, StartError> {
        Context::with_driver(config, clusters, None).await
    }

    /// Like [`Context::new`], with the concrete cluster driver for listings and reports.
    pub async fn with_driver(
        config: Config,
        clusters: Option<Arc<dyn ClusterOps>>,
        cluster_driver: Option<Arc<crate::cluster::Clusters>>,
    ) -> Result<Arc<Context>, StartError> {
        let store = crate::store::connect(&config.database_url).await?;
        let key = match &config.session_secret {
            // The config check guarantees at least 64 bytes, which is what `Key::from` needs.
            Some(s) => Key::from(s.as_bytes()),
            None => load_or_create_key(&config.data_dir)?,
        };
        let recording = crate::recording::RecordingConfig::from_settings(&config.recording)
            .map_err(StartError::Recording)?;
        let relays = crate::relay::Relays::new(recording).map_err(StartError::Recording)?;
        Ok(Arc::new(Context {
            relays: Some(Arc::new(relays)),
            cluster_driver,
            changes: broadcast::channel(1024).0,
            metrics: Metrics::new()?,
            config,
            store,
            key,
            clusters,
        }))
    }
}

/// The cookie key lives in the data directory so restarts keep people signed in.
fn load_or_create_key(dir: &Path) -> Result<Key, StartError> {
    let path = dir.join("cookie.key");
    let err = |source| StartError::Key {
        path: path.display().to_string(),
        source,
    };
    match std::fs::read(&path) {
        Ok(bytes) if bytes.len() >= 64 => Ok(Key::from(&bytes)),
        Ok(_) | Err(_) => {
            std::fs::create_dir_all(dir).map_err(err)?;
            let key = Key::generate();
            write_private(&path, key.master()).map_err(err)?;
            Ok(key)
        }
    }
}
