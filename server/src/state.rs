//! The shared context, built once. It only composes: it builds the store, the recorder, the
//! connections, the relay and the lifecycle (which owns its ports), and hands them out: the
//! router's state is [`AppState`], from which each handler takes only the parts it uses
//! (`State<Arc<Config>>`, `State<Arc<Lifecycle>>`, ...; see the `FromRef` impls below).
//!
//! It also joins this process to the other replicas of the database: what they announce
//! through the store ([`Notice`]) is carried in here, so a change committed on another replica
//! reaches this one's SSE streams and keeper on the same `changes` channel as a local one.

use std::path::Path;
use std::sync::{Arc, Weak};

use axum::extract::FromRef;
use axum_extra::extract::cookie::Key;
use breakglass_shared::api::SessionChange;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::watch;
use tracing::Instrument;

use crate::auth::oidc::OidcProvider;
use crate::cluster::Clusters;
use crate::config::Config;
use crate::connections::Connections;
use crate::fsutil::write_private;
use crate::holds::Holds;
use crate::lifecycle::{Lifecycle, Ports};
pub use crate::metrics::Metrics;
use crate::ports::ClusterOps;
use crate::recorder::{Recorder, RecorderParts};
use crate::relay::Relay;
use crate::step_up::StepUp;
use crate::store::{Notice, Store};
use crate::watching::Watching;

/// Everything a request or task needs.
pub struct Context {
    /// Resolved configuration.
    pub config: Arc<Config>,
    /// Session storage (reads; every write goes through [`Context::lifecycle`]).
    pub store: Arc<dyn Store>,
    /// Live session changes for the SSE streams: this replica's commits and, re-read from
    /// the database, the other replicas'.
    pub changes: broadcast::Sender<SessionChange>,
    /// Bumped whenever changes of other replicas may have been missed (the database's
    /// notifications were interrupted): live views re-read.
    pub missed: watch::Sender<u64>,
    /// Metrics.
    pub metrics: Metrics,
    /// Cookie signing key.
    pub key: Key,
    /// The one place sessions change.
    pub lifecycle: Arc<Lifecycle>,
    /// Session recordings (the stored casts, verification, anchoring).
    pub recorder: Arc<Recorder>,
    /// The terminal relay.
    pub relay: Arc<Relay>,
    /// The watch sockets of running sessions.
    pub watching: Arc<Watching>,
    /// The cluster driver, for listings and guardrail reports; `None` when no environment
    /// has a cluster (the lifecycle holds it as its port too).
    pub clusters: Option<Arc<Clusters>>,
    /// The terminals and live streams open on this replica, and who opened them: checked
    /// again every second (`crate::revocation`).
    pub holds: Arc<Holds>,
    /// The OIDC provider (discovered on first use), shared by the sign-in and the checks.
    pub oidc: OidcProvider,
    /// Security keys: registering them, and confirming actions with them.
    pub step_up: Arc<StepUp>,
    /// Bumped when the locks in force changed (read once a second by `crate::revocation`,
    /// wherever they were written): live pages read their environments' locks again.
    pub locks_changed: watch::Sender<u64>,
    /// Notification routing (and the wake-up of this replica's delivery worker).
    pub outbox: Arc<crate::outbox::Outbox>,
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

/// Each part a handler may take as its `State`, cloned out of the context (each is an `Arc`
/// or as cheap), so a handler names what it uses instead of the whole context.
macro_rules! parts {
    ($($part:ty => $field:ident),* $(,)?) => {
        $(
            impl FromRef<AppState> for $part {
                fn from_ref(s: &AppState) -> $part {
                    s.0.$field.clone()
                }
            }
        )*
    };
}

parts! {
    Arc<Config> => config,
    Key => key,
    Arc<dyn Store> => store,
    Arc<Lifecycle> => lifecycle,
    Arc<Recorder> => recorder,
    Arc<Relay> => relay,
    Arc<Watching> => watching,
    Option<Arc<Clusters>> => clusters,
    Metrics => metrics,
    Arc<Holds> => holds,
    Arc<StepUp> => step_up,
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
    Recording(crate::recording::RecordingStoreError),
}

impl Context {
    /// Opens the store and builds the context over the cluster port `cluster` (tests pass
    /// their own, or `None`); the cluster listings are off.
    pub async fn new(
        config: Config,
        cluster: Option<Arc<dyn ClusterOps>>,
    ) -> Result<Arc<Context>, StartError> {
        Context::build(config, cluster, None).await
    }

    /// The context over the configured clusters (when any has credentials).
    pub async fn with_clusters(
        config: Config,
        clusters: Option<Arc<Clusters>>,
    ) -> Result<Arc<Context>, StartError> {
        let port = clusters.clone().map(|c| c as Arc<dyn ClusterOps>);
        Context::build(config, port, clusters).await
    }

