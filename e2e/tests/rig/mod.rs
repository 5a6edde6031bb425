//! The rig the activation and failure-path tests share: the two test control planes with their
//! guardrails, a fresh namespace, and the real server binary configured for both.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use breakglass_e2e::server::{config_toml, ServerProcess};
use breakglass_e2e::{wait_for_pod_running, wait_until, ControlPlane, Identity};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{json, Value};
use tokio::sync::OnceCell;

/// The two clusters: `ground` is the shared control plane, `flight` a second one, each with its
/// tier's guardrails rendered by the server's own CLI for the in-cluster ServiceAccount identity
/// (guardrails are per cluster: one server identity and one tier each).
pub async fn cluster(tier: &str) -> &'static ControlPlane {
    static FLIGHT: OnceCell<&'static ControlPlane> = OnceCell::const_new();
    static GROUND_RAILS: OnceCell<()> = OnceCell::const_new();
    if tier == "ground" {
        let cp = ControlPlane::shared().await.unwrap();
        GROUND_RAILS
            .get_or_init(|| install_guardrails(cp, "ground"))
            .await;
        cp
    } else {
        FLIGHT
            .get_or_init(|| async {
                let opts = breakglass_e2e::StartOptions {
                    cluster_name: Some("flight".into()),
                    trust_issuer_dir: None,
                };
                let cp: &'static ControlPlane =
                    Box::leak(Box::new(ControlPlane::start(opts).await.unwrap()));
                install_guardrails(cp, "flight").await;
                cp
            })
            .await
    }
}

async fn install_guardrails(cp: &'static ControlPlane, tier: &str) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("render.toml");
    let kc = cp.kubeconfig_path(Identity::BreakglassSa).unwrap();
    std::fs::write(&cfg, config_toml(&[(tier, tier, kc)], "")).unwrap();
    let identity = cp.username(Identity::BreakglassSa).unwrap();
    breakglass_e2e::server::install_guardrails(cp, &cfg, tier, identity)
        .await
        .unwrap();
}

pub struct Rig {
    pub cp: &'static ControlPlane,
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    pub ns: String,
}

impl Rig {
    /// A fresh namespace on the `tier` cluster and a server configured for both clusters (plus
    /// `extra_envs`).
    pub async fn new(prefix: &str, tier: &str, extra_envs: &[(&str, &str, &Path)]) -> Rig {
        let cp = cluster(tier).await;
        let ground = cluster("ground").await;
        let flight = cluster("flight").await;
        let ns = cp.namespace(prefix).await.unwrap();
        let name = ns.name().to_string();
        // Namespaces are deleted by the control plane's own cleanup when the test binary ends;
        // keep this one for the test's whole life.
        std::mem::forget(ns);
        let dir = tempfile::tempdir().unwrap();
        let mut envs: Vec<(&str, &str, &Path)> = vec![
            (
                "ground",
                "ground",
                ground.kubeconfig_path(Identity::BreakglassSa).unwrap(),
            ),
            (
                "flight",
                "flight",
                flight.kubeconfig_path(Identity::BreakglassSa).unwrap(),
            ),
        ];
        envs.extend_from_slice(extra_envs);
        let config = dir.path().join("server.toml");
        std::fs::write(&config, config_toml(&envs, "")).unwrap();
        Rig {
            cp,
            dir,
            config,
            ns: name,
        }
    }

    pub async fn start(&self, env: &[(&str, &str)]) -> ServerProcess {
        self.start_with(&self.config, env).await
    }

    /// Starts the server with another configuration file, on the same data directory (and so
    /// the same SQLite database) as [`Rig::start`].
    pub async fn start_with(&self, config: &Path, env: &[(&str, &str)]) -> ServerProcess {
        ServerProcess::start(config, &self.dir.path().join("data"), env)
            .await
            .unwrap()
    }

    /// The rig's configuration with top-level `keys` set (replacing a key already there),
    /// written as `name` next to it.
    pub fn config_with(&self, name: &str, keys: &[(&str, &str)]) -> PathBuf {
        let text = std::fs::read_to_string(&self.config).unwrap();
        let kept: Vec<&str> = text
            .lines()
            .filter(|l| !keys.iter().any(|(k, _)| l.starts_with(&format!("{k} ="))))
            .collect();
        let mut out: String = keys.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
        out.push_str(&kept.join("\n"));
        let path = self.dir.path().join(name);
        std::fs::write(&path, out).unwrap();
        path
    }

