//! Cluster guardrails: the RBAC and ValidatingAdmissionPolicies that fence what the server may
//! do in each cluster (`policies/`), rendered per environment ([`render`]), and checked against
//! a live cluster ([`doctor`]).
//!
//! The templates live in `policies/` (one source for both tiers) and are compiled into the
//! binary. Rendering fills in what differs per cluster: the server's username there (the
//! policies name it literally), the tier (Flight grants need an approver or a broken glass),
//! the tier's longest session, the protected namespaces, the server's namespace and the pinned
//! debug image. See `policies/README.md` for every rule, why it exists and the tests proving it.
//!
//! # The shape activation must follow
//!
//! The policies admit exactly what the activation code produces, so both follow these
//! contracts (names are kept from the reference system):
//! - grant: RoleBinding `breakglass-<short id>` binding ClusterRole [`LIVE_ROLE`] or
//!   [`COPY_ROLE`] to the server itself, labels [`MANAGED_BY_LABEL`]=[`MANAGED_BY_VALUE`],
//!   [`SESSION_LABEL`]=`<session uuid>`, [`TTL_LABEL`]=`<n>m`, annotations
//!   [`REQUESTER_ANNOTATION`], [`TTL_ANNOTATION`] (equal to the label) and on Flight
//!   [`APPROVER_ANNOTATION`] (not the requester) or [`GLASS_BROKEN_ANNOTATION`]=`"true"`;
//! - debug container (ephemeral in live mode, regular in a copy pod): named
//!   `debug-<short id>`, env [`SESSION_ENV`]=`<session uuid>` (the short id is the last 8 hex
//!   digits of that uuid), the pinned image, stdin+tty, not privileged,
//!   `allowPrivilegeEscalation: false`, capabilities added only from
//!   [`ALLOWED_CAPABILITIES`]; `SYS_PTRACE` and `targetContainerName` only with process access,
//!   i.e. when the pod carries [`PROCESS_ACCESS_ANNOTATION`]=`<that session uuid>` (in copy
//!   mode: the copy pod itself carries the annotation);
//! - copy pod `<pod>-bg-<short id>`: labels only from [`COPY_POD_LABELS`] (with [`COPY_LABEL`]
//!   = session uuid), no owner references, `automountServiceAccountToken: false` and no
//!   projected service-account token volume, no host namespaces, no hostPath volume, no
//!   privileged container, exactly one debug container.

pub mod doctor;
mod identity;
mod input;
mod manifest;
pub mod render;
mod template;

pub use doctor::{doctor, GuardrailError, GuardrailItem, GuardrailReport, ItemStatus};
pub use identity::Identity;
pub use render::{render, Manifest, RenderError, RenderInput};

/// The ClusterRoles bound by live- and copy-mode grants (contracts: never rename); named in
/// `shared`, where the audit trail's OCSF events name them too.
pub use breakglass_shared::session::{COPY_ROLE, LIVE_ROLE};
/// Label on grants (and copy pods) naming who manages them.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY_VALUE: &str = "tower-breakglass";
/// Grant label: the session id.
pub const SESSION_LABEL: &str = "hangar.io/breakglass-session";
/// Kyverno's TTL cleanup label (`<n>m`), the backstop when the server is gone.
pub const TTL_LABEL: &str = "cleanup.kyverno.io/ttl";
/// Grant annotation: the requester.
pub const REQUESTER_ANNOTATION: &str = "hangar.io/breakglass-requester";
/// Grant annotation: the session's TTL (`<n>m`, equal to [`TTL_LABEL`]).
pub const TTL_ANNOTATION: &str = "hangar.io/breakglass-ttl";
/// Grant annotation (Flight): the approver.
pub const APPROVER_ANNOTATION: &str = "hangar.io/breakglass-approver";
/// Grant annotation (Flight): `"true"` when the glass was broken instead of approved.
pub const GLASS_BROKEN_ANNOTATION: &str = "hangar.io/breakglass-glass-broken";
/// Pod annotation granting process access to one session (value: the session uuid).
pub const PROCESS_ACCESS_ANNOTATION: &str = "hangar.io/breakglass-process-access";
/// Copy-pod label (value: the session uuid).
pub const COPY_LABEL: &str = "hangar.io/breakglass-copy";
/// The only labels a copy pod may carry (so no Service selects it).
pub const COPY_POD_LABELS: [&str; 4] = [COPY_LABEL, SESSION_LABEL, MANAGED_BY_LABEL, TTL_LABEL];
/// Env var on every debug container naming its session (uuid); the policies match it against
/// the container's name and the pod's process-access annotation.
pub const SESSION_ENV: &str = "BREAKGLASS_SESSION";
/// Capabilities a debug container may add (`SYS_PTRACE` only with process access).
pub const ALLOWED_CAPABILITIES: [&str; 2] = ["NET_RAW", "SYS_PTRACE"];
/// The parameter ConfigMap (in the server's namespace) holding the pinned debug image.
pub const DEBUG_IMAGE_PARAM: &str = "tower-breakglass-debug-image";
/// Label on every rendered guardrail object.
pub const PART_OF_LABEL: (&str, &str) = ("app.kubernetes.io/part-of", "tower-breakglass");

