//! Activation in the cluster, in the order DESIGN.md §6 gives: the grant, then the debug
//! container (live) or the copy pod (copy), then a bounded wait, driven by a watch, until it
//! runs. Each step is idempotent (activation is re-driven after a crash) and is on the session
//! row, through the [`ProgressSink`], before the next cluster write.

use std::sync::Arc;

use breakglass_shared::session::Progress;
use breakglass_shared::{Mode, Session};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::wait::{self, await_condition};
use kube::runtime::watcher;
use kube::Api;

use super::error::{retry, STEP_BUDGET};
use super::objects::*;
use super::Clusters;
#[cfg(feature = "failpoints")]
use crate::failpoint::{self, Failpoint};
use crate::ports::{ClusterError, ProgressSink};

/// The session's objects on one cluster, for the steps below.
struct Target<'a> {
    s: &'a Session,
    env: &'a str,
    pods: Api<Pod>,
    progress: &'a dyn ProgressSink,
}

impl Target<'_> {
    async fn record(&self, p: Progress) -> Result<(), ClusterError> {
        self.progress
            .record(p)
            .await
            .map(|_| ())
            .map_err(ClusterError::SessionChanged)
    }
}

impl Clusters {
    pub(super) async fn activate_inner(
        &self,
        s: &Session,
        progress: &dyn ProgressSink,
    ) -> Result<(), ClusterError> {
        let env = s.environment.as_str();
        // The API refuses these at create; a row that names one anyway (an older server, a
        // changed configuration, a tampered store) must still never reach the cluster.
        if self.env(env)?.protected.contains(&s.namespace) {
            return Err(ClusterError::config(
                env,
                format!(
                    "namespace `{}` is protected: no session may touch it",
                    s.namespace
                ),
            ));
        }
        let client = self.client(env).await?;
        let me = self.identity(env, &client).await?;
        let rbs: Api<RoleBinding> = Api::namespaced(client.clone(), &s.namespace);
        let t = Target {
            s,
            env,
            pods: Api::namespaced(client, &s.namespace),
            progress,
        };
        // The pod as it is now: the objects are rendered from it and checked against the
        // approved spec before anything is written (copy mode checks its own read again).
        let pod = retry(STEP_BUDGET, false, || async {
            t.pods
                .get(&s.pod)
                .await
                .map_err(|e| ClusterError::from_kube(env, "read the pod", e))
        })
        .await?;
        self.check_spec(s, &me, &pod)?;
        self.create_grant(&t, &rbs, &me).await?;
        // RBAC may need a moment to see the new grant: the steps below retry a 403.
        match s.mode {
            Mode::Live => {
                if s.target_container.is_some() && !s.process_access_annotated {
                    annotate(&t).await?;
                }
                self.add_debug_container(&t, pod).await?;
            }
            Mode::Copy => self.create_copy(&t, &me).await?,
        }
        self.wait_running(&t).await
    }

    /// An extension: the grant's TTL label and annotation follow the session's new time (the
    /// grant policy checks them as at creation).
    pub(super) async fn extend_inner(&self, s: &Session) -> Result<(), ClusterError> {
        let env = s.environment.as_str();
        let rbs: Api<RoleBinding> = Api::namespaced(self.client(env).await?, &s.namespace);
        let ttl = grant_ttl(s);
        let patch = serde_json::json!({"metadata": {
            "labels": {TTL_LABEL: &ttl},
            "annotations": {TTL_ANNOTATION: &ttl},
        }});
        let name = grant_name(s);
        retry(STEP_BUDGET, false, || async {
            rbs.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
                .map_err(|e| ClusterError::from_kube(env, "extend the grant", e))
        })
        .await
    }

    /// Step 1: the grant RoleBinding (an existing one must be this session's).
    async fn create_grant(
        &self,
        t: &Target<'_>,
        rbs: &Api<RoleBinding>,
        me: &str,
    ) -> Result<(), ClusterError> {
        let (s, env) = (t.s, t.env);
        let want = grant(s, me);
        let name = grant_name(s);
        retry(STEP_BUDGET, false, || async {
            match rbs.create(&PostParams::default(), &want).await {
                Ok(_) => Ok(()),
                Err(e) => {
                    let e = ClusterError::from_kube(env, "create the grant", e);
                    if e.is_already_exists() {
                        check_ours(rbs, &name, s).await
                    } else {
                        Err(e)
                    }
                }
            }
        })
        .await?;
        #[cfg(feature = "failpoints")]
        failpoint::hit(Failpoint::GrantWritten);
        if s.grant_name.is_none() {
            t.record(Progress::GrantCreated { name }).await?;
        }
        Ok(())
    }

