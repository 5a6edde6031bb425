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

async fn setup() -> (ServerProcess, ApiClient, String, tempfile::TempDir, String) {
    let cp = ControlPlane::shared().await.unwrap();
    let admin = cp.client(Identity::Admin).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kc = cp.kubeconfig_path(Identity::BreakglassSa).unwrap();
    let cfg = dir.path().join("server.toml");
    std::fs::write(&cfg, config_toml(&[("ground", "ground", kc)], "")).unwrap();
    // Guardrails for this cluster, rendered by the server itself.
    let identity = cp.username(Identity::BreakglassSa).unwrap();
    breakglass_e2e::server::install_guardrails(cp, &cfg, "ground", identity)
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

    let server = ServerProcess::start(&cfg, &dir.path().join("data"), &[])
        .await
        .unwrap();
    let alice = server.login("alice").await.unwrap();
    let id = alice
        .create(
            json!({"environment": "ground", "namespace": ns_name, "pod": "shell", "mode": "live",
                       "reason": "checking the relay end to end", "duration_minutes": 30}),
        )
        .await
        .unwrap();
    alice
        .wait_state(&id, &["Active"], T)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.log_text()));
    (server, alice, id, dir, ns_name)
}

async fn connect(server: &ServerProcess, who: &ApiClient, id: &str) -> Ws {
    let url = format!(
        "{}/api/breakglass/sessions/{id}/terminal",
        server.url.replace("http://", "ws://")
    );
    let mut req = url.into_client_request().unwrap();
    req.headers_mut()
        .insert("cookie", who.cookie_header().parse().unwrap());
    req.headers_mut()
        .insert("origin", server.url.parse().unwrap());
    let (ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    ws
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

#[tokio::test]
async fn keystrokes_in_output_out_recorded_and_closed_at_end() {
    let (server, alice, id, _dir, _ns) = setup().await;
    let mut ws = connect(&server, &alice, &id).await;
    ws.send(Message::Binary(
        Frame::Resize {
            cols: 100,
            rows: 30,
        }
        .encode()
        .into(),
    ))
    .await
    .unwrap();
    ws.send(Message::Binary(
        Frame::Data(b"echo hel''lo-$((6*7))\r").encode().into(),
    ))
    .await
    .unwrap();
    let (seen, closed) = read_until(&mut ws, "hello-42").await;
    assert!(
        closed.is_none(),
        "closed early: {closed:?}; saw {seen:?}\n{}",
        server.log_text()
    );
    ws.send(Message::Binary(Frame::Data(b"stty size\r").encode().into()))
        .await
        .unwrap();
    let (seen, _) = read_until(&mut ws, "30 100").await;
    assert!(seen.contains("30 100"), "resize reached the PTY: {seen:?}");

    let (st, _) = alice
        .post(&format!("/sessions/{id}/end"), json!({}))
        .await
        .unwrap();
    assert_eq!(st, 200);
    let (code, reason) = closed_with(&mut ws).await;
    assert_eq!(code, close::SESSION_ENDED, "{reason}");
    let d = alice.wait_state(&id, &["Ended"], T).await.unwrap();
    let rec = &d["session"]["recording"];
    assert!(rec["sha256"].as_str().unwrap().len() == 64, "{rec}");

    // The recording has the output, the resize and the markers; its hash is the row's.
    let (st, _) = alice
        .get(&format!("/sessions/{id}/recording"))
        .await
        .unwrap();
    assert_eq!(st, 200);
    let cast = alice
        .get_text(&format!("/sessions/{id}/recording"))
        .await
        .unwrap();
    let (_, events) = breakglass_shared::recording::parse(&cast).unwrap();
    let output: String = events
        .iter()
        .filter(|e| e.code == breakglass_shared::recording::Code::Output)
        .map(|e| e.data.as_str())
        .collect();
    assert!(output.contains("hello-42"), "{output:?}");
    assert!(events
        .iter()
        .any(|e| e.code == breakglass_shared::recording::Code::Resize && e.data == "100x30"));
    let markers: Vec<&str> = events
        .iter()
        .filter(|e| e.code == breakglass_shared::recording::Code::Marker)
        .map(|e| e.data.as_str())
        .collect();
    assert!(
        markers.iter().any(|m| m.starts_with("approved")),
        "{markers:?}"
    );
    assert!(markers.contains(&"active"), "{markers:?}");
    assert!(
        markers.iter().any(|m| m.starts_with("ended")),
        "{markers:?}"
    );
    let (st, v) = alice
        .get(&format!("/sessions/{id}/recording/verify"))
        .await
        .unwrap();
    assert_eq!(st, 200);
    assert_eq!(v["ok"], true, "{v}");
    // The CLI verifies it from the session row, and names the check a tampered copy fails.
    let bin = breakglass_e2e::server::server_binary().unwrap();
    let data = _dir.path().join("data");
    let verify = || {
        std::process::Command::new(&bin)
            .args(["verify-recording", id.as_str(), "--data-dir"])
            .arg(&data)
            .env_remove("TOWER_BREAKGLASS_MINIO_ENDPOINT")
            .output()
            .unwrap()
    };
    let ok = verify();
    assert!(
        ok.status.success(),
        "{}{}",
        String::from_utf8_lossy(&ok.stdout),
        String::from_utf8_lossy(&ok.stderr)
    );
    let version = rec["version"].as_str().unwrap();
    let file = data
        .join("recordings")
        .join(format!("sessions/{id}.cast.v"))
        .join(version);
    let mut perms = std::fs::metadata(&file).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&file, perms).unwrap();
    let tampered = std::fs::read_to_string(&file)
        .unwrap()
        .replace("hello-42", "hello-43");
    std::fs::write(&file, tampered).unwrap();
    let bad = verify();
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stdout).contains("hash on record"),
        "{}",
        String::from_utf8_lossy(&bad.stdout)
    );
    // Approvers of the environment may read it too.
    let bob = server.login("bob").await.unwrap();
    assert_eq!(
        bob.get(&format!("/sessions/{id}/recording"))
            .await
            .unwrap()
            .0,
        200
    );
}

