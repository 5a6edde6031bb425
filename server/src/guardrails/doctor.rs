//! `doctor`: checks a live cluster against what [`render`](super::render) produces.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};
use serde_json::Value;

use super::render::{render, Manifest, RenderError, RenderInput};
use super::{COPY_ROLE, DEBUG_IMAGE_PARAM, LIVE_ROLE};
use crate::config::{Config, Environment};
use crate::credentials::whoami;
use crate::ports::ClusterError;

pub use breakglass_shared::listing::{GuardrailItem, GuardrailReport, ItemStatus};

/// Why a check could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum GuardrailError {
    /// The cluster did not say who the server is (unreachable, bad credentials).
    #[error("{0}")]
    Identity(#[from] ClusterError),
    /// The policies cannot be rendered for this identity or configuration.
    #[error("cannot render the policies: {0}")]
    Render(#[from] RenderError),
    /// The cluster failed while being checked.
    #[error("talking to the cluster: {0}")]
    Kube(#[from] kube::Error),
}

/// The command that renders and applies the guardrails of `env`.
pub fn fix_command(env: &Environment, live_identity: &str) -> String {
    let identity = if env.identity.as_deref() == Some(live_identity) {
        String::new()
    } else {
        format!(" --identity {live_identity}")
    };
    format!(
        "breakglass-server policies render --cluster {}{identity} | kubectl apply -f -",
        env.name
    )
}

/// Checks the cluster behind `client` (credentials of the server itself, so the identity is
/// the one the policies must name) against the guardrails rendered for `env`.
pub async fn doctor(
    client: &Client,
    config: &Config,
    env: &Environment,
) -> Result<GuardrailReport, GuardrailError> {
    let identity = whoami(&env.name, client.clone()).await?;
    let fix = fix_command(env, &identity);
    let mut items = Vec::new();
    items.push(match &env.identity {
        Some(configured) if configured != &identity => GuardrailItem {
            name: "server identity".into(),
            status: ItemStatus::Drifted,
            detail: format!(
                "the configuration says `{configured}`, but the cluster says the server is `{identity}`; policies rendered from the configuration would not match the server"
            ),
            fix: Some(format!(
                "set `identity = \"{identity}\"` for environment `{}` in the server configuration (or remove it: doctor and activation learn it live)",
                env.name
            )),
        },
        _ => GuardrailItem {
            name: "server identity".into(),
            status: ItemStatus::Ok,
            detail: format!("the server is `{identity}` on this cluster"),
            fix: None,
        },
    });
    let input = RenderInput::new(config, env, &identity);
    let manifests = render(&input)?;
    for m in &manifests {
        items.push(check_object(client, m, &fix).await?);
    }
    for (what, attrs) in access_checks() {
        items.push(check_access(client, what, attrs, &fix).await?);
    }
    Ok(GuardrailReport {
        ok: items.iter().all(|i| i.status == ItemStatus::Ok),
        environment: env.name.clone(),
        tier: env.tier,
        identity: Some(identity),
        fix,
        items,
    })
}

/// The access the server must effectively have at rest (through whatever bindings).
fn access_checks() -> Vec<(&'static str, ResourceAttributes)> {
    let attrs = |group: &str, resource: &str, verb: &str, name: Option<&str>| ResourceAttributes {
        group: Some(group.into()),
        resource: Some(resource.into()),
        verb: Some(verb.into()),
        name: name.map(str::to_string),
        ..ResourceAttributes::default()
    };
    vec![
        (
            "access: create RoleBindings in any namespace (binder right)",
            attrs("rbac.authorization.k8s.io", "rolebindings", "create", None),
        ),
        (
            "access: delete RoleBindings in any namespace (binder right)",
            attrs("rbac.authorization.k8s.io", "rolebindings", "delete", None),
        ),
        (
            "access: bind ClusterRole tower-breakglass-debug-live (binder right)",
            attrs(
                "rbac.authorization.k8s.io",
                "clusterroles",
                "bind",
                Some(LIVE_ROLE),
            ),
        ),
        (
            "access: bind ClusterRole tower-breakglass-debug-copy (binder right)",
            attrs(
                "rbac.authorization.k8s.io",
                "clusterroles",
                "bind",
                Some(COPY_ROLE),
            ),
        ),
        (
            "access: list pods in any namespace (UI listings)",
            attrs("", "pods", "list", None),
        ),
    ]
}

async fn check_access(
    client: &Client,
    what: &str,
    attrs: ResourceAttributes,
    fix: &str,
) -> Result<GuardrailItem, GuardrailError> {
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(attrs),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let result = reviews.create(&PostParams::default(), &review).await?;
    let allowed = result.status.as_ref().is_some_and(|s| s.allowed);
    Ok(if allowed {
        GuardrailItem {
            name: what.into(),
            status: ItemStatus::Ok,
            detail: "allowed".into(),
            fix: None,
        }
    } else {
        let reason = result
            .status
            .and_then(|s| s.reason)
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| "no RBAC rule allows it".into());
        GuardrailItem {
            name: what.into(),
            status: ItemStatus::Missing,
            detail: format!("not allowed: {reason}"),
            fix: Some(fix.into()),
        }
    })
}

/// The API of `m`'s kind (in its namespace, if namespaced); `None` for a kind never rendered.
pub fn api_for(client: &Client, m: &Manifest) -> Option<Api<DynamicObject>> {
    let plural = m.plural()?;
    let (group, version) = match m.api_version().split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", m.api_version()),
    };
    let gvk = GroupVersionKind::gvk(group, version, m.kind());
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    Some(match m.namespace() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    })
}

