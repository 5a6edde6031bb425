//! What the clusters behind an environment show: namespaces, pods, guardrail health.

use breakglass_shared::listing::{NamespaceInfo, PodInfo};

use super::{encode, get_json, ApiError};

pub use breakglass_shared::listing::{GuardrailReport, ItemStatus};

/// Namespaces of `env`.
pub async fn namespaces(env: &str) -> Result<Vec<NamespaceInfo>, ApiError> {
    get_json(
        "list namespaces",
        &format!("/environments/{}/namespaces", encode(env)),
    )
    .await
}

/// Pods of `ns` in `env`.
pub async fn pods(env: &str, ns: &str) -> Result<Vec<PodInfo>, ApiError> {
    get_json(
        "list pods",
        &format!(
            "/environments/{}/namespaces/{}/pods",
            encode(env),
            encode(ns)
        ),
    )
    .await
}

/// Guardrail health of `env`.
pub async fn guardrails(env: &str) -> Result<GuardrailReport, ApiError> {
    get_json(
        "check guardrails",
        &format!("/environments/{}/guardrails", encode(env)),
    )
    .await
}
