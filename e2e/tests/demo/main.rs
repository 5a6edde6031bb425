//! The README's first command, for real: `scripts/dev.sh` starts the whole demo (two control
//! planes, guardrails, workloads, server); alice gets a Ground session on a demo pod, types in
//! its terminal, ends it and reads the recording; then SIGINT must stop every process the demo
//! started and free every port it listened on. Started again on the same data (the second day),
//! a new session on each pod debugged the first day gets its debug container, on both tiers.
//!
//! The only departures from a person's `scripts/dev.sh`: a data directory of its own and a
//! free server port (`--data-dir`, `--port 0`), so it runs beside a demo or other tests. It
//! uses whatever dev.sh uses: the cached control plane binary and the built frontend (both
//! prepared by `scripts/test.sh`), building what is missing.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use breakglass_e2e::browser::{artifacts_dir, Browser, ChromeDriver};
use breakglass_e2e::flows::{
    attr_of, end_session, find_in_player, panel_state, request_access, type_in_terminal,
    wait_terminal_connected,
};
use breakglass_e2e::server::ApiClient;
use breakglass_e2e::wait_until;
use breakglass_shared::recording::Code;
use breakglass_shared::terminal::{close, Frame};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

/// Up to the URL: everything is built by scripts/test.sh, but run alone this may build the
/// server (and the frontend, after a change to it).
const START: Duration = Duration::from_secs(30 * 60);
const T: Duration = Duration::from_secs(60);

fn root() -> PathBuf {
    breakglass_e2e::workspace_root()
}

/// `scripts/dev.sh` as a child in a process group of its own; stopped (SIGINT, then SIGKILL
/// for the whole group) if the test fails before it does so itself.
struct Demo {
    child: Child,
    lines: mpsc::Receiver<String>,
    /// Shared by the demo of the first day and the one started again on its data.
    data: Arc<tempfile::TempDir>,
}

impl Demo {
    fn start() -> Demo {
        Demo::start_on(Arc::new(tempfile::tempdir().unwrap()))
    }

    /// `scripts/dev.sh` on `data`: a new demo, or the same demo started again.
    fn start_on(data: Arc<tempfile::TempDir>) -> Demo {
        // A person's shell delivers Ctrl-C; a test started in the background (CI, `cmd &`)
        // may have inherited SIGINT ignored, and bash cannot trap a signal ignored at its
        // start: reset both to the default so dev.sh's own trap is what is tested.
        let mut cmd = Command::new("env");
        cmd.arg("--default-signal=INT,QUIT").arg("bash");
        // What cargo sets for this test binary a person's shell does not have; build scripts
        // (ring's) watch some of it, so dev.sh's cargo would rebuild them.
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            let per_crate = [
                "CARGO_PKG_",
                "CARGO_MANIFEST_",
                "CARGO_CRATE_",
                "CARGO_BIN_",
            ]
            .iter()
            .any(|p| key.starts_with(p));
            if per_crate
                || ["CARGO_PRIMARY_PACKAGE", "CARGO_TARGET_TMPDIR", "OUT_DIR"].contains(&&*key)
            {
                cmd.env_remove(&*key);
            }
        }
        let mut child = cmd
            .arg(root().join("scripts/dev.sh"))
            .args(["--port", "0", "--data-dir"])
            .arg(data.path())
            .current_dir(root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                eprintln!("[dev.sh] {line}");
                // Once nobody listens, keep draining so dev.sh never blocks on a full pipe.
                let _ = tx.send(line);
            }
        });
        Demo { child, lines, data }
    }

    /// Waits for the URL line; fails if dev.sh exits first.
    fn url(&mut self) -> String {
        let deadline = Instant::now() + START;
        loop {
            match self.lines.recv_timeout(Duration::from_millis(500)) {
                Ok(line) => {
                    if let Some(url) = line.strip_prefix("break-glass is listening: open ") {
                        return url.trim_end_matches('/').to_string();
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!(
                        "dev.sh exited before printing the URL: {:?}",
                        self.child.wait()
                    );
                }
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("dev.sh exited before printing the URL: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "no URL from dev.sh within {START:?}"
            );
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn signal(&self, sig: &str) {
        let _ = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status();
    }

    /// The pids dev.sh says it started (`<data>/demo/pids`: `name pid` lines).
    fn recorded_pids(&self) -> Vec<(String, u32)> {
        let text = std::fs::read_to_string(self.data.path().join("demo/pids")).unwrap();
        text.lines()
            .filter_map(|l| {
                let (name, pid) = l.split_once(' ')?;
                Some((name.to_string(), pid.trim().parse().ok()?))
            })
            .collect()
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_some() {
            return;
        }
        self.signal("INT");
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // `--` so the negative number is the process group, not a signal name.
        let _ = Command::new("kill")
            .args(["-s", "KILL", "--"])
            .arg(format!("-{}", self.pid()))
            .status();
        let _ = self.child.wait();
    }
}

/// A process as `/proc/PID/stat` shows it: parent, process group and start time (which tells
/// a reused pid apart).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Proc {
    pid: u32,
    ppid: u32,
    pgid: u32,
    start: u64,
    comm: String,
}

fn proc_stat(pid: u32) -> Option<Proc> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
    let (head, rest) = text.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_string();
    let f: Vec<&str> = rest.split_whitespace().collect();
    if f.first() == Some(&"Z") {
        return None;
    }
    Some(Proc {
        pid,
        ppid: f.get(1)?.parse().ok()?,
        pgid: f.get(2)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
        comm,
    })
}

fn all_procs() -> Vec<Proc> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter_map(proc_stat)
        .collect()
}

