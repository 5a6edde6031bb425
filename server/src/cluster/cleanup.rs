//! Cleanup at the end of a session (or after a failed activation): the copy pod, or the
//! debugged pod recycled by the tier rule, the process-access annotation, then the grant.
//! Idempotent and safe when nothing was created; every step done goes on the audit trail.

use breakglass_shared::{Mode, Session, Tier};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::RoleBinding;
use std::time::Duration;

use breakglass_shared::terminal::END_SIZE;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::wait::await_condition;
use kube::Api;
use uuid::Uuid;

use super::error::{gone_is_ok, retry, STEP_BUDGET};
use super::objects::*;
use super::Clusters;
use crate::ports::{CleanupStep, ClusterError, ClusterOps, ProgressSink};

impl Clusters {
    pub(super) async fn cleanup_inner(
        &self,
        s: &Session,
        progress: &dyn ProgressSink,
    ) -> Result<(), ClusterError> {
        let env = s.environment.as_str();
        let client = self.client(env).await?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), &s.namespace);
        match s.mode {
            Mode::Copy => {
                let pod = debug_pod_name(s);
                if delete_pod(&pods, env, &pod).await? {
                    step(progress, CleanupStep::CopyDeleted { pod }).await;
                }
            }
            Mode::Live => {
                let tier = self.env(env)?.tier;
                if let Some(pod) = clean_live_pod(&pods, env, tier, s, progress).await? {
                    self.stop_debug_container(s, &pods, &pod, progress).await;
                    if let Some(container) = &s.target_container {
                        let kept = CleanupStep::ProcessAccessKept {
                            pod: s.pod.clone(),
                            container: container.clone(),
                        };
                        step(progress, kept).await;
                    }
                }
            }
        }
        let rbs: Api<RoleBinding> = Api::namespaced(client, &s.namespace);
        let name = s.grant_name.clone().unwrap_or_else(|| grant_name(s));
        let deleted = rbs
            .delete(&name, &DeleteParams::default())
            .await
            .map(|_| ())
            .map_err(|e| ClusterError::from_kube(env, "delete the grant", e));
        if gone_is_ok(deleted)? {
            step(progress, CleanupStep::GrantDeleted { name }).await;
        }
        Ok(())
    }
}

/// How long the cleanup waits for a debug container asked to stop: its supervisor looks at the
/// terminal's size four times a second, and the pod's status follows once the node saw the
/// container end.
const STOP_WAIT: Duration = Duration::from_secs(15);

impl Clusters {
    /// Stops the debug container of a pod that stays: Kubernetes cannot remove an ephemeral
    /// container, but the container ends, and every process in it, when its supervisor sees
    /// the terminal at [`END_SIZE`] (set here through an attach of its own). Waits, bounded,
    /// for the pod's status to say so; either outcome goes on the audit trail, and a failure
    /// does not stop the rest of the cleanup.
    async fn stop_debug_container(
        &self,
        s: &Session,
        pods: &Api<Pod>,
        pod: &Pod,
        progress: &dyn ProgressSink,
    ) {
        let container = debug_container_name(s);
        if !container_running(pod, &container) {
            return;
        }
        let stopped = async {
            let mut attached = match self.attach(s).await {
                Ok(attached) => attached,
                // A container that ended between the look above and the attach has nothing to
                // attach to: the pod's status, not the refused attach, says whether it stopped.
                Err(e) => {
                    let now = pods.get_opt(&s.pod).await.ok().flatten();
                    if now.is_none_or(|p| !container_running(&p, &container)) {
                        return Ok(());
                    }
                    return Err(e.to_string());
                }
            };
            attached
                .resize(END_SIZE.0, END_SIZE.1)
                .await
                .map_err(|e| e.to_string())?;
            let name = container.clone();
            let ended = move |p: Option<&Pod>| p.is_none_or(|p| !container_running(p, &name));
            match tokio::time::timeout(STOP_WAIT, await_condition(pods.clone(), &s.pod, ended))
                .await
            {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(format!("watching the pod failed: {e}")),
                Err(_) => Err(format!(
                    "it did not end within {} s of being asked",
                    STOP_WAIT.as_secs()
                )),
            }
        }
        .await;
        let step_done = match stopped {
            Ok(()) => CleanupStep::DebugContainerStopped { container },
            Err(why) => {
                tracing::warn!(id = %s.id, %container, %why, "debug container left running");
                CleanupStep::DebugContainerLeftRunning { container, why }
            }
        };
        step(progress, step_done).await;
    }
}

