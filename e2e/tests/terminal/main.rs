//! The terminal relay end to end: browser-side WebSocket → server → `pods/attach` → the debug
//! container's real shell on the test control plane, with the recording checked afterwards.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use breakglass_e2e::server::{config_toml, ApiClient, ServerProcess};
use breakglass_e2e::{wait_for_pod_running, ControlPlane, Identity};
use breakglass_shared::terminal::{close, Frame};
use futures::{SinkExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::Api;
use serde_json::json;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

const T: Duration = Duration::from_secs(60);

/// In a test's `[recording]` section: record to `<data>/recordings` whatever the run's store.
const LOCAL_STORE: &str = "{local_store}\n";

async fn setup() -> (ServerProcess, ApiClient, String, tempfile::TempDir, String) {
    let (dir, cfg, ns_name) = prepare(&format!("[recording]\n{LOCAL_STORE}\n")).await;
    let server = ServerProcess::start(&cfg, &dir.path().join("data"), &[])
        .await
        .unwrap();
    let (alice, id) = request(&server, &ns_name).await;
    alice
        .wait_state(&id, &["Active"], T)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.log_text()));
    (server, alice, id, dir, ns_name)
}

/// A config with one Ground environment on the shared control plane (plus `extra` TOML), its
/// guardrails installed, and a namespace with a running pod `shell`.
async fn prepare(extra: &str) -> (tempfile::TempDir, std::path::PathBuf, String) {
    let cp = ControlPlane::shared().await.unwrap();
    let admin = cp.client(Identity::Admin).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kc = cp.kubeconfig_path(Identity::BreakglassSa).unwrap();
    let cfg = dir.path().join("server.toml");
    // Tests that open the stored files themselves pin the local store (LOCAL_STORE), also
    // when the run records to S3 (BREAKGLASS_E2E_STORE=s3).
    let local = format!(
        "local_dir = \"{}\"\n",
        dir.path().join("data/recordings").display()
    );
    let extra = extra.replace(LOCAL_STORE, &local);
    std::fs::write(&cfg, config_toml(&[("ground", "ground", kc)], &extra)).unwrap();
    // Guardrails for this cluster, rendered by the server itself. The cluster is shared by
    // every test of this file, running at once, so they are rendered from the common
    // configuration: a test's own `extra` (shorter durations, say) must not narrow the rails
    // for the others.
    let rails = dir.path().join("guardrails.toml");
    std::fs::write(&rails, config_toml(&[("ground", "ground", kc)], "")).unwrap();
    let identity = cp.username(Identity::BreakglassSa).unwrap();
    breakglass_e2e::server::install_guardrails(cp, &rails, "ground", identity)
        .await
        .unwrap();

    let ns = cp.namespace("bg-term").await.unwrap();
    let ns_name = ns.name().to_string();
    std::mem::forget(ns);
    let pods: Api<Pod> = Api::namespaced(admin, &ns_name);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "shell"},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    wait_for_pod_running(&pods, "shell", Duration::from_secs(30))
        .await
        .unwrap();
    (dir, cfg, ns_name)
}

/// Alice asks for a live session on `shell` (Ground: no approval).
async fn request(server: &ServerProcess, ns: &str) -> (ApiClient, String) {
    let alice = server.login("alice").await.unwrap();
    let id = alice
        .create(
            json!({"environment": "ground", "namespace": ns, "pod": "shell", "mode": "live",
                       "reason": "checking the relay end to end", "duration_minutes": 30}),
        )
        .await
        .unwrap();
    (alice, id)
}

/// The terminal upgrade request of `id` as `who`, sent from `origin` (none when `None`).
fn upgrade_request(
    server: &ServerProcess,
    who: &ApiClient,
    id: &str,
    origin: Option<&str>,
) -> tokio_tungstenite::tungstenite::handshake::client::Request {
    socket_request(server, who, id, "terminal", origin)
}

/// The upgrade request of a session's `socket` (`terminal` or `watch`).
fn socket_request(
    server: &ServerProcess,
    who: &ApiClient,
    id: &str,
    socket: &str,
    origin: Option<&str>,
) -> tokio_tungstenite::tungstenite::handshake::client::Request {
    let url = format!(
        "{}/api/breakglass/sessions/{id}/{socket}",
        server.url.replace("http://", "ws://")
    );
    let mut req = url.into_client_request().unwrap();
    req.headers_mut()
        .insert("cookie", who.cookie_header().parse().unwrap());
    if let Some(o) = origin {
        req.headers_mut().insert("origin", o.parse().unwrap());
    }
    req
}

