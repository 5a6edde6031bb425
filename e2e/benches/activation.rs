//! Approve → Active latency over 20 activations on the test control plane (Ground, where the
//! request is approved on creation), against the baseline the design names: adding the same
//! ephemeral container directly as admin and waiting for it to run. Prints p50/p95 and ratios.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use breakglass_e2e::server::{config_toml, ServerProcess};
use breakglass_e2e::{wait_for_container_running, wait_for_pod_running, ControlPlane, Identity};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::json;

const N: usize = 20;

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

#[tokio::main]
async fn main() {
    let cp = ControlPlane::shared().await.unwrap();
    let admin = cp.client(Identity::Admin).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kc = cp.kubeconfig_path(Identity::BreakglassSa).unwrap();
    let cfg = dir.path().join("server.toml");
    std::fs::write(&cfg, config_toml(&[("ground", "ground", kc)], "")).unwrap();
    let identity = cp.username(Identity::BreakglassSa).unwrap();
    breakglass_e2e::server::install_guardrails(cp, &cfg, "ground", identity)
        .await
        .unwrap();
    let ns = cp.namespace("bench").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(admin.clone(), ns.name());
    for i in 0..(2 * N) {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("p{i}")},
            "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    for i in 0..(2 * N) {
        wait_for_pod_running(&pods, &format!("p{i}"), Duration::from_secs(30))
            .await
            .unwrap();
    }

    // Baseline: the ephemeral container added directly.
    let mut base = Vec::new();
    for i in 0..N {
        let name = format!("p{i}");
        let t = Instant::now();
        let patch = json!({"spec": {"ephemeralContainers": [{"name": "debug-direct", "image": "registry.example/debug@sha256:0", "stdin": true, "tty": true}]}});
        pods.patch_ephemeral_containers(&name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .unwrap();
        wait_for_container_running(&pods, &name, "debug-direct", Duration::from_secs(30))
            .await
            .unwrap();
        base.push(t.elapsed());
    }

    // Through the server: request (auto-approved on Ground) → Active.
    let server = ServerProcess::start(&cfg, &dir.path().join("data"), &[])
        .await
        .unwrap();
    let alice = server.login("alice").await.unwrap();
    let mut ours = Vec::new();
    for i in N..(2 * N) {
        let t = Instant::now();
        let id = alice
            .create(json!({"environment": "ground", "namespace": ns.name(), "pod": format!("p{i}"), "mode": "live",
                           "reason": "benchmarking activation latency", "duration_minutes": 30}))
            .await
            .unwrap();
        alice
            .wait_state(&id, &["Active"], Duration::from_secs(60))
            .await
            .unwrap();
        ours.push(t.elapsed());
    }
    let (b50, b95) = (pct(&mut base, 0.5), pct(&mut base, 0.95));
    let (o50, o95) = (pct(&mut ours, 0.5), pct(&mut ours, 0.95));
    println!("activation over {N} runs on the test control plane");
    println!("  baseline (ephemeral container added directly): p50 {b50:?}  p95 {b95:?}");
    println!("  approve -> Active through the server:          p50 {o50:?}  p95 {o95:?}");
    println!(
        "  ratio p50 {:.2}x  p95 {:.2}x  (design target: p95 at most 1.5 s)",
        o50.as_secs_f64() / b50.as_secs_f64(),
        o95.as_secs_f64() / b95.as_secs_f64()
    );
}