/// The cluster-scoped RBAC objects rendered (ClusterRoles and ClusterRoleBindings share names).
pub const CLUSTER_RBAC_NAMES: [&str; 5] = [
    LIVE_ROLE,
    COPY_ROLE,
    "tower-breakglass-binder",
    "tower-breakglass-reader",
    "tower-breakglass-guardrails-reader",
];

/// The ValidatingAdmissionPolicies rendered (each binding has its policy's name), with the
/// rule name each one's refusal messages start with (`<rule>: ...`).
pub const POLICIES: [(&str, &str); 7] = [
    ("tower-breakglass-grant", "breakglass-grant"),
    ("tower-breakglass-ephemeral", "breakglass-ephemeral"),
    ("tower-breakglass-pod-patch", "breakglass-pod-patch"),
    ("tower-breakglass-copy-pod", "breakglass-copy-pod"),
    ("tower-breakglass-delete", "breakglass-delete"),
    ("tower-breakglass-attach", "breakglass-attach"),
    ("tower-breakglass-no-exec", "breakglass-exec"),
];

/// The pinned digest in `policies/debug-image.yaml` (the admission policy parameter's
/// default), for the check that the three places agree.
pub fn policy_parameter_image() -> Result<String, RenderError> {
    template::default_parameter_image()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::config::DEFAULT_DEBUG_IMAGE;

    const KYVERNO_IMAGE_POLICY: &str = include_str!("../../../policies/kyverno/debug-image.yaml");

    /// The release step updates the debug image digest in three places (debug-image/README.md):
    /// the server's default, the admission policy parameter, the Kyverno image policy. They
    /// must agree.
    #[test]
    fn the_three_debug_image_pins_agree() {
        assert!(crate::config::is_pinned_image(DEFAULT_DEBUG_IMAGE));
        assert_eq!(
            policy_parameter_image().unwrap(),
            DEFAULT_DEBUG_IMAGE,
            "policies/debug-image.yaml disagrees with DEFAULT_DEBUG_IMAGE (server/src/config/environments.rs)"
        );
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(KYVERNO_IMAGE_POLICY)
            .unwrap()
            .into_iter()
            .filter(|d: &serde_json::Value| !d.is_null())
            .collect();
        let policy = docs
            .iter()
            .find(|d| d["kind"] == "ImageValidatingPolicy")
            .expect("an ImageValidatingPolicy in policies/kyverno/debug-image.yaml");
        let pinned: Vec<&str> = policy["spec"]["variables"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["name"] == "pinned")
            .filter_map(|v| v["expression"].as_str())
            .collect();
        assert_eq!(
            pinned,
            vec![format!("'{DEFAULT_DEBUG_IMAGE}'").as_str()],
            "the Kyverno image policy's `pinned` variable disagrees with DEFAULT_DEBUG_IMAGE"
        );
        let (repo, _) = DEFAULT_DEBUG_IMAGE.split_once('@').unwrap();
        let globs: Vec<&str> = policy["spec"]["matchImageReferences"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["glob"].as_str())
            .collect();
        assert_eq!(globs, vec![format!("{repo}*").as_str()]);
    }
}
