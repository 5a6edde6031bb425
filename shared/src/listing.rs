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
