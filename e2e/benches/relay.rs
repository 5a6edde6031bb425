//! The relay and the recording (DESIGN.md section 13), each figure against its baseline in the
//! same run:
//!
//! - `relay-keystroke`: keystrokes' echo round trip through the server's terminal WebSocket
//!   (the browser's binary frames) vs a kube-rs `attach` straight to the same API server, to a
//!   container of the same kind (the simulated node runs a real shell in a PTY for each);
//! - `relay-bulk`: output throughput the same two ways;
//! - `recording-bulk`: throughput through a server recording into the S3 store (versitygw) vs
//!   one recording into its local directory. The server has no "recording off" (no recording,
//!   no session), so the baseline is the cheapest recording it has: the same in-memory cast
//!   writer, its segments on the local disk;
//! - `silent-connections`: a keystroke's echo through the relay while 1,000 connections that
//!   send nothing are held open against the server, vs the same terminal with none;
//! - `idle-rss`, `idle-cpu`: what N open, idle terminals cost the server process, from
//!   `/proc/<pid>`, vs the same server with none open;
//! - `watch-cpu`, `watch-rate`: the server's CPU per MB relayed and the requester's rate with
//!   one watcher reading the terminal live, vs a session on the same server nobody watches.
//!
//! The servers record with no rate limit (`max_rate_bytes_per_second = 0`): the default rate
//! (16 MiB/s) is a policy, not a cost, and would hide the relay's throughput.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use breakglass_e2e::bench::{self, Dist, Figure, Target};
use breakglass_e2e::server::{config_toml, ApiClient, ServerProcess};
use breakglass_e2e::{ControlPlane, Identity};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::json;

#[path = "relay/idle.rs"]
mod idle;
#[path = "relay/silent.rs"]
mod silent;
#[path = "relay/tail.rs"]
mod tail;
#[path = "relay/term.rs"]
mod term;
#[path = "relay/watch.rs"]
mod watch;

use term::{Relayed, Term};

/// Sessions per pod for the idle terminals: each session adds its own ephemeral container,
/// and a pod with a thousand of them would make every patch of it slow.
const SESSIONS_PER_POD: usize = 10;
const ACTIVE: Duration = Duration::from_secs(600);
/// The servers' sweep interval (the default; the tests' configuration sweeps every second).
const SWEEP_INTERVAL: Duration = Duration::from_secs(5);
const BASELINE_IS: &str = "kube-rs attach straight to the API server";

struct Bench {
    dir: tempfile::TempDir,
    config: PathBuf,
    ns: String,
    pods: Api<Pod>,
}

#[tokio::main]
async fn main() {
    let b = prepare().await;
    if bench::part("relay") {
        relay_figures(&b).await;
    }
    if bench::part("silent") {
        silent_figure(&b).await;
    }
    if bench::part("idle") {
        idle_figures(&b).await;
    }
    if bench::part("watch") {
        watch::watch_figures(&b).await;
    }
}

