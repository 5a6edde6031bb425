//! The recording store failing mid-session, and a hash the end could not anchor.

use super::*;

/// Waits until a stored version of the live recording holds `needle`.
pub(crate) async fn wait_stored(who: &ApiClient, id: &str, needle: &str) {
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
pub(crate) async fn assert_no_grants(admin: kube::Client, ns: &str) {
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
