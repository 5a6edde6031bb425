//! The cluster driver: activation and cleanup of sessions in each environment's cluster,
//! orphan reconciliation, and the listings the UI needs. It implements the lifecycle's
//! [`ClusterOps`] port and never writes a session itself: every step it completes is reported
//! through the [`ProgressSink`] it is handed, which goes through the state machine.
//!
//! `activate`, `cleanup` and `reconcile` hold the three kinds of work; `error` classifies the
//! API server's answers and retries the transient ones.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use breakglass_shared::session::SessionSpec;
use breakglass_shared::{Session, Tier};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::ListParams;
use kube::{Api, Client};
use tokio::sync::Mutex;
use uuid::Uuid;

use crate::config::{ClusterCredentials, Config};
use crate::credentials;
pub use crate::ports::ClusterError;
use crate::ports::{AttachedTerminal, ClusterOps, ProgressSink};

mod activate;
mod attach;
mod cleanup;
mod error;
mod health;
pub mod listing;
pub mod objects;
mod reconcile;
pub mod spec;

use error::{retry, STEP_BUDGET};
use objects::*;

/// Sessions in one namespace from which the sweep lists the namespace's pods (metadata only)
/// instead of reading each session's pod. Below it the reads are at most two requests, and a
/// list of a large namespace would carry every other pod's metadata for one or two sessions.
const LIST_FROM: usize = 3;

/// Pods per page of that list.
const POD_PAGE: u32 = 500;

/// A page of a namespace's pods as the sweep reads it: each one's name and whether it is being
/// deleted, nothing else. Decoding whole metadata built a JSON tree of every pod's managed
/// fields (each debug container adds its own entry) on every pass, a tenth of what an idle
/// server with a thousand open terminals spent (BENCHMARKS.md); serde skips what is not named
/// here without building anything.
#[derive(serde::Deserialize)]
struct PodNames {
    items: Vec<NamedPod>,
    metadata: PageMeta,
}

