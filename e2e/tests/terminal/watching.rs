//! Watching a running session live: the late joiner's first screen, the stream after it,
//! keystrokes and resizes of a watcher that go nowhere, who may watch, a slow watcher that
//! catches up without slowing the requester, and moderated sessions whose input waits for an
//! approver watching. Each checked at the sockets and in the recording.

use breakglass_shared::terminal::Status;

use super::*;

pub(crate) async fn watch(server: &ServerProcess, who: &ApiClient, id: &str) -> Ws {
    let req = socket_request(server, who, id, "watch", Some(&server.url));
    let (ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    ws
}

/// What a socket showed until `done` said so: the text of its data frames, the statuses and
/// the sizes it was told, and the close if it closed first.
#[derive(Default, Debug)]
pub(crate) struct Seen {
    pub(crate) text: String,
    pub(crate) statuses: Vec<Status>,
    pub(crate) sizes: Vec<(u16, u16)>,
    pub(crate) closed: Option<(u16, String)>,
}

pub(crate) async fn read_while(ws: &mut Ws, done: impl Fn(&Seen) -> bool) -> Seen {
    let mut seen = Seen::default();
    let r = tokio::time::timeout(T, async {
        while let Some(msg) = ws.next().await {
            match msg.unwrap() {
                Message::Binary(b) => match Frame::decode(&b) {
                    Ok(Frame::Data(d)) => seen.text.push_str(&String::from_utf8_lossy(d)),
                    Ok(Frame::Status(s)) => seen.statuses.push(s),
                    Ok(Frame::Resize { cols, rows }) => seen.sizes.push((cols, rows)),
                    _ => {}
                },
                Message::Close(c) => {
                    seen.closed = Some(
                        c.map(|c| (u16::from(c.code), c.reason.to_string()))
                            .unwrap_or((1005, String::new())),
                    );
                    return;
                }
                _ => {}
            }
            if done(&seen) {
                return;
            }
        }
    })
    .await;
    if r.is_err() {
        seen.closed = Some((0, "timed out".into()));
    }
    seen
}

pub(crate) async fn type_in(ws: &mut Ws, text: &str) {
    ws.send(Message::Binary(
        Frame::Data(text.as_bytes()).encode().into(),
    ))
    .await
    .unwrap();
}

pub(crate) fn last_watchers(seen: &Seen) -> Option<&Vec<String>> {
    seen.statuses.last().map(|s| &s.watchers)
}

#[tokio::test]
async fn an_approver_watches_live_and_read_only_from_the_current_screen() {
    let (server, alice, id, _dir, _ns) = setup().await;
    let mut term = connect(&server, &alice, &id).await;
    term.send(Message::Binary(
        Frame::Resize { cols: 90, rows: 20 }.encode().into(),
    ))
    .await
    .unwrap();
    type_in(&mut term, "echo before-$((20+22))\r").await;
    let (seen, closed) = read_until(&mut term, "before-42").await;
    assert!(closed.is_none(), "{seen}");

    // A late joiner gets the current screen first (its size, then what is on it), drawn from
    // the recording: the command typed before bob came is there.
    let bob = server.login("bob").await.unwrap();
    let mut watcher = watch(&server, &bob, &id).await;
    let first = read_while(&mut watcher, |s| {
        s.text.contains("before-42") && s.statuses.iter().any(|s| s.watchers == ["bob"])
    })
    .await;
    assert!(first.closed.is_none(), "{first:?}\n{}", server.log_text());
    assert_eq!(first.sizes.first(), Some(&(90, 20)), "{first:?}");
    assert!(
        first.statuses.iter().any(|s| s.watchers == ["bob"]),
        "{first:?}"
    );
    // The requester's terminal says who watches.
    let told = read_while(&mut term, |s| {
        last_watchers(s).is_some_and(|w| w == &["bob"])
    })
    .await;
    assert!(told.closed.is_none(), "{told:?}");

    // Then the stream: what alice runs now reaches bob.
    type_in(&mut term, "echo live-$((3*3))\r").await;
    let live = read_while(&mut watcher, |s| s.text.contains("live-9")).await;
    assert!(live.closed.is_none(), "{live:?}");

    // Nothing bob sends reaches the pod: keystrokes, a resize, text, a status frame.
    type_in(&mut watcher, "echo bob-was-$((5*5))\r").await;
    watcher
        .send(Message::Binary(
            Frame::Resize { cols: 33, rows: 11 }.encode().into(),
        ))
        .await
        .unwrap();
    watcher
        .send(Message::Text("echo text-$((6*6))\r".into()))
        .await
        .unwrap();
    type_in(&mut term, "stty size; echo after-$((7*7))\r").await;
    let after = read_while(&mut term, |s| s.text.contains("after-49")).await;
    assert!(
        after.text.contains("20 90"),
        "bob's resize went nowhere: {after:?}"
    );
    assert!(!after.text.contains("bob-was-25"), "{after:?}");
    assert!(!after.text.contains("text-36"), "{after:?}");
    // bob is still watching (what he sent did not close him), and sees what alice sees.
    let still = read_while(&mut watcher, |s| s.text.contains("after-49")).await;
    assert!(still.closed.is_none(), "{still:?}");

    // Who may not watch: the requester herself, and someone who only requests.
    let mut own = watch(&server, &alice, &id).await;
    let refused = read_while(&mut own, |_| false).await;
    assert_eq!(refused.closed.map(|c| c.0), Some(close::NOT_WATCHER));

    // bob leaves: alice is told, the recording has both markers and none of bob's input.
    watcher.close(None).await.unwrap();
    let left = read_while(&mut term, |s| last_watchers(s).is_some_and(Vec::is_empty)).await;
    assert!(left.closed.is_none(), "{left:?}");

    // carol (an admin) watches, and is closed when the session ends.
    let carol = server.login("carol").await.unwrap();
    let mut admin = watch(&server, &carol, &id).await;
    let shown = read_while(&mut admin, |s| s.text.contains("after-49")).await;
    assert!(shown.closed.is_none(), "{shown:?}");
    let d = end_and_wait(&alice, &id).await;
    assert_eq!(d["session"]["state"], "Ended");
    let ended = read_while(&mut admin, |_| false).await;
    assert_eq!(
        ended.closed.as_ref().map(|c| c.0),
        Some(close::SESSION_ENDED),
        "{ended:?}"
    );
    let (_, events) = recording_of(&alice, &id).await;
    let markers = markers_of(&events);
    for m in ["watching: bob", "left: bob", "watching: carol"] {
        assert!(markers.contains(&m), "{m} in {markers:?}");
    }
    let output = output_of(&events);
    assert!(!output.contains("bob-was-25"), "{output:?}");
    assert!(output.contains("live-9"), "{output:?}");
}

#[tokio::test]
async fn a_watcher_who_falls_behind_catches_up_without_slowing_the_requester() {
    let (server, alice, id, _dir, _ns) = setup().await;
    let bob = server.login("bob").await.unwrap();
    // bob joins and then reads nothing while the pod prints far more than his queue and his
    // connection's buffers hold.
    let mut watcher = watch(&server, &bob, &id).await;
    let mut term = connect(&server, &alice, &id).await;
    let _ = read_while(&mut term, |s| {
        last_watchers(s).is_some_and(|w| w == &["bob"])
    })
    .await;
    type_in(&mut term, "seq 1 1500000; echo printed-$((8*8))\r").await;
    // alice gets all of it while bob reads nothing.
    let all = read_while(&mut term, |s| s.text.contains("printed-64")).await;
    assert!(all.closed.is_none(), "{:?}", all.closed);
    assert!(all.text.contains("\n1500000"), "every line reached alice");
    // bob, reading again, is told he fell behind and gets the screen as it is now.
    let caught = read_while(&mut watcher, |s| {
        s.statuses
            .iter()
            .any(|st| st.message.contains("fell behind"))
            && s.text.contains("printed-64")
    })
    .await;
    assert!(
        caught.closed.is_none(),
        "{:?}\n{}",
        caught.closed,
        server.log_text()
    );
    // The fresh screen (after its reset) ends as alice's did: the last lines, in order, though
    // the screen's emulator skipped most of what scrolled past.
    let screen = &caught.text[caught.text.rfind("\x1bc").unwrap()..];
    let lines: Vec<u64> = screen
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .filter(|&n| n > 1_000_000)
        .collect();
    assert!(lines.len() >= 10, "{screen:?}");
    assert_eq!(lines.last(), Some(&1_500_000), "{screen:?}");
    assert!(lines.windows(2).all(|w| w[1] == w[0] + 1), "{screen:?}");
    // And he is live again after it.
    type_in(&mut term, "echo again-$((9*9))\r").await;
    let again = read_while(&mut watcher, |s| s.text.contains("again-81")).await;
    assert!(again.closed.is_none(), "{:?}", again.closed);
}

#[tokio::test]
async fn a_moderated_session_takes_input_only_while_an_approver_watches() {
    let (dir, cfg, ns) = prepare(&format!("[recording]\n{LOCAL_STORE}\n")).await;
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        text.replace(
            "tier = \"ground\"\n",
            "tier = \"ground\"\nmoderated = true\n",
        ),
    )
    .unwrap();
    let server = ServerProcess::start(&cfg, &dir.path().join("data"), &[])
        .await
        .unwrap();
    let (alice, id) = request(&server, &ns).await;
    alice.wait_state(&id, &["Active"], T).await.unwrap();

    // Nobody watches: alice's terminal says her input waits, and what she types goes nowhere.
    let mut term = connect(&server, &alice, &id).await;
    let paused = read_while(&mut term, |s| s.statuses.iter().any(|st| st.paused)).await;
    assert!(paused.closed.is_none(), "{paused:?}");
    type_in(&mut term, "echo early-$((1+1))\r").await;
    // The relay says so once it has held the keystrokes back.
    let held = read_while(&mut term, |s| s.statuses.iter().any(|st| st.paused)).await;
    assert!(held.closed.is_none(), "{held:?}");

    // bob (an approver) watches: input flows.
    let bob = server.login("bob").await.unwrap();
    let mut watcher = watch(&server, &bob, &id).await;
    let resumed = read_while(&mut term, |s| {
        s.statuses.last().is_some_and(|st| !st.paused)
    })
    .await;
    assert!(resumed.closed.is_none(), "{resumed:?}");
    type_in(&mut term, "echo flowing-$((2+2))\r").await;
    let flowing = read_while(&mut term, |s| s.text.contains("flowing-4")).await;
    assert!(
        !flowing.text.contains("early-2"),
        "typed while paused: {flowing:?}"
    );
    let _ = read_while(&mut watcher, |s| s.text.contains("flowing-4")).await;

    // bob leaves: paused again, output keeps flowing (a command already running goes on).
    type_in(&mut term, "sleep 1; echo still-printing-$((3+3))\r").await;
    // Its echo says the pod has the command before bob goes.
    let _ = read_while(&mut term, |s| s.text.contains("still-printing-$((3+3))")).await;
    watcher.close(None).await.unwrap();
    let again = read_while(&mut term, |s| {
        s.statuses.last().is_some_and(|st| st.paused) && s.text.contains("still-printing-6")
    })
    .await;
    assert!(again.closed.is_none(), "{again:?}");
    type_in(&mut term, "echo while-alone-$((4+4))\r").await;
    let held = read_while(&mut term, |s| s.statuses.iter().any(|st| st.paused)).await;
    assert!(held.closed.is_none(), "{held:?}");

    // bob comes back: input flows again.
    let mut watcher = watch(&server, &bob, &id).await;
    let _ = read_while(&mut term, |s| {
        s.statuses.last().is_some_and(|st| !st.paused)
    })
    .await;
    type_in(&mut term, "echo back-$((5+5))\r").await;
    let back = read_while(&mut term, |s| s.text.contains("back-10")).await;
    assert!(!back.text.contains("while-alone-8"), "{back:?}");
    let _ = read_while(&mut watcher, |s| s.text.contains("back-10")).await;

    end_and_wait(&alice, &id).await;
    let (_, events) = recording_of(&alice, &id).await;
    let output = output_of(&events);
    for typed_alone in ["early-2", "while-alone-8"] {
        assert!(
            !output.contains(typed_alone),
            "{typed_alone} reached the pod: {output:?}"
        );
    }
    assert!(
        output.contains("flowing-4") && output.contains("back-10"),
        "{output:?}"
    );
    let markers = markers_of(&events);
    let pauses = markers
        .iter()
        .filter(|m| m.starts_with("input paused"))
        .count();
    let resumes = markers
        .iter()
        .filter(|m| m.starts_with("input resumed"))
        .count();
    assert_eq!((pauses, resumes), (2, 2), "{markers:?}");
}

