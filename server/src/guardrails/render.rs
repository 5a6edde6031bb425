//! Rendering `policies/` for one environment.

use std::collections::BTreeMap;

use breakglass_shared::validate;
use breakglass_shared::Tier;
use serde_json::Value;

use crate::config::{Config, Environment};

use super::{
    ALLOWED_CAPABILITIES, CLUSTER_RBAC_NAMES, COPY_ROLE, DEBUG_IMAGE_PARAM, LIVE_ROLE, POLICIES,
};

/// The templates, in apply order (a namespace before what lives in it, the parameter
/// ConfigMap before the bindings naming it, each policy before its binding).
const TEMPLATES: [(&str, &str); 9] = [
    ("rbac.yaml", include_str!("../../../policies/rbac.yaml")),
    (
        "debug-image.yaml",
        include_str!("../../../policies/debug-image.yaml"),
    ),
    (
        "admission/grant.yaml",
        include_str!("../../../policies/admission/grant.yaml"),
    ),
    (
        "admission/ephemeral.yaml",
        include_str!("../../../policies/admission/ephemeral.yaml"),
    ),
    (
        "admission/pod-patch.yaml",
        include_str!("../../../policies/admission/pod-patch.yaml"),
    ),
    (
        "admission/copy-pod.yaml",
        include_str!("../../../policies/admission/copy-pod.yaml"),
    ),
    (
        "admission/delete.yaml",
        include_str!("../../../policies/admission/delete.yaml"),
    ),
    (
        "admission/attach.yaml",
        include_str!("../../../policies/admission/attach.yaml"),
    ),
    (
        "admission/no-exec.yaml",
        include_str!("../../../policies/admission/no-exec.yaml"),
    ),
];

