//! One rendered guardrail object and what `doctor` and `policies render` read from it.

use serde_json::Value;

/// One rendered Kubernetes object.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The template it came from, relative to `policies/`.
    pub template: &'static str,
    /// The object, as the API server takes it.
    pub value: Value,
}

impl Manifest {
    fn str_at(&self, pointer: &str) -> &str {
        self.value
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// `apiVersion`.
    pub fn api_version(&self) -> &str {
        self.str_at("/apiVersion")
    }

    /// `kind`.
    pub fn kind(&self) -> &str {
        self.str_at("/kind")
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.str_at("/metadata/name")
    }

    /// `metadata.namespace`, for namespaced objects.
    pub fn namespace(&self) -> Option<&str> {
        self.value
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
    }

    /// `Kind name` or `Kind namespace/name`.
    pub fn display_name(&self) -> String {
        match self.namespace() {
            Some(ns) => format!("{} {ns}/{}", self.kind(), self.name()),
            None => format!("{} {}", self.kind(), self.name()),
        }
    }

    /// The lowercase plural resource name of the kind (the kinds rendered here only).
    pub fn plural(&self) -> Option<&'static str> {
        Some(match self.kind() {
            "Namespace" => "namespaces",
            "ConfigMap" => "configmaps",
            "ClusterRole" => "clusterroles",
            "ClusterRoleBinding" => "clusterrolebindings",
            "Role" => "roles",
            "RoleBinding" => "rolebindings",
            "ValidatingAdmissionPolicy" => "validatingadmissionpolicies",
            "ValidatingAdmissionPolicyBinding" => "validatingadmissionpolicybindings",
            _ => return None,
        })
    }
}
