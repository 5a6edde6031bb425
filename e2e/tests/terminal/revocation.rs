//! A right taken back while the terminal is open: an administrator ends the person's logins
//! from the command line (another process: only the database tells the server), and the open
//! terminal closes within two seconds saying why. The session itself stays theirs: signing in
//! again brings the same shell back, and the recording marks where access was taken.

use super::*;

/// Runs the server's command line on the data of the test's server (in `dir`); its output,
/// asserted to succeed.
fn cli(dir: &tempfile::TempDir, args: &[&str]) -> String {
    let data = dir.path().join("data");
    let out = breakglass_e2e::server::cli_command(&data)
        .unwrap()
        .args(args)
        .arg("--config")
        .arg(dir.path().join("server.toml"))
        .arg("--data-dir")
        .arg(&data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn ending_a_login_closes_its_open_terminal_within_two_seconds() {
    let (server, alice, id, dir, _ns) = setup().await;
    let mut ws = connect(&server, &alice, &id).await;
    type_and_see(&server, &mut ws, b"echo here-$((6*7))\r", "here-42").await;

    cli(
        &dir,
        &["logins", "revoke", "--user", "alice", "--by", "security"],
    );
    let revoked = tokio::time::Instant::now();
    let (code, reason) = closed_with(&mut ws).await;
    let took = revoked.elapsed();
    assert_eq!(code, close::REVOKED, "{reason}\n{}", server.log_text());
    assert!(reason.contains("sign-in ended"), "{reason}");
    assert!(
        took <= Duration::from_secs(2),
        "closed {took:?} after the revoke"
    );
    eprintln!("the terminal closed {took:?} after `logins revoke`");

    // The old cookie opens nothing any more; a new sign-in gets the same shell back.
    assert_eq!(
        handshake(&server, &alice, &id, Some(&server.url)).await,
        Some(401)
    );
    let again = server.login("alice").await.unwrap();
    let session = again.session(&id).await.unwrap();
    assert_eq!(session["session"]["state"], "Active", "{session}");
    let mut ws = connect(&server, &again, &id).await;
    type_and_see(&server, &mut ws, b"echo back-$((7*7))\r", "back-49").await;
    end_and_wait(&again, &id).await;
    let (_, events) = recording_of(&again, &id).await;
    let output = output_of(&events);
    assert!(output.contains("here-42") && output.contains("back-49"));
    assert!(
        markers_of(&events)
            .iter()
            .any(|m| m.starts_with("access revoked: your sign-in ended")),
        "{:?}",
        markers_of(&events)
    );
    verified(&again, &id).await;
}

/// The kill switch from a shell: an environment lock written by the command line (another
/// process) closes the open terminal with the lock's reason, ends the session `Locked` with its
/// cleanup, and refuses new requests until the unlock (Ground: one admin's).
#[tokio::test]
async fn an_environment_lock_from_the_command_line_ends_the_running_session() {
    let (server, alice, id, dir, ns) = setup().await;
    let mut ws = connect(&server, &alice, &id).await;
    type_and_see(&server, &mut ws, b"echo before-$((3*3))\r", "before-9").await;
    let said = cli(
        &dir,
        &[
            "lock",
            "ground",
            "--reason",
            "INC-9 suspicious shell",
            "--by",
            "security",
        ],
    );
    assert!(said.contains("INC-9 suspicious shell"), "{said}");
    let locked = tokio::time::Instant::now();
    let (code, reason) = closed_with(&mut ws).await;
    let took = locked.elapsed();
    assert!(
        code == close::REVOKED || code == close::SESSION_ENDED,
        "{code} {reason}\n{}",
        server.log_text()
    );
    assert!(
        took <= Duration::from_secs(2),
        "closed {took:?} after the lock"
    );
    let ended = alice.wait_state(&id, &["Ended"], T).await.unwrap();
    assert_eq!(ended["session"]["end_reason"]["kind"], "Locked", "{ended}");
    let body = json!({"environment": "ground", "namespace": ns, "pod": "shell", "mode": "live",
                      "reason": "trying again under the lock", "duration_minutes": 30});
    let (status, v) = alice.post("/sessions", body.clone()).await.unwrap();
    assert_eq!(status, 423, "{v}");
    assert!(v["message"].as_str().unwrap().contains("INC-9"), "{v}");

    let listed = cli(&dir, &["locks", "--history"]);
    assert!(
        listed.contains("environment ground") && listed.contains("locked by security"),
        "{listed}"
    );
    let said = cli(
        &dir,
        &[
            "unlock",
            "ground",
            "--reason",
            "all clear",
            "--by",
            "security",
        ],
    );
    assert!(said.contains("ground is unlocked"), "{said}");
    let (status, v) = alice.post("/sessions", body).await.unwrap();
    assert_eq!(status, 201, "{v}");
}
