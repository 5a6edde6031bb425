//! Applies multi-document YAML manifests (e.g. `breakglass-server policies render`) to a
//! cluster with server-side apply, discovering each kind's API resource.

use anyhow::{anyhow, Context as _};
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::discovery::{Discovery, Scope};
use kube::{Api, Client};

/// Applies every document of `yaml` as field manager `breakglass-e2e`; returns how many.
pub async fn apply_yaml(client: &Client, yaml: &str) -> anyhow::Result<usize> {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .context("API discovery")?;
    let mut n = 0;
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(yaml).context("parsing the manifests")?;
    for value in docs {
        if value.is_null() {
            continue;
        }
        let obj: DynamicObject = serde_json::from_value(value)?;
        let tm = obj
            .types
            .as_ref()
            .ok_or_else(|| anyhow!("a document without apiVersion/kind"))?;
        let (group, version) = match tm.api_version.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), tm.api_version.clone()),
        };
        let gvk = kube::api::GroupVersionKind::gvk(&group, &version, &tm.kind);
        let (ar, caps) = discovery
            .resolve_gvk(&gvk)
            .ok_or_else(|| anyhow!("the cluster does not serve {gvk:?}"))?;
        let name = obj
            .metadata
            .name
            .clone()
            .ok_or_else(|| anyhow!("{} without a name", tm.kind))?;
        let api: Api<DynamicObject> = match (caps.scope, obj.metadata.namespace.as_deref()) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &ar),
            (Scope::Namespaced, None) => Api::default_namespaced_with(client.clone(), &ar),
            (Scope::Cluster, _) => Api::all_with(client.clone(), &ar),
        };
        api.patch(
            &name,
            &PatchParams::apply("breakglass-e2e").force(),
            &Patch::Apply(&obj),
        )
        .await
        .with_context(|| format!("applying {} {name}", tm.kind))?;
        n += 1;
    }
    Ok(n)
}