/// `root` and every process below it.
fn tree(root: u32) -> BTreeSet<Proc> {
    let procs = all_procs();
    let mut out: BTreeSet<Proc> = procs.iter().filter(|p| p.pid == root).cloned().collect();
    loop {
        let pids: BTreeSet<u32> = out.iter().map(|p| p.pid).collect();
        let more: Vec<Proc> = procs
            .iter()
            .filter(|p| pids.contains(&p.ppid) && !pids.contains(&p.pid))
            .cloned()
            .collect();
        if more.is_empty() {
            return out;
        }
        out.extend(more);
    }
}

/// Whether that very process (same start time) still runs.
fn still_running(p: &Proc) -> bool {
    proc_stat(p.pid).is_some_and(|now| now.start == p.start)
}

fn port_open(port: u16) -> bool {
    let to = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    match std::net::TcpStream::connect_timeout(&to, Duration::from_millis(300)) {
        // A connect to a free port of the ephemeral range now and then picks that very port as
        // its own and connects to itself (TCP's simultaneous open): nobody serves it then.
        Ok(s) => s.local_addr().ok() != Some(to),
        Err(_) => false,
    }
}

/// Every port the demo listens on: the server's and each control plane's API server and
/// kubelet.
fn demo_ports(url: &str, data: &Path) -> Vec<u16> {
    let mut ports = vec![url.rsplit(':').next().unwrap().parse().unwrap()];
    for env in ["dev", "prod"] {
        let path = data.join(format!("clusters/{env}/kube/controlplane.json"));
        let info: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        for key in ["apiserverPort", "kubeletPort"] {
            ports.push(u16::try_from(info[key].as_u64().unwrap()).unwrap());
        }
    }
    ports
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// How reading the terminal stopped short of what was awaited.
#[derive(Debug)]
enum Stopped {
    /// A close frame (its code, 1005 without one).
    Closed(u16),
    /// A transport error, the end of the stream, or the time bound.
    Failed(String),
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stopped::Closed(code) => write!(f, "closed with code {code}"),
            Stopped::Failed(why) => f.write_str(why),
        }
    }
}

/// Reads terminal output until `needle` shows up; returns what was read.
async fn read_until(ws: &mut Ws, needle: &str) -> Result<String, (Stopped, String)> {
    let mut seen = String::new();
    let read = async {
        while let Some(msg) = ws.next().await {
            match msg.map_err(|e| Stopped::Failed(e.to_string()))? {
                Message::Binary(b) => {
                    if let Ok(Frame::Data(d)) = Frame::decode(&b) {
                        seen.push_str(&String::from_utf8_lossy(d));
                        if seen.contains(needle) {
                            return Ok(());
                        }
                    }
                }
                Message::Close(c) => {
                    return Err(Stopped::Closed(c.map_or(1005, |c| u16::from(c.code))))
                }
                _ => {}
            }
        }
        Err(Stopped::Failed("the stream ended".into()))
    };
    match tokio::time::timeout(Duration::from_secs(20), read).await {
        Ok(Ok(())) => Ok(seen),
        Ok(Err(why)) => Err((why, seen)),
        Err(_) => Err((Stopped::Failed(format!("no {needle:?} within 20 s")), seen)),
    }
}