/// Why the policies could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The server's username is unusable in a policy.
    #[error("identity `{identity}`: {reason}")]
    Identity {
        /// The username given.
        identity: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A value from the configuration cannot go into a policy.
    #[error("{0}")]
    Value(String),
    /// A template is broken (a bug in `policies/`).
    #[error("template policies/{template}: {reason}")]
    Template {
        /// The template file, relative to `policies/`.
        template: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// Everything that differs between clusters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderInput {
    /// The environment's name (for messages only).
    pub environment: String,
    /// Its tier: Flight grants need an approver or a broken glass.
    pub tier: Tier,
    /// The server's username on that cluster (the policies name it literally).
    pub identity: String,
    /// The server's namespace (Lease, debug image parameter; protected).
    pub server_namespace: String,
    /// The debug image, pinned by digest.
    pub debug_image: String,
    /// Namespaces where no grant may be made.
    pub protected_namespaces: Vec<String>,
    /// The longest session on this tier, in minutes (the grant TTL bound).
    pub max_ttl_minutes: u32,
}

impl RenderInput {
    /// The input for `env` of `config`, with the server's `identity` there.
    pub fn new(config: &Config, env: &Environment, identity: &str) -> RenderInput {
        RenderInput {
            environment: env.name.clone(),
            tier: env.tier,
            identity: identity.to_string(),
            server_namespace: config.server_namespace.clone(),
            debug_image: config.debug_image.clone(),
            protected_namespaces: env.protected_namespaces.clone(),
            max_ttl_minutes: config.durations.for_tier(env.tier).max_minutes,
        }
    }
}

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

/// Renders every guardrail object for one environment.
pub fn render(input: &RenderInput) -> Result<Vec<Manifest>, RenderError> {
    check_identity(&input.identity)?;
    if !crate::config::is_pinned_image(&input.debug_image) {
        return Err(RenderError::Value(format!(
            "debug image `{}` is not pinned by digest (REPOSITORY@sha256:<64 hex digits>)",
            input.debug_image
        )));
    }
    for ns in input
        .protected_namespaces
        .iter()
        .chain(std::iter::once(&input.server_namespace))
    {
        if validate::dns_label("namespace", ns).is_err() {
            return Err(RenderError::Value(format!(
                "namespace `{ns}` is not a DNS label"
            )));
        }
    }
    if input.max_ttl_minutes == 0 || input.max_ttl_minutes > 9999 {
        return Err(RenderError::Value(format!(
            "the longest session ({} minutes) must be 1..=9999 minutes",
            input.max_ttl_minutes
        )));
    }
    let values = placeholder_values(input);
    let mut out = Vec::new();
    for (template, text) in TEMPLATES {
        for value in parse_template(template, text, &values)? {
            out.push(Manifest { template, value });
        }
    }
    for m in &mut out {
        if m.kind() == "ConfigMap" && m.name() == DEBUG_IMAGE_PARAM {
            m.value["metadata"]["namespace"] = Value::from(input.server_namespace.as_str());
            m.value["data"]["image"] = Value::from(input.debug_image.as_str());
        }
    }
    Ok(out)
}

/// The same objects for a second server identity on the same cluster (the guardrails are
/// cluster-scoped and name the identity literally, so two identities need two sets): every
/// object that names the identity gets `suffix` appended to its name, and so do the references
/// to them (roleRef, policyName, resourceNames); the objects both sets share keep their names
/// (the server's namespace, the two debug ClusterRoles, the debug image parameter). `doctor`
/// checks the unsuffixed set.
pub fn with_name_suffix(
    manifests: Vec<Manifest>,
    suffix: &str,
) -> Result<Vec<Manifest>, RenderError> {
    let valid = suffix.len() >= 2
        && suffix.len() <= 20
        && suffix.starts_with('-')
        && !suffix.ends_with('-')
        && suffix
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !valid {
        return Err(RenderError::Value(format!(
            "name suffix `{suffix}` must be `-` then 1 to 19 lowercase letters, digits or `-`, not ending in `-`"
        )));
    }
    let shared = |name: &str| [LIVE_ROLE, COPY_ROLE, DEBUG_IMAGE_PARAM].contains(&name);
    let add = |v: &mut Value| {
        if let Some(s) = v.as_str() {
            if !shared(s) {
                *v = Value::from(format!("{s}{suffix}"));
            }
        }
    };
    Ok(manifests
        .into_iter()
        .map(|mut m| {
            if m.kind() != "Namespace" {
                add(&mut m.value["metadata"]["name"]);
            }
            if m.value.get("roleRef").is_some() {
                add(&mut m.value["roleRef"]["name"]);
            }
            if m.kind() == "ValidatingAdmissionPolicyBinding" {
                add(&mut m.value["spec"]["policyName"]);
            }
            if let Some(rules) = m.value.get_mut("rules").and_then(Value::as_array_mut) {
                for rule in rules {
                    if let Some(names) = rule.get_mut("resourceNames").and_then(Value::as_array_mut)
                    {
                        names.iter_mut().for_each(add);
                    }
                }
            }
            m
        })
        .collect())
}

/// The rendered objects as one multi-document YAML stream (what `kubectl apply -f -` takes),
/// with a header naming the environment.
pub fn to_yaml(input: &RenderInput, manifests: &[Manifest]) -> Result<String, RenderError> {
    let mut out = format!(
        "# Break-glass guardrails for environment `{}` ({} tier), server identity `{}`.\n\
         # Rendered by `breakglass-server policies render`; apply with `kubectl apply -f -`.\n",
        input.environment,
        input.tier.as_str(),
        input.identity
    );
    for m in manifests {
        out.push_str("---\n");
        out.push_str(&manifest_yaml(m)?);
    }
    Ok(out)
}

/// One object as a YAML document (without the `---` separator).
pub fn manifest_yaml(m: &Manifest) -> Result<String, RenderError> {
    let mut text = serde_saphyr::to_string(&m.value).map_err(|e| RenderError::Template {
        template: m.template,
        reason: format!("cannot write YAML: {e}"),
    })?;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

/// The default image of the parameter ConfigMap, as committed in `policies/debug-image.yaml`.
pub(super) fn default_parameter_image() -> Result<String, RenderError> {
    let (template, text) = TEMPLATES[1];
    let docs = parse_template(template, text, &BTreeMap::new())?;
    docs.iter()
        .find_map(|d| d.pointer("/data/image").and_then(Value::as_str))
        .map(str::to_string)
        .ok_or_else(|| RenderError::Template {
            template,
            reason: "no data.image".into(),
        })
}

/// Usernames are written into CEL string literals and YAML: allow the characters Kubernetes
/// usernames of machine identities use, nothing that needs quoting.
fn check_identity(identity: &str) -> Result<(), RenderError> {
    let bad = |reason: &str| {
        Err(RenderError::Identity {
            identity: identity.to_string(),
            reason: reason.to_string(),
        })
    };
    if identity.is_empty() || identity.len() > 253 {
        return bad("must be 1 to 253 characters");
    }
    if !identity
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || ":._@+/=-".contains(c))
    {
        return bad("may contain only letters, digits and : . _ @ + / = -");
    }
    if let Some(rest) = identity.strip_prefix("system:serviceaccount:") {
        match rest.split_once(':') {
            Some((ns, name))
                if validate::dns_label("namespace", ns).is_ok()
                    && !name.is_empty()
                    && !name.contains(':') => {}
            _ => {
                return bad(
                    "a service account username is system:serviceaccount:<namespace>:<name>",
                )
            }
        }
    }
    Ok(())
}

/// `'text'` (the inputs are checked to need no escaping).
fn cel_string(s: &str) -> String {
    format!("'{s}'")
}

fn cel_list<S: AsRef<str>>(items: &[S]) -> String {
    let inner: Vec<String> = items.iter().map(|s| cel_string(s.as_ref())).collect();
    format!("[{}]", inner.join(", "))
}

fn placeholder_values(input: &RenderInput) -> BTreeMap<&'static str, String> {
    let identity = input.identity.as_str();
    let (subjects, subject_is_server) = match identity
        .strip_prefix("system:serviceaccount:")
        .and_then(|r| r.split_once(':'))
    {
        Some((ns, name)) => (
            serde_json::json!([{ "kind": "ServiceAccount", "name": name, "namespace": ns }]),
            format!(
                "s.kind == 'ServiceAccount' && s.name == {} && s.?namespace.orValue('') == {}",
                cel_string(name),
                cel_string(ns)
            ),
        ),
        None => (
            serde_json::json!([{
                "kind": "User",
                "apiGroup": "rbac.authorization.k8s.io",
                "name": identity
            }]),
            format!(
                "s.kind == 'User' && s.?apiGroup.orValue('') == 'rbac.authorization.k8s.io' && s.name == {}",
                cel_string(identity)
            ),
        ),
    };
    let policy_names: Vec<&str> = POLICIES.iter().map(|(name, _)| *name).collect();
    BTreeMap::from([
        ("server_namespace", input.server_namespace.clone()),
        ("subjects", subjects.to_string()),
        ("username", cel_string(identity)),
        ("username_text", identity.to_string()),
        ("subject_is_server", subject_is_server),
        (
            "protected_namespaces",
            cel_list(&input.protected_namespaces),
        ),
        ("max_ttl_minutes", input.max_ttl_minutes.to_string()),
        ("is_flight", (input.tier == Tier::Flight).to_string()),
        ("allowed_capabilities", cel_list(&ALLOWED_CAPABILITIES)),
        (
            "cluster_rbac_names",
            serde_json::json!(CLUSTER_RBAC_NAMES).to_string(),
        ),
        ("policy_names", serde_json::json!(policy_names).to_string()),
    ])
}

