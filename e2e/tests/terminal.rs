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
    let url = format!(
        "{}/api/breakglass/sessions/{id}/terminal",
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
    let (_, events) = recording_of(&alice, &id).await;
    let output = output_of(&events);
    assert!(output.contains("hello-42"), "{output:?}");
    assert!(events
        .iter()
        .any(|e| e.code == breakglass_shared::recording::Code::Resize && e.data == "100x30"));
    let markers = markers_of(&events);
    assert!(
        markers.iter().any(|m| m.starts_with("approved")),
        "{markers:?}"
    );
    assert!(markers.contains(&"active"), "{markers:?}");
    assert!(
        markers.iter().any(|m| m.starts_with("ended")),
        "{markers:?}"
    );
    verified(&alice, &id).await;
    // The CLI verifies it from the session row, and names the check a tampered copy fails.
    let data = _dir.path().join("data");
    let verify = || {
        let mut cmd = breakglass_e2e::server::cli_command(&data).unwrap();
        cmd.args(["verify-recording", id.as_str(), "--data-dir"])
            .arg(&data)
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
    // Someone else's session and an unknown one get the same answer: no id is confirmed.
    let mut ws = connect(&server, &bob, &id).await;
    let theirs = closed_with(&mut ws).await;
    let mut ws = connect(&server, &bob, "0190f3a4-0000-7000-8000-000000000000").await;
    let unknown = closed_with(&mut ws).await;
    assert_eq!(theirs, unknown);
    assert_eq!(theirs.0, close::NOT_FOUND);
    // The requester's own cookie, sent by a page on another origin (a browser sends cookies
    // with cross-site WebSocket upgrades), or with no Origin at all: refused before upgrade.
    for origin in [Some("https://evil.example"), Some("null"), None] {
        let refused = handshake(&server, &alice, &id, origin).await;
        assert_eq!(refused, Some(403), "Origin {origin:?}");
    }
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
    // A resize beyond any screen never reaches the pod or the recording.
    let mut ws = connect(&server, &alice, &id).await;
    ws.send(Message::Binary(
        Frame::Resize {
            cols: u16::MAX,
            rows: u16::MAX,
        }
        .encode()
        .into(),
    ))
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
        !cast.contains("65535"),
        "the oversized resize is not recorded"
    );
    assert!(
        cast.contains("refused: text frame"),
        "a marker records the refusal"
    );
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

/// SIGKILL mid-session keeps everything up to the last flush; after a restart the terminal
/// reconnects to the same session and the same recording continues (one header, a `resumed`
/// marker, one clock); at End the final hash is anchored in the transparency log, and a
/// recording rewritten together with its database row still fails verification at the log.
#[tokio::test]
async fn killed_server_keeps_the_last_flush_resumes_the_recording_and_anchors_it() {
    let rekor = std::env::var("BREAKGLASS_TEST_REKOR_URL").expect(
        "BREAKGLASS_TEST_REKOR_URL is not set: start the transparency log with \
         `scripts/rekor.sh start DIR PORT` (scripts/test.sh does)",
    );
    let extra = format!(
        "[recording]\nflush_interval_seconds = 1\n{LOCAL_STORE}\n[recording.transparency_log]\nurl = \"{rekor}\"\n\n"
    );
    let (dir, cfg, ns) = prepare(&extra).await;
    let data = dir.path().join("data");
    let mut server = ServerProcess::start(&cfg, &data, &[]).await.unwrap();
    // SQLite serves one replica: a second server on the same file refuses to start, saying
    // why and what to use instead. (On PostgreSQL, replicas are the point.)
    if breakglass_e2e::server::database_url_of(&data).starts_with("sqlite") {
        let second = ServerProcess::start(&cfg, &data, &[]).await;
        assert!(
            second.is_err(),
            "a second server started on one SQLite file"
        );
        let log = server.log_text();
        assert!(log.contains("SQLite serves one replica only"), "{log}");
        assert!(log.contains("PostgreSQL"), "{log}");
    }
    let (alice, id) = request(&server, &ns).await;
    alice
        .wait_state(&id, &["Active"], T)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.log_text()));
    let mut ws = connect(&server, &alice, &id).await;
    type_and_see(&server, &mut ws, b"echo before-$((2*21))\r", "before-42").await;
    // Wait for a flush that holds the output, then kill the server without warning.
    wait_stored(&alice, &id, "before-42").await;
    server.kill().await.unwrap();
    drop(ws);
    let latest = stored_segments(&data, &id);
    let (_, events) = breakglass_shared::recording::parse(&latest).unwrap();
    assert!(output_of(&events).contains("before-42"), "{latest}");

    // Restart on the same data (the killed server's lock is gone with its process): the
    // session is still Active and its terminal comes back.
    let server = ServerProcess::start(&cfg, &data, &[]).await.unwrap();
    let alice = server.login("alice").await.unwrap();
    let d = alice.session(&id).await.unwrap();
    assert_eq!(d["session"]["state"], "Active", "{d}");
    // The killed process's lease on the recording runs out first (one writer per recording).
    let mut ws = open_when_free(&server, &alice, &id).await;
    type_and_see(&server, &mut ws, b"echo after-$((3*3))\r", "after-9").await;
    let d = end_and_wait(&alice, &id).await;

    // One cast: the old part, the resume marker, the new part, the end; time never goes back.
    let cast = alice
        .get_text(&format!("/sessions/{id}/recording"))
        .await
        .unwrap();
    assert!(
        cast.starts_with(&latest),
        "the final cast does not continue the killed server's last version"
    );
    let (_, events) = breakglass_shared::recording::parse(&cast).unwrap();
    let out = output_of(&events);
    assert!(
        out.contains("before-42") && out.contains("after-9"),
        "{out:?}"
    );
    let markers = markers_of(&events);
    assert!(
        markers.contains(&"resumed: server restarted"),
        "{markers:?}"
    );
    assert!(markers.last().unwrap().starts_with("ended"), "{markers:?}");
    assert!(
        events.windows(2).all(|w| w[0].time <= w[1].time),
        "clock went back"
    );

    // Anchored: the row names the log entry and every check passes, the log's included.
    let rekor_entry = &d["session"]["rekor"];
    assert!(
        rekor_entry["uuid"].as_str().is_some_and(|u| u.len() >= 64),
        "{d}"
    );
    let v = verified(&alice, &id).await;
    let log_check = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "transparency log")
        .unwrap();
    assert_eq!(log_check["outcome"], "pass", "{v}");
    drop(server);
    let (ok, text) = verify_cli(&data, &cfg, &id, &[]);
    assert!(ok, "{text}");
    assert!(text.contains("PASS transparency log"), "{text}");

    // Someone with write access to both the files and the database rewrites the recording
    // and its row consistently: every local check passes, the log still says no.
    let rec = &d["session"]["recording"];
    let file = data
        .join("recordings")
        .join(format!("sessions/{id}.cast.v"))
        .join(rec["version"].as_str().unwrap());
    let mut perms = std::fs::metadata(&file).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&file, perms).unwrap();
    let forged = cast.replace("after-9", "after-8");
    std::fs::write(&file, &forged).unwrap();
    let sha = breakglass_server::recording::sha256_hex(forged.as_bytes());
    let url = breakglass_e2e::server::database_url_of(&data);
    let uuid = uuid::Uuid::parse_str(&id).unwrap();
    // One statement for both engines (SQLite numbers `$N` parameters in order too).
    macro_rules! forge {
        ($pool:expr) => {{
            let db = $pool.await.unwrap();
            let n = sqlx::query(
                "UPDATE breakglass_sessions SET recording_sha256 = $1, recording_bytes = $2 WHERE id = $3",
            )
            .bind(&sha)
            .bind(forged.len() as i64)
            .bind(uuid)
            .execute(&db)
            .await
            .unwrap()
            .rows_affected();
            db.close().await;
            n
        }};
    }
    let changed = if url.starts_with("postgres") {
        forge!(sqlx::PgPool::connect(&url))
    } else {
        forge!(sqlx::SqlitePool::connect(&url))
    };
    assert_eq!(changed, 1);
    let (ok, text) = verify_cli(&data, &cfg, &id, &[]);
    assert!(!ok, "{text}");
    assert!(text.contains("PASS hash on record"), "{text}");
    assert!(text.contains("FAIL transparency log"), "{text}");
    assert!(text.contains(&format!("the row says {sha}")), "{text}");
}

