//! Converts cluster objects into the listing types the UI shows.

use breakglass_shared::listing::{ContainerInfo, NamespaceInfo, OwnerInfo, PodInfo};
use k8s_openapi::api::core::v1::{Namespace, Pod};

use super::objects::{pod_ready, COPY_LABEL};

/// A namespace, flagged when sessions are refused there.
pub fn namespace_info(ns: &Namespace, protected: &[String]) -> Option<NamespaceInfo> {
    let name = ns.metadata.name.clone()?;
    Some(NamespaceInfo {
        protected: protected.contains(&name),
        name,
    })
}

/// A pod with its containers, readiness and owner.
pub fn pod_info(p: &Pod) -> Option<PodInfo> {
    let name = p.metadata.name.clone()?;
    let status = p.status.as_ref();
    let ready_of = |c: &str, ephemeral: bool| {
        let list = if ephemeral {
            status.and_then(|s| s.ephemeral_container_statuses.as_ref())
        } else {
            status.and_then(|s| s.container_statuses.as_ref())
        };
        list.is_some_and(|v| {
            v.iter().any(|st| {
                st.name == c
                    && (st.ready
                        || (ephemeral
                            && st.state.as_ref().and_then(|s| s.running.as_ref()).is_some()))
            })
        })
    };
    let spec = p.spec.as_ref();
    let mut containers: Vec<ContainerInfo> = spec
        .map(|s| {
            s.containers
                .iter()
                .map(|c| c.name.clone())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .map(|n| ContainerInfo {
            ready: ready_of(&n, false),
            name: n,
            ephemeral: false,
        })
        .collect();
    containers.extend(
        spec.and_then(|s| s.ephemeral_containers.as_ref())
            .into_iter()
            .flatten()
            .map(|c| ContainerInfo {
                ready: ready_of(&c.name, true),
                name: c.name.clone(),
                ephemeral: true,
            }),
    );
    let owner = p
        .metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.iter().find(|r| r.controller == Some(true)))
        .map(|r| OwnerInfo {
            kind: r.kind.clone(),
            name: r.name.clone(),
        });
    Some(PodInfo {
        name,
        phase: status
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Unknown".into()),
        ready: pod_ready(p),
        containers,
        owner,
        breakglass_copy: p
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(COPY_LABEL)),
    })
}
