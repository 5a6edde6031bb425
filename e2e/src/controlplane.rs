//! Starting (or reusing) a test control plane and talking to it.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::PostParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde::{Deserialize, Serialize};

/// How long to wait for `READY` once the binary is built.
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// The identities the control plane writes a kubeconfig for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Identity {
    /// Cluster admin (static token, group `system:masters`).
    Admin,
    /// ServiceAccount `breakglass/breakglass-server` (a TokenRequest token):
    /// the server's in-cluster identity. No RBAC rights of its own.
    BreakglassSa,
    /// User `breakglass-server-user` (static token): the server's identity
    /// in the token case. No RBAC rights of its own.
    BreakglassUser,
    /// User `alice`, a human without rights.
    Alice,
    /// User `bob`, a human without rights.
    Bob,
}

impl Identity {
    /// Every identity, in a fixed order.
    pub const ALL: [Identity; 5] = [
        Identity::Admin,
        Identity::BreakglassSa,
        Identity::BreakglassUser,
        Identity::Alice,
        Identity::Bob,
    ];

    /// The identity's key in `controlplane.json` and its kubeconfig file
    /// stem (`<key>.kubeconfig`).
    pub fn key(self) -> &'static str {
        match self {
            Identity::Admin => "admin",
            Identity::BreakglassSa => "breakglass-sa",
            Identity::BreakglassUser => "breakglass-user",
            Identity::Alice => "alice",
            Identity::Bob => "bob",
        }
    }
}

/// What a control plane reports once ready (`READY {json}`, also
/// `<kubeconfig dir>/controlplane.json`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneInfo {
    /// This cluster's name: kubeconfig cluster/context name, and the audience
    /// tokens from a trusted home cluster must carry.
    pub cluster_name: String,
    /// API server URL, `https://127.0.0.1:<port>`.
    pub server: String,
    /// API server port.
    pub apiserver_port: u16,
    /// Simulated kubelet port (also in the Node's daemonEndpoints).
    pub kubelet_port: u16,
    /// Service-account token issuer (= `server`).
    pub issuer: String,
    /// The one simulated node.
    pub node_name: String,
    /// Where the kubeconfigs, `ca.crt`, `sa.pub`, `jwks.json` live.
    pub kubeconfig_dir: PathBuf,
    /// etcd data, keys; removed when the control plane exits.
    pub data_dir: PathBuf,
    /// Component logs.
    pub log_file: PathBuf,
    /// The cluster CA (PEM).
    pub ca_file: PathBuf,
    /// Public key verifying service-account tokens (PEM).
    #[serde(rename = "serviceAccountPublicKeyFile")]
    pub service_account_public_key_file: PathBuf,
    /// The issuer's JWKS, as served at `/openid/v1/jwks`.
    pub jwks_file: PathBuf,
    /// Kubeconfig path per identity key (see [`Identity::key`]).
    pub kubeconfigs: BTreeMap<String, PathBuf>,
    /// Username per identity key, as SelfSubjectReview reports it.
    pub users: BTreeMap<String, String>,
    /// Set when this instance trusts another instance's issuer.
    #[serde(default)]
    pub trusted_issuer: Option<TrustedIssuer>,
    /// Process id of the control plane.
    pub pid: u32,
    /// Seconds from process start to READY.
    pub start_seconds: f64,
    /// Kubernetes version of the API server.
    pub kube_version: String,
}

/// The home cluster whose service-account tokens this instance accepts.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustedIssuer {
    /// The home cluster's issuer URL.
    pub issuer: String,
    /// The home cluster's name.
    pub home_cluster: String,
    /// The audience a token must carry to be accepted here (this cluster's name).
    pub audience: String,
    /// Usernames are `<prefix><service account name>`, i.e. `hangar:<home>:`.
    pub username_prefix: String,
}

/// Options for [`ControlPlane::start`].
#[derive(Clone, Debug, Default)]
pub struct StartOptions {
    /// `--cluster-name` (default `controlplane`).
    pub cluster_name: Option<String>,
    /// `--trust-issuer-dir`: kubeconfig dir of a home instance whose
    /// service-account issuer this one trusts.
    pub trust_issuer_dir: Option<PathBuf>,
}

/// A running test control plane: either started by this process (stopped
/// when dropped, or when this process exits) or an external one reused
/// through `BREAKGLASS_KUBECONFIG_DIR`.
pub struct ControlPlane {
    info: ControlPlaneInfo,
    process: Option<Mutex<Process>>,
}

struct Process {
    child: Child,
    base_dir: PathBuf,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("server", &self.info.server)
            .field("cluster_name", &self.info.cluster_name)
            .field("owned", &self.process.is_some())
            .finish()
    }
}

static SHARED: OnceLock<Result<ControlPlane, String>> = OnceLock::new();
static INSTANCE_COUNTER: AtomicUsize = AtomicUsize::new(0);