/// "No recording, no session": with the recording store unreachable, activation fails with a
/// message naming the store, and nothing is created in the cluster.
#[tokio::test]
async fn unreachable_recording_store_fails_activation_with_a_clear_message() {
    let (dir, cfg, ns) = prepare("").await;
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{closed_port}");
    let server = ServerProcess::start(
        &cfg,
        &dir.path().join("data"),
        &[
            ("TOWER_BREAKGLASS_MINIO_ENDPOINT", endpoint.as_str()),
            ("TOWER_BREAKGLASS_MINIO_ACCESS_KEY", "nobody"),
            ("TOWER_BREAKGLASS_MINIO_SECRET_KEY", "nothing-at-all"),
        ],
    )
    .await
    .unwrap();
    let (alice, id) = request(&server, &ns).await;
    let d = alice
        .wait_state(&id, &["Failed"], T)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.log_text()));
    let failure = d["session"]["failure"].as_str().unwrap_or_default();
    assert!(
        failure.contains("recording store is unavailable, so no session can start"),
        "{failure}"
    );
    assert!(d["session"]["grant_name"].is_null(), "{d}");
    assert!(d["session"]["debug_container"].is_null(), "{d}");
    let cp = ControlPlane::shared().await.unwrap();
    let admin = cp.client(Identity::Admin).await.unwrap();
    let pod = Api::<Pod>::namespaced(admin.clone(), &ns)
        .get("shell")
        .await
        .unwrap();
    let ephemeral = pod
        .spec
        .and_then(|s| s.ephemeral_containers)
        .unwrap_or_default();
    assert!(ephemeral.is_empty(), "{ephemeral:?}");
    assert_no_grants(admin, &ns).await;
}