/// `relay-keystroke`, `relay-bulk` and `recording-bulk`.
async fn relay_figures(b: &Bench) {
    let mut direct = term::attach(&b.pods, "direct", "app").await.unwrap();

    // The relay with the local store: keystrokes and bulk output against direct attach.
    let local = ServerProcess::start(&b.config, &b.dir.path().join("local"), &[])
        .await
        .unwrap();
    let (alice, id) = one_session(&local, &b.ns, "relay-local").await;
    let mut relayed = Relayed(term::open(&local, &alice, &id).await.unwrap());
    keystroke_figures(&mut direct, &mut relayed).await;
    let sizes = bench::sizes(&[10u64, 30, 100], &[1, 2, 4]);
    // Several runs a size, direct and relayed taking turns, so a drift of the shared machine's
    // speed (the baseline once moved from 15.6 to 18.5 MB/s between runs of unchanged code)
    // falls on both sides; each side's figure is its median.
    let reps = if bench::short() { 1 } else { BULK_RUNS };
    let mut local_rates = Vec::new();
    for &mb in &sizes {
        let last = mb == *sizes.last().unwrap();
        let (mut base, mut ours, mut cpu) = (Vec::new(), Vec::new(), Vec::new());
        for run in 0..reps {
            base.push(rate(&mut direct, mb).await);
            let cpu_before = idle::cpu_seconds(local.pid().unwrap()).unwrap();
            // The profile covers the relayed side of the largest size's first run.
            let perf = (last && run == 0)
                .then(|| idle::profile(local.pid().unwrap(), "bulk", Duration::from_secs(5)))
                .flatten();
            ours.push(rate(&mut relayed, mb).await);
            cpu.push(
                1000.0 * (idle::cpu_seconds(local.pid().unwrap()).unwrap() - cpu_before)
                    / mb as f64,
            );
            if let Some(mut p) = perf {
                let _ = p.wait();
            }
        }
        // The server's own CPU per MB relayed (and recorded) does not depend on how busy the
        // rest of the machine is, unlike the rates: it shows a change to the relay's cost when
        // the rates are too noisy to.
        println!(
            "relay-bulk output={mb}MB runs (direct | relayed, MB/s): {base:.1?} | {ours:.1?}; server CPU per MB relayed: {cpu:.1?} ms"
        );
        // Each relayed run against the direct run just before it: when the machine's speed
        // moves between runs, the pairs keep what the medians of the two sides mix up.
        let paired: Vec<f64> = base.iter().zip(&ours).map(|(b, o)| o / b).collect();
        println!(
            "relay-bulk output={mb}MB each run over the direct run before it: {paired:.3?}, median {:.3}",
            median(paired.clone())
        );
        let (base, ours) = (median(base), median(ours));
        local_rates.push(ours);
        let fig = Figure::new("relay-bulk", "median", "MB/s", base, ours)
            .size(format!("output={mb}MB,runs={reps}"))
            .baseline_is("direct attach");
        bench::report(&if last {
            fig.target(Target::RatioAtLeast(0.9))
        } else {
            fig
        });
    }
    drop(relayed);
    drop(local);

    // The same through a server recording into the S3 store.
    let s3 = S3::start(b.dir.path());
    let env: Vec<(&str, &str)> = s3
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let remote = ServerProcess::start(&b.config, &b.dir.path().join("s3-server"), &env)
        .await
        .unwrap();
    let (alice, id) = one_session(&remote, &b.ns, "relay-s3").await;
    let mut relayed = Relayed(term::open(&remote, &alice, &id).await.unwrap());
    for (i, &mb) in sizes.iter().enumerate() {
        let mut runs = Vec::new();
        for _ in 0..reps {
            runs.push(rate(&mut relayed, mb).await);
        }
        let fig = Figure::new(
            "recording-bulk",
            "median",
            "MB/s",
            local_rates[i],
            median(runs),
        )
        .size(format!("output={mb}MB,runs={reps}"))
        .baseline_is("relay recording to the local store");
        bench::report(&if i == sizes.len() - 1 {
            fig.target(Target::RatioAtLeast(0.95))
        } else {
            fig
        });
    }
    drop(relayed);
    drop(remote);
    drop(s3);
}

/// The config, the guardrails, a namespace with the pods every part needs.
async fn prepare() -> Bench {
    let cp = ControlPlane::shared().await.unwrap();
    let admin = cp.client(Identity::Admin).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kc = cp.kubeconfig_path(Identity::BreakglassSa).unwrap();
    let config = dir.path().join("server.toml");
    let extra = "[recording]\nmax_rate_bytes_per_second = 0\n";
    // The tests sweep every second; an idle server is measured with the default.
    let text = config_toml(&[("ground", "ground", kc)], extra).replace(
        "sweep_interval_seconds = 1\n",
        &format!("sweep_interval_seconds = {}\n", SWEEP_INTERVAL.as_secs()),
    );
    std::fs::write(&config, text).unwrap();
    let identity = cp.username(Identity::BreakglassSa).unwrap();
    breakglass_e2e::server::install_guardrails(cp, &config, "ground", identity)
        .await
        .unwrap();
    let ns = cp.namespace("bench-relay").await.unwrap();
    let ns_name = ns.name().to_string();
    // The namespace outlives the run's servers; the control plane goes with the process.
    std::mem::forget(ns);
    let pods: Api<Pod> = Api::namespaced(admin, &ns_name);
    let idle_pods = idle_sizes().last().unwrap().div_ceil(SESSIONS_PER_POD);
    let mut names: Vec<String> = [
        "direct",
        "relay-local",
        "relay-s3",
        "silent",
        "warm-up",
        "watch-alone",
        "watch-watched",
    ]
    .map(String::from)
    .to_vec();
    names.extend((0..idle_pods).map(|i| format!("idle-{i}")));
    term::create_pods(&pods, &names).await;
    Bench {
        dir,
        config,
        ns: ns_name,
        pods,
    }
}