#[tokio::test]
async fn bad_frames_strangers_takeover_and_ended_sessions_are_closed_with_a_code() {
    let (server, alice, id, _dir, _ns) = setup().await;
    // Someone other than the requester.
    let bob = server.login("bob").await.unwrap();
    let mut ws = connect(&server, &bob, &id).await;
    assert_eq!(closed_with(&mut ws).await.0, close::NOT_REQUESTER);
    // Text where binary is expected.
    let mut ws = connect(&server, &alice, &id).await;
    ws.send(Message::Text("echo pwned\r".into())).await.unwrap();
    assert_eq!(closed_with(&mut ws).await.0, close::BAD_FRAME);
    // A malformed resize.
    let mut ws = connect(&server, &alice, &id).await;
    ws.send(Message::Binary(vec![1u8, 0, 1].into()))
        .await
        .unwrap();
    assert_eq!(closed_with(&mut ws).await.0, close::BAD_FRAME);
    // A second connection takes over the first.
    let mut first = connect(&server, &alice, &id).await;
    first
        .send(Message::Binary(
            Frame::Data(b"echo first-$((2+3))\r").encode().into(),
        ))
        .await
        .unwrap();
    assert!(read_until(&mut first, "first-5").await.1.is_none());
    let mut second = connect(&server, &alice, &id).await;
    assert_eq!(closed_with(&mut first).await.0, close::TAKEN_OVER);
    second
        .send(Message::Binary(
            Frame::Data(b"echo still-$((1+1))\r").encode().into(),
        ))
        .await
        .unwrap();
    assert!(read_until(&mut second, "still-2").await.1.is_none());
    drop(second);
    // After the end, a socket is refused with NOT_ACTIVE.
    alice
        .post(&format!("/sessions/{id}/end"), json!({}))
        .await
        .unwrap();
    alice.wait_state(&id, &["Ended"], T).await.unwrap();
    let mut ws = connect(&server, &alice, &id).await;
    assert_eq!(closed_with(&mut ws).await.0, close::NOT_ACTIVE);
    // Nothing but markers came from the refused frames: "pwned" never reached the pod.
    let cast = alice
        .get_text(&format!("/sessions/{id}/recording"))
        .await
        .unwrap();
    assert!(
        !cast.contains("pwned"),
        "refused input must not reach the pod or the recording"
    );
    assert!(
        cast.contains("refused: text frame"),
        "a marker records the refusal"
    );
}