    async fn build(
        config: Config,
        cluster: Option<Arc<dyn ClusterOps>>,
        clusters: Option<Arc<Clusters>>,
    ) -> Result<Arc<Context>, StartError> {
        let store = crate::store::connect(&config.database_url).await?;
        let notices = store.join().await?;
        let key = match &config.session_secret {
            // The config check guarantees at least 64 bytes, which is what `Key::from` needs.
            Some(s) => Key::from(s.as_bytes()),
            None => load_or_create_key(&config.data_dir)?,
        };
        let metrics = Metrics::new()?;
        let changes = broadcast::channel(1024).0;
        let missed = watch::channel(0).0;
        let connections = Arc::new(Connections::default());
        let recording = crate::recording::RecordingConfig::from_settings(&config.recording)
            .map_err(StartError::Recording)?;
        let (recorder, recorder_events) = Recorder::new(RecorderParts {
            config: recording,
            db: store.clone(),
            connections: connections.clone(),
            changes: changes.clone(),
            missed: missed.subscribe(),
            anchors: metrics.anchors.clone(),
            advertise: config.advertise_url.clone(),
        })
        .map_err(StartError::Recording)?;
        let config = Arc::new(config);
        let outbox = Arc::new(crate::outbox::Outbox::new(config.clone()));
        let lifecycle = Lifecycle::new(
            Ports {
                store: store.clone(),
                changes: changes.clone(),
                transitions: metrics.transitions.clone(),
                cluster: cluster.clone(),
                recorder: recorder.clone(),
                terminals: connections.clone(),
                park_without_cluster: config.no_clusters,
                approval_expiry: config.approval_expiry,
                outbox: outbox.clone(),
            },
            recorder_events,
        );
        let holds = Arc::<Holds>::default();
        let watching = Arc::new(Watching {
            config: config.clone(),
            store: store.clone(),
            recorder: recorder.clone(),
            watches: connections.watches().clone(),
            holds: holds.clone(),
            key: key.clone(),
        });
        let relay = Arc::new(Relay {
            store: store.clone(),
            recorder: recorder.clone(),
            cluster,
            connections,
            holds: holds.clone(),
            config: config.clone(),
        });
        let oidc = OidcProvider::for_config(&config);
        let step_up = Arc::new(StepUp::new(&config, store.clone()));
        let ctx = Arc::new(Context {
            config,
            store,
            changes,
            missed,
            metrics,
            key,
            lifecycle,
            recorder,
            relay,
            watching,
            clusters,
            holds,
            oidc,
            step_up,
            locks_changed: watch::channel(0).0,
            outbox: outbox.clone(),
        });
        tokio::spawn(follow(Arc::downgrade(&ctx), notices));
        let checker = crate::revocation::Checker {
            config: ctx.config.clone(),
            key: ctx.key.clone(),
            store: ctx.store.clone(),
            oidc: ctx.oidc.clone(),
            lifecycle: ctx.lifecycle.clone(),
            holds: Arc::downgrade(&ctx.holds),
            locks_changed: ctx.locks_changed.clone(),
        };
        tokio::spawn(checker.run());
        if outbox.has_receivers() {
            let worker = crate::notify::Worker {
                store: ctx.store.clone(),
                config: ctx.config.clone(),
                outbox: outbox.clone(),
                metrics: ctx.metrics.clone(),
                holder: format!("notify-{}", uuid::Uuid::now_v7()),
            };
            tokio::spawn(
                worker
                    .run()
                    .instrument(tracing::info_span!("notifications")),
            );
        }
        Ok(ctx)
    }
}

/// Carries the other replicas' notices into this one until the context is gone: a changed
/// session is re-read (the notice names it, the row is the truth) and published like a local
/// commit; a request for a recording's writer goes to the recorder; a possible loss bumps
/// `missed`.
async fn follow(ctx: Weak<Context>, mut notices: broadcast::Receiver<Notice>) {
    loop {
        let notice = notices.recv().await;
        let Some(ctx) = ctx.upgrade() else { return };
        match notice {
            Ok(Notice::Changed { id, kind, .. }) => match ctx.store.get(id).await {
                Ok(Some(session)) => {
                    let _ = ctx.changes.send(SessionChange { session, kind });
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(%id, error = %e, "a change on another replica could not be read; live views re-read");
                    ctx.missed.send_modify(|n| *n += 1);
                }
            },
            Ok(Notice::Handover { id }) => {
                let recorder = ctx.recorder.clone();
                tokio::spawn(async move { recorder.hand_over(id).await });
            }
            Ok(Notice::Missed) | Err(RecvError::Lagged(_)) => ctx.missed.send_modify(|n| *n += 1),
            Err(RecvError::Closed) => return,
        }
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