async fn connect(server: &ServerProcess, who: &ApiClient, id: &str) -> Ws {
    let req = upgrade_request(server, who, id, Some(&server.url));
    let (ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    ws
}

/// Tries a terminal upgrade as `who` with `origin` (none when `None`): `None` when the
/// socket opened, else the HTTP status that refused it.
async fn handshake(
    server: &ServerProcess,
    who: &ApiClient,
    id: &str,
    origin: Option<&str>,
) -> Option<u16> {
    match tokio_tungstenite::connect_async(upgrade_request(server, who, id, origin)).await {
        Ok(_) => None,
        Err(tokio_tungstenite::tungstenite::Error::Http(res)) => Some(res.status().as_u16()),
        Err(e) => panic!("the upgrade failed without an HTTP answer: {e}"),
    }
}

/// Reads data frames until `needle` shows up; returns everything read, or the close frame.
async fn read_until(ws: &mut Ws, needle: &str) -> (String, Option<(u16, String)>) {
    let mut seen = String::new();
    let r = tokio::time::timeout(Duration::from_secs(15), async {
        while let Some(msg) = ws.next().await {
            match msg.unwrap() {
                Message::Binary(b) => {
                    if let Ok(Frame::Data(d)) = Frame::decode(&b) {
                        seen.push_str(&String::from_utf8_lossy(d));
                        if seen.contains(needle) {
                            return None;
                        }
                    }
                }
                Message::Close(Some(c)) => return Some((u16::from(c.code), c.reason.to_string())),
                Message::Close(None) => return Some((1005, String::new())),
                _ => {}
            }
        }
        Some((1006, String::new()))
    })
    .await;
    (seen, r.unwrap_or(Some((0, "timed out".into()))))
}

async fn closed_with(ws: &mut Ws) -> (u16, String) {
    let (_, c) = read_until(ws, "\u{0}never\u{0}").await;
    c.unwrap()
}

/// Ends the session as `who` and waits until it is `Ended`; the session document.
async fn end_and_wait(who: &ApiClient, id: &str) -> serde_json::Value {
    let (st, body) = who
        .post(&format!("/sessions/{id}/end"), json!({}))
        .await
        .unwrap();
    assert_eq!(st, 200, "{body}");
    who.wait_state(id, &["Ended"], T).await.unwrap()
}

/// The session's recording as served (the latest version while live, the row's once
/// finished), and its events; it must parse as one asciicast.
async fn recording_of(
    who: &ApiClient,
    id: &str,
) -> (String, Vec<breakglass_shared::recording::Event>) {
    let cast = who
        .get_text(&format!("/sessions/{id}/recording"))
        .await
        .unwrap();
    let (_, events) = breakglass_shared::recording::parse(&cast).unwrap();
    (cast, events)
}

/// The server's verification of the recording, asserted to pass.
async fn verified(who: &ApiClient, id: &str) -> serde_json::Value {
    let (st, v) = who
        .get(&format!("/sessions/{id}/recording/verify"))
        .await
        .unwrap();
    assert_eq!(st, 200);
    assert_eq!(v["ok"], true, "{v}");
    v
}

/// Types `keys` and waits until `needle` comes back; fails with the server's log otherwise.
async fn type_and_see(server: &ServerProcess, ws: &mut Ws, keys: &[u8], needle: &str) {
    ws.send(Message::Binary(Frame::Data(keys).encode().into()))
        .await
        .unwrap();
    let (seen, closed) = read_until(ws, needle).await;
    assert!(
        closed.is_none(),
        "{closed:?} {seen:?}\n{}",
        server.log_text()
    );
}

/// What the segments of a local-store recording on disk hold: the latest version of each
/// segment, in order, concatenated (the live recording before its final cast is stored).
fn stored_segments(data: &std::path::Path, id: &str) -> String {
    let dir = data.join("recordings").join(format!("sessions/{id}"));
    let mut segments: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    segments.sort();
    let mut cast = String::new();
    for seg in segments {
        let latest = std::fs::read_dir(&seg)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
            .max()
            .unwrap();
        cast.push_str(&std::fs::read_to_string(seg.join(latest.to_string())).unwrap());
    }
    cast
}

fn markers_of(events: &[breakglass_shared::recording::Event]) -> Vec<&str> {
    events
        .iter()
        .filter(|e| e.code == breakglass_shared::recording::Code::Marker)
        .map(|e| e.data.as_str())
        .collect()
}

fn output_of(events: &[breakglass_shared::recording::Event]) -> String {
    events
        .iter()
        .filter(|e| e.code == breakglass_shared::recording::Code::Output)
        .map(|e| e.data.as_str())
        .collect()
}

fn verify_cli(
    data: &std::path::Path,
    cfg: &std::path::Path,
    id: &str,
    env: &[(&str, &str)],
) -> (bool, String) {
    let mut cmd = breakglass_e2e::server::cli_command(data).unwrap();
    let out = cmd
        .args(["verify-recording", id, "--data-dir"])
        .arg(data)
        .arg("--config")
        .arg(cfg)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

mod commands;
mod endings;
mod extensions;
mod leftovers;
mod relay;
mod replicas;
mod restarts;
mod revocation;
#[path = "../rig/mod.rs"]
mod rig;
mod search;
mod staying;
mod store_failures;
mod watching;
mod watching_replicas;
use replicas::open_when_free;
use store_failures::{assert_no_grants, wait_stored};
