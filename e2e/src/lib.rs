//! End-to-end test harness around the test control plane (`e2e/controlplane`,
//! a real kube-apiserver + etcd + the controllers tests need + one simulated
//! node whose attach/exec endpoints are real shells in PTYs).
//!
//! Typical test:
//!
//! ```no_run
//! use breakglass_e2e::{ControlPlane, Identity, wait_until};
//! use k8s_openapi::api::core::v1::Pod;
//! use kube::Api;
//! use std::time::Duration;
//!
//! # async fn t() -> anyhow::Result<()> {
//! let cp = ControlPlane::shared().await?;          // started once per test binary
//! let ns = cp.namespace("my-test").await?;         // fresh namespace, default SA ready
//! let pods: Api<Pod> = Api::namespaced(cp.client(Identity::Admin).await?, ns.name());
//! // ... create things, then wait with a bound:
//! wait_until("pod p running", Duration::from_secs(20), || async {
//!     Ok(pods.get_opt("p").await?.filter(breakglass_e2e::pod_running))
//! }).await?;
//! ns.delete().await // or just drop it: see TestNamespace
//! # }
//! ```
//!
//! The control plane binary is built by `scripts/controlplane.sh build`
//! (cached by source hash under `$BREAKGLASS_CACHE`, default
//! `/var/cache/breakglass`); the first build takes several minutes. Set
//! `BREAKGLASS_KUBECONFIG_DIR` to the kubeconfig dir of an instance started
//! with `scripts/controlplane.sh start` to reuse it instead of starting one.

pub mod access;
pub mod agent;
pub mod apply;
pub mod bench;
pub mod browser;
pub mod browser_a11y;
pub mod browser_pixels;
mod controlplane;
pub mod flows;
pub mod hydra;
mod namespace;
pub mod oauth2_proxy;
pub mod postgres;
pub mod procs;
pub mod receivers;
pub mod s3;
pub mod server;
mod wait;

use std::path::{Path, PathBuf};

/// The workspace root of the checkout whose tests are running, found at run time: cargo gives
/// every test and bench process its package directory (`CARGO_MANIFEST_DIR`). The compile-time
/// value is only the fallback, because clones that share one target directory reuse each
/// other's up-to-date test binaries, and the clone that built one may be gone by now (or hold
/// other scripts).
pub fn workspace_root() -> PathBuf {
    let package = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let root = package.parent().map(Path::to_path_buf).unwrap_or(package);
    root.canonicalize().unwrap_or(root)
}

/// A script of the checkout under test, `scripts/NAME`.
pub fn script(name: &str) -> PathBuf {
    workspace_root().join("scripts").join(name)
}

pub use controlplane::{ControlPlane, ControlPlaneInfo, Identity, StartOptions, TrustedIssuer};
pub use namespace::{in_namespace, TestNamespace};
pub use wait::{
    container_running, pod_running, wait_for_container_running, wait_for_pod_running, wait_until,
};
