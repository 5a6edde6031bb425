//! Approve → `Active` through the server against the baseline DESIGN.md section 13 names:
//! the same ephemeral container added directly as the cluster's admin (target: p95 at most
//! 1.2x, issue 36; it was 2x before).
//!
//! Production-like: the environment is a Flight one, so alice's request waits and bob's
//! approval is the start of each measurement; it ends when the session's `Active` change
//! reaches an open live stream (`GET /events`, read by `common/sse.rs`). The baseline patches
//! the pod's ephemeral containers and waits on a watch (`kube::runtime::wait::await_condition`,
//! the wait the server's own activation uses) until the container runs. Neither side polls.
//!
//! Sizes: 200 activations one after another (the figure), then the cost growth with 5 and 10
//! approved at once (two rounds each), both sides alike. Both sides' tails come mostly from the
//! test control plane (a list right after a write waits for the API server's watch cache now
//! and then, about 50 ms), so the figure takes 200 of each: with 50, the p95 ratio of four runs
//! in a row spread from 0.56x to 1.10x.
#![allow(clippy::unwrap_used)]

// Reads every change whole: the cheap match on one session's id is the fan-out benches'.
#[allow(dead_code)]
#[path = "common/sse.rs"]
mod sse;

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use breakglass_e2e::bench::{self, Dist, Figure, Target};
use breakglass_e2e::server::{config_toml, ApiClient, ServerProcess};
use breakglass_e2e::{container_running, wait_for_pod_running, ControlPlane, Identity};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use kube::Api;
use serde_json::json;
use tokio::sync::mpsc;

/// Bound on one activation, either side: a hang fails the bench instead of stalling it.
const BOUND: Duration = Duration::from_secs(60);