#[derive(serde::Deserialize)]
struct NamedPod {
    metadata: PodName,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodName {
    name: Option<String>,
    deletion_timestamp: Option<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
struct PageMeta {
    #[serde(rename = "continue")]
    continue_: Option<String>,
}

struct EnvCluster {
    tier: Tier,
    creds: ClusterCredentials,
    /// Namespaces no session may touch (checked again here, below the API's check).
    protected: Vec<String>,
}

/// Every configured cluster.
pub struct Clusters {
    envs: HashMap<String, EnvCluster>,
    debug_image: String,
    activation_timeout: Duration,
    /// Objects younger than this are never judged orphans (`reconcile`).
    orphan_min_age: Duration,
    /// Clients of clusters whose credentials do not change per step.
    clients: Mutex<HashMap<String, Client>>,
    /// The server's username per environment (SelfSubjectReview), dropped after a 401.
    identities: Mutex<HashMap<String, String>>,
    /// The last reachability probe per environment (`health`).
    probes: health::Probes,
}

impl Clusters {
    /// The clusters of every environment that has credentials; `None` when none has.
    pub fn from_config(config: &Config) -> Option<Arc<Clusters>> {
        let envs: HashMap<String, EnvCluster> = config
            .environments
            .iter()
            .filter_map(|e| {
                e.cluster.clone().map(|creds| {
                    (
                        e.name.clone(),
                        EnvCluster {
                            tier: e.tier,
                            creds,
                            protected: e.protected_namespaces.clone(),
                        },
                    )
                })
            })
            .collect();
        if envs.is_empty() {
            return None;
        }
        Some(Arc::new(Clusters {
            envs,
            debug_image: config.debug_image.clone(),
            activation_timeout: config.activation_timeout,
            orphan_min_age: config.orphan_min_age,
            clients: Mutex::new(HashMap::new()),
            identities: Mutex::new(HashMap::new()),
            probes: health::Probes::default(),
        }))
    }

    /// Whether `env` has a cluster here.
    pub fn has(&self, env: &str) -> bool {
        self.envs.contains_key(env)
    }

    fn env(&self, env: &str) -> Result<&EnvCluster, ClusterError> {
        self.envs.get(env).ok_or_else(|| {
            ClusterError::config(
                env,
                "no cluster credentials are configured for this environment",
            )
        })
    }

    /// A client for one step on `env`: minted tokens are fresh each call, other credentials
    /// are built once.
    pub async fn client(&self, env: &str) -> Result<Client, ClusterError> {
        let e = self.env(env)?;
        if let ClusterCredentials::MintedToken { home, .. } = &e.creds {
            let home_client = Box::pin(self.client(home)).await?;
            return credentials::client_for(env, &e.creds, Some(home_client)).await;
        }
        let mut clients = self.clients.lock().await;
        if let Some(c) = clients.get(env) {
            return Ok(c.clone());
        }
        let c = credentials::client_for(env, &e.creds, None).await?;
        clients.insert(env.to_string(), c.clone());
        Ok(c)
    }

    /// The server's username on `env` (cached).
    pub async fn identity(&self, env: &str, client: &Client) -> Result<String, ClusterError> {
        if let Some(u) = self.identities.lock().await.get(env) {
            return Ok(u.clone());
        }
        let u = retry(STEP_BUDGET, false, || {
            credentials::whoami(env, client.clone())
        })
        .await?;
        self.identities
            .lock()
            .await
            .insert(env.to_string(), u.clone());
        Ok(u)
    }

    /// Passes `r` on, forgetting the client and identity of `env` when a 401 proved them
    /// stale.
    async fn forget_stale<T>(
        &self,
        env: &str,
        r: Result<T, ClusterError>,
    ) -> Result<T, ClusterError> {
        if let Err(e) = &r {
            if e.code() == Some(401) {
                self.identities.lock().await.remove(env);
                self.clients.lock().await.remove(env);
            }
        }
        r
    }

    /// Whether the session's pod (or copy) is still there.
    pub async fn pod_present(&self, s: &Session) -> Result<bool, ClusterError> {
        let env = s.environment.as_str();
        let client = self.client(env).await?;
        let pods: Api<Pod> = Api::namespaced(client, &s.namespace);
        // Metadata only: the sweep asks this of every active session each pass, and parsing
        // whole Pods (every container's spec and status) was the largest part of an idle
        // server's profile (BENCHMARKS.md, "Relay and recording").
        match pods.get_metadata_opt(&debug_pod_name(s)).await {
            Ok(p) => Ok(p.is_some_and(|p| p.metadata.deletion_timestamp.is_none())),
            Err(e) => Err(ClusterError::from_kube(env, "read the pod", e)),
        }
    }

    /// The names of the pods of `namespace` on `env` that exist and are not being deleted,
    /// from their metadata, a page at a time.
    async fn pods_present_in(
        &self,
        env: &str,
        namespace: &str,
    ) -> Result<HashSet<String>, ClusterError> {
        let client = self.client(env).await?;
        let url = <Pod as kube::Resource>::url_path(&(), Some(namespace));
        let mut present = HashSet::new();
        let mut params = ListParams::default().limit(POD_PAGE);
        loop {
            let req = kube::core::Request::new(&url)
                .list_metadata(&params)
                .map_err(|e| {
                    ClusterError::config_from(env, "cannot build the pod list request", e)
                })?;
            let page: PodNames = client
                .request(req)
                .await
                .map_err(|e| ClusterError::from_kube(env, "list the pods", e))?;
            present.extend(
                page.items
                    .into_iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .filter_map(|p| p.metadata.name),
            );
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => return Ok(present),
            }
        }
    }

    /// The namespaces of `env`.
    pub async fn namespaces(&self, env: &str) -> Result<Vec<Namespace>, ClusterError> {
        let client = self.client(env).await?;
        let api: Api<Namespace> = Api::all(client);
        Ok(api
            .list(&ListParams::default())
            .await
            .map_err(|e| ClusterError::from_kube(env, "list namespaces", e))?
            .items)
    }

    /// The pods of `namespace` on `env`.
    pub async fn pods(&self, env: &str, namespace: &str) -> Result<Vec<Pod>, ClusterError> {
        let client = self.client(env).await?;
        let api: Api<Pod> = Api::namespaced(client, namespace);
        Ok(api
            .list(&ListParams::default())
            .await
            .map_err(|e| ClusterError::from_kube(env, "list pods", e))?
            .items)
    }
}

#[async_trait]
impl ClusterOps for Clusters {
    fn serves(&self, environment: &str) -> bool {
        self.envs.contains_key(environment)
    }