fn request(ns: &str, pod: &str) -> serde_json::Value {
    json!({"environment": "ground", "namespace": ns, "pod": pod, "mode": "live",
           "reason": "benchmarking the terminal relay", "duration_minutes": 30})
}

/// Alice's session on `pod`, active.
async fn one_session(server: &ServerProcess, ns: &str, pod: &str) -> (ApiClient, String) {
    let alice = server.login("alice").await.unwrap();
    let id = alice.create(request(ns, pod)).await.unwrap();
    alice
        .wait_state(&id, &["Active"], ACTIVE)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.log_text()));
    (alice, id)
}

async fn keystroke_figures(direct: &mut impl Term, relayed: &mut impl Term) {
    let samples = bench::sizes(&[1000usize, 300, 300], &[30, 10, 10]);
    for (bytes, n) in [1usize, 16, 256].into_iter().zip(samples) {
        // With `BENCH_PERF`, the paste's tail is profiled (BENCHMARKS.md, issue 36 item 5).
        let tail = (bytes == 256).then(|| tail::Tail::start("paste")).flatten();
        // Alternating halves, so a busy minute on the shared machine falls on both.
        let mut base = term::keystrokes_at(direct, bytes, n / 2).await;
        let mut ours = term::keystrokes_at(relayed, bytes, n / 2).await;
        base.extend(term::keystrokes_at(direct, bytes, n - n / 2).await);
        ours.extend(term::keystrokes_at(relayed, bytes, n - n / 2).await);
        if let Some(tail) = tail {
            tail.finish(&[("direct", &base), ("relayed", &ours)], 0.97);
        }
        let (base, ours) = (term::dist(&base), term::dist(&ours));
        let size = format!("bytes={bytes},n={n}");
        for (stat, q) in [("p50", 0.5), ("p95", 0.95), ("p99", 0.99)] {
            let fig = Figure::new("relay-keystroke", stat, "ms", base.p(q), ours.p(q))
                .size(size.clone())
                .baseline_is(BASELINE_IS);
            // The design's figure is one keystroke's p99.
            bench::report(&if bytes == 1 && stat == "p99" {
                fig.target(Target::PlusAtMost(1.0))
            } else {
                fig
            });
        }
    }
}

/// `silent-connections`: a keystroke's echo through the relay while connections that never
/// send a byte are held open against the server, vs the same terminal with none; halves
/// alternated, so a busy minute of the machine falls on both.
async fn silent_figure(b: &Bench) {
    let (conns, n) = if bench::short() {
        (50, 20)
    } else {
        (1000, 600)
    };
    let server = ServerProcess::start(&b.config, &b.dir.path().join("silent"), &[])
        .await
        .unwrap();
    let (alice, id) = one_session(&server, &b.ns, "silent").await;
    let mut relayed = Relayed(term::open(&server, &alice, &id).await.unwrap());
    let addr = server.url.trim_start_matches("http://").to_string();
    let (mut base, mut ours) = (Vec::new(), Vec::new());
    for half in [n / 2, n - n / 2] {
        base.extend(term::keystrokes(&mut relayed, 1, half).await);
        let held = silent::hold(&addr, conns).await;
        ours.extend(term::keystrokes(&mut relayed, 1, half).await);
        drop(held);
    }
    let (base, ours) = (Dist::from_durations(&base), Dist::from_durations(&ours));
    bench::report(
        &Figure::new(
            "silent-connections",
            "p99",
            "ms",
            base.p(0.99),
            ours.p(0.99),
        )
        .size(format!("connections={conns},bytes=1,n={n}"))
        .baseline_is("the same terminal with no silent connection")
        .target(Target::PlusAtMost(1.0)),
    );
}

/// Runs of each bulk size on each side at the full sizes (a 100 MB run takes about 7 s).
const BULK_RUNS: usize = 5;

/// MB/s of one run of `mb` megabytes of output.
async fn rate(term: &mut impl Term, mb: u64) -> f64 {
    let took = term::bulk(term, mb * 1_000_000).await;
    mb as f64 / took.as_secs_f64()
}

fn median(runs: Vec<f64>) -> f64 {
    Dist::from_values(runs).p(0.5)
}

fn idle_sizes() -> Vec<usize> {
    bench::sizes(&[100, 300, 1000], &[3, 6, 10])
}

