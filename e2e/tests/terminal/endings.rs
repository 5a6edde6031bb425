//! How terminals end: terminated, the shell exiting, a browser that stops reading, the time box, a large burst.

use super::*;

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
/// is closed with "session ended", its recording is final and verifies, its grant is gone, and
/// its debug container is stopped with what was left running in the background.
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
    let pids = super::leftovers::start_background(&server, &mut ws).await;

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
    super::leftovers::assert_debug_container_stopped(&server, &alice, &ns, &id, &pids).await;
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
    let (mut ys, mut tail, mut seen) = (0u64, String::new(), false);
    while !seen {
        let msg = tokio::time::timeout(T, ws.next())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no output for {T:?} after {ys} bytes, the last {tail:?}\n{}",
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
                    // Looked for before the tail is cut: the prompt after it can be longer
                    // than what is kept.
                    seen = tail.contains("burst-42");
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