    /// Step 2, live: the ephemeral debug container. `read` is the pod as read at the start of
    /// this activation: the first try decides from it whether the container is there already
    /// (a read less on every activation); each retry reads the pod again.
    async fn add_debug_container(&self, t: &Target<'_>, read: Pod) -> Result<(), ClusterError> {
        let (s, env) = (t.s, t.env);
        let container = debug_container_name(s);
        let ec = ephemeral_container(s, &self.debug_image);
        let first = std::sync::Mutex::new(Some(read));
        retry(STEP_BUDGET, true, || async {
            let earlier = first
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            let pod = match earlier {
                Some(pod) => pod,
                None => t
                    .pods
                    .get(&s.pod)
                    .await
                    .map_err(|e| ClusterError::from_kube(env, "read the pod", e))?,
            };
            if has_ephemeral(&pod, &container) {
                return Ok(());
            }
            let patch = serde_json::json!({"spec": {"ephemeralContainers": [ec]}});
            t.pods
                .patch_ephemeral_containers(
                    &s.pod,
                    &PatchParams::default(),
                    &Patch::Strategic(&patch),
                )
                .await
                .map(|_| ())
                .map_err(|e| ClusterError::from_kube(env, "add the debug container", e))
        })
        .await?;
        #[cfg(feature = "failpoints")]
        failpoint::hit(Failpoint::ContainerWritten);
        if s.debug_container.is_none() {
            t.record(Progress::DebugContainerAdded { name: container })
                .await?;
        }
        Ok(())
    }

    /// Step 2, copy: the hardened copy pod.
    async fn create_copy(&self, t: &Target<'_>, me: &str) -> Result<(), ClusterError> {
        let (s, env) = (t.s, t.env);
        retry(STEP_BUDGET, true, || async {
            // Read again after the grant: the pod may have gone meanwhile, and the copy is made
            // only from a read that still renders the approved spec.
            let original = t
                .pods
                .get(&s.pod)
                .await
                .map_err(|e| ClusterError::from_kube(env, "read the pod to copy", e))?;
            self.check_spec(s, me, &original)?;
            let copy = copy_pod(s, &original, &self.debug_image);
            match t.pods.create(&PostParams::default(), &copy).await {
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
        #[cfg(feature = "failpoints")]
        failpoint::hit(Failpoint::CopyWritten);
        if s.copy_pod.is_none() {
            t.record(Progress::CopyPodCreated {
                name: copy_pod_name(s),
                container: debug_container_name(s),
            })
            .await?;
        }
        Ok(())
    }

    /// Step 3: waits, bounded by the activation timeout, until the debug container runs (a
    /// watch on the pod, restarted after a transient failure).
    async fn wait_running(&self, t: &Target<'_>) -> Result<(), ClusterError> {
        let (s, env) = (t.s, t.env);
        let pod_name = debug_pod_name(s);
        let container = debug_container_name(s);
        let deadline = tokio::time::Instant::now() + self.activation_timeout;
        // Also true when the pod is gone: that ends the wait as well.
        let started = |p: Option<&Pod>| {
            p.is_none_or(|p| {
                container_running(p, &container) || container_terminated(p, &container)
            })
        };
        loop {
            let watch = await_condition(t.pods.clone(), &pod_name, started);
            match tokio::time::timeout_at(deadline, watch).await {
                Ok(Ok(Some(p))) if container_running(&p, &container) => return Ok(()),
                Ok(Ok(Some(_))) => {
                    return Err(ClusterError::ContainerExited {
                        env: env.into(),
                        container,
                    })
                }
                Ok(Ok(None)) => {
                    return Err(ClusterError::Refused {
                        env: env.into(),
                        what: "start the debug container".into(),
                        code: 404,
                        message: format!("pod {pod_name} is gone"),
                    })
                }
                Ok(Err(wait::Error::ProbeFailed(e))) => {
                    let e = watch_error(env, e);
                    if !e.is_transient(true) {
                        return Err(e);
                    }
                    tracing::debug!(error = %e, "watch of the debug container failed; watching again");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                Err(_) => {
                    return Err(ClusterError::Timeout {
                        env: env.into(),
                        what: format!("the debug container {container} running"),
                        seconds: self.activation_timeout.as_secs(),
                    })
                }
            }
        }
    }
}

/// The watch's failure as a cluster error of the wait step.
fn watch_error(env: &str, e: watcher::Error) -> ClusterError {
    const WHAT: &str = "watch the debug container start";
    match e {
        watcher::Error::InitialListFailed(k)
        | watcher::Error::WatchStartFailed(k)
        | watcher::Error::WatchFailed(k) => ClusterError::from_kube(env, WHAT, k),
        watcher::Error::WatchError(status) => ClusterError::Refused {
            env: env.into(),
            what: WHAT.into(),
            code: status.code,
            message: status.message.clone(),
        },
        other @ watcher::Error::NoResourceVersion => ClusterError::Unreachable {
            env: env.into(),
            what: WHAT.into(),
            source: Arc::new(other),
        },
    }
}

/// Before step 2, live: the pod annotation the process-access policy requires, set before the container.
async fn annotate(t: &Target<'_>) -> Result<(), ClusterError> {
    let (s, env) = (t.s, t.env);
    let patch = process_access_patch(Some(&s.id.to_string()));
    retry(STEP_BUDGET, true, || async {
        t.pods
            .patch(&s.pod, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|e| ClusterError::from_kube(env, "annotate the pod for process access", e))
    })
    .await?;
    #[cfg(feature = "failpoints")]
    failpoint::hit(Failpoint::AnnotateWritten);
    t.record(Progress::ProcessAccessAnnotated).await
}

/// An existing grant of the same name is fine only when it carries this session's label.
async fn check_ours(rbs: &Api<RoleBinding>, name: &str, s: &Session) -> Result<(), ClusterError> {
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
