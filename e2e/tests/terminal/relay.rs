//! Keystrokes in, output out, recorded; bad frames, strangers, takeovers and ended sessions closed with a code.

use super::*;

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