/// The fields that carry an object's meaning (what drift is about), per kind; `true` compares
/// the field exactly, `false` checks rendered ⊆ live (the API server adds defaults).
fn compared_fields(kind: &str) -> &'static [(&'static str, bool)] {
    match kind {
        "ClusterRole" | "Role" => &[("rules", false)],
        "ClusterRoleBinding" | "RoleBinding" => &[("roleRef", false), ("subjects", false)],
        "ConfigMap" => &[("data", true)],
        "ValidatingAdmissionPolicy" | "ValidatingAdmissionPolicyBinding" => &[("spec", false)],
        _ => &[],
    }
}

async fn check_object(
    client: &Client,
    m: &Manifest,
    fix: &str,
) -> Result<GuardrailItem, GuardrailError> {
    let is_pin = m.kind() == "ConfigMap" && m.name() == DEBUG_IMAGE_PARAM;
    let name = if is_pin {
        format!("debug image pin ({})", m.display_name())
    } else {
        m.display_name()
    };
    let item = |status: ItemStatus, detail: String| GuardrailItem {
        name: name.clone(),
        status,
        detail,
        fix: (status != ItemStatus::Ok).then(|| fix.to_string()),
    };
    let Some(api) = api_for(client, m) else {
        return Ok(item(
            ItemStatus::Missing,
            format!("doctor cannot read kind {}", m.kind()),
        ));
    };
    let live = match api.get_opt(m.name()).await {
        Ok(Some(obj)) => obj,
        Ok(None) => return Ok(item(ItemStatus::Missing, "not found".into())),
        Err(kube::Error::Api(e)) if e.code == 403 => {
            return Ok(item(
                ItemStatus::Missing,
                format!(
                    "cannot read it with the server's identity (forbidden: is ClusterRole tower-breakglass-guardrails-reader bound?): {}",
                    e.message
                ),
            ))
        }
        Err(e) => return Err(e.into()),
    };
    let live = serde_json::to_value(&live).map_err(kube::Error::SerdeError)?;
    for (field, exact) in compared_fields(m.kind()) {
        let desired = m.value.get(*field).unwrap_or(&Value::Null);
        let actual = live.get(*field).unwrap_or(&Value::Null);
        let difference = if *exact {
            (desired != actual).then(|| {
                format!(
                    "{field}: live {} but rendered {}",
                    short(actual),
                    short(desired)
                )
            })
        } else {
            first_difference(actual, desired, field)
        };
        if let Some(d) = difference {
            let detail = if is_pin {
                format!(
                    "the admission policies admit {} but the server is configured with {}",
                    short(&live["data"]["image"]),
                    short(&m.value["data"]["image"])
                )
            } else {
                d
            };
            return Ok(item(ItemStatus::Drifted, detail));
        }
    }
    if m.kind() == "ValidatingAdmissionPolicy" {
        let warnings: Vec<String> = live
            .pointer("/status/typeChecking/expressionWarnings")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|w| {
                format!(
                    "{}: {}",
                    w["fieldRef"].as_str().unwrap_or("?"),
                    w["warning"].as_str().unwrap_or("?")
                )
            })
            .collect();
        if !warnings.is_empty() {
            return Ok(item(
                ItemStatus::Drifted,
                format!("the API server's type check warns: {}", warnings.join("; ")),
            ));
        }
    }
    Ok(item(
        ItemStatus::Ok,
        if is_pin {
            format!("admits {}", short(&m.value["data"]["image"]))
        } else {
            "present, as rendered".into()
        },
    ))
}

