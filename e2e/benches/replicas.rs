//! Three server replicas on one PostgreSQL (DESIGN.md section 13's next targets, issue 36 item
//! 2), each figure against a baseline measured in the same run on the same three processes:
//!
//! - `replicas-idle-rss`, `replicas-idle-cpu`: N open, idle terminals spread evenly over the
//!   replicas (each opened on the replica its session was requested through), the three
//!   processes' resident memory and CPU summed, vs the same three with none open;
//! - `replicas-keystroke`: a keystroke's echo through each replica in turn while P other
//!   terminals, spread over the three, print steady output, vs a kube-rs `attach` straight to
//!   the API server under the same load (`replicas/load.rs`);
//! - `replicas-sse`: one change made through the first replica, to S live streams spread over
//!   the three; the time to the last stream, vs one stream on the second replica
//!   (`replicas/fanout.rs`).
//!
//! The replicas share what a deployment's share: the database, the recording store (a
//! directory here) and the cookie key. Everything runs on this one machine (the control
//! plane's API server and node, PostgreSQL, the three servers and this client), so the sizes
//! are what it holds; BENCHMARKS.md, "Three replicas", extrapolates from the growth curve.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use breakglass_e2e::bench::{self, Figure, Target};
use breakglass_e2e::server::{config_toml, ApiClient, ServerProcess};
use breakglass_e2e::{ControlPlane, Identity};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::json;

#[path = "replicas/fanout.rs"]
mod fanout;
// The relay bench's modules, of which this bench uses a part.
#[allow(dead_code)]
#[path = "relay/idle.rs"]
mod idle;
#[path = "replicas/load.rs"]
mod load;
#[path = "common/sse.rs"]
mod sse;
#[path = "relay/tail.rs"]
mod tail;
#[allow(dead_code)]
#[path = "relay/term.rs"]
mod term;

const REPLICAS: usize = 3;
/// Sessions per pod: each session adds its own ephemeral container, and a pod with hundreds of
/// them would make every patch of it slow.
const SESSIONS_PER_POD: usize = 10;
const ACTIVE: Duration = Duration::from_secs(600);
/// The servers' sweep interval (the default; the tests' configuration sweeps every second).
const SWEEP_INTERVAL: Duration = Duration::from_secs(5);
/// Users holding the live streams, each at most [`PER_USER`] (`[limits]
/// live_streams_per_user`); together they hold the largest size of `replicas-sse`.
const VIEWERS: usize = 30;
const PER_USER: usize = 100;

/// What every part shares: the three replicas, alice signed in on each, the namespace.
pub struct Rig {
    /// The configuration, the replicas' data and the shared recordings; kept for the run.
    _dir: tempfile::TempDir,
    ns: String,
    pods: Api<Pod>,
    replicas: Vec<ServerProcess>,
    /// alice, signed in on the replica of the same index.
    alices: Vec<ApiClient>,
}

/// Open terminals, the i-th on replica `i % REPLICAS`: the sockets of those never used, and
/// those that printed (`replicas/load.rs`), stopped since.
#[derive(Default)]
pub struct Open {
    sockets: Vec<term::Ws>,
    printers: Vec<load::Printer>,
    ids: Vec<String>,
}

/// The idle terminals' sizes: the keystroke part leaves the largest of its sizes open (its
/// printers stopped), and the idle part grows from there.
fn terminal_sizes() -> Vec<usize> {
    bench::sizes(&[1000, 2000, 3000], &[3, 6, 9])
}

/// The order keeps each part's load off the others: the live streams first, with no debug
/// container running yet (each one's watcher starts a process every few seconds on this one
/// machine, BENCHMARKS.md "Three replicas"); then the baseline of the idle figures (the three
/// replicas with none open); then the keystrokes under printing terminals, which stay open,
/// stopped, as the first of the idle ones.
#[tokio::main]
async fn main() {
    let rig = prepare().await;
    // One terminal opened and closed on each replica first, so what is made once (the cluster
    // client, the recorder's tasks) is in the baseline and not spread over the sessions.
    for r in 0..REPLICAS {
        let id = rig.session(r, "warm-up").await;
        drop(rig.terminal(r, &id).await);
    }
    if bench::part("sse") {
        fanout::sse_figures(&rig).await;
    }
    let window = if bench::short() {
        SWEEP_INTERVAL + Duration::from_secs(1)
    } else {
        Duration::from_secs(10)
    };
    let none_open = (rig.cpu_percent(window).await, rig.rss_kb());
    let mut open = Open::default();
    if bench::part("keys") {
        load::keystroke_figures(&rig, &mut open).await;
    }
    if bench::part("idle") {
        idle_figures(&rig, &mut open, window, none_open).await;
    }
}