/// Substitutes the placeholders of one template and parses its documents.
fn parse_template(
    template: &'static str,
    text: &str,
    values: &BTreeMap<&'static str, String>,
) -> Result<Vec<Value>, RenderError> {
    let mut out = String::with_capacity(text.len() + 512);
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with('#') {
            out.push_str(line);
            continue;
        }
        let mut rest = line;
        while let Some(start) = rest.find("{{") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after.find("}}").ok_or_else(|| RenderError::Template {
                template,
                reason: format!("unclosed placeholder in line {:?}", line.trim_end()),
            })?;
            let key = after[..end].trim();
            let value = values.get(key).ok_or_else(|| RenderError::Template {
                template,
                reason: format!("unknown placeholder `{key}`"),
            })?;
            out.push_str(value);
            rest = &after[end + 2..];
        }
        out.push_str(rest);
    }
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&out).map_err(|e| RenderError::Template {
            template,
            reason: format!("not valid YAML after rendering: {e}"),
        })?;
    let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
    for d in &docs {
        let ok = d.get("apiVersion").and_then(Value::as_str).is_some()
            && d.get("kind").and_then(Value::as_str).is_some()
            && d.pointer("/metadata/name")
                .and_then(Value::as_str)
                .is_some();
        if !ok {
            return Err(RenderError::Template {
                template,
                reason: "a document without apiVersion, kind or metadata.name".into(),
            });
        }
    }
    Ok(docs)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::config::DEFAULT_DEBUG_IMAGE;

    fn input(tier: Tier, identity: &str) -> RenderInput {
        RenderInput {
            environment: "prod".into(),
            tier,
            identity: identity.into(),
            server_namespace: "breakglass".into(),
            debug_image: DEFAULT_DEBUG_IMAGE.into(),
            protected_namespaces: vec![
                "kube-system".into(),
                "kube-public".into(),
                "kube-node-lease".into(),
                "breakglass".into(),
                "payments".into(),
            ],
            max_ttl_minutes: 45,
        }
    }

    fn find<'a>(ms: &'a [Manifest], kind: &str, name: &str) -> &'a Manifest {
        ms.iter()
            .find(|m| m.kind() == kind && m.name() == name)
            .unwrap_or_else(|| panic!("{kind} {name} not rendered"))
    }

    fn validation_expressions(m: &Manifest) -> Vec<String> {
        m.value["spec"]["validations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["expression"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn renders_every_object_with_the_identity_literally() {
        let sa = "system:serviceaccount:breakglass:breakglass-server";
        let ms = render(&input(Tier::Flight, sa)).unwrap();
        // Every policy has a binding of the same name, Deny, matching only the server.
        for (policy, rule) in super::POLICIES {
            let p = find(&ms, "ValidatingAdmissionPolicy", policy);
            assert_eq!(p.value["spec"]["failurePolicy"], "Fail");
            assert_eq!(
                p.value["spec"]["matchConditions"][0]["expression"],
                format!("request.userInfo.username == '{sa}'")
            );
            for v in p.value["spec"]["validations"].as_array().unwrap() {
                let msg = v["message"]
                    .as_str()
                    .or(v["messageExpression"].as_str())
                    .unwrap();
                assert!(
                    msg.trim_start_matches('\'')
                        .starts_with(&format!("{rule}: ")),
                    "{policy}: {msg}"
                );
            }
            let b = find(&ms, "ValidatingAdmissionPolicyBinding", policy);
            assert_eq!(b.value["spec"]["policyName"], policy);
            assert_eq!(
                b.value["spec"]["validationActions"],
                serde_json::json!(["Deny"])
            );
        }
        let binder = find(&ms, "ClusterRoleBinding", "tower-breakglass-binder");
        assert_eq!(
            binder.value["subjects"],
            serde_json::json!([{"kind": "ServiceAccount", "name": "breakglass-server", "namespace": "breakglass"}])
        );
        let cm = find(&ms, "ConfigMap", DEBUG_IMAGE_PARAM);
        assert_eq!(cm.value["data"]["image"], DEFAULT_DEBUG_IMAGE);
        assert_eq!(cm.namespace(), Some("breakglass"));
        // The names the guardrails reader may read are exactly the rendered ones.
        let mut cluster_rbac: Vec<&str> = ms
            .iter()
            .filter(|m| m.kind() == "ClusterRole")
            .map(Manifest::name)
            .collect();
        cluster_rbac.sort_unstable();
        let mut expected = super::CLUSTER_RBAC_NAMES.to_vec();
        expected.sort_unstable();
        assert_eq!(cluster_rbac, expected);
        let bindings: Vec<&str> = ms
            .iter()
            .filter(|m| m.kind() == "ClusterRoleBinding")
            .map(Manifest::name)
            .collect();
        assert!(bindings.iter().all(|b| expected.contains(b)));
        assert_eq!(
            ms.iter()
                .filter(|m| m.kind() == "ValidatingAdmissionPolicy")
                .count(),
            super::POLICIES.len()
        );
    }

    #[test]
    fn user_identity_gets_a_user_subject() {
        let ms = render(&input(Tier::Ground, "hangar:home:tower-actor")).unwrap();
        let rb = find(&ms, "RoleBinding", "tower-breakglass-server");
        assert_eq!(
            rb.value["subjects"],
            serde_json::json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "hangar:home:tower-actor"}])
        );
        let grant = find(&ms, "ValidatingAdmissionPolicy", "tower-breakglass-grant");
        assert!(validation_expressions(grant)
            .iter()
            .any(|e| e.contains("s.kind == 'User'") && e.contains("'hangar:home:tower-actor'")));
    }

    #[test]
    fn tier_ttl_and_protected_namespaces_are_rendered() {
        let sa = "system:serviceaccount:breakglass:breakglass-server";
        let flight = render(&input(Tier::Flight, sa)).unwrap();
        let ground = render(&input(Tier::Ground, sa)).unwrap();
        let var = |ms: &[Manifest], name: &str| -> String {
            let g = find(ms, "ValidatingAdmissionPolicy", "tower-breakglass-grant");
            g.value["spec"]["variables"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == name)
                .map(|v| v["expression"].as_str().unwrap().to_string())
                .unwrap()
        };
        assert_eq!(var(&flight, "isFlight"), "true");
        assert_eq!(var(&ground, "isFlight"), "false");
        let grant = find(
            &flight,
            "ValidatingAdmissionPolicy",
            "tower-breakglass-grant",
        );
        let exprs = validation_expressions(grant).join("\n");
        assert!(exprs.contains("<= 45"), "{exprs}");
        assert!(exprs.contains("'payments'"), "{exprs}");
        // Apart from the tier, both tiers render the same objects.
        assert_eq!(flight.len(), ground.len());
    }

    #[test]
    fn yaml_output_parses_back_to_the_same_objects() {
        let i = input(
            Tier::Flight,
            "system:serviceaccount:breakglass:breakglass-server",
        );
        let ms = render(&i).unwrap();
        let text = to_yaml(&i, &ms).unwrap();
        let back: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        let back: Vec<Value> = back.into_iter().filter(|d| !d.is_null()).collect();
        let original: Vec<Value> = ms.into_iter().map(|m| m.value).collect();
        assert_eq!(back, original);
        assert!(!text.contains("{{"));
    }

    #[test]
    fn a_second_identity_gets_suffixed_names_and_references() {
        let ms = render(&input(Tier::Ground, "hangar:home:tower-actor")).unwrap();
        let n = ms.len();
        let ms = with_name_suffix(ms, "-actor").unwrap();
        assert_eq!(ms.len(), n);
        find(&ms, "Namespace", "breakglass");
        find(&ms, "ClusterRole", super::LIVE_ROLE);
        find(&ms, "ConfigMap", DEBUG_IMAGE_PARAM);
        let binder = find(&ms, "ClusterRoleBinding", "tower-breakglass-binder-actor");
        assert_eq!(
            binder.value["roleRef"]["name"],
            "tower-breakglass-binder-actor"
        );
        let role = find(&ms, "ClusterRole", "tower-breakglass-binder-actor");
        assert_eq!(
            role.value["rules"][1]["resourceNames"],
            serde_json::json!([super::LIVE_ROLE, super::COPY_ROLE])
        );
        let reader = find(
            &ms,
            "ClusterRole",
            "tower-breakglass-guardrails-reader-actor",
        );
        assert!(reader.value["rules"][1]["resourceNames"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n.as_str().unwrap().ends_with("-actor")));
        let b = find(
            &ms,
            "ValidatingAdmissionPolicyBinding",
            "tower-breakglass-ephemeral-actor",
        );
        assert_eq!(
            b.value["spec"]["policyName"],
            "tower-breakglass-ephemeral-actor"
        );
        assert_eq!(b.value["spec"]["paramRef"]["name"], DEBUG_IMAGE_PARAM);
        find(
            &ms,
            "ValidatingAdmissionPolicy",
            "tower-breakglass-no-exec-actor",
        );
        for bad in ["actor", "-", "-Actor", "-a-", "-aaaaaaaaaaaaaaaaaaaaaaaa"] {
            assert!(with_name_suffix(vec![], bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_inputs_are_refused() {
        for identity in [
            "",
            "bob'; true; '",
            "system:serviceaccount:Bad:x",
            "system:serviceaccount:onlyns",
            "a b",
        ] {
            assert!(
                matches!(
                    render(&input(Tier::Ground, identity)),
                    Err(RenderError::Identity { .. })
                ),
                "{identity:?}"
            );
        }
        let mut i = input(Tier::Ground, "u");
        i.debug_image = "alpine:latest".into();
        assert!(matches!(render(&i), Err(RenderError::Value(_))));
        let mut i = input(Tier::Ground, "u");
        i.protected_namespaces.push("Bad".into());
        assert!(matches!(render(&i), Err(RenderError::Value(_))));
    }

    #[test]
    fn unknown_placeholders_are_template_errors() {
        let e = parse_template("x.yaml", "a: {{nope}}\n", &BTreeMap::new()).unwrap_err();
        assert!(matches!(e, RenderError::Template { .. }), "{e}");
        // Comment lines are left alone.
        let docs = parse_template(
            "x.yaml",
            "# {{whatever}}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
            &BTreeMap::new(),
        )
        .unwrap();
        assert_eq!(docs.len(), 1);
    }
}