/// A watcher whose first screen waits (here at a pause where the draw waits for the
/// recording's store) is still closed at once when his right to watch is taken, and the
/// watcher waiting with him is not left waiting for a draw nobody finishes: she draws it.
#[tokio::test]
async fn a_watcher_waiting_for_the_first_screen_is_still_closed_when_revoked() {
    let (dir, cfg, ns) = prepare(&format!("[recording]\n{LOCAL_STORE}\n")).await;
    let resume = dir.path().join("resume");
    let server = ServerProcess::start(
        &cfg,
        &dir.path().join("data"),
        &[
            ("BREAKGLASS_PAUSE_AT", "first-screen"),
            ("BREAKGLASS_PAUSE_UNTIL", resume.to_str().unwrap()),
        ],
    )
    .await
    .unwrap();
    let (alice, id) = request(&server, &ns).await;
    alice.wait_state(&id, &["Active"], T).await.unwrap();
    let mut term = connect(&server, &alice, &id).await;
    type_and_see(&server, &mut term, b"echo before-$((6*7))\r", "before-42").await;

    // bob's first screen is drawn from the recording, and that draw waits.
    let bob = server.login("bob").await.unwrap();
    let mut watcher = watch(&server, &bob, &id).await;
    let paused = resume.with_extension("paused");
    breakglass_e2e::wait_until("bob's first screen waiting", T, || async {
        Ok(paused.exists().then_some(()))
    })
    .await
    .unwrap();
    // carol joins meanwhile and waits for bob's draw; bob is told she watches.
    let carol = server.login("carol").await.unwrap();
    let mut admin = watch(&server, &carol, &id).await;
    let both = read_while(&mut watcher, |s| {
        last_watchers(s).is_some_and(|w| w.contains(&"carol".to_string()))
    })
    .await;
    assert!(both.closed.is_none(), "{both:?}\n{}", server.log_text());
    assert!(!both.text.contains("before-42"), "{both:?}");

    // bob is locked out: his socket closes now, though his screen is still being drawn.
    let (status, v) = carol
        .post(
            "/users/bob/lock",
            json!({"reason": "INC-7 watching too much"}),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{v}");
    let locked = tokio::time::Instant::now();
    let gone = read_while(&mut watcher, |_| false).await;
    let took = locked.elapsed();
    let (code, reason) = gone.closed.clone().unwrap();
    assert_eq!(code, close::REVOKED, "{gone:?}\n{}", server.log_text());
    assert!(reason.contains("INC-7"), "{reason}");
    assert!(
        took <= Duration::from_secs(2),
        "closed {took:?} after the lock"
    );

    // The store answers again: carol gets the screen, drawn anew now that bob's draw is given
    // up, and then the stream.
    std::fs::write(&resume, "").unwrap();
    let shown = read_while(&mut admin, |s| s.text.contains("before-42")).await;
    assert!(shown.closed.is_none(), "{shown:?}\n{}", server.log_text());
    type_in(&mut term, "echo live-$((4*4))\r").await;
    let live = read_while(&mut admin, |s| s.text.contains("live-16")).await;
    assert!(live.closed.is_none(), "{live:?}");
}