/// Live mode: recycles or keeps the debugged pod (it carries the debug container), then
/// removes the annotation from a pod that stays. The pod, when it stays with the debug
/// container in it.
async fn clean_live_pod(
    pods: &Api<Pod>,
    env: &str,
    tier: Tier,
    s: &Session,
    progress: &dyn ProgressSink,
) -> Result<Option<Pod>, ClusterError> {
    let pod = pods
        .get_opt(&s.pod)
        .await
        .map_err(|e| ClusterError::from_kube(env, "read the pod", e))?;
    let Some(pod) = pod else { return Ok(None) };
    let debugged = has_ephemeral(&pod, &debug_container_name(s));
    let deleted = if debugged {
        recycle_or_keep(pods, env, tier, s, &pod, progress).await?
    } else {
        false
    };
    if !deleted
        && remove_process_access(
            pods,
            env,
            &pod,
            s.id,
            "remove the process-access annotation",
        )
        .await?
    {
        step(progress, CleanupStep::AnnotationRemoved).await;
    }
    Ok((debugged && !deleted).then_some(pod))
}

/// Applies the tier rule to the debugged pod: true when it was deleted (its controller makes
/// a fresh one).
async fn recycle_or_keep(
    pods: &Api<Pod>,
    env: &str,
    tier: Tier,
    s: &Session,
    pod: &Pod,
    progress: &dyn ProgressSink,
) -> Result<bool, ClusterError> {
    let owner = controller_uid(pod);
    let others = match &owner {
        Some(uid) => pods
            .list(&ListParams::default())
            .await
            .map_err(|e| ClusterError::from_kube(env, "list the owner's pods", e))?
            .items
            .iter()
            .filter(|p| p.metadata.name != pod.metadata.name)
            .filter(|p| controller_uid(p).as_ref() == Some(uid))
            .filter(|p| p.metadata.deletion_timestamp.is_none() && pod_ready(p))
            .count(),
        None => 0,
    };
    let name = s.pod.clone();
    if !should_recycle(tier, s.recycle, owner.is_some(), others) {
        step(progress, CleanupStep::PodKept { pod: name, others }).await;
        return Ok(false);
    }
    let deleted = delete_pod(pods, env, &name).await?;
    if deleted {
        step(progress, CleanupStep::PodRecycled { pod: name, others }).await;
    }
    Ok(deleted)
}

/// Removes the process-access annotation of session `id` from `pod`; false when it carried
/// none of this session's (or the pod is gone).
pub(super) async fn remove_process_access(
    pods: &Api<Pod>,
    env: &str,
    pod: &Pod,
    id: Uuid,
    what: &str,
) -> Result<bool, ClusterError> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    if !annotated_for(pod, id) {
        return Ok(false);
    }
    let patch = process_access_patch(None);
    let removed = retry(STEP_BUDGET, false, || async {
        pods.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|e| ClusterError::from_kube(env, what, e))
    })
    .await;
    gone_is_ok(removed)
}

/// Deletes a pod at once; false when it was already gone.
pub(super) async fn delete_pod(
    pods: &Api<Pod>,
    env: &str,
    name: &str,
) -> Result<bool, ClusterError> {
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    let deleted = retry(STEP_BUDGET, false, || async {
        pods.delete(name, &dp)
            .await
            .map(|_| ())
            .map_err(|e| ClusterError::from_kube(env, &format!("delete pod {name}"), e))
    })
    .await;
    gone_is_ok(deleted)
}

/// Cleanup steps are recorded for the audit trail; a failure to record one must not stop the
/// cleanup itself (the objects are already gone).
async fn step(progress: &dyn ProgressSink, step: CleanupStep) {
    if let Err(e) = progress.cleaned(step).await {
        tracing::debug!(error = %e, "cleanup step not recorded");
    }
}