/// A fresh server; its memory and CPU with none open, then with each size of open terminals,
/// every baseline measured on the same process just before the terminals are opened.
async fn idle_figures(b: &Bench) {
    // Each window holds at least one sweep, the one thing an idle server does on its own: a
    // shorter one may fall between two and measure nothing at all.
    let window = if bench::short() {
        SWEEP_INTERVAL + Duration::from_secs(1)
    } else {
        Duration::from_secs(10)
    };
    let server = ServerProcess::start(&b.config, &b.dir.path().join("idle"), &[])
        .await
        .unwrap();
    let pid = server.pid().unwrap();
    // One terminal opened and closed first, so what is made once (the cluster client, its TLS
    // session, the recorder's tasks) is in the baseline and not spread over the sessions.
    let (alice, id) = one_session(&server, &b.ns, "warm-up").await;
    drop(term::open(&server, &alice, &id).await.unwrap());
    let cpu0 = idle::cpu_percent(pid, window).await.unwrap();
    let rss0 = idle::rss_kb(pid).unwrap();

    let mut open: Vec<term::Ws> = Vec::new();
    let mut all_ids: Vec<String> = Vec::new();
    for n in idle_sizes() {
        let ids = futures::stream::iter(open.len()..n)
            .map(|i| {
                let alice = alice.clone();
                let pod = format!("idle-{}", i / SESSIONS_PER_POD);
                async move { alice.create(request(&b.ns, &pod)).await.unwrap() }
            })
            .buffer_unordered(16)
            .collect::<Vec<_>>()
            .await;
        for id in &ids {
            alice
                .wait_state(id, &["Active"], ACTIVE)
                .await
                .unwrap_or_else(|e| panic!("{e}\n{}", server.log_text()));
        }
        let opened: Vec<term::Ws> = futures::stream::iter(ids.clone())
            .map(|id| {
                let (server, alice) = (&server, &alice);
                async move { term::open(server, alice, &id).await.unwrap() }
            })
            .buffer_unordered(16)
            .collect()
            .await;
        open.extend(opened);
        all_ids.extend(ids);
        idle::settle(&alice, &all_ids).await;
        let last = n == *idle_sizes().last().unwrap();
        let perf = last
            .then(|| idle::profile(pid, &format!("idle-{n}"), window))
            .flatten();
        let cpu = idle::cpu_percent(pid, window).await.unwrap();
        if let Some(mut p) = perf {
            let _ = p.wait();
        }
        let rss = idle::rss_kb(pid).unwrap();
        // The design's figure is per terminal; the row keeps both totals, so its baseline is
        // the measured server and not a 0 every ratio to would be infinite.
        let per = (rss - rss0) / n as f64;
        let fig = Figure::new("idle-rss", "total", "KB", rss0, rss)
            .size(format!("terminals={n} ({per:.1} KB each)"))
            .baseline_is("server with none open");
        bench::report(&if last {
            fig.target(Target::PlusEachAtMost {
                each: 200.0,
                count: n,
            })
        } else {
            fig
        });
        let fig = Figure::new("idle-cpu", "mean", "%core", cpu0, cpu)
            .size(format!("terminals={n},window={}s", window.as_secs()))
            .baseline_is("server with none open");
        bench::report(&if last {
            fig.target(Target::AtMost(1.0))
        } else {
            fig
        });
    }
    drop(open);
}

/// A versitygw for the run (`scripts/s3.sh`), its bucket made as an operator makes it; stopped
/// on drop.
struct S3 {
    dir: PathBuf,
    env: Vec<(String, String)>,
}

impl S3 {
    fn script() -> PathBuf {
        breakglass_e2e::script("s3.sh")
    }

    fn run(args: &[&std::ffi::OsStr]) -> String {
        let out = std::process::Command::new(S3::script())
            .args(args)
            .env_remove("TOWER_BREAKGLASS_MINIO_BUCKET")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "scripts/s3.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn start(parent: &Path) -> S3 {
        let dir = parent.join("s3");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
            .to_string();
        let out = S3::run(&["start".as_ref(), dir.as_os_str(), port.as_ref()]);
        let env = out
            .lines()
            .filter_map(|l| l.strip_prefix("export "))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.trim_matches(['\'', '"']).to_string()))
            .collect();
        S3::run(&["create-bucket".as_ref(), dir.as_os_str()]);
        S3 { dir, env }
    }
}

impl Drop for S3 {
    fn drop(&mut self) {
        S3::run(&["stop".as_ref(), self.dir.as_os_str()]);
    }
}