/// Opens the terminal on `server`: the socket once it says "attached", or the close frame.
async fn open_terminal(
    server: &ServerProcess,
    who: &ApiClient,
    id: &str,
) -> Result<Ws, (u16, String)> {
    let mut ws = connect(server, who, id).await;
    // A replica taking the recording over from a dead one waits for its lease (10 s) first.
    let first = tokio::time::timeout(Duration::from_secs(30), ws.next())
        .await
        .map_err(|_| (0, "no answer in 30 s".to_string()))?;
    match first {
        Some(Ok(Message::Binary(b))) => match Frame::decode(&b) {
            Ok(Frame::Status(st)) if st.message == "attached" => Ok(ws),
            other => Err((0, format!("unexpected first frame {other:?}"))),
        },
        Some(Ok(Message::Close(Some(c)))) => Err((u16::from(c.code), c.reason.to_string())),
        other => Err((0, format!("unexpected {other:?}"))),
    }
}

/// Opens the terminal, retrying while another (dead) process's lease on the recording has not
/// run out yet; every refusal must say so.
async fn open_when_free(server: &ServerProcess, who: &ApiClient, id: &str) -> Ws {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    loop {
        match open_terminal(server, who, id).await {
            Ok(ws) => return ws,
            Err((code, reason)) => {
                assert_eq!(code, close::RELAY_ERROR, "{reason}");
                assert!(reason.contains("another server replica"), "{reason}");
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the recording was never taken over\n{}",
                    server.log_text()
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Two replicas with their own URLs and data directories, sharing what replicas share: one
/// PostgreSQL database and one recording store (a directory here, a bucket in production).
/// What two replicas share besides the cluster: the database and the recording store, as the
/// environment a replica is started with; the bucket (under S3) runs while this is kept.
struct SharedStore {
    env: Vec<(String, String)>,
    _bucket: Option<std::sync::Arc<breakglass_e2e::s3::Bucket>>,
}

impl SharedStore {
    fn env(&self) -> Vec<(&str, &str)> {
        self.env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }
}

async fn two_replicas(
    ns_extra: &str,
) -> (
    ServerProcess,
    ServerProcess,
    tempfile::TempDir,
    std::path::PathBuf,
    String,
    SharedStore,
) {
    let db = breakglass_e2e::postgres::fresh_database().await.unwrap();
    let shared = tempfile::tempdir().unwrap();
    // The replicas share one store: a bucket when the run records to S3, else a directory.
    let bucket = breakglass_e2e::s3::wanted()
        .unwrap()
        .then(|| breakglass_e2e::s3::bucket_for(shared.path()).unwrap());
    let store = match &bucket {
        Some(_) => String::new(),
        None => format!(
            "local_dir = \"{}\"\n",
            shared.path().join("recordings").display()
        ),
    };
    let extra = format!("[recording]\nflush_interval_seconds = 1\n{store}\n{ns_extra}");
    let (dir, cfg, ns) = prepare(&extra).await;
    let mut env = vec![("BREAKGLASS_DATABASE_URL".to_string(), db)];
    if let Some(b) = &bucket {
        env.extend(b.env.iter().cloned());
    }
    let shared_store = SharedStore {
        env,
        _bucket: bucket,
    };
    let env = shared_store.env();
    let a = ServerProcess::start(&cfg, &dir.path().join("a"), &env)
        .await
        .unwrap();
    let b = ServerProcess::start(&cfg, &dir.path().join("b"), &env)
        .await
        .unwrap();
    drop(env);
    std::mem::forget(shared);
    (a, b, dir, cfg, ns, shared_store)
}

/// How often `needle` occurs in `haystack`.
fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// Two replicas on PostgreSQL behind nothing but two URLs. The terminal works through either:
/// the writer of the recording follows the terminal (the replica holding it hands it over,
/// even with its own terminal open), and when the replica serving the terminal is killed the
/// other serves it once the dead one's lease ran out. Through all of it the recording is one
/// cast: each command's output is in it exactly once, every handover and resume is marked, it
/// ends once and verifies, on the server and with `verify-recording`.
#[tokio::test]
async fn two_replicas_serve_one_terminal_and_one_recording() {
    let (mut a, mut b, dir, cfg, ns, shared) = two_replicas("").await;
    let (alice_a, id) = request(&a, &ns).await;
    alice_a
        .wait_state(&id, &["Active"], T)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", a.log_text()));

    // Activated (and recorded) on A; the terminal opened on B works.
    let alice_b = b.login("alice").await.unwrap();
    let mut ws_b = open_terminal(&b, &alice_b, &id)
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}\n{}", a.log_text(), b.log_text()));
    type_and_see(&b, &mut ws_b, b"echo one-$((5*5))\r", "one-25").await;

    // Back to A while B's terminal is open: B closes it, and what B recorded stays.
    let mut ws_a = open_terminal(&a, &alice_a, &id)
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}\n{}", a.log_text(), b.log_text()));
    let (code, reason) = closed_with(&mut ws_b).await;
    assert_eq!(code, close::TAKEN_OVER, "{reason}");
    assert!(reason.contains("another server replica"), "{reason}");
    type_and_see(&a, &mut ws_a, b"echo two-$((6*6))\r", "two-36").await;

    // A, writing and serving the terminal, is killed: B serves it and continues the cast.
    wait_stored(&alice_b, &id, "two-36").await;
    a.kill().await.unwrap();
    drop(ws_a);
    let mut ws_b = open_terminal(&b, &alice_b, &id)
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", b.log_text()));
    type_and_see(&b, &mut ws_b, b"echo three-$((7*7))\r", "three-49").await;

    // A comes back; now B is killed, and A serves the terminal.
    let env = shared.env();
    let a = ServerProcess::start(&cfg, &dir.path().join("a"), &env)
        .await
        .unwrap();
    let alice_a = a.login("alice").await.unwrap();
    wait_stored(&alice_a, &id, "three-49").await;
    b.kill().await.unwrap();
    drop(ws_b);
    let mut ws_a = open_terminal(&a, &alice_a, &id)
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", a.log_text()));
    type_and_see(&a, &mut ws_a, b"echo four-$((8*8))\r", "four-64").await;
    end_and_wait(&alice_a, &id).await;

    let (cast, events) = recording_of(&alice_a, &id).await;
    assert_eq!(count(&cast, "\"version\":2"), 1, "one header:\n{cast}");
    let out = output_of(&events);
    for needle in ["one-25", "two-36", "three-49", "four-64"] {
        assert_eq!(
            count(&out, needle),
            1,
            "{needle} once in the cast:\n{out:?}"
        );
    }
    let markers = markers_of(&events);
    let n = |prefix: &str| markers.iter().filter(|m| m.starts_with(prefix)).count();
    assert_eq!(n("handed over: "), 2, "A→B, then B→A: {markers:?}");
    assert_eq!(
        n("resumed: handed over by another server replica"),
        2,
        "{markers:?}"
    );
    assert_eq!(
        n("resumed: server restarted"),
        2,
        "one per kill: {markers:?}"
    );
    assert_eq!(n("ended"), 1, "{markers:?}");
    assert!(markers.last().unwrap().starts_with("ended"), "{markers:?}");
    assert!(
        events.windows(2).all(|w| w[0].time <= w[1].time),
        "clock went back"
    );
    verified(&alice_a, &id).await;
    drop(a);
    let (ok, text) = verify_cli(&dir.path().join("a"), &cfg, &id, &env);
    assert!(ok, "{text}");
}

/// Ending a session through the replica that does not hold its terminal closes the terminal
/// on the other one at once (the change reaches it through the database) and the recording is
/// finished once.
#[tokio::test]
async fn ending_through_the_other_replica_closes_the_terminal_and_finishes_once() {
    let (a, b, _dir, _cfg, ns, _shared) = two_replicas("").await;
    let (alice, id) = request(&a, &ns).await;
    alice.wait_state(&id, &["Active"], T).await.unwrap();
    let mut ws = open_terminal(&a, &alice, &id).await.unwrap();
    type_and_see(&a, &mut ws, b"echo one-$((5*5))\r", "one-25").await;
    let via_b = b.login("alice").await.unwrap();
    let (st, body) = via_b
        .post(&format!("/sessions/{id}/end"), json!({}))
        .await
        .unwrap();
    assert_eq!(st, 200, "{body}");
    let (code, reason) = closed_with(&mut ws).await;
    assert_eq!(code, close::SESSION_ENDED, "{reason}");
    via_b.wait_state(&id, &["Ended"], T).await.unwrap();
    let (_, events) = recording_of(&via_b, &id).await;
    assert_eq!(count(&output_of(&events), "one-25"), 1);
    let ended = markers_of(&events)
        .iter()
        .filter(|m| m.starts_with("ended"))
        .count();
    assert_eq!(ended, 1, "{:?}", markers_of(&events));
    verified(&via_b, &id).await;
}

/// Waits until a stored version of the live recording holds `needle`.
async fn wait_stored(who: &ApiClient, id: &str, needle: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let cast = who
            .get_text(&format!("/sessions/{id}/recording"))
            .await
            .unwrap();
        if cast.contains(needle) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no stored version holds {needle:?} after 20 s:\n{cast}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The store fails mid-session: output is spooled and retried; past the spool limit the session
/// ends with `RecordingFailed` and its terminal closes, and every version stored before the
/// failure is kept and still verifies.
#[tokio::test]
async fn spool_full_ends_the_session_and_keeps_what_was_stored() {
    let (dir, cfg, ns) = prepare(
        &format!("[recording]\nflush_interval_seconds = 1\nspool_limit_bytes = 65536\nretry_initial_ms = 100\nretry_max_seconds = 1\nfinish_timeout_seconds = 2\n{LOCAL_STORE}\n"),
    )
    .await;
    let data = dir.path().join("data");
    let server = ServerProcess::start(&cfg, &data, &[]).await.unwrap();
    let (alice, id) = request(&server, &ns).await;
    alice.wait_state(&id, &["Active"], T).await.unwrap();
    let mut ws = connect(&server, &alice, &id).await;
    type_and_see(&server, &mut ws, b"echo kept-$((4*4))\r", "kept-16").await;
    wait_stored(&alice, &id, "kept-16").await;

    // The store breaks: the directory of the recording's segments becomes a plain file.
    let vdir = data.join("recordings").join(format!("sessions/{id}"));
    let aside = vdir.with_extension("aside");
    std::fs::rename(&vdir, &aside).unwrap();
    std::fs::write(&vdir, b"blocked").unwrap();
    ws.send(Message::Binary(
        Frame::Data(b"head -c 200000 /dev/zero | tr '\\0' x; echo\r")
            .encode()
            .into(),
    ))
    .await
    .unwrap();
    let (code, reason) = closed_with(&mut ws).await;
    assert_eq!(code, close::SESSION_ENDED, "{reason}");
    assert!(reason.contains("RecordingFailed"), "{reason}");
    assert!(server.log_text().contains("spool limit"));
    let d = alice
        .wait_state(&id, &["Ended"], T)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.log_text()));
    assert!(
        d["session"]["end_reason"]
            .to_string()
            .contains("RecordingFailed"),
        "{d}"
    );

    // The store comes back: what was stored before the failure is all there. The end could
    // not store the final cast, so the sweep builds it from the segments; then it verifies.
    std::fs::remove_file(&vdir).unwrap();
    std::fs::rename(&aside, &vdir).unwrap();
    let (cast, events) = recording_of(&alice, &id).await;
    assert!(output_of(&events).contains("kept-16"), "{cast}");
    let built = data
        .join("recordings")
        .join(format!("sessions/{id}.cast.v/1"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !built.exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the sweep did not build the final cast:\n{}",
            server.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(std::fs::read_to_string(&built).unwrap(), cast);
    verified(&alice, &id).await;
}

/// No grant RoleBinding of any session is left in `ns`.
async fn assert_no_grants(admin: kube::Client, ns: &str) {
    let bindings = Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(admin, ns)
        .list(&Default::default())
        .await
        .unwrap();
    let grants: Vec<_> = bindings
        .items
        .iter()
        .filter_map(|b| b.metadata.name.as_deref())
        .filter(|n| n.starts_with("breakglass"))
        .collect();
    assert!(grants.is_empty(), "grants left: {grants:?}");
}

/// A transparency log started by `scripts/rekor.sh` for one test; destroyed (servers stopped,
/// database dropped) on drop.
struct OwnLog(std::path::PathBuf);

impl OwnLog {
    fn script(args: &[&std::ffi::OsStr]) -> std::process::Output {
        let script = breakglass_e2e::script("rekor.sh");
        std::process::Command::new(script)
            .args(args)
            .output()
            .unwrap()
    }

    fn start(dir: std::path::PathBuf, port: u16) -> OwnLog {
        let port = port.to_string();
        let out = OwnLog::script(&["start".as_ref(), dir.as_os_str(), port.as_ref()]);
        assert!(
            out.status.success(),
            "scripts/rekor.sh start failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        OwnLog(dir)
    }
}

impl Drop for OwnLog {
    fn drop(&mut self) {
        let _ = OwnLog::script(&["destroy".as_ref(), self.0.as_os_str()]);
    }
}

/// The transparency log is down when a session ends: the session still ends (its cluster
/// objects go), verification says the hash was never anchored; once the log answers, the sweep
/// anchors it and verification passes, the log included.
#[tokio::test]
async fn hash_left_unanchored_at_the_end_is_anchored_by_the_sweep() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let extra = format!(
        "[recording]\nflush_interval_seconds = 1\n\n[recording.transparency_log]\nurl = \"http://127.0.0.1:{port}\"\n\n"
    );
    let (dir, cfg, ns) = prepare(&extra).await;
    let server = ServerProcess::start(&cfg, &dir.path().join("data"), &[])
        .await
        .unwrap();
    let (alice, id) = request(&server, &ns).await;
    alice.wait_state(&id, &["Active"], T).await.unwrap();
    let d = end_and_wait(&alice, &id).await;
    assert!(d["session"]["rekor"].is_null(), "{d}");
    let cp = ControlPlane::shared().await.unwrap();
    assert_no_grants(cp.client(Identity::Admin).await.unwrap(), &ns).await;
    let (_, v) = alice
        .get(&format!("/sessions/{id}/recording/verify"))
        .await
        .unwrap();
    assert_eq!(v["ok"], false, "{v}");
    let failed: Vec<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["outcome"] == "fail")
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["transparency log"], "{v}");
    assert!(v.to_string().contains("never anchored"), "{v}");

    let _log = OwnLog::start(dir.path().join("rekor"), port);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let d = alice.session(&id).await.unwrap();
        if d["session"]["rekor"]["uuid"].is_string() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the sweep did not anchor the hash within 30 s\n{}",
            server.log_text()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let v = verified(&alice, &id).await;
    assert!(v.to_string().contains("inclusion"), "{v}");
}

/// An admin terminating someone's session closes their terminal at once with the reason, and
/// the recording ends with it.
#[tokio::test]
async fn terminate_closes_the_terminal_with_the_reason() {
    let (server, alice, id, _dir, _ns) = setup().await;
    let mut ws = connect(&server, &alice, &id).await;
    type_and_see(&server, &mut ws, b"echo still-$((8*8))\r", "still-64").await;
    let carol = server.login("carol").await.unwrap();
    let (st, body) = carol
        .post(&format!("/sessions/{id}/terminate"), json!({}))
        .await
        .unwrap();
    assert_eq!(st, 200, "{body}");
    let (code, reason) = closed_with(&mut ws).await;
    assert_eq!(code, close::SESSION_ENDED, "{reason}");
    assert!(reason.contains("Terminated"), "{reason}");
    alice.wait_state(&id, &["Ended"], T).await.unwrap();
    let (_, events) = recording_of(&alice, &id).await;
    assert!(output_of(&events).contains("still-64"));
    assert_eq!(markers_of(&events).last(), Some(&"ended: Terminated"));
    verified(&alice, &id).await;
}

/// The shell in the debug container exits: the API server ends the attach with the process's
/// status, and the relay closes the terminal saying so, with what was typed before recorded.
#[tokio::test]
async fn a_shell_that_exits_closes_the_terminal_and_keeps_what_it_showed() {
    let (server, alice, id, _dir, _ns) = setup().await;
    let mut ws = connect(&server, &alice, &id).await;
    type_and_see(&server, &mut ws, b"echo bye-$((9*9))\r", "bye-81").await;
    ws.send(Message::Binary(Frame::Data(b"exit\r").encode().into()))
        .await
        .unwrap();
    let (code, reason) = closed_with(&mut ws).await;
    assert_eq!(code, close::RELAY_ERROR, "{reason}\n{}", server.log_text());
    assert!(reason.contains("terminal closed"), "{reason}");
    end_and_wait(&alice, &id).await;
    let (_, events) = recording_of(&alice, &id).await;
    assert!(output_of(&events).contains("bye-81"));
    verified(&alice, &id).await;
}

/// Bytes of the newest stored version named on the session row.
async fn recorded_bytes(who: &ApiClient, id: &str) -> u64 {
    let d = who.session(id).await.unwrap();
    d["session"]["recording"]["bytes"].as_u64().unwrap_or(0)
}

/// Back-pressure: while the browser reads nothing, the pod's endless output stalls (the relay
/// stops reading from the attach once the socket is full), so the recording, and with it
/// the server's memory, stops growing; once the browser reads again, output flows again.
#[tokio::test]
async fn a_browser_that_stops_reading_stalls_the_pod_output() {
    // The local store: this is about the socket's back-pressure, and it reads the stored size
    // as its gauge, which a slower store (S3) moves in coarser, later steps.
    let (dir, cfg, ns) = prepare(&format!(
        "[recording]\nflush_interval_seconds = 1\nmax_bytes = 268435456\n{LOCAL_STORE}\n"
    ))
    .await;
    let server = ServerProcess::start(&cfg, &dir.path().join("data"), &[])
        .await
        .unwrap();
    let (alice, id) = request(&server, &ns).await;
    alice.wait_state(&id, &["Active"], T).await.unwrap();
    let mut ws = connect(&server, &alice, &id).await;
    type_and_see(&server, &mut ws, b"echo ready-$((9*9))\r", "ready-81").await;
    ws.send(Message::Binary(
        Frame::Data(b"yes 0123456789abcdef0123456789abcdef0123456789abcdef\r")
            .encode()
            .into(),
    ))
    .await
    .unwrap();
    // Read nothing: in-flight buffers fill, the store catches up with what was recorded
    // (slower on S3), and then nothing more comes. Stalled: the stored size unchanged over
    // eight looks (more than three flush intervals); output that kept flowing never is.
    let seen = std::cell::RefCell::new(Vec::new());
    let stalled_at = breakglass_e2e::wait_until(
        "the recording to stop growing while the browser reads nothing",
        Duration::from_secs(60),
        || async {
            let now = recorded_bytes(&alice, &id).await;
            let mut seen = seen.borrow_mut();
            seen.push(now);
            let n = seen.len();
            let stable = n >= 8 && seen[n - 8..].iter().all(|b| b.abs_diff(now) < 64 * 1024);
            Ok(stable.then_some(now))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: stored sizes {:?}", seen.borrow()));
    let seen = seen.into_inner();
    eprintln!("recorded while not reading: stalled at {stalled_at} bytes ({seen:?})");
    assert!(
        stalled_at < 48 * 1024 * 1024,
        "{stalled_at} bytes buffered before stalling"
    );

    // Read again for a while: the output flows and the recording grows again.
    let read = tokio::time::timeout(Duration::from_secs(1), async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Binary(_))) => {}
                other => return other,
            }
        }
    })
    .await;
    assert!(
        read.is_err(),
        "the terminal closed while reading: {read:?}\n{}",
        server.log_text()
    );
    ws.send(Message::Binary(Frame::Data(b"\x03").encode().into()))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while recorded_bytes(&alice, &id).await <= stalled_at + 1024 * 1024 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the output did not flow again once the browser read"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    end_and_wait(&alice, &id).await;
}

