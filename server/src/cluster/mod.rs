//! The cluster driver: activation and cleanup of sessions in each environment's cluster,
//! orphan reconciliation, and the listings the UI needs. It implements the lifecycle's
//! [`ClusterOps`] seam and never writes a session itself: every step it completes is reported
//! through the [`ProgressSink`], which goes through the state machine.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use breakglass_shared::session::Progress;
use breakglass_shared::{Mode, Session, Tier};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use tokio::sync::Mutex;
use uuid::Uuid;

use crate::config::{ClusterCredentials, Config};
use crate::lifecycle::{ClusterOps, ProgressSink};

pub mod credentials;
pub mod listing;
pub mod objects;

use objects::*;

/// A failure talking to a cluster, naming the environment.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClusterError {
    /// Credentials or configuration are unusable.
    #[error("cluster `{env}`: {message}")]
    Config {
        /// Environment.
        env: String,
        /// What is wrong.
        message: String,
    },
    /// The API server could not be reached.
    #[error("cluster `{env}` is unreachable while trying to {what}: {message}")]
    Unreachable {
        /// Environment.
        env: String,
        /// The step.
        what: String,
        /// Transport error.
        message: String,
    },
    /// The API server refused the request (RBAC, admission policy, validation).
    #[error("cluster `{env}` refused to {what} ({code}): {message}")]
    Refused {
        /// Environment.
        env: String,
        /// The step.
        what: String,
        /// HTTP status.
        code: u16,
        /// The API server's message (for policies, it names the rule).
        message: String,
    },
    /// A bounded wait ran out.
    #[error("cluster `{env}`: {what} did not happen within {seconds} s")]
    Timeout {
        /// Environment.
        env: String,
        /// What was awaited.
        what: String,
        /// The bound.
        seconds: u64,
    },
}

impl ClusterError {
    /// Classifies a kube error for step `what` on `env`.
    pub fn from_kube(env: &str, what: &str, e: kube::Error) -> ClusterError {
        match e {
            kube::Error::Api(status) => ClusterError::Refused {
                env: env.into(),
                what: what.into(),
                code: status.code,
                message: status.message.clone(),
            },
            other => ClusterError::Unreachable {
                env: env.into(),
                what: what.into(),
                message: other.to_string(),
            },
        }
    }

