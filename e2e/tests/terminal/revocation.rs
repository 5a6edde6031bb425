//! A right taken back while the terminal is open: an administrator ends the person's logins
//! from the command line (another process: only the database tells the server), and the open
//! terminal closes within two seconds saying why. The session itself stays theirs: signing in
//! again brings the same shell back, and the recording marks where access was taken.

use super::*;

/// Runs the server's command line on the data of the test's server (in `dir`).
fn cli_output(dir: &tempfile::TempDir, args: &[&str]) -> std::process::Output {
    let data = dir.path().join("data");
    breakglass_e2e::server::run_cli(&data, &dir.path().join("server.toml"), args).unwrap()
}

/// [`cli_output`], asserted to succeed; its stdout.
pub(crate) fn cli(dir: &tempfile::TempDir, args: &[&str]) -> String {
    let out = cli_output(dir, args);
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// [`cli_output`], asserted to fail with exit 1 and nothing on stdout; its stderr.
fn cli_refused(dir: &tempfile::TempDir, args: &[&str]) -> String {
    let out = cli_output(dir, args);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
    assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn ending_a_login_closes_its_open_terminal_within_two_seconds() {
    let (server, alice, id, dir, _ns) = setup().await;
    let mut ws = connect(&server, &alice, &id).await;
    type_and_see(&server, &mut ws, b"echo here-$((6*7))\r", "here-42").await;

    // Ending sessions needs a reason for their history; refused, it changes nothing.
    let said = cli_refused(
        &dir,
        &[
            "logins",
            "revoke",
            "--user",
            "alice",
            "--end-sessions",
            "--reason",
            " ",
        ],
    );
    assert!(said.contains("--reason"), "{said}");
    type_and_see(&server, &mut ws, b"echo still-$((6*7))\r", "still-42").await;
    let said = cli(
        &dir,
        &["logins", "revoke", "--user", "alice", "--by", "security"],
    );
    // The session stays theirs, and the command says so.
    assert!(
        said.contains("1 session(s) of alice still run") && said.contains("--end-sessions"),
        "{said}"
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

/// An administrator ends someone's running session from a shell (another process: only the
/// database tells the server): `sessions list` shows it, `sessions end` writes the end with who
/// and why and waits for the server's cleanup, so when it returns the terminal is closed, the
/// debug container stopped and the grant gone. Bad input and a second end change nothing.
#[tokio::test]
async fn an_administrator_ends_a_running_session_from_the_command_line() {
    let (server, alice, id, dir, ns) = setup().await;
    let mut ws = connect(&server, &alice, &id).await;
    type_and_see(&server, &mut ws, b"echo stuck-$((5*5))\r", "stuck-25").await;
    let pids = super::leftovers::start_background(&server, &mut ws).await;

    let listed = cli(&dir, &["sessions", "list"]);
    let row = listed
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{id} not listed:\n{listed}"));
    assert!(
        row.contains("Active") && row.contains("alice") && row.contains("/shell"),
        "{row}"
    );
    assert!(listed.contains("1 live session(s)"), "{listed}");

    // Bad input names the flag and changes nothing.
    let said = cli_refused(
        &dir,
        &["sessions", "end", &id, "--reason", " ", "--by", "security"],
    );
    assert!(said.contains("--reason"), "{said}");
    let stranger = uuid::Uuid::now_v7().to_string();
    let said = cli_refused(
        &dir,
        &[
            "sessions", "end", &stranger, "--reason", "x", "--by", "security",
        ],
    );
    assert!(said.contains(&stranger), "{said}");
    assert_eq!(
        alice.session(&id).await.unwrap()["session"]["state"],
        "Active"
    );

    let said = cli(
        &dir,
        &[
            "sessions",
            "end",
            &id,
            "--reason",
            "INC-12 stuck shell",
            "--by",
            "security",
        ],
    );
    assert!(
        said.contains("is ending") && said.contains("INC-12 stuck shell"),
        "{said}"
    );
    assert!(said.contains("Ended: the terminal is closed"), "{said}");
    let (code, reason) = closed_with(&mut ws).await;
    assert_eq!(
        code,
        close::SESSION_ENDED,
        "{reason}\n{}",
        server.log_text()
    );

    let d = alice.session(&id).await.unwrap();
    assert_eq!(d["session"]["state"], "Ended", "{d}");
    assert_eq!(d["session"]["end_reason"]["kind"], "AdminForceEnded", "{d}");
    let ended_by = d["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "system_end")
        .unwrap_or_else(|| panic!("no end event: {d}"));
    assert_eq!(ended_by["actor"], "security", "{ended_by}");
    assert!(
        ended_by["detail"]
            .as_str()
            .unwrap()
            .contains("INC-12 stuck shell"),
        "{ended_by}"
    );
    super::leftovers::assert_debug_container_stopped(&server, &alice, &ns, &id, &pids).await;
    let cp = ControlPlane::shared().await.unwrap();
    super::store_failures::assert_no_grants(cp.client(Identity::Admin).await.unwrap(), &ns).await;
    let (_, events) = recording_of(&alice, &id).await;
    assert!(output_of(&events).contains("stuck-25"));
    verified(&alice, &id).await;

    // Ending it again is refused with the state it is in; the list no longer shows it.
    let said = cli_refused(
        &dir,
        &[
            "sessions", "end", &id, "--reason", "again", "--by", "security",
        ],
    );
    assert!(said.contains("Ended"), "{said}");
    let listed = cli(&dir, &["sessions", "list"]);
    assert!(
        !listed.contains(&id) && listed.contains("0 live session(s)"),
        "{listed}"
    );
}