/// The time box for real: a one-minute session ends by itself with `TtlExpired`, its terminal
/// is closed with "session ended", its recording is final and verifies, and its grant is gone.
#[tokio::test]
async fn a_one_minute_session_ends_on_time_with_everything_closed() {
    let (dir, cfg, ns) =
        prepare("[durations.ground]\nmin_minutes = 1\nmax_minutes = 5\ndefault_minutes = 1\n\n")
            .await;
    let server = ServerProcess::start(&cfg, &dir.path().join("data"), &[])
        .await
        .unwrap();
    let alice = server.login("alice").await.unwrap();
    let id = alice
        .create(
            json!({"environment": "ground", "namespace": ns, "pod": "shell", "mode": "live",
                       "reason": "checking that the time box ends it", "duration_minutes": 1}),
        )
        .await
        .unwrap();
    alice
        .wait_state(&id, &["Active"], T)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.log_text()));
    let mut ws = connect(&server, &alice, &id).await;
    ws.send(Message::Binary(
        Frame::Data(b"echo boxed-$((40+2))\r").encode().into(),
    ))
    .await
    .unwrap();
    assert!(read_until(&mut ws, "boxed-42").await.1.is_none());

    // Nobody ends it: the sweep does, at the end of its minute.
    let closed = tokio::time::timeout(Duration::from_secs(150), async {
        loop {
            let (_, c) = read_until(&mut ws, "\u{0}never\u{0}").await;
            // read_until gives up after 15 s of silence (code 0); the box is a minute long.
            if !matches!(c, Some((0, _))) {
                return c;
            }
        }
    })
    .await
    .expect("the terminal was still open 150 s into a one-minute session");
    assert_eq!(
        closed.map(|c| c.0),
        Some(close::SESSION_ENDED),
        "{}",
        server.log_text()
    );
    let d = alice.wait_state(&id, &["Ended"], T).await.unwrap();
    assert_eq!(
        d["session"]["end_reason"],
        json!({"kind": "TtlExpired"}),
        "{d}"
    );
    let (_, events) = recording_of(&alice, &id).await;
    assert!(output_of(&events).contains("boxed-42"));
    assert!(
        markers_of(&events).iter().any(|m| m.starts_with("ended")),
        "the recording is final"
    );
    verified(&alice, &id).await;
    let cp = ControlPlane::shared().await.unwrap();
    let grants: Api<k8s_openapi::api::rbac::v1::RoleBinding> =
        Api::namespaced(cp.client(Identity::Admin).await.unwrap(), &ns);
    let left = grants
        .list(
            &kube::api::ListParams::default()
                .labels("app.kubernetes.io/managed-by=tower-breakglass"),
        )
        .await
        .unwrap();
    assert!(left.items.is_empty(), "grant left: {:?}", left.items);
}