    fn code(&self) -> Option<u16> {
        match self {
            ClusterError::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }

    fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    fn is_already_exists(&self) -> bool {
        self.code() == Some(409)
    }

    /// Worth another try: transport trouble, throttling, a server hiccup, or (right after a
    /// grant) RBAC not yet caught up.
    fn is_transient(&self, forbidden_too: bool) -> bool {
        match self {
            ClusterError::Unreachable { .. } => true,
            ClusterError::Refused { code, .. } => {
                matches!(code, 429 | 500 | 502 | 503 | 504) || (forbidden_too && *code == 403)
            }
            _ => false,
        }
    }
}

/// Retries `op` on transient errors with a short backoff, up to `budget`.
async fn retry<T, F, Fut>(
    budget: Duration,
    forbidden_too: bool,
    mut op: F,
) -> Result<T, ClusterError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ClusterError>>,
{
    let start = tokio::time::Instant::now();
    let mut wait = Duration::from_millis(50);
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if e.is_transient(forbidden_too) && start.elapsed() + wait < budget => {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(1));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Bound on retrying one step.
const STEP_BUDGET: Duration = Duration::from_secs(10);

struct EnvCluster {
    tier: Tier,
    creds: ClusterCredentials,
}

/// Every configured cluster.
pub struct Clusters {
    envs: HashMap<String, EnvCluster>,
    debug_image: String,
    activation_timeout: Duration,
    /// Clients of clusters whose credentials do not change per step.
    clients: Mutex<HashMap<String, Client>>,
    /// The server's username per environment (SelfSubjectReview), dropped after a 401.
    identities: Mutex<HashMap<String, String>>,
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
            clients: Mutex::new(HashMap::new()),
            identities: Mutex::new(HashMap::new()),
        }))
    }

    /// Whether `env` has a cluster here.
    pub fn has(&self, env: &str) -> bool {
        self.envs.contains_key(env)
    }

    fn env(&self, env: &str) -> Result<&EnvCluster, ClusterError> {
        self.envs.get(env).ok_or_else(|| ClusterError::Config {
            env: env.into(),
            message: "no cluster credentials are configured for this environment".into(),
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

    /// Forgets what a 401 proved stale.
    async fn on_error(&self, env: &str, e: &ClusterError) {
        if e.code() == Some(401) {
            self.identities.lock().await.remove(env);
            self.clients.lock().await.remove(env);
        }
    }

    async fn activate_inner(
        &self,
        s: &Session,
        progress: &dyn ProgressSink,
    ) -> Result<(), ClusterError> {
        let env = s.environment.as_str();
        let client = self.client(env).await?;
        let me = self.identity(env, &client).await?;

        // 1. The grant.
        let rbs: Api<RoleBinding> = Api::namespaced(client.clone(), &s.namespace);
        let want = grant(s, &me);
        let name = grant_name(s);
        retry(STEP_BUDGET, false, || async {
            match rbs.create(&PostParams::default(), &want).await {
                Ok(_) => Ok(()),
                Err(e) => {
                    let e = ClusterError::from_kube(env, "create the grant", e);
                    if e.is_already_exists() {
                        self.check_ours(&rbs, &name, s).await
                    } else {
                        Err(e)
                    }
                }
            }
        })
        .await?;
        if s.grant_name.is_none() {
            record(progress, Progress::GrantCreated { name: name.clone() }).await?;
        }

        // 2. The debug container (RBAC may need a moment to see the new grant: retry 403).
        let pods: Api<Pod> = Api::namespaced(client.clone(), &s.namespace);
        let container = debug_container_name(s);
        let pod_name = match s.mode {
            Mode::Live => {
                if s.target_container.is_some() && !s.process_access_annotated {
                    let patch = serde_json::json!({"metadata": {"annotations": {PROCESS_ACCESS_ANNOTATION: s.id.to_string()}}});
                    retry(STEP_BUDGET, true, || async {
                        pods.patch(&s.pod, &PatchParams::default(), &Patch::Merge(&patch))
                            .await
                            .map(|_| ())
                            .map_err(|e| {
                                ClusterError::from_kube(
                                    env,
                                    "annotate the pod for process access",
                                    e,
                                )
                            })
                    })
                    .await?;
                    record(progress, Progress::ProcessAccessAnnotated).await?;
                }
                let ec = ephemeral_container(s, &self.debug_image);
                retry(STEP_BUDGET, true, || async {
                    let pod = pods
                        .get(&s.pod)
                        .await
                        .map_err(|e| ClusterError::from_kube(env, "read the pod", e))?;
                    let present = pod
                        .spec
                        .as_ref()
                        .and_then(|sp| sp.ephemeral_containers.as_ref())
                        .is_some_and(|v| v.iter().any(|c| c.name == container));
                    if present {
                        return Ok(());
                    }
                    let patch = serde_json::json!({"spec": {"ephemeralContainers": [ec]}});
                    pods.patch_ephemeral_containers(
                        &s.pod,
                        &PatchParams::default(),
                        &Patch::Strategic(&patch),
                    )
                    .await
                    .map(|_| ())
                    .map_err(|e| ClusterError::from_kube(env, "add the debug container", e))
                })
                .await?;
                if s.debug_container.is_none() {
                    record(
                        progress,
                        Progress::DebugContainerAdded {
                            name: container.clone(),
                        },
                    )
                    .await?;
                }
                s.pod.clone()
            }
            Mode::Copy => {
                let copy_name = copy_pod_name(s);
                retry(STEP_BUDGET, true, || async {
                    let original = pods
                        .get(&s.pod)
                        .await
                        .map_err(|e| ClusterError::from_kube(env, "read the pod to copy", e))?;
                    let copy = copy_pod(s, &original, &self.debug_image);
                    match pods.create(&PostParams::default(), &copy).await {
                        Ok(_) => Ok(()),
                        Err(e) => {
                            let e = ClusterError::from_kube(env, "create the copy pod", e);
                            if e.is_already_exists() {
                                Ok(())
                            } else {
                                Err(e)
                            }
                        }
                    }
                })
                .await?;
                if s.copy_pod.is_none() {
                    record(
                        progress,
                        Progress::CopyPodCreated {
                            name: copy_name.clone(),
                            container: container.clone(),
                        },
                    )
                    .await?;
                }
                copy_name
            }
        };

        // 3. Wait, bounded, until it runs.
        let deadline = tokio::time::Instant::now() + self.activation_timeout;
        loop {
            match pods.get(&pod_name).await {
                Ok(p) if container_running(&p, &container) => return Ok(()),
                Ok(p) if container_terminated(&p, &container) => {
                    return Err(ClusterError::Refused {
                        env: env.into(),
                        what: "start the debug container".into(),
                        code: 500,
                        message: "the debug container exited at once".into(),
                    })
                }
                Ok(_) => {}
                Err(e) => {
                    let e = ClusterError::from_kube(env, "watch the debug container start", e);
                    if !e.is_transient(true) {
                        return Err(e);
                    }
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ClusterError::Timeout {
                    env: env.into(),
                    what: format!("the debug container {container} running"),
                    seconds: self.activation_timeout.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn check_ours(
        &self,
        rbs: &Api<RoleBinding>,
        name: &str,
        s: &Session,
    ) -> Result<(), ClusterError> {
        let env = s.environment.as_str();
        let existing = rbs
            .get(name)
            .await
            .map_err(|e| ClusterError::from_kube(env, "read the existing grant", e))?;
        let label = existing
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SESSION_LABEL))
            .cloned()
            .unwrap_or_default();
        if label == s.id.to_string() {
            Ok(())
        } else {
            Err(ClusterError::Refused {
                env: env.into(),
                what: "create the grant".into(),
                code: 409,
                message: format!("a RoleBinding {name} exists and belongs to another session"),
            })
        }
    }

    async fn cleanup_inner(
        &self,
        s: &Session,
        progress: &dyn ProgressSink,
    ) -> Result<(), ClusterError> {
        let env = s.environment.as_str();
        let client = self.client(env).await?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), &s.namespace);
        let tier = self.env(env)?.tier;
        match s.mode {
            Mode::Copy => {
                let name = s.copy_pod.clone().unwrap_or_else(|| copy_pod_name(s));
                if delete_pod(&pods, env, &name).await? {
                    step(progress, format!("deleted copy pod {name}")).await;
                }
            }
            Mode::Live => {
                let pod = match pods.get(&s.pod).await {
                    Ok(p) => Some(p),
                    Err(e) => {
                        let e = ClusterError::from_kube(env, "read the pod", e);
                        if e.is_not_found() {
                            None
                        } else {
                            return Err(e);
                        }
                    }
                };
                if let Some(pod) = pod {
                    let container = debug_container_name(s);
                    let has_debug = pod
                        .spec
                        .as_ref()
                        .and_then(|sp| sp.ephemeral_containers.as_ref())
                        .is_some_and(|v| v.iter().any(|c| c.name == container));
                    let mut deleted = false;
                    if has_debug {
                        let owner = controller_uid(&pod);
                        let others = match &owner {
                            Some(uid) => pods
                                .list(&ListParams::default())
                                .await
                                .map_err(|e| {
                                    ClusterError::from_kube(env, "list the owner's pods", e)
                                })?
                                .items
                                .iter()
                                .filter(|p| p.metadata.name != pod.metadata.name)
                                .filter(|p| controller_uid(p).as_ref() == Some(uid))
                                .filter(|p| p.metadata.deletion_timestamp.is_none() && pod_ready(p))
                                .count(),
                            None => 0,
                        };
                        if should_recycle(tier, s.recycle, owner.is_some(), others) {
                            deleted = delete_pod(&pods, env, &s.pod).await?;
                            if deleted {
                                step(
                                    progress,
                                    format!("recycled pod {} ({others} other ready pods)", s.pod),
                                )
                                .await;
                            }
                        } else {
                            step(
                                progress,
                                format!(
                                    "kept pod {} (tier rule; {others} other ready pods)",
                                    s.pod
                                ),
                            )
                            .await;
                        }
                    }
                    let annotated = pod
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(PROCESS_ACCESS_ANNOTATION))
                        .is_some_and(|v| *v == s.id.to_string());
                    if annotated && !deleted {
                        let patch = serde_json::json!({"metadata": {"annotations": {PROCESS_ACCESS_ANNOTATION: null}}});
                        match pods
                            .patch(&s.pod, &PatchParams::default(), &Patch::Merge(&patch))
                            .await
                        {
                            Ok(_) => {
                                step(progress, "removed the process-access annotation".into()).await
                            }
                            Err(e) => {
                                let e = ClusterError::from_kube(
                                    env,
                                    "remove the process-access annotation",
                                    e,
                                );
                                if !e.is_not_found() {
                                    return Err(e);
                                }
                            }
                        }
                    }
                }
            }
        }
        let rbs: Api<RoleBinding> = Api::namespaced(client, &s.namespace);
        let name = s.grant_name.clone().unwrap_or_else(|| grant_name(s));
        match rbs.delete(&name, &DeleteParams::default()).await {
            Ok(_) => step(progress, format!("deleted grant {name}")).await,
            Err(e) => {
                let e = ClusterError::from_kube(env, "delete the grant", e);
                if !e.is_not_found() {
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Whether the session's pod (or copy) is still there.
    pub async fn pod_present(&self, s: &Session) -> Result<bool, ClusterError> {
        let env = s.environment.as_str();
        let client = self.client(env).await?;
        let pods: Api<Pod> = Api::namespaced(client, &s.namespace);
        let name = match s.mode {
            Mode::Live => s.pod.clone(),
            Mode::Copy => s.copy_pod.clone().unwrap_or_else(|| copy_pod_name(s)),
        };
        match pods.get_opt(&name).await {
            Ok(p) => Ok(p.is_some_and(|p| p.metadata.deletion_timestamp.is_none())),
            Err(e) => Err(ClusterError::from_kube(env, "read the pod", e)),
        }
    }

    /// Removes break-glass objects on `env` whose session is not in `live` (crash leftovers):
    /// grants first cleaned of their copy pods and annotations. Returns how many were removed.
    pub async fn reconcile(&self, env: &str, live: &HashSet<Uuid>) -> Result<usize, ClusterError> {
        let client = self.client(env).await?;
        let all_rbs: Api<RoleBinding> = Api::all(client.clone());
        let lp = ListParams::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"));
        let grants = all_rbs
            .list(&lp)
            .await
            .map_err(|e| ClusterError::from_kube(env, "list grants", e))?;
        let mut removed = 0;
        for g in grants.items {
            let (Some(ns), Some(name)) = (g.metadata.namespace.clone(), g.metadata.name.clone())
            else {
                continue;
            };
            let Some(id) = g
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SESSION_LABEL))
                .and_then(|v| Uuid::parse_str(v).ok())
            else {
                continue;
            };
            if live.contains(&id) || is_young(&g.metadata) {
                continue;
            }
            let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
            let in_ns = pods
                .list(&ListParams::default())
                .await
                .map_err(|e| ClusterError::from_kube(env, "list pods", e))?;
            for p in in_ns.items {
                let pname = p.metadata.name.clone().unwrap_or_default();
                let labels = p.metadata.labels.clone().unwrap_or_default();
                let annotations = p.metadata.annotations.clone().unwrap_or_default();
                if labels.get(COPY_LABEL) == Some(&id.to_string()) {
                    if delete_pod(&pods, env, &pname).await? {
                        removed += 1;
                    }
                } else if annotations.get(PROCESS_ACCESS_ANNOTATION) == Some(&id.to_string()) {
                    let patch = serde_json::json!({"metadata": {"annotations": {PROCESS_ACCESS_ANNOTATION: null}}});
                    retry(STEP_BUDGET, false, || async {
                        pods.patch(&pname, &PatchParams::default(), &Patch::Merge(&patch))
                            .await
                            .map(|_| ())
                            .map_err(|e| {
                                ClusterError::from_kube(env, "remove an orphan annotation", e)
                            })
                    })
                    .await?;
                    removed += 1;
                }
            }
            let rbs: Api<RoleBinding> = Api::namespaced(client.clone(), &ns);
            match rbs.delete(&name, &DeleteParams::default()).await {
                Ok(_) => removed += 1,
                Err(e) => {
                    let e = ClusterError::from_kube(env, "delete an orphan grant", e);
                    if !e.is_not_found() {
                        return Err(e);
                    }
                }
            }
            tracing::info!(%env, namespace = %ns, grant = %name, session = %id, "removed orphaned break-glass objects");
        }
        Ok(removed)
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

/// Objects younger than this are not judged orphans: their session may have been created
/// after the caller read the live sessions.
const ORPHAN_MIN_AGE: Duration = Duration::from_secs(60);

fn is_young(meta: &kube::api::ObjectMeta) -> bool {
    meta.creation_timestamp.as_ref().is_some_and(|t| {
        let age = jiff_age_seconds(t);
        age < ORPHAN_MIN_AGE.as_secs() as i64
    })
}

fn jiff_age_seconds(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> i64 {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    now - t.0.as_second()
}

/// Deletes a pod at once; false when it was already gone.
async fn delete_pod(pods: &Api<Pod>, env: &str, name: &str) -> Result<bool, ClusterError> {
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    retry(STEP_BUDGET, false, || async {
        match pods.delete(name, &dp).await {
            Ok(_) => Ok(true),
            Err(e) => {
                let e = ClusterError::from_kube(env, &format!("delete pod {name}"), e);
                if e.is_not_found() {
                    Ok(false)
                } else {
                    Err(e)
                }
            }
        }
    })
    .await
}

async fn record(progress: &dyn ProgressSink, p: Progress) -> Result<(), ClusterError> {
    progress
        .record(p)
        .await
        .map(|_| ())
        .map_err(|e| ClusterError::Config {
            env: String::new(),
            message: format!("the session changed meanwhile: {}", e.body.message),
        })
}

/// Cleanup steps are recorded for the audit trail; a failure to record one must not stop the
/// cleanup itself (the objects are already gone).
async fn step(progress: &dyn ProgressSink, detail: String) {
    if let Err(e) = progress.record(Progress::CleanupStep { detail }).await {
        tracing::debug!(error = %e.body.message, "cleanup step not recorded");
    }
}

#[async_trait]
impl ClusterOps for Clusters {
    fn serves(&self, environment: &str) -> bool {
        self.envs.contains_key(environment)
    }

    async fn activate(&self, session: &Session, progress: &dyn ProgressSink) -> Result<(), String> {
        match self.activate_inner(session, progress).await {
            Ok(()) => Ok(()),
            Err(e) => {
                self.on_error(&session.environment, &e).await;
                Err(e.to_string())
            }
        }
    }

    async fn cleanup(&self, session: &Session, progress: &dyn ProgressSink) -> Result<(), String> {
        match self.cleanup_inner(session, progress).await {
            Ok(()) => Ok(()),
            Err(e) => {
                self.on_error(&session.environment, &e).await;
                Err(e.to_string())
            }
        }
    }

    async fn pod_gone(&self, session: &Session) -> Result<bool, String> {
        self.pod_present(session)
            .await
            .map(|p| !p)
            .map_err(|e| e.to_string())
    }

    async fn reconcile(&self, environment: &str, live: &HashSet<Uuid>) -> Result<usize, String> {
        Clusters::reconcile(self, environment, live)
            .await
            .map_err(|e| e.to_string())
    }

    async fn attach(&self, s: &Session) -> Result<kube::api::AttachedProcess, String> {
        let env = s.environment.as_str();
        let client = self.client(env).await.map_err(|e| e.to_string())?;
        let pods: Api<Pod> = Api::namespaced(client, &s.namespace);
        let pod = match s.mode {
            Mode::Live => s.pod.clone(),
            Mode::Copy => s.copy_pod.clone().unwrap_or_else(|| copy_pod_name(s)),
        };
        let ap = kube::api::AttachParams::interactive_tty().container(debug_container_name(s));
        match pods.attach(&pod, &ap).await {
            Ok(a) => Ok(a),
            Err(e) => {
                let e = ClusterError::from_kube(env, "attach to the debug container", e);
                self.on_error(env, &e).await;
                Err(e.to_string())
            }
        }
    }
}
