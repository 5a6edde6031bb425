//! Per-step minted credentials for real, with two test control planes: the server's identity on
//! the remote cluster is a token minted for `breakglass/tower-actor` by the home cluster's
//! TokenRequest API, which the remote trusts (so there the server is User
//! `hangar:<home>:tower-actor`). No static credential for the remote exists. Also the listing
//! and guardrail-health endpoints through those credentials.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use breakglass_e2e::server::{config_toml, ServerProcess};
use breakglass_e2e::{wait_for_pod_running, ControlPlane, Identity, StartOptions};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{ListParams, PostParams};
use kube::Api;
use serde_json::json;

#[tokio::test]
async fn a_session_on_a_cluster_reached_with_minted_tokens() {
    let home = ControlPlane::shared().await.unwrap();
    let remote = ControlPlane::start(StartOptions {
        cluster_name: Some("remote".into()),
        trust_issuer_dir: Some(home.kubeconfig_dir().to_owned()),
    })
    .await
    .unwrap();
    let remote_user = format!("hangar:{}:tower-actor", home.cluster_name());

    // Home: the server (breakglass-server) may mint tokens for tower-actor, nothing more.
    let home_admin = home.client(Identity::Admin).await.unwrap();
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "mint-tower-actor", "namespace": "breakglass"},
        "rules": [{"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"], "resourceNames": ["tower-actor"]}]
    }))
    .unwrap();
    Api::<Role>::namespaced(home_admin.clone(), "breakglass")
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let rb: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "mint-tower-actor", "namespace": "breakglass"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "mint-tower-actor"},
        "subjects": [{"kind": "ServiceAccount", "name": "breakglass-server", "namespace": "breakglass"}]
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(home_admin, "breakglass")
        .create(&PostParams::default(), &rb)
        .await
        .unwrap();

    // Server config: `home` by kubeconfig, `remote` by minted token.
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("server.toml");
    let mut toml = config_toml(
        &[(
            "home",
            "ground",
            home.kubeconfig_path(Identity::BreakglassSa).unwrap(),
        )],
        "",
    );
    toml.push_str(&format!(
        "\n[[environments]]\nname = \"remote\"\ntier = \"ground\"\n\
         cluster = {{ kind = \"minted_token\", home = \"home\", namespace = \"breakglass\", service_account = \"tower-actor\", audience = \"remote\", server = \"{}\", ca_file = \"{}\" }}\n\
         [environments.permissions]\n\"tower.breakglass.request\" = {{ groups = [\"engineers\"] }}\n",
        remote.server(),
        remote.info().ca_file.display()
    ));
    std::fs::write(&cfg, &toml).unwrap();

    // Remote: the guardrails for the minted identity, rendered by the server.
    breakglass_e2e::server::install_guardrails(&remote, &cfg, "remote", &remote_user)
        .await
        .unwrap();
    let remote_admin = remote.client(Identity::Admin).await.unwrap();

    let ns = remote.namespace("bg-minted").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(remote_admin.clone(), ns.name());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "api-0"},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    wait_for_pod_running(&pods, "api-0", Duration::from_secs(30))
        .await
        .unwrap();

    let server = ServerProcess::start(&cfg, &dir.path().join("data"), &[])
        .await
        .unwrap();
    let alice = server.login("alice").await.unwrap();

    // Listings through the minted credentials.
    let (st, nss) = alice.get("/environments/remote/namespaces").await.unwrap();
    assert_eq!(st, 200, "{nss}");
    assert!(
        nss.as_array()
            .unwrap()
            .iter()
            .any(|n| n["name"] == ns.name()),
        "{nss}"
    );
    assert!(nss
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["name"] == "kube-system" && n["protected"] == true));
    let (st, list) = alice
        .get(&format!(
            "/environments/remote/namespaces/{}/pods",
            ns.name()
        ))
        .await
        .unwrap();
    assert_eq!(st, 200, "{list}");
    assert_eq!(list[0]["name"], "api-0");
    assert_eq!(list[0]["ready"], true);
    assert_eq!(list[0]["containers"][0]["name"], "app");
    // Guardrail health as the server sees it there.
    let (st, report) = alice.get("/environments/remote/guardrails").await.unwrap();
    assert_eq!(st, 200, "{report}");
    assert_eq!(report["identity"], remote_user.as_str(), "{report}");
    assert_eq!(report["ok"], true, "{report}");

    let id = alice
        .create(
            json!({"environment": "remote", "namespace": ns.name(), "pod": "api-0", "mode": "live",
                       "reason": "checking minted per-step credentials", "duration_minutes": 30}),
        )
        .await
        .unwrap();
    let d = alice
        .wait_state(&id, &["Active"], Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.log_text()));
    let grants: Api<RoleBinding> = Api::namespaced(remote_admin.clone(), ns.name());
    let g = grants
        .get(d["session"]["grant_name"].as_str().unwrap())
        .await
        .unwrap();
    let subject = &g.subjects.unwrap()[0];
    assert_eq!(
        (subject.kind.as_str(), subject.name.as_str()),
        ("User", remote_user.as_str())
    );
    let (st, list) = alice
        .get(&format!(
            "/environments/remote/namespaces/{}/pods",
            ns.name()
        ))
        .await
        .unwrap();
    assert_eq!(st, 200);
    assert!(
        list[0]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["ephemeral"] == true && c["ready"] == true),
        "{list}"
    );

    alice
        .post(&format!("/sessions/{id}/end"), json!({}))
        .await
        .unwrap();
    alice
        .wait_state(&id, &["Ended"], Duration::from_secs(60))
        .await
        .unwrap();
    assert!(
        grants
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "grant removed"
    );
}