impl ControlPlane {
    /// The control plane shared by every test of this test binary, started
    /// on first use (building the binary if needed), or the instance named
    /// by `BREAKGLASS_KUBECONFIG_DIR`. It is never stopped explicitly: it
    /// notices this process exiting and shuts down, removing its data.
    pub async fn shared() -> anyhow::Result<&'static ControlPlane> {
        tokio::task::spawn_blocking(|| {
            SHARED
                .get_or_init(|| {
                    let result = match std::env::var_os("BREAKGLASS_KUBECONFIG_DIR") {
                        Some(dir) if !dir.is_empty() => ControlPlane::connect(Path::new(&dir)),
                        _ => ControlPlane::start_blocking(&StartOptions::default()),
                    };
                    result.map_err(|e| format!("{e:#}"))
                })
                .as_ref()
                .map_err(|e| anyhow!("test control plane unavailable: {e}"))
        })
        .await
        .context("starting the test control plane")?
    }

    /// Starts a separate control plane owned by the caller; it stops when
    /// the returned value is dropped.
    pub async fn start(options: StartOptions) -> anyhow::Result<ControlPlane> {
        tokio::task::spawn_blocking(move || ControlPlane::start_blocking(&options))
            .await
            .context("starting a test control plane")?
    }

    /// Uses an already running control plane, given its kubeconfig dir.
    pub fn connect(kubeconfig_dir: &Path) -> anyhow::Result<ControlPlane> {
        let path = kubeconfig_dir.join("controlplane.json");
        let raw = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let info: ControlPlaneInfo =
            serde_json::from_slice(&raw).with_context(|| format!("parsing {}", path.display()))?;
        Ok(ControlPlane {
            info,
            process: None,
        })
    }

    fn start_blocking(options: &StartOptions) -> anyhow::Result<ControlPlane> {
        let binary = controlplane_binary()?;
        let root = std::env::temp_dir().join("breakglass-e2e");
        std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
        remove_stale_dirs(&root);
        let base_dir = root.join(format!(
            "{}-{}",
            std::process::id(),
            INSTANCE_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let data_dir = base_dir.join("data");
        let kube_dir = base_dir.join("kube");
        std::fs::create_dir_all(&kube_dir)
            .with_context(|| format!("creating {}", kube_dir.display()))?;

        let mut cmd = Command::new(&binary);
        cmd.arg("--data-dir")
            .arg(&data_dir)
            .arg("--kubeconfig-dir")
            .arg(&kube_dir)
            .arg("--exit-with-parent");
        if let Some(name) = &options.cluster_name {
            cmd.arg("--cluster-name").arg(name);
        }
        if let Some(dir) = &options.trust_issuer_dir {
            cmd.arg("--trust-issuer-dir").arg(dir);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .with_context(|| format!("spawning {}", binary.display()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow!("no stdout pipe"))?;

        // A reader thread forwards the first READY/FAILED line and then keeps
        // draining stdout for the life of the process.
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let mut sent = false;
            loop {
                line.clear();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if !sent && (line.starts_with("READY ") || line.starts_with("FAILED")) {
                            sent = tx.send(line.trim_end().to_owned()).is_ok();
                        } else {
                            eprint!("[controlplane] {line}");
                        }
                    }
                }
            }
        });
        let log_file = kube_dir.join("controlplane.log");
        let fail = |child: &mut Child, msg: String| -> anyhow::Error {
            let _ = child.kill();
            let _ = child.wait();
            anyhow!(
                "{msg}\n--- last lines of {} ---\n{}",
                log_file.display(),
                tail_file(&log_file, 6000)
            )
        };
        let line = match rx.recv_timeout(START_TIMEOUT) {
            Ok(line) => line,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(fail(
                    &mut child,
                    format!("control plane not ready after {START_TIMEOUT:?}"),
                ))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = child.try_wait().ok().flatten();
                return Err(fail(
                    &mut child,
                    format!("control plane exited before READY (status {status:?})"),
                ));
            }
        };
        let Some(json) = line.strip_prefix("READY ") else {
            return Err(fail(&mut child, format!("control plane failed: {line}")));
        };
        let info: ControlPlaneInfo = match serde_json::from_str(json) {
            Ok(info) => info,
            Err(e) => return Err(fail(&mut child, format!("bad READY line ({e}): {json}"))),
        };
        eprintln!(
            "[controlplane] {} ready at {} in {:.1}s (kubeconfigs in {})",
            info.cluster_name,
            info.server,
            started.elapsed().as_secs_f64(),
            info.kubeconfig_dir.display()
        );
        Ok(ControlPlane {
            info,
            process: Some(Mutex::new(Process { child, base_dir })),
        })
    }

    /// Everything the control plane reported when it became ready.
    pub fn info(&self) -> &ControlPlaneInfo {
        &self.info
    }

    /// The API server URL.
    pub fn server(&self) -> &str {
        &self.info.server
    }

    /// This cluster's name (kubeconfig context name; audience for trusted
    /// tokens from a home cluster).
    pub fn cluster_name(&self) -> &str {
        &self.info.cluster_name
    }

    /// The directory with the kubeconfigs, `ca.crt` and `controlplane.json`
    /// (what `--trust-issuer-dir` of a second instance points at).
    pub fn kubeconfig_dir(&self) -> &Path {
        &self.info.kubeconfig_dir
    }

    /// The kubeconfig file of an identity.
    pub fn kubeconfig_path(&self, id: Identity) -> anyhow::Result<&Path> {
        self.info
            .kubeconfigs
            .get(id.key())
            .map(PathBuf::as_path)
            .ok_or_else(|| anyhow!("control plane wrote no kubeconfig for {}", id.key()))
    }

    /// The username the API server sees for an identity.
    pub fn username(&self, id: Identity) -> anyhow::Result<&str> {
        self.info
            .users
            .get(id.key())
            .map(String::as_str)
            .ok_or_else(|| anyhow!("control plane reported no user for {}", id.key()))
    }

    /// A new client authenticating as `id`. Clients are cheap; make one per
    /// test (a client must not outlive the tokio runtime it was first used
    /// on, and each `#[tokio::test]` has its own).
    pub async fn client(&self, id: Identity) -> anyhow::Result<Client> {
        let config = self.config(id).await?;
        Client::try_from(config).context("building kube client")
    }

    /// The kube client configuration of an identity.
    pub async fn config(&self, id: Identity) -> anyhow::Result<Config> {
        let path = self.kubeconfig_path(id)?;
        let kubeconfig =
            Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
        Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .with_context(|| format!("loading {}", path.display()))
    }

    /// A new client presenting a bearer token (e.g. one from
    /// [`ControlPlane::service_account_token`] or another cluster's).
    pub async fn token_client(&self, token: &str) -> anyhow::Result<Client> {
        let mut config = self.config(Identity::Admin).await?;
        config.auth_info = serde_json::from_value(serde_json::json!({ "token": token }))
            .context("building token credentials")?;
        Client::try_from(config).context("building kube client")
    }

    /// Mints a token for a service account with the TokenRequest API (as
    /// admin). Empty `audiences` means the API server's default (this
    /// cluster's issuer).
    pub async fn service_account_token(
        &self,
        namespace: &str,
        service_account: &str,
        audiences: &[&str],
        expiration_seconds: i64,
    ) -> anyhow::Result<String> {
        let api: Api<ServiceAccount> =
            Api::namespaced(self.client(Identity::Admin).await?, namespace);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: audiences.iter().map(|a| (*a).to_owned()).collect(),
                expiration_seconds: Some(expiration_seconds),
                ..TokenRequestSpec::default()
            },
            ..TokenRequest::default()
        };
        let response = api
            .create_token_request(service_account, &PostParams::default(), &request)
            .await
            .with_context(|| format!("TokenRequest for {namespace}/{service_account}"))?;
        response.status.map(|s| s.token).ok_or_else(|| {
            anyhow!("TokenRequest for {namespace}/{service_account} returned no status")
        })
    }

    /// The last `max_bytes` of the control plane's log (for failure messages).
    pub fn log_tail(&self, max_bytes: u64) -> String {
        tail_file(&self.info.log_file, max_bytes)
    }

    /// Stops an owned control plane (SIGTERM, then SIGKILL after 15 s) and
    /// removes its files. Does nothing for a reused external instance.
    pub fn stop(&mut self) {
        let Some(process) = self.process.take() else {
            return;
        };
        let mut p = match process.into_inner() {
            Ok(p) => p,
            Err(poisoned) => poisoned.into_inner(),
        };
        let pid = p.child.id().to_string();
        let _ = Command::new("kill").arg("-TERM").arg(&pid).status();
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            match p.child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                _ => {
                    let _ = p.child.kill();
                    let _ = p.child.wait();
                    break;
                }
            }
        }
        let _ = std::fs::remove_dir_all(&p.base_dir);
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Path of the control plane binary: `BREAKGLASS_CONTROLPLANE_BIN`, or what
/// `scripts/controlplane.sh build` prints (it builds once per source hash).
fn controlplane_binary() -> anyhow::Result<PathBuf> {
    if let Some(bin) = std::env::var_os("BREAKGLASS_CONTROLPLANE_BIN") {
        if !bin.is_empty() {
            return Ok(PathBuf::from(bin));
        }
    }
    let script = crate::script("controlplane.sh");
    let output = Command::new("bash")
        .arg(&script)
        .arg("build")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {} build", script.display()))?;
    if !output.status.success() {
        bail!("{} build failed ({})", script.display(), output.status);
    }
    let path = String::from_utf8(output.stdout).context("binary path is not UTF-8")?;
    let path = PathBuf::from(path.trim());
    if !path.is_file() {
        bail!(
            "{} build printed {:?}, which is not a file",
            script.display(),
            path
        );
    }
    Ok(path)
}

/// Removes instance dirs left by test processes that no longer run.
fn remove_stale_dirs(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.split('-').next()) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn tail_file(path: &Path, max_bytes: u64) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return format!("(no log at {})", path.display());
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(max_bytes)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}