fn short(v: &Value) -> String {
    let mut s = v.to_string();
    if s.len() > 160 {
        let mut cut = 157;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

/// The first place where `desired` is not contained in `live` (objects: every rendered key
/// present and contained; lists: same length, element-wise contained; scalars: equal), or
/// `None`. Containment rather than equality because the API server fills in defaults.
pub fn first_difference(live: &Value, desired: &Value, path: &str) -> Option<String> {
    match (live, desired) {
        (Value::Object(l), Value::Object(d)) => d.iter().find_map(|(k, dv)| match l.get(k) {
            Some(lv) => first_difference(lv, dv, &format!("{path}.{k}")),
            None => Some(format!("{path}.{k}: missing, rendered {}", short(dv))),
        }),
        (Value::Array(l), Value::Array(d)) => {
            if l.len() != d.len() {
                return Some(format!(
                    "{path}: {} entries live, {} rendered",
                    l.len(),
                    d.len()
                ));
            }
            l.iter()
                .zip(d)
                .enumerate()
                .find_map(|(i, (lv, dv))| first_difference(lv, dv, &format!("{path}[{i}]")))
        }
        _ if live == desired => None,
        _ => Some(format!(
            "{path}: live {} but rendered {}",
            short(live),
            short(desired)
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containment_ignores_defaults_but_not_changes() {
        let desired = json!({"failurePolicy": "Fail", "rules": [{"verbs": ["get"]}]});
        let live = json!({"failurePolicy": "Fail", "matchPolicy": "Equivalent", "rules": [{"verbs": ["get"], "scope": "*"}]});
        assert_eq!(first_difference(&live, &desired, "spec"), None);
        let changed = json!({"failurePolicy": "Ignore", "rules": [{"verbs": ["get"]}]});
        assert_eq!(
            first_difference(&changed, &desired, "spec").unwrap(),
            "spec.failurePolicy: live \"Ignore\" but rendered \"Fail\""
        );
        let more =
            json!({"failurePolicy": "Fail", "rules": [{"verbs": ["get"]}, {"verbs": ["*"]}]});
        assert!(first_difference(&more, &desired, "spec")
            .unwrap()
            .contains("2 entries live, 1 rendered"));
        let gone = json!({"rules": [{"verbs": ["get"]}]});
        assert!(first_difference(&gone, &desired, "spec")
            .unwrap()
            .contains("missing"));
    }

    #[test]
    fn report_serializes_with_lowercase_statuses() {
        let r = GuardrailReport {
            ok: false,
            environment: "prod".into(),
            tier: breakglass_shared::Tier::Flight,
            identity: Some("u".into()),
            fix: "x".into(),
            items: vec![GuardrailItem {
                name: "n".into(),
                status: ItemStatus::Drifted,
                detail: "d".into(),
                fix: Some("x".into()),
            }],
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["items"][0]["status"], "drifted");
        assert_eq!(v["tier"], "flight");
        let back: GuardrailReport = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
    }
}