/// In session `id`'s terminal (Active), `who` types `echo <word>-$((6*7))` and sees its output,
/// then ends the session: the terminal closes with "session ended" and the session ends.
async fn type_and_end(url: &str, who: &ApiClient, id: &str, word: &str) {
    let mut req = format!(
        "{}/api/breakglass/sessions/{id}/terminal",
        url.replace("http://", "ws://")
    )
    .into_client_request()
    .unwrap();
    req.headers_mut()
        .insert("cookie", who.cookie_header().parse().unwrap());
    req.headers_mut().insert("origin", url.parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    ws.send(Message::Binary(
        Frame::Resize { cols: 90, rows: 25 }.encode().into(),
    ))
    .await
    .unwrap();
    ws.send(Message::Binary(
        Frame::Data(format!("echo {word}-$((6*7))\r").as_bytes())
            .encode()
            .into(),
    ))
    .await
    .unwrap();
    if let Err((why, seen)) = read_until(&mut ws, &format!("{word}-42")).await {
        panic!("no command output in the terminal: {why}; saw {seen:?}");
    }

    let (st, v) = who
        .post(&format!("/sessions/{id}/end"), json!({}))
        .await
        .unwrap();
    assert_eq!(st, 200, "{v}");
    // The terminal closes with "session ended" (after any output still in flight).
    match read_until(&mut ws, "\u{0}never\u{0}").await {
        Err((Stopped::Closed(code), _)) => assert_eq!(code, close::SESSION_ENDED),
        Err((why, seen)) => panic!("the terminal did not close at the end: {why}; saw {seen:?}"),
        Ok(seen) => panic!("the terminal did not close at the end; saw {seen:?}"),
    }
    who.wait_state(id, &["Ended"], T).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_readme_demo_runs_a_terminal_session_and_stops_clean() {
    let mut demo = Demo::start();
    let url = demo.url();
    let data = demo.data.path().to_path_buf();
    let alice = ApiClient::login(&url, "alice").await.unwrap();

    // Both environments have a cluster behind them, with their guardrails in place.
    for env in ["dev", "prod"] {
        let (st, report) = alice
            .get(&format!("/environments/{env}/guardrails"))
            .await
            .unwrap();
        assert_eq!(st, 200, "{report}");
        assert_eq!(report["ok"], true, "{env}: {report}");
    }
    // The home page shows each environment's cluster as reached, with its tier.
    let (_, whoami) = alice.get("/whoami").await.unwrap();
    let envs = whoami["environments"].as_array().unwrap();
    for (env, tier) in [("dev", "ground"), ("prod", "flight")] {
        let e = envs.iter().find(|e| e["name"] == env).unwrap();
        assert_eq!(e["tier"], tier, "{e}");
        assert_eq!(e["cluster"]["status"], "configured", "{e}");
    }
    // The demo workloads run: 2 + 1 Deployment replicas, a bare pod, a two-container pod.
    let pods = wait_until("the demo pods of dev running", T, || async {
        let (st, v) = alice.get("/environments/dev/namespaces/shop/pods").await?;
        let pods = v.as_array().cloned().unwrap_or_default();
        let running = |p: &&Value| p["phase"] == "Running" && p["ready"] == true;
        Ok((st == 200 && pods.iter().filter(running).count() == 4).then_some(pods))
    })
    .await
    .unwrap();
    let checkout = pods.iter().find(|p| p["name"] == "checkout").unwrap();
    assert_eq!(
        checkout["containers"].as_array().unwrap().len(),
        2,
        "{checkout}"
    );
    let (_, workers) = alice
        .get("/environments/prod/namespaces/payments/pods")
        .await
        .unwrap();
    assert_eq!(workers.as_array().unwrap().len(), 1, "{workers}");

    // A Ground session on the two-container pod, with process access to `app`.
    let id = alice
        .create(
            json!({"environment": "dev", "namespace": "shop", "pod": "checkout",
                       "mode": "live", "target_container": "app",
                       "reason": "trying the demo end to end", "duration_minutes": 15}),
        )
        .await
        .unwrap();
    alice.wait_state(&id, &["Active"], T).await.unwrap();

    type_and_end(&url, &alice, &id, "demo").await;

    // The recording has what was typed and seen, and checks out.
    let cast = alice
        .get_text(&format!("/sessions/{id}/recording"))
        .await
        .unwrap();
    let (_, events) = breakglass_shared::recording::parse(&cast).unwrap();
    let output: String = events
        .iter()
        .filter(|e| e.code == Code::Output)
        .map(|e| e.data.as_str())
        .collect();
    assert!(output.contains("demo-42"), "{output:?}");
    let (st, v) = alice
        .get(&format!("/sessions/{id}/recording/verify"))
        .await
        .unwrap();
    assert_eq!(st, 200);
    assert_eq!(v["ok"], true, "{v}");
    // bob, an approver of dev, plays it too.
    let bob = ApiClient::login(&url, "bob").await.unwrap();
    let (st, _) = bob.get(&format!("/sessions/{id}/recording")).await.unwrap();
    assert_eq!(st, 200, "bob reads the dev recording");

    // The README's "try this", in headless Chromium: alice asks on prod, bob approves from
    // the queue strip, alice types in the terminal, bob plays the recording.
    if let Err(e) = try_this_in_the_browser(&url).await {
        panic!("the demo's try-this in the browser: {e:#}");
    }

    // Ctrl-C: every process of the demo goes, and every port it served is free again.
    let before = tree(demo.pid());
    let recorded = demo.recorded_pids();
    let names: BTreeSet<&str> = recorded.iter().map(|(n, _)| n.as_str()).collect();
    for part in ["server", "cluster-dev", "cluster-prod"] {
        assert!(names.contains(part), "{recorded:?}");
    }
    let recorded: Vec<Proc> = recorded
        .iter()
        .filter_map(|(_, pid)| proc_stat(*pid))
        .collect();
    let ports = demo_ports(&url, &data);
    for port in &ports {
        assert!(port_open(*port), "port {port} is not served before SIGINT");
    }
    demo.signal("INT");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = demo.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "dev.sh still runs 60 s after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(130), "dev.sh exit after SIGINT");
    let left: Vec<&Proc> = before
        .iter()
        .chain(recorded.iter())
        .filter(|p| still_running(p))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let in_group: Vec<Proc> = all_procs()
        .into_iter()
        .filter(|p| p.pgid == demo.pid())
        .collect();
    assert!(in_group.is_empty(), "left in dev.sh's group: {in_group:?}");
    for port in &ports {
        assert!(!port_open(*port), "port {port} still served after SIGINT");
    }

    // The second day: the demo started again on its own data. Both pods debugged on the first
    // day (checkout on dev, Ground, and on prod, Flight, in the browser) carry the debug
    // containers of then; a new session on each gets a debug container of its own that runs.
    let mut again = Demo::start_on(demo.data.clone());
    let url = again.url();
    let alice = ApiClient::login(&url, "alice").await.unwrap();
    let bob = ApiClient::login(&url, "bob").await.unwrap();
    for (env, word) in [("dev", "second-day"), ("prod", "second-day-flight")] {
        let id = alice
            .create(
                json!({"environment": env, "namespace": "shop", "pod": "checkout",
                           "mode": "live", "target_container": "app",
                           "reason": "the demo's second day", "duration_minutes": 15}),
            )
            .await
            .unwrap();
        if env == "prod" {
            alice
                .wait_state(&id, &["PendingApproval"], T)
                .await
                .unwrap();
            bob.approve(&id).await.unwrap();
        }
        if let Err(e) = alice.wait_state(&id, &["Active"], T).await {
            let (_, session) = alice.get(&format!("/sessions/{id}")).await.unwrap();
            panic!("{env}: no debug container on the second day: {e:#}\n{session}");
        }
        type_and_end(&url, &alice, &id, word).await;
    }
    // Ctrl-C again, and wait for every process of the second demo to go.
    drop(again);

    // `--reset` wipes the demo's data (the lock file aside).
    let out = Command::new("bash")
        .arg(root().join("scripts/dev.sh"))
        .arg("--reset")
        .arg("--data-dir")
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let rest: Vec<String> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != ".demo.lock")
        .collect();
    assert!(rest.is_empty(), "{rest:?}");
}

mod pictures;
use pictures::try_this_in_the_browser;
