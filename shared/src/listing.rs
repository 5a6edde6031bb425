//! What the UI lists from a cluster: namespaces and pods, read with the server's standing read
//! access.

use serde::{Deserialize, Serialize};

/// A namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct NamespaceInfo {
    /// Name.
    pub name: String,
    /// Whether sessions are refused there (protected namespace).
    pub protected: bool,
}

/// One container of a pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct ContainerInfo {
    /// Name.
    pub name: String,
    /// Ready.
    pub ready: bool,
    /// An ephemeral (debug) container.
    pub ephemeral: bool,
}

/// The controller owning a pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct OwnerInfo {
    /// Kind, e.g. `ReplicaSet`.
    pub kind: String,
    /// Name.
    pub name: String,
}

/// A pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct PodInfo {
    /// Name.
    pub name: String,
    /// Phase (`Running`, `Pending`, ...).
    pub phase: String,
    /// The Ready condition.
    pub ready: bool,
    /// Containers, regular then ephemeral.
    pub containers: Vec<ContainerInfo>,
    /// Controller owner, if any.
    pub owner: Option<OwnerInfo>,
    /// A break-glass copy pod.
    pub breakglass_copy: bool,
}

/// The state of one checked guardrail item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum ItemStatus {
    /// Present and as rendered.
    Ok,
    /// Absent (or unreadable by the identity checking).
    Missing,
    /// Present but different from what is rendered now.
    Drifted,
}

impl ItemStatus {
    /// Lowercase name, as on the wire.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One checked guardrail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct GuardrailItem {
    /// What was checked, e.g. `ValidatingAdmissionPolicy tower-breakglass-grant`.
    pub name: String,
    /// Its state.
    pub status: ItemStatus,
    /// What was found (for a drift, the first difference).
    pub detail: String,
    /// The command (or config change) that fixes it; absent when `ok`.
    pub fix: Option<String>,
}

/// The guardrails of one environment's cluster (`GET /environments/{env}/guardrails`, and
/// `breakglass-server doctor`): the server's identity there, the RBAC, the admission policies
/// and bindings, the pinned debug image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct GuardrailReport {
    /// True when every item is `ok`.
    pub ok: bool,
    /// The environment checked.
    pub environment: String,
    /// Its tier.
    pub tier: crate::session::Tier,
    /// The server's username on the cluster (from a SelfSubjectReview).
    pub identity: Option<String>,
    /// The command that installs or repairs everything.
    pub fix: String,
    /// Every check, in order: identity, each rendered object, the effective access.
    pub items: Vec<GuardrailItem>,
}