fn request(ns: &str, pod: &str) -> serde_json::Value {
    json!({"environment": "ground", "namespace": ns, "pod": pod, "mode": "live",
           "reason": "benchmarking three replicas", "duration_minutes": 30})
}

impl Rig {
    fn pids(&self) -> Vec<u32> {
        self.replicas.iter().map(|r| r.pid().unwrap()).collect()
    }

    fn logs(&self) -> String {
        self.replicas
            .iter()
            .map(ServerProcess::log_text)
            .collect::<Vec<_>>()
            .join("\n----\n")
    }

    /// Alice's session on `pod`, requested through replica `r`, once active.
    async fn session(&self, r: usize, pod: &str) -> String {
        let alice = &self.alices[r];
        let id = alice.create(request(&self.ns, pod)).await.unwrap();
        alice
            .wait_state(&id, &["Active"], ACTIVE)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", self.logs()));
        id
    }

    /// The terminal of session `id` opened on replica `r`.
    async fn terminal(&self, r: usize, id: &str) -> term::Ws {
        term::open(&self.replicas[r], &self.alices[r], id)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", self.logs()))
    }

    /// The three processes' CPU over one window, measured at once, summed (% of a core).
    async fn cpu_percent(&self, window: Duration) -> f64 {
        let each = futures::future::join_all(
            self.pids()
                .into_iter()
                .map(|pid| idle::cpu_percent(pid, window)),
        )
        .await;
        each.into_iter().map(Result::unwrap).sum()
    }

    fn rss_kb(&self) -> f64 {
        self.pids()
            .into_iter()
            .map(|p| idle::rss_kb(p).unwrap())
            .sum()
    }
}

impl Open {
    /// Opens terminals until `n` are open: the i-th session requested through replica
    /// `i % REPLICAS` and its terminal opened there.
    pub async fn grow(&mut self, rig: &Rig, n: usize) {
        let new: Vec<(String, term::Ws)> = futures::stream::iter(self.ids.len()..n)
            .map(|i| async move {
                let r = i % REPLICAS;
                let id = rig
                    .session(r, &format!("idle-{}", i / SESSIONS_PER_POD))
                    .await;
                let ws = rig.terminal(r, &id).await;
                (id, ws)
            })
            // Ordered, so the i-th socket stays on replica i % REPLICAS.
            .buffered(16)
            .collect()
            .await;
        for (id, ws) in new {
            self.ids.push(id);
            self.sockets.push(ws);
        }
    }
}

/// Each size of open, idle terminals spread over the three replicas, against `none_open`, the
/// same three processes' CPU and memory before any terminal was opened. Each `window` holds at
/// least one sweep, the one thing an idle server does on its own.
async fn idle_figures(rig: &Rig, open: &mut Open, window: Duration, none_open: (f64, f64)) {
    let (cpu0, rss0) = none_open;
    let sizes = terminal_sizes();
    for &n in &sizes {
        open.grow(rig, n).await;
        idle::settle(&rig.alices[0], &open.ids).await;
        let last = n == *sizes.last().unwrap();
        let perf = last
            .then(|| idle::profile(rig.pids()[0], &format!("replicas-idle-{n}"), window))
            .flatten();
        let cpu = rig.cpu_percent(window).await;
        if let Some(mut p) = perf {
            let _ = p.wait();
        }
        let rss = rig.rss_kb();
        let per = (rss - rss0) / n as f64;
        let thousands = n as f64 / 1000.0;
        let fig = Figure::new("replicas-idle-rss", "total", "KB", rss0, rss)
            .size(format!("terminals={n} ({per:.1} KB each)"))
            .baseline_is("the three replicas with none open");
        bench::report(&if last {
            fig.target(Target::PlusEachAtMost {
                each: 100.0,
                count: n,
            })
        } else {
            fig
        });
        let fig = Figure::new("replicas-idle-cpu", "mean", "%core", cpu0, cpu)
            .size(format!(
                "terminals={n},window={}s ({:.2} % per 1,000)",
                window.as_secs(),
                cpu / thousands
            ))
            .baseline_is("the three replicas with none open");
        // 1 % of a core per 1,000 open terminals.
        bench::report(&if last {
            fig.target(Target::AtMost(thousands))
        } else {
            fig
        });
    }
}

