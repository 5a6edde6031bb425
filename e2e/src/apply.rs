//! Applies multi-document YAML manifests (e.g. `breakglass-server policies render`, `helm
//! template`) to a cluster with server-side apply, discovering each kind's API resource.

use anyhow::{anyhow, Context as _};
use kube::api::{DynamicObject, Patch, PatchParams, ValidationDirective};
use kube::discovery::{Discovery, Scope};
use kube::{Api, Client};

/// Applies every document of `yaml` as field manager `breakglass-e2e`; returns how many.
pub async fn apply_yaml(client: &Client, yaml: &str) -> anyhow::Result<usize> {
    let params = PatchParams::apply("breakglass-e2e").force();
    Ok(apply_docs(client, yaml, &params).await?.len())
}

/// Applies every document of `yaml` with a server-side dry run and strict field validation
/// (an unknown or misplaced field is an error, not dropped): the API server validates and
/// admits each object as for a real install, and stores nothing. Returns the objects as the
/// server would have stored them, in document order.
pub async fn dry_run_yaml(client: &Client, yaml: &str) -> anyhow::Result<Vec<DynamicObject>> {
    let mut params = PatchParams::apply("breakglass-e2e").force().dry_run();
    params.field_validation = Some(ValidationDirective::Strict);
    apply_docs(client, yaml, &params).await
}

async fn apply_docs(
    client: &Client,
    yaml: &str,
    params: &PatchParams,
) -> anyhow::Result<Vec<DynamicObject>> {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .context("API discovery")?;
    let mut applied = Vec::new();
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
        let stored = api
            .patch(&name, params, &Patch::Apply(&obj))
            .await
            .with_context(|| format!("applying {} {name}", tm.kind))?;
        applied.push(stored);
    }
    Ok(applied)
}
