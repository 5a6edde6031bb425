//! Cleanup at the end of a session (or after a failed activation): the copy pod, or the
//! debugged pod recycled by the tier rule, the process-access annotation, then the grant.
//! Idempotent and safe when nothing was created; every step done goes on the audit trail.

use breakglass_shared::{Mode, Session, Tier};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::Api;
use uuid::Uuid;

use super::error::{gone_is_ok, retry, STEP_BUDGET};
use super::objects::*;
use super::Clusters;
use crate::ports::{CleanupStep, ClusterError, ProgressSink};

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
                clean_live_pod(&pods, env, tier, s, progress).await?;
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

/// Live mode: recycles or keeps the debugged pod (it carries the debug container), then
/// removes the annotation from a pod that stays.
async fn clean_live_pod(
    pods: &Api<Pod>,
    env: &str,
    tier: Tier,
    s: &Session,
    progress: &dyn ProgressSink,
) -> Result<(), ClusterError> {
    let pod = pods
        .get_opt(&s.pod)
        .await
        .map_err(|e| ClusterError::from_kube(env, "read the pod", e))?;
    let Some(pod) = pod else { return Ok(()) };
    let deleted = if has_ephemeral(&pod, &debug_container_name(s)) {
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
    Ok(())
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
