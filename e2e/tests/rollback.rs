//! Activation failing after the grant exists, on the real API server with the guardrails
//! installed: the pod deleted between the grant and the debug container (a pause at the grant
//! step, the test deleting the pod through the API server), a debug container the node never
//! starts, and a debug image the cluster's admission policy refuses. Each ends `Failed` with the
//! grant on the audit trail and every object removed.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use breakglass_e2e::wait_until;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams};
use serde_json::{json, Value};

mod rig;
use rig::Rig;

const WAIT: Duration = Duration::from_secs(60);

/// The test control plane's node never starts ephemeral containers of a pod annotated so
/// (e2e/controlplane/node.go).
const NEVER_STARTS: &str = "e2e.breakglass.test/ephemeral-never-starts";

/// The failure ended the session only after the grant was made, and cleanup took it away: the
/// audit trail has both steps, the row ended `Failed`, the namespace holds nothing.
async fn assert_rolled_back(rig: &Rig, d: &Value) {
    assert_eq!(d["session"]["state"], "Failed", "{}", d["session"]);
    let details: Vec<String> = d["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["detail"].as_str().map(String::from))
        .collect();
    assert!(
        details.iter().any(|t| t.contains("GrantCreated")),
        "the grant existed: {details:?}"
    );
    assert!(
        details.iter().any(|t| t.contains("deleted grant")),
        "cleanup removed it: {details:?}"
    );
    rig.assert_clean().await;
}

/// Starts a server that pauses after the grant is on the row until `resume` exists; asks for a
/// session on `pod` in `mode`, waits for the pause, deletes the pod through the API server,
/// and lets the activation go on.
async fn pod_gone_after_the_grant(rig: &Rig, pod: &str, mode: &str, resume: &Path) -> Value {
    rig.bare_pod(pod).await;
    let resume_s = resume.to_str().unwrap();
    let s = rig
        .start(&[
            ("BREAKGLASS_PAUSE_AT", "grant"),
            ("BREAKGLASS_PAUSE_UNTIL", resume_s),
        ])
        .await;
    let alice = s.login("alice").await.unwrap();
    let id = alice
        .create(rig.request("ground", pod, mode))
        .await
        .unwrap();
    let paused = resume.with_extension("paused");
    wait_until("activation paused after the grant", WAIT, || async {
        Ok(paused.exists().then_some(()))
    })
    .await
    .unwrap();
    let d = alice.session(&id).await.unwrap();
    assert!(d["session"]["grant_name"].is_string(), "{}", d["session"]);
    let pods = rig.admin_pods().await;
    pods.delete(pod, &DeleteParams::default()).await.unwrap();
    wait_until("the pod gone", WAIT, || async {
        Ok(pods.get_opt(pod).await?.is_none().then_some(()))
    })
    .await
    .unwrap();
    std::fs::write(resume, "go").unwrap();
    let d = alice.wait_state(&id, &["Failed"], WAIT).await.unwrap();
    let failure = d["session"]["failure"].as_str().unwrap_or_default();
    assert!(
        failure.contains(pod),
        "the failure names the pod: {failure}"
    );
    d
}

#[tokio::test]
async fn a_pod_gone_between_the_grant_and_the_debug_container_rolls_back() {
    let rig = Rig::new("bg-rb-gone", "ground", &[]).await;
    for mode in ["live", "copy"] {
        let resume = rig.dir.path().join(format!("resume-{mode}"));
        let d = pod_gone_after_the_grant(&rig, &format!("gone-{mode}"), mode, &resume).await;
        assert_rolled_back(&rig, &d).await;
    }
}

#[tokio::test]
async fn a_debug_container_that_never_runs_rolls_back_at_the_activation_timeout() {
    let rig = Rig::new("bg-rb-stuck", "ground", &[]).await;
    let pods = rig.admin_pods().await;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "stuck", "annotations": {NEVER_STARTS: "true"}},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    breakglass_e2e::wait_for_pod_running(&pods, "stuck", WAIT)
        .await
        .unwrap();
    // The bound on waiting for the container is the server's own setting; a short one keeps
    // the test quick.
    let config = rig.config_with(
        "short-activation.toml",
        &[("activation_timeout_seconds", "3")],
    );
    let s = rig.start_with(&config, &[]).await;
    let alice = s.login("alice").await.unwrap();
    let mut req = rig.request("ground", "stuck", "live");
    req["target_container"] = json!("app");
    let id = alice.create(req).await.unwrap();
    let d = alice.wait_state(&id, &["Failed"], WAIT).await.unwrap();
    let failure = d["session"]["failure"].as_str().unwrap_or_default();
    assert!(
        failure.contains("running did not happen within 3 s"),
        "the failure says what did not happen in time: {failure}"
    );
    assert!(
        d["session"]["debug_container"].is_string(),
        "{}",
        d["session"]
    );
    assert_rolled_back(&rig, &d).await;
}

#[tokio::test]
async fn a_debug_image_the_policy_refuses_rolls_back() {
    let rig = Rig::new("bg-rb-image", "ground", &[]).await;
    // The cluster's guardrails admit only the default debug image; this server is configured
    // with another one (pinned, so the server itself accepts it).
    let image = format!(
        "\"registry.example/not-admitted@sha256:{}\"",
        "ab".repeat(32)
    );
    let config = rig.config_with("other-image.toml", &[("debug_image", &image)]);
    let s = rig.start_with(&config, &[]).await;
    let alice = s.login("alice").await.unwrap();
    for mode in ["live", "copy"] {
        let pod = format!("refused-{mode}");
        rig.bare_pod(&pod).await;
        let id = alice
            .create(rig.request("ground", &pod, mode))
            .await
            .unwrap();
        let d = alice.wait_state(&id, &["Failed"], WAIT).await.unwrap();
        let failure = d["session"]["failure"].as_str().unwrap_or_default();
        assert!(
            failure.contains("refused") || failure.contains("denied"),
            "the failure says the cluster refused it: {failure}"
        );
        assert_rolled_back(&rig, &d).await;
    }
}
