//! Orphan reconciliation: break-glass objects in a cluster whose session is no longer live (a
//! crash between a cluster write and its row write, or a cleanup that never finished) are
//! removed: copy pods and annotations first, then the grant.

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{DeleteParams, ListParams};
use kube::Api;
use uuid::Uuid;

use super::cleanup::{delete_pod, remove_process_access};
use super::error::gone_is_ok;
use super::objects::*;
use super::Clusters;
use crate::ports::ClusterError;

impl Clusters {
    /// Removes break-glass objects on `env` whose session is not in `live` (crash leftovers).
    /// Returns how many were removed.
    pub async fn reconcile(&self, env: &str, live: &HashSet<Uuid>) -> Result<usize, ClusterError> {
        let client = self.client(env).await?;
        let all_rbs: Api<RoleBinding> = Api::all(client.clone());
        let lp = ListParams::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"));
        // Metadata only (names, labels, age): the sweep lists every grant each pass, one per
        // open session.
        let grants = all_rbs
            .list_metadata(&lp)
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
            // A younger object's session may have been created after the caller read `live`.
            if live.contains(&id) || is_young(&g.metadata, self.orphan_min_age) {
                continue;
            }
            let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
            removed += remove_pod_leftovers(&pods, env, id).await?;
            let rbs: Api<RoleBinding> = Api::namespaced(client.clone(), &ns);
            let deleted = rbs
                .delete(&name, &DeleteParams::default())
                .await
                .map(|_| ())
                .map_err(|e| ClusterError::from_kube(env, "delete an orphan grant", e));
            if gone_is_ok(deleted)? {
                removed += 1;
            }
            tracing::info!(%env, namespace = %ns, grant = %name, session = %id, "removed orphaned break-glass objects");
        }
        Ok(removed)
    }
}

/// The copy pods and process-access annotations of session `id` in one namespace.
async fn remove_pod_leftovers(pods: &Api<Pod>, env: &str, id: Uuid) -> Result<usize, ClusterError> {
    let in_ns = pods
        .list(&ListParams::default())
        .await
        .map_err(|e| ClusterError::from_kube(env, "list pods", e))?;
    let mut removed = 0;
    for p in in_ns.items {
        let pname = p.metadata.name.clone().unwrap_or_default();
        let copy_of = p.metadata.labels.as_ref().and_then(|l| l.get(COPY_LABEL));
        let done = if copy_of == Some(&id.to_string()) {
            delete_pod(pods, env, &pname).await?
        } else {
            remove_process_access(pods, env, &p, id, "remove an orphan annotation").await?
        };
        if done {
            removed += 1;
        }
    }
    Ok(removed)
}

fn is_young(meta: &kube::api::ObjectMeta, min_age: Duration) -> bool {
    meta.creation_timestamp.as_ref().is_some_and(|t| {
        let age = time::OffsetDateTime::now_utc().unix_timestamp() - t.0.as_second();
        age < i64::try_from(min_age.as_secs()).unwrap_or(i64::MAX)
    })
}