    /// `config` with environment `env` left without a cluster (as if an operator removed it),
    /// written as `name` next to it.
    pub fn without_cluster(&self, config: &Path, name: &str, env: &str) -> PathBuf {
        let text = std::fs::read_to_string(config).unwrap();
        let mut in_env = false;
        let mut out = Vec::new();
        for l in text.lines() {
            if l.starts_with("name = ") {
                in_env = l == format!("name = \"{env}\"");
            }
            if !(in_env && l.starts_with("cluster = ")) {
                out.push(l);
            }
        }
        let path = self.dir.path().join(name);
        std::fs::write(&path, out.join("\n")).unwrap();
        path
    }

    pub async fn admin_pods(&self) -> Api<Pod> {
        Api::namespaced(self.cp.client(Identity::Admin).await.unwrap(), &self.ns)
    }

    pub async fn grants(&self) -> Api<RoleBinding> {
        Api::namespaced(self.cp.client(Identity::Admin).await.unwrap(), &self.ns)
    }

    /// A bare pod (no owner) with one container `app`.
    pub async fn bare_pod(&self, name: &str) -> Pod {
        let pods = self.admin_pods().await;
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        wait_for_pod_running(&pods, name, Duration::from_secs(30))
            .await
            .unwrap()
    }

    /// A Deployment with `replicas` ready pods; returns their names.
    pub async fn deployment(&self, name: &str, replicas: i32) -> Vec<String> {
        let client = self.cp.client(Identity::Admin).await.unwrap();
        let deps: Api<Deployment> = Api::namespaced(client, &self.ns);
        let d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}}}
        }))
        .unwrap();
        deps.create(&PostParams::default(), &d).await.unwrap();
        self.ready_pods_of(name, replicas as usize).await
    }

    pub async fn ready_pods_of(&self, app: &str, n: usize) -> Vec<String> {
        let pods = self.admin_pods().await;
        wait_until(
            &format!("{n} ready pods of {app}"),
            Duration::from_secs(30),
            || async {
                let list = pods
                    .list(&ListParams::default().labels(&format!("app={app}")))
                    .await?;
                let ready: Vec<String> = list
                    .items
                    .iter()
                    .filter(|p| {
                        p.metadata.deletion_timestamp.is_none() && breakglass_e2e::pod_running(p)
                    })
                    .filter_map(|p| p.metadata.name.clone())
                    .collect();
                Ok((ready.len() == n).then_some(ready))
            },
        )
        .await
        .unwrap()
    }

    pub fn request(&self, env: &str, pod: &str, mode: &str) -> Value {
        json!({
            "environment": env, "namespace": self.ns, "pod": pod, "mode": mode,
            "reason": "investigating stuck payment worker", "duration_minutes": 30,
        })
    }

    /// How many grants and how many copy pods (not being deleted) of session `id` the
    /// namespace holds.
    pub async fn grants_and_copies_of(&self, id: &str) -> (usize, usize) {
        let grants = self
            .grants()
            .await
            .list(&ListParams::default().labels(&format!("hangar.io/breakglass-session={id}")))
            .await
            .unwrap()
            .items
            .len();
        let copies = self
            .admin_pods()
            .await
            .list(&ListParams::default().labels(&format!("hangar.io/breakglass-copy={id}")))
            .await
            .unwrap()
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .count();
        (grants, copies)
    }

    /// Waits until the namespace holds no break-glass object: grant, copy pod, annotation.
    pub async fn assert_clean(&self) {
        let grants = self.grants().await;
        let pods = self.admin_pods().await;
        wait_until(
            "no break-glass objects left",
            Duration::from_secs(30),
            || async {
                let g = grants
                    .list(
                        &ListParams::default()
                            .labels("app.kubernetes.io/managed-by=tower-breakglass"),
                    )
                    .await?;
                let p = pods.list(&ListParams::default()).await?;
                let copies = p
                    .items
                    .iter()
                    .filter(|x| {
                        x.labels().contains_key("hangar.io/breakglass-copy")
                            && x.metadata.deletion_timestamp.is_none()
                    })
                    .count();
                let annotated = p
                    .items
                    .iter()
                    .filter(|x| {
                        x.annotations()
                            .contains_key("hangar.io/breakglass-process-access")
                    })
                    .count();
                Ok((g.items.is_empty() && copies == 0 && annotated == 0).then_some(()))
            },
        )
        .await
        .unwrap();
    }
}
