//! The templates in `policies/` and how one is filled in: `{{ placeholder }}` substitution
//! (comment lines left alone), then parsing its YAML documents.

use std::collections::BTreeMap;

use breakglass_shared::Tier;
use serde_json::Value;

use super::identity::{cel_string, Identity};
use super::input::{RenderError, RenderInput};
use super::ALLOWED_CAPABILITIES;

/// The templates, in apply order (a namespace before what lives in it, the parameter
/// ConfigMap before the bindings naming it, each policy before its binding).
pub(super) const TEMPLATES: [(&str, &str); 9] = [
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

fn cel_list<S: AsRef<str>>(items: &[S]) -> String {
    let inner: Vec<String> = items.iter().map(|s| cel_string(s.as_ref())).collect();
    format!("[{}]", inner.join(", "))
}

/// The value of every placeholder the templates use, for `input` (already checked).
pub(super) fn placeholder_values(input: &RenderInput) -> BTreeMap<&'static str, String> {
    let identity = input.identity.as_str();
    let subject = Identity::parse(identity);
    BTreeMap::from([
        ("server_namespace", input.server_namespace.clone()),
        ("subjects", subject.rbac_subjects().to_string()),
        ("username", cel_string(identity)),
        ("username_text", identity.to_string()),
        ("subject_is_server", subject.cel_is_subject()),
        (
            "protected_namespaces",
            cel_list(&input.protected_namespaces),
        ),
        ("max_ttl_minutes", input.max_ttl_minutes.to_string()),
        ("is_flight", (input.tier == Tier::Flight).to_string()),
        ("allowed_capabilities", cel_list(&ALLOWED_CAPABILITIES)),
    ])
}

/// Substitutes the placeholders of one template and parses its documents.
pub(super) fn parse_template(
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

    /// The placeholders `rbac.yaml` may use: the Helm chart (`deploy/helm/breakglass`) reads
    /// that template too and fills in exactly these, so the chart's standing RBAC and
    /// `policies render` come from one file.
    const CHART_RBAC_PLACEHOLDERS: [&str; 2] = ["server_namespace", "subjects"];

    /// The placeholders `text` uses outside comment lines.
    fn placeholders_of(text: &str) -> Vec<&str> {
        text.lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .flat_map(|l| l.split("{{").skip(1))
            .filter_map(|rest| rest.split_once("}}").map(|(key, _)| key.trim()))
            .collect()
    }

    #[test]
    fn rbac_uses_only_the_placeholders_the_chart_fills() {
        let (name, text) = TEMPLATES[0];
        assert_eq!(name, "rbac.yaml");
        let used = placeholders_of(text);
        assert!(used.contains(&"subjects"), "{used:?}");
        for key in used {
            assert!(
                CHART_RBAC_PLACEHOLDERS.contains(&key),
                "rbac.yaml uses `{key}`, which the Helm chart does not fill in"
            );
        }
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
