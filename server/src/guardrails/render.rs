//! Rendering `policies/` for one environment: checking the inputs, filling in the templates,
//! and the two ways out: a second identity's set with suffixed names, and YAML for
//! `kubectl apply -f -`.

use breakglass_shared::validate;
use serde_json::Value;

use super::identity::Identity;
use super::template::{parse_template, placeholder_values, TEMPLATES};
use super::{COPY_ROLE, DEBUG_IMAGE_PARAM, LIVE_ROLE};

pub use super::input::{RenderError, RenderInput};
pub use super::manifest::Manifest;

/// Renders every guardrail object for one environment.
pub fn render(input: &RenderInput) -> Result<Vec<Manifest>, RenderError> {
    Identity::check(&input.identity)?;
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