/// `cat` of a large file: output far past the old 64 MiB cap is shown whole and recorded
/// whole, the session stays `Active`, and the recording (one `.cast`, built from its segments)
/// downloads and verifies.
#[tokio::test]
async fn a_large_burst_is_shown_and_recorded_whole_without_ending_the_session() {
    const BURST: u64 = 100_000_000;
    let (server, alice, id, _dir, _ns) = setup().await;
    let mut ws = connect(&server, &alice, &id).await;
    ws.send(Message::Binary(
        Frame::Data(
            format!("head -c {BURST} /dev/zero | tr '\\0' y; echo; echo burst-$((6*7))\r")
                .as_bytes(),
        )
        .encode()
        .into(),
    ))
    .await
    .unwrap();
    // Count what arrives rather than keeping it: 100 MB.
    let (mut ys, mut tail) = (0u64, String::new());
    while !tail.contains("burst-42") {
        let msg = tokio::time::timeout(T, ws.next())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no output for {T:?} after {ys} bytes\n{}",
                    server.log_text()
                )
            })
            .unwrap()
            .unwrap();
        match msg {
            Message::Binary(b) => {
                if let Ok(Frame::Data(d)) = Frame::decode(&b) {
                    ys += d.iter().filter(|c| **c == b'y').count() as u64;
                    tail.push_str(&String::from_utf8_lossy(d));
                    let keep = tail.len().saturating_sub(64);
                    let keep = (keep..tail.len())
                        .find(|i| tail.is_char_boundary(*i))
                        .unwrap_or(0);
                    tail.drain(..keep);
                }
            }
            Message::Close(c) => panic!("closed during the burst: {c:?}\n{}", server.log_text()),
            _ => {}
        }
    }
    assert!(ys >= BURST, "{ys} of {BURST} bytes shown");
    let d = alice.session(&id).await.unwrap();
    assert_eq!(d["session"]["state"], "Active", "{d}");
    let d = end_and_wait(&alice, &id).await;
    let rec = &d["session"]["recording"];
    assert!(rec["bytes"].as_u64().unwrap() > BURST, "{d}");
    assert!(rec["key"].as_str().unwrap().ends_with(".cast"), "{d}");
    let v = verified(&alice, &id).await;
    let chain = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "segment chain")
        .unwrap();
    assert_eq!(chain["outcome"], "pass", "{v}");
    let cast = alice
        .get_text(&format!("/sessions/{id}/recording?download=true"))
        .await
        .unwrap();
    assert_eq!(cast.len() as u64, rec["bytes"].as_u64().unwrap());
    let end = &cast[cast.len() - 200..];
    assert!(end.contains("\"m\", \"ended: "), "{end}");
}