#[tokio::main]
async fn main() {
    let sequential = if bench::short() { 4 } else { 200 };
    let at_once: Vec<(usize, usize)> = bench::sizes(&[(5, 2), (10, 2)], &[(2, 1)]);
    let per_side = 1 + sequential + at_once.iter().map(|(k, rounds)| k * rounds).sum::<usize>();

    let cp = ControlPlane::shared().await.unwrap();
    let admin = cp.client(Identity::Admin).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kc = cp.kubeconfig_path(Identity::BreakglassSa).unwrap();
    let cfg = dir.path().join("server.toml");
    std::fs::write(&cfg, config_toml(&[("flight", "flight", kc)], "")).unwrap();
    let identity = cp.username(Identity::BreakglassSa).unwrap();
    breakglass_e2e::server::install_guardrails(cp, &cfg, "flight", identity)
        .await
        .unwrap();
    let ns = cp.namespace("bench").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(admin.clone(), ns.name());
    let names: Vec<String> = (0..2 * per_side).map(|i| format!("p{i}")).collect();
    for name in &names {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    for name in &names {
        wait_for_pod_running(&pods, name, Duration::from_secs(30))
            .await
            .unwrap();
    }
    let (direct_pods, server_pods) = names.split_at(per_side);

    let server = ServerProcess::start(&cfg, &dir.path().join("data"), &[])
        .await
        .unwrap();
    let alice = server.login("alice").await.unwrap();
    let bob = server.login("bob").await.unwrap();
    let http = reqwest::Client::new();
    let (tx, rx) = mpsc::unbounded_channel();
    let stream = sse::open(&http, &server.url, &alice).await.unwrap();
    let reader = tokio::spawn(async move { sse::forward(stream, tx).await.unwrap() });
    let mut ours = Ours {
        alice,
        bob,
        ns: ns.name().to_string(),
        rx,
        done: Vec::new(),
    };

    // One unmeasured activation each: the watch connections, the server's first recording.
    let (mut direct_left, mut server_left) = (direct_pods.iter(), server_pods.iter());
    direct_batch(&pods, &direct_left.by_ref().take(1).collect::<Vec<_>>()).await;
    ours.batch(&server_left.by_ref().take(1).collect::<Vec<_>>())
        .await;
    let rounds = std::iter::once((1, sequential)).chain(at_once.iter().copied());
    for (k, batches) in rounds {
        let (mut base, mut value) = (Vec::new(), Vec::new());
        for _ in 0..batches {
            let d: Vec<&String> = direct_left.by_ref().take(k).collect();
            let s: Vec<&String> = server_left.by_ref().take(k).collect();
            base.extend(direct_batch(&pods, &d).await);
            value.extend(ours.batch(&s).await);
        }
        let (b, v) = (Dist::from_durations(&base), Dist::from_durations(&value));
        let size = format!("activations={},at_once={k}", v.len());
        for (stat, q) in [("p50", 0.5), ("p95", 0.95)] {
            let mut fig = Figure::new("activation", stat, "ms", b.p(q), v.p(q))
                .size(&size)
                .baseline_is("the ephemeral container added directly, watched until it runs");
            if k == 1 && stat == "p95" {
                fig = fig.target(Target::RatioAtMost(1.2));
            }
            bench::report(&fig);
        }
        if k == 1 {
            ours.print_steps(&server.log_text()).await;
        }
    }
    // Before the server goes: its end would end the stream, which the reader reports.
    reader.abort();
}

/// Adds a debug container to each pod at once, as the admin, and waits on a watch until each
/// runs; how long each took.
async fn direct_batch(pods: &Api<Pod>, names: &[&String]) -> Vec<Duration> {
    let runs = names.iter().map(|name| async move {
        let t = SystemTime::now();
        let patch = json!({"spec": {"ephemeralContainers": [{"name": "debug-direct",
            "image": "registry.example/debug@sha256:0", "stdin": true, "tty": true}]}});
        pods.patch_ephemeral_containers(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .unwrap();
        let running = await_condition(pods.clone(), name, |p: Option<&Pod>| {
            p.is_some_and(|p| container_running(p, "debug-direct"))
        });
        tokio::time::timeout(BOUND, running)
            .await
            .unwrap_or_else(|_| panic!("debug container of {name} not running within {BOUND:?}"))
            .unwrap();
        t.elapsed().unwrap_or_default()
    });
    futures::future::join_all(runs).await
}

/// The server side: alice requests, bob approves, the live stream says `Active`.
struct Ours {
    alice: ApiClient,
    bob: ApiClient,
    ns: String,
    rx: mpsc::UnboundedReceiver<sse::Arrival>,
    /// The sessions of the last batches, for their steps.
    done: Vec<String>,
}

impl Ours {
    /// Requests a session on each pod, approves them all at once and waits for each to be
    /// `Active` on the stream; from each approval to its `Active`.
    async fn batch(&mut self, pods: &[&String]) -> Vec<Duration> {
        let mut ids = Vec::new();
        for pod in pods {
            let id = self
                .alice
                .create(json!({"environment": "flight", "namespace": self.ns, "pod": pod,
                    "mode": "live", "reason": "benchmarking activation latency", "duration_minutes": 30}))
                .await
                .unwrap();
            ids.push(id);
        }
        let bob = &self.bob;
        let approvals = ids.iter().map(|id| async move {
            let t = SystemTime::now();
            let (status, body) = bob
                .post(&format!("/sessions/{id}/approve"), json!({}))
                .await
                .unwrap();
            assert_eq!(status, 200, "approve {id}: {body}");
            (id.clone(), t)
        });
        let mut started: HashMap<String, SystemTime> = futures::future::join_all(approvals)
            .await
            .into_iter()
            .collect();
        let mut took = Vec::new();
        let wait = async {
            while took.len() < ids.len() {
                let a = self.rx.recv().await.expect("the live stream ended");
                let change = a.change();
                let s = &change["session"];
                let Some(id) = s["id"].as_str() else { continue };
                match s["state"].as_str() {
                    // Only its first `Active` change: later ones (recording progress) are not
                    // the activation.
                    Some("Active") => {
                        if let Some(t) = started.remove(id) {
                            took.push(a.at.duration_since(t).unwrap_or_default());
                        }
                    }
                    Some("Failed") if started.contains_key(id) => {
                        panic!("activation failed: {}", s["failure"])
                    }
                    _ => {}
                }
            }
        };
        tokio::time::timeout(BOUND, wait)
            .await
            .unwrap_or_else(|_| panic!("sessions {ids:?} not all Active within {BOUND:?}"));
        self.done.extend(ids);
        took
    }

    /// Where the activations' time went (the profile), from their audit trails: each step's
    /// p50 and p95 after the approval (the server's own clock), over the sessions since the
    /// last call; and the cluster steps the server had to retry (its debug log), by step.
    async fn print_steps(&mut self, log: &str) {
        let mut after: HashMap<String, Vec<f64>> = HashMap::new();
        for id in std::mem::take(&mut self.done) {
            let d = self.alice.session(&id).await.unwrap();
            let at = |e: &serde_json::Value| {
                time::OffsetDateTime::parse(
                    e["at"].as_str().unwrap_or_default(),
                    &time::format_description::well_known::Rfc3339,
                )
                .ok()
            };
            let events = d["events"].as_array().cloned().unwrap_or_default();
            let Some(start) = events.iter().find(|e| e["kind"] == "approve").and_then(at) else {
                continue;
            };
            // Each step's first time: a recording is stored again at every flush.
            let mut seen = std::collections::HashSet::new();
            for e in &events {
                let Some(t) = at(e).filter(|t| *t >= start) else {
                    continue;
                };
                // A progress step by its kind (its detail is the step as JSON).
                let kind = e["kind"].as_str().unwrap_or("?");
                let step = e["detail"]
                    .as_str()
                    .and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok())
                    .map(|d| match d["kind"].as_str() {
                        Some(k) => k.to_string(),
                        // The recording's stored version has no kind: {key, version, sha256, bytes}.
                        None if d.get("sha256").is_some() => "recording_stored".to_string(),
                        None => d.to_string(),
                    });
                let kind = match step {
                    Some(step) if kind == "progress" => step,
                    _ => kind.to_string(),
                };
                let ms = (t - start).as_seconds_f64() * 1000.0;
                if seen.insert(kind.clone()) {
                    after.entry(kind).or_default().push(ms);
                }
            }
        }
        let mut steps: Vec<(f64, String)> = after
            .into_iter()
            .map(|(kind, times)| {
                let d = Dist::from_values(times);
                let line = format!("{kind} +{:.1}/+{:.1} ms", d.p(0.5), d.p(0.95));
                (d.p(0.5), line)
            })
            .collect();
        steps.sort_by(|a, b| a.0.total_cmp(&b.0));
        let steps: Vec<String> = steps.into_iter().map(|(_, l)| l).collect();
        println!("  steps after the approval (p50/p95): {}", steps.join(", "));
        let mut retried: HashMap<&str, usize> = HashMap::new();
        for line in log.lines().filter(|l| l.contains("cluster step retried")) {
            // "refused to <step> (<code>): ..." or "unreachable while trying to <step>: ...".
            let step = ["refused to ", "trying to "]
                .iter()
                .find_map(|p| line.split(p).nth(1))
                .and_then(|r| r.split(": ").next())
                .unwrap_or("?");
            *retried.entry(step).or_default() += 1;
        }
        println!("  cluster steps retried (server log): {retried:?}");
    }
}