/// The control plane, the guardrails, the pods, a fresh database and the three replicas.
async fn prepare() -> Rig {
    let cp = ControlPlane::shared().await.unwrap();
    let admin = cp.client(Identity::Admin).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kc = cp.kubeconfig_path(Identity::BreakglassSa).unwrap();
    let config: PathBuf = dir.path().join("server.toml");
    std::fs::write(&config, config_text(kc, &dir.path().join("recordings"))).unwrap();
    let identity = cp.username(Identity::BreakglassSa).unwrap();
    breakglass_e2e::server::install_guardrails(cp, &config, "ground", identity)
        .await
        .unwrap();
    let ns = cp.namespace("bench-replicas").await.unwrap();
    let ns_name = ns.name().to_string();
    // The namespace outlives the run's servers; the control plane goes with the process.
    std::mem::forget(ns);
    let pods: Api<Pod> = Api::namespaced(admin, &ns_name);
    let most = terminal_sizes()
        .into_iter()
        .chain(load::printing_sizes())
        .max()
        .unwrap();
    let mut names: Vec<String> = ["direct", "keys", "warm-up"].map(String::from).to_vec();
    names.extend((0..most.div_ceil(SESSIONS_PER_POD)).map(|i| format!("idle-{i}")));
    term::create_pods(&pods, &names).await;

    let db = breakglass_e2e::postgres::fresh_database().await.unwrap();
    let env = [("BREAKGLASS_DATABASE_URL", db.as_str())];
    let mut replicas = Vec::new();
    let mut alices = Vec::new();
    for r in 0..REPLICAS {
        let server = ServerProcess::start(&config, &dir.path().join(format!("replica-{r}")), &env)
            .await
            .unwrap();
        alices.push(server.login("alice").await.unwrap());
        replicas.push(server);
    }
    Rig {
        _dir: dir,
        ns: ns_name,
        pods,
        replicas,
        alices,
    }
}

/// The ground environment on the control plane (terminals), a Flight environment with no
/// cluster (its requests wait for approval: the live streams' changes), alice and the viewers,
/// one recording directory and one cookie key for all three replicas.
fn config_text(kubeconfig: &std::path::Path, recordings: &std::path::Path) -> String {
    let mut extra = format!(
        "[recording]\nmax_rate_bytes_per_second = 0\nlocal_dir = \"{}\"\n\n[limits]\nlive_streams_per_user = {PER_USER}\n\n\
         [[dev_login.users]]\nname = \"alice\"\ngroups = [\"engineers\"]\n",
        recordings.display()
    );
    for v in 0..VIEWERS {
        extra.push_str(&format!(
            "\n[[dev_login.users]]\nname = \"viewer{v}\"\ngroups = [\"engineers\"]\n"
        ));
    }
    let text = config_toml(&[("ground", "ground", kubeconfig)], &extra).replace(
        "sweep_interval_seconds = 1\n",
        &format!("sweep_interval_seconds = {}\n", SWEEP_INTERVAL.as_secs()),
    );
    let secret = "replicas-share-this-key-".repeat(4);
    format!(
        "session_secret = \"{secret}\"\n{text}\n[[environments]]\nname = \"flight\"\ntier = \"flight\"\n\
         [environments.permissions]\n\"tower.breakglass.request\" = {{ groups = [\"engineers\"] }}\n"
    )
}
