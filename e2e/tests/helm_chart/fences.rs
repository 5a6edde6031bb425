//! What the chart fences: the binder role only beside the grant policy, and a NetworkPolicy
//! that lets in only the ingress controller and the scraper and out only what is named.

use super::*;

/// The admission policy (and its binding) that narrows the binder role.
const GRANT_POLICY: &str = "tower-breakglass-grant";

#[tokio::test]
async fn the_binder_role_needs_the_grant_policy_in_the_cluster_or_an_acknowledgement() {
    let ground = example("ground.yaml");
    let binder = |yaml: &str| {
        docs(yaml)
            .unwrap()
            .iter()
            .any(|d| kind(d) == "ClusterRole" && name(d) == "tower-breakglass-binder")
    };
    let unacknowledged = ["rbac.admissionPoliciesAppliedSeparately=false"];
    // Without a cluster to look into, and without the acknowledgement: refused, saying how.
    let Err(message) = template("bg", &ground, &unacknowledged).unwrap() else {
        panic!("the binder role rendered with no grant policy and no acknowledgement");
    };
    for part in [
        "tower-breakglass-binder",
        GRANT_POLICY,
        "policies apply",
        "rbac.admissionPoliciesAppliedSeparately=true",
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }
    // No RBAC, nothing to fence.
    let set = [unacknowledged[0], "rbac.create=false"];
    let yaml = rendered("bg", &ground, &set).unwrap();
    assert!(!binder(&yaml), "rbac.create=false rendered the binder");

    // Against a real API server: refused while the policy is missing, rendered once it and its
    // binding are there.
    let cp = ControlPlane::shared().await.unwrap();
    let admin = cp.client(Identity::Admin).await.unwrap();
    let kubeconfig = cp.kubeconfig_path(Identity::Admin).unwrap();
    let live = [
        "--dry-run=server",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ];
    let before = template_with("bg", &[&ground], &unacknowledged, &live).unwrap();
    let Err(message) = before else {
        panic!("rendered against a cluster without {GRANT_POLICY}");
    };
    assert!(message.contains(GRANT_POLICY), "{message}");

    let objects = docs(&rendered("bg", &ground, &[]).unwrap()).unwrap();
    let config = find(&objects, "ConfigMap").unwrap()["data"]["server.toml"]
        .as_str()
        .unwrap()
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("server.toml");
    std::fs::write(&config_file, &config).unwrap();
    let out = policies_render(
        &server_binary().unwrap(),
        &config_file,
        "dev",
        "system:serviceaccount:bg:breakglass-server",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let policy: Vec<String> = docs(&String::from_utf8(out.stdout).unwrap())
        .unwrap()
        .into_iter()
        .filter(|d| name(d) == GRANT_POLICY)
        .map(|d| serde_json::to_string(&d).unwrap())
        .collect();
    assert_eq!(policy.len(), 2, "the policy and its binding: {policy:?}");
    breakglass_e2e::apply::apply_yaml(&admin, &policy.join("\n---\n"))
        .await
        .unwrap();
    let after = template_with("bg", &[&ground], &unacknowledged, &live).unwrap();
    let yaml = after.unwrap_or_else(|e| panic!("refused beside {GRANT_POLICY}: {e}"));
    assert!(binder(&yaml), "the binder role is missing");
}

/// The namespaces or address blocks a NetworkPolicy rule names on `side` (`from`, `to`), and
/// `pods {labels}` for pods of the policy's own namespace; a rule without that side (open to
/// everyone) fails the test.
fn peers(rule: &Value, side: &str) -> Vec<String> {
    rule[side]
        .as_array()
        .unwrap_or_else(|| panic!("a rule open to everyone: {rule}"))
        .iter()
        .map(|peer| {
            if peer.get("namespaceSelector").is_none() {
                if let Some(labels) = peer["podSelector"]["matchLabels"].as_object() {
                    return format!("pods {}", Value::Object(labels.clone()));
                }
            }
            peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
                .as_str()
                .or(peer["ipBlock"]["cidr"].as_str())
                .unwrap_or_else(|| panic!("a peer with neither: {peer}"))
                .to_string()
        })
        .collect()
}

#[test]
fn the_network_policy_lets_in_the_ingress_and_the_scraper_and_out_only_what_is_named() {
    let flight = example("flight.yaml");
    let objects = docs(&rendered("bg", &flight, &[]).unwrap()).unwrap();
    let policy = find(&objects, "NetworkPolicy").unwrap();
    let pods = &find(&objects, "Deployment").unwrap()["spec"]["template"]["metadata"]["labels"];
    let selector = policy["spec"]["podSelector"]["matchLabels"]
        .as_object()
        .unwrap();
    assert!(!selector.is_empty(), "the policy selects every pod");
    for (k, v) in selector {
        assert_eq!(
            &pods[k], v,
            "the policy selects other pods than the server's"
        );
    }
    assert_eq!(
        policy["spec"]["policyTypes"],
        serde_json::json!(["Ingress", "Egress"])
    );
    let rules = |side: &str, key: &str| -> Vec<String> {
        policy["spec"][key]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| peers(r, side))
            .collect()
    };
    // The replicas reach each other (a watcher is served by the one holding the terminal).
    let replicas = format!("pods {}", Value::Object(selector.clone()));
    assert_eq!(
        rules("from", "ingress"),
        [replicas.as_str(), "ingress-nginx", "monitoring"]
    );
    assert_eq!(
        rules("to", "egress"),
        [
            replicas.as_str(),
            "kube-system",
            "198.51.100.20/32",
            "203.0.113.0/24",
            "192.0.2.10/32"
        ]
    );
    for rule in policy["spec"]["egress"].as_array().unwrap() {
        let ports = rule["ports"].as_array();
        assert!(ports.is_some_and(|p| !p.is_empty()), "any port: {rule}");
    }

    // Without an address the configuration needs, refused naming the key.
    let dir = tempfile::tempdir().unwrap();
    let oidc = dir.path().join("oidc.yaml");
    std::fs::write(
        &oidc,
        "config: |\n  [auth.oidc]\n  issuer_url = \"https://id.example.com\"\n",
    )
    .unwrap();
    let ground = example("ground.yaml");
    let cases: [(&[&Path], &str, &str); 4] = [
        (
            &[&ground],
            "networkPolicy.egress.apiServers=null",
            "networkPolicy.egress.apiServers",
        ),
        (
            &[&flight],
            "networkPolicy.egress.database=null",
            "networkPolicy.egress.database",
        ),
        (
            &[&flight],
            "networkPolicy.egress.bucket=null",
            "networkPolicy.egress.bucket",
        ),
        (
            &[&ground, &oidc],
            "networkPolicy.enabled=true",
            "networkPolicy.egress.provider",
        ),
    ];
    for (values, set, key) in cases {
        let outcome = template_with("bg", values, &[set], &[]).unwrap();
        let Err(message) = outcome else {
            panic!("{set} rendered");
        };
        assert!(message.contains(key), "{set}: {message}");
    }
    // Turned off, there is none (and nothing is asked of it).
    let set = [
        "networkPolicy.enabled=false",
        "networkPolicy.egress.apiServers=null",
    ];
    let objects = docs(&rendered("bg", &ground, &set).unwrap()).unwrap();
    assert!(objects.iter().all(|d| kind(d) != "NetworkPolicy"));
}
