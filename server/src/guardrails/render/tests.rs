//! The rendered objects, checked as the cluster will read them.

use breakglass_shared::Tier;

use super::*;
use crate::config::DEFAULT_DEBUG_IMAGE;
use crate::guardrails::{CLUSTER_RBAC_NAMES, POLICIES};

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
    for (policy, rule) in POLICIES {
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
    let mut expected = CLUSTER_RBAC_NAMES.to_vec();
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
        POLICIES.len()
    );
}

/// `rbac.yaml` writes the guardrail names out (so the Helm chart needs no list of them); they
/// must be exactly the objects rendered, in the order the constants give (the doctor compares
/// lists exactly).
#[test]
fn the_guardrails_reader_names_every_rendered_guardrail() {
    let ms = render(&input(Tier::Flight, "system:serviceaccount:breakglass:bg")).unwrap();
    let reader = find(&ms, "ClusterRole", "tower-breakglass-guardrails-reader");
    let names = |i: usize| -> Vec<String> {
        serde_json::from_value(reader.value["rules"][i]["resourceNames"].clone()).unwrap()
    };
    assert_eq!(names(0), CLUSTER_RBAC_NAMES.map(String::from).to_vec());
    let policies: Vec<String> = POLICIES.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(names(1), policies);
    let rendered: Vec<String> = ms
        .iter()
        .filter(|m| m.kind() == "ValidatingAdmissionPolicy")
        .map(|m| m.name().to_string())
        .collect();
    assert_eq!(rendered, policies);
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
    find(&ms, "ClusterRole", LIVE_ROLE);
    find(&ms, "ConfigMap", DEBUG_IMAGE_PARAM);
    let binder = find(&ms, "ClusterRoleBinding", "tower-breakglass-binder-actor");
    assert_eq!(
        binder.value["roleRef"]["name"],
        "tower-breakglass-binder-actor"
    );
    let role = find(&ms, "ClusterRole", "tower-breakglass-binder-actor");
    assert_eq!(
        role.value["rules"][1]["resourceNames"],
        serde_json::json!([LIVE_ROLE, COPY_ROLE])
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
