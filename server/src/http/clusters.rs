//! `/environments/{env}/...`: namespaces, pods and guardrail health, read with the server's
//! standing read access.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::Json;
use breakglass_shared::listing::{NamespaceInfo, PodInfo};
use breakglass_shared::{ErrorBody, ErrorCode};

use crate::auth::CurrentUser;
use crate::cluster::listing::{namespace_info, pod_info};
use crate::cluster::Clusters;
use crate::config::{Config, Environment};
use crate::error::ApiError;
use crate::guardrails::doctor::GuardrailReport;

fn clusters(all: Option<Arc<Clusters>>, env: &Environment) -> Result<Arc<Clusters>, ApiError> {
    all.filter(|c| env.cluster.is_some() && c.has(&env.name))
        // A configuration fact, not an outage: a 4xx whose message reaches the user (5xx
        // messages are replaced by a generic one), and no error in the logs on every call.
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "environment {} has no cluster configured, so its namespaces and pods cannot be listed",
                env.name
            ))
        })
}

fn unavailable(e: crate::cluster::ClusterError) -> ApiError {
    ApiError::new(ErrorCode::Unavailable, e.to_string())
}

/// Namespaces of an environment's cluster.
#[utoipa::path(get, path = "/api/breakglass/environments/{env}/namespaces", tag = "environments",
    params(("env" = String, Path, description = "Environment name")),
    responses(
        (status = 200, description = "Namespaces", body = Vec<NamespaceInfo>),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such environment, or it has no cluster configured", body = ErrorBody),
        (status = 503, description = "The cluster is unreachable", body = ErrorBody),
    ))]
pub async fn namespaces(
    State(config): State<Arc<Config>>,
    State(all): State<Option<Arc<Clusters>>>,
    user: CurrentUser,
    Path(env): Path<String>,
) -> Result<Json<Vec<NamespaceInfo>>, ApiError> {
    let (e, _) = user.environment(&config, &env)?;
    let c = clusters(all, e)?;
    let list = c.namespaces(&env).await.map_err(unavailable)?;
    Ok(Json(
        list.iter()
            .filter_map(|n| namespace_info(n, &e.protected_namespaces))
            .collect(),
    ))
}

/// Pods of a namespace, with containers, readiness and owners.
#[utoipa::path(get, path = "/api/breakglass/environments/{env}/namespaces/{ns}/pods", tag = "environments",
    params(("env" = String, Path, description = "Environment name"), ("ns" = String, Path, description = "Namespace")),
    responses(
        (status = 200, description = "Pods", body = Vec<PodInfo>),
        (status = 400, description = "The namespace is not a DNS-1123 label; `field` is `namespace`", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such environment, or it has no cluster configured", body = ErrorBody),
        (status = 503, description = "The cluster is unreachable", body = ErrorBody),
    ))]
pub async fn pods(
    State(config): State<Arc<Config>>,
    State(all): State<Option<Arc<Clusters>>>,
    user: CurrentUser,
    Path((env, ns)): Path<(String, String)>,
) -> Result<Json<Vec<PodInfo>>, ApiError> {
    breakglass_shared::validate::dns_label("namespace", &ns)?;
    let (e, _) = user.environment(&config, &env)?;
    let c = clusters(all, e)?;
    let list = c.pods(&env, &ns).await.map_err(unavailable)?;
    Ok(Json(list.iter().filter_map(pod_info).collect()))
}

/// Guardrail health: the cluster's RBAC, admission policies and debug image pin, as `doctor`
/// checks them.
#[utoipa::path(get, path = "/api/breakglass/environments/{env}/guardrails", tag = "environments",
    params(("env" = String, Path, description = "Environment name")),
    responses(
        (status = 200, description = "The report", body = GuardrailReport),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such environment, or it has no cluster configured", body = ErrorBody),
        (status = 503, description = "The cluster is unreachable", body = ErrorBody),
    ))]
pub async fn guardrails(
    State(config): State<Arc<Config>>,
    State(all): State<Option<Arc<Clusters>>>,
    user: CurrentUser,
    Path(env): Path<String>,
) -> Result<Json<GuardrailReport>, ApiError> {
    let (e, _) = user.environment(&config, &env)?;
    let c = clusters(all, e)?;
    let client = c.client(&env).await.map_err(unavailable)?;
    let report = crate::guardrails::doctor::doctor(&client, &config, e)
        .await
        .map_err(|err| ApiError::new(ErrorCode::Unavailable, err.to_string()))?;
    Ok(Json(report))
}