    async fn activate(
        &self,
        session: &Session,
        progress: &dyn ProgressSink,
    ) -> Result<(), ClusterError> {
        let r = self.activate_inner(session, progress).await;
        self.forget_stale(&session.environment, r).await
    }

    async fn spec(&self, session: &Session) -> Result<SessionSpec, ClusterError> {
        let r = self.spec_inner(session).await;
        self.forget_stale(&session.environment, r).await
    }

    async fn extend(&self, session: &Session) -> Result<(), ClusterError> {
        let r = self.extend_inner(session).await;
        self.forget_stale(&session.environment, r).await
    }

    async fn cleanup(
        &self,
        session: &Session,
        progress: &dyn ProgressSink,
    ) -> Result<(), ClusterError> {
        let r = self.cleanup_inner(session, progress).await;
        self.forget_stale(&session.environment, r).await
    }

    async fn containers_of(
        &self,
        env: &str,
        namespace: &str,
        pod: &str,
    ) -> Result<Option<Vec<String>>, ClusterError> {
        let r = async {
            let api: Api<Pod> = Api::namespaced(self.client(env).await?, namespace);
            let found = api
                .get_opt(pod)
                .await
                .map_err(|e| ClusterError::from_kube(env, "read the pod", e))?;
            Ok(found
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .map(|p| {
                    p.spec
                        .map(|s| s.containers.into_iter().map(|c| c.name).collect())
                        .unwrap_or_default()
                }))
        }
        .await;
        self.forget_stale(env, r).await
    }

    async fn pod_gone(&self, session: &Session) -> Result<bool, ClusterError> {
        self.pod_present(session).await.map(|p| !p)
    }

    async fn pods_gone(&self, sessions: &[&Session]) -> Vec<Result<bool, ClusterError>> {
        let mut by_namespace: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
        for (i, s) in sessions.iter().enumerate() {
            by_namespace
                .entry((s.environment.as_str(), s.namespace.as_str()))
                .or_default()
                .push(i);
        }
        let mut gone: Vec<Result<bool, ClusterError>> = vec![Ok(false); sessions.len()];
        for ((env, namespace), at) in by_namespace {
            if at.len() < LIST_FROM {
                for i in at {
                    gone[i] = self.pod_gone(sessions[i]).await;
                }
                continue;
            }
            let present = self
                .forget_stale(env, self.pods_present_in(env, namespace).await)
                .await;
            for i in at {
                gone[i] = match &present {
                    Ok(names) => Ok(!names.contains(&debug_pod_name(sessions[i]))),
                    Err(e) => Err(e.clone()),
                };
            }
        }
        gone
    }

    async fn reconcile(
        &self,
        environment: &str,
        live: &HashSet<Uuid>,
    ) -> Result<usize, ClusterError> {
        Clusters::reconcile(self, environment, live).await
    }

    async fn attach(&self, s: &Session) -> Result<Box<dyn AttachedTerminal>, ClusterError> {
        let env = s.environment.as_str();
        let client = self.client(env).await?;
        let attached = attach::Attach::open(
            &client,
            env,
            &s.namespace,
            &debug_pod_name(s),
            &debug_container_name(s),
        )
        .await;
        let attached = self.forget_stale(env, attached).await?;
        Ok(Box::new(attached))
    }
}
