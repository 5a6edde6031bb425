//! Approvals bound to the exact spec, on real clusters: the objects activation will create are
//! rendered and dry-run when the request is made, their hash is on the approval event and on the
//! grant, and activation refuses objects that differ from the approved ones.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use breakglass_e2e::server::ApiClient;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::{json, Value};

mod rig;
use rig::Rig;

const ACTIVE: Duration = Duration::from_secs(60);

fn sha256_hex(text: &str) -> String {
    breakglass_server::recording::sha256_hex(text.as_bytes())
}

/// The session's spec, after checking that its hash is the hash of its document.
fn spec_of(detail: &Value) -> Value {
    let spec = detail["session"]["spec"].clone();
    let document = spec["document"].as_str().unwrap();
    assert_eq!(spec["sha256"], sha256_hex(document), "{spec}");
    spec
}

#[tokio::test]
async fn the_approved_spec_is_dry_run_and_its_hash_is_on_the_approval_and_the_grant() {
    let rig = Rig::new("bg-spec", "flight", &[]).await;
    rig.bare_pod("solo").await;
    let uid = rig
        .admin_pods()
        .await
        .get("solo")
        .await
        .unwrap()
        .uid()
        .unwrap();
    let server = rig.start(&[]).await;
    let alice = server.login("alice").await.unwrap();
    let bob = server.login("bob").await.unwrap();
    let mut req = rig.request("flight", "solo", "live");
    req["target_container"] = json!("app");
    let id = alice.create(req).await.unwrap();

    let spec = spec_of(&alice.session(&id).await.unwrap());
    assert_eq!(spec["dry_run"]["admitted"], true, "{spec}");
    let lines = spec["dry_run"]["lines"].as_array().unwrap();
    assert!(
        lines[0].as_str().unwrap().ends_with(": admitted"),
        "{lines:?}"
    );
    let summary = &spec["summary"];
    assert_eq!(summary["pod_uid"], uid.as_str());
    assert_eq!(summary["role"], "tower-breakglass-debug-live");
    assert_eq!(summary["target_container"], "app");
    assert_eq!(summary["process_access"], true);
    assert_eq!(summary["privileged"], false);
    assert!(
        summary["image"].as_str().unwrap().contains("@sha256:"),
        "{summary}"
    );
    let doc: Value = serde_json::from_str(spec["document"].as_str().unwrap()).unwrap();
    assert_eq!(doc["objects"][0]["kind"], "RoleBinding");
    assert_eq!(doc["objects"][1]["container"]["image"], summary["image"]);
    assert_eq!(doc["target"]["uid"], uid.as_str());

    let (st, v) = bob
        .post(&format!("/sessions/{id}/approve"), json!({}))
        .await
        .unwrap();
    assert_eq!(st, 200, "{v}");
    let d = alice.wait_state(&id, &["Active"], ACTIVE).await.unwrap();
    let sha = spec["sha256"].as_str().unwrap();
    let approval = d["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "approve")
        .unwrap_or_else(|| panic!("no approve event: {}", d["events"]));
    assert_eq!(approval["detail"], format!("spec sha256 {sha}"));
    let grant = rig
        .grants()
        .await
        .get(d["session"]["grant_name"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(grant.annotations()["hangar.io/breakglass-spec-sha256"], sha);
    assert_eq!(grant.annotations()["hangar.io/breakglass-approver"], "bob");

    let (st, _) = alice
        .post(&format!("/sessions/{id}/end"), json!({}))
        .await
        .unwrap();
    assert_eq!(st, 200);
    alice.wait_state(&id, &["Ended"], ACTIVE).await.unwrap();
    rig.assert_clean().await;
}

#[tokio::test]
async fn a_request_the_policies_would_refuse_says_so_before_anyone_approves() {
    let rig = Rig::new("bg-spec-refused", "flight", &[]).await;
    rig.bare_pod("solo").await;
    // The server allows two hours where the cluster's policies (rendered for the default
    // bounds) allow one: a configuration changed without the policies applied again.
    let text = std::fs::read_to_string(&rig.config).unwrap();
    let config = rig.dir.path().join("longer.toml");
    std::fs::write(
        &config,
        format!("{text}\n[durations.flight]\nmin_minutes = 5\nmax_minutes = 120\ndefault_minutes = 30\n"),
    )
    .unwrap();
    let server = rig.start_with(&config, &[]).await;
    let alice = server.login("alice").await.unwrap();
    let mut req = rig.request("flight", "solo", "copy");
    req["duration_minutes"] = json!(90);
    let id = alice.create(req).await.unwrap();
    let spec = spec_of(&alice.session(&id).await.unwrap());
    assert_eq!(spec["dry_run"]["admitted"], false, "{spec}");
    let first = spec["dry_run"]["lines"][0].as_str().unwrap();
    assert!(first.contains("refused"), "{first}");
    assert!(
        first.contains("at most 60m"),
        "the policy's own words: {first}"
    );
    // A dry run leaves nothing behind.
    assert!(rig
        .grants()
        .await
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty());
}

/// Approves `id` as bob and waits until it fails; the failure.
async fn approve_and_fail(bob: &ApiClient, alice: &ApiClient, id: &str) -> String {
    let (st, v) = bob
        .post(&format!("/sessions/{id}/approve"), json!({}))
        .await
        .unwrap();
    assert_eq!(st, 200, "{v}");
    let d = alice.wait_state(id, &["Failed"], ACTIVE).await.unwrap();
    d["session"]["failure"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn activation_refuses_objects_that_differ_from_the_approved_ones() {
    let rig = Rig::new("bg-spec-drift", "flight", &[]).await;
    rig.bare_pod("solo").await;
    rig.bare_pod("again").await;
    let server = rig.start(&[]).await;
    let alice = server.login("alice").await.unwrap();
    let bob = server.login("bob").await.unwrap();
    let pods = rig.admin_pods().await;

    // Copy mode: the pod's image changes between the request and the approval, so the copy
    // activation would make is not the approved one.
    let copy = alice
        .create(rig.request("flight", "solo", "copy"))
        .await
        .unwrap();
    let before: Value = serde_json::from_str(
        spec_of(&alice.session(&copy).await.unwrap())["document"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let image = before["objects"][1]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap()
        .to_string();
    let patch =
        json!({"spec": {"containers": [{"name": "app", "image": format!("{image}-changed")}]}});
    pods.patch("solo", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
    let failure = approve_and_fail(&bob, &alice, &copy).await;
    assert!(
        failure.contains("differ from the approved spec"),
        "{failure}"
    );
    assert!(
        failure.contains("/objects/1/spec/containers/0/image"),
        "{failure}"
    );

    // Live mode: the pod is replaced by another of the same name (another UID).
    let live = alice
        .create(rig.request("flight", "again", "live"))
        .await
        .unwrap();
    pods.delete("again", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    breakglass_e2e::wait_until("the old pod gone", Duration::from_secs(30), || async {
        Ok(pods.get_opt("again").await?.is_none().then_some(()))
    })
    .await
    .unwrap();
    rig.bare_pod("again").await;
    let failure = approve_and_fail(&bob, &alice, &live).await;
    assert!(failure.contains("/target/uid"), "{failure}");

    // Nothing was created for either.
    rig.assert_clean().await;
    assert_eq!(rig.grants_and_copies_of(&copy).await, (0, 0));
    assert_eq!(rig.grants_and_copies_of(&live).await, (0, 0));
}
