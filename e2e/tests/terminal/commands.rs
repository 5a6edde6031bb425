//! Command markers: a shell whose prompt carries the OSC 133 marks (as the debug image's
//! profile sets it) has each command it runs in the recording as a `$ ...` marker, at the
//! moment it ran; resizes are markers too.

use super::watching::{read_while, type_in};
use super::*;

#[tokio::test]
async fn each_command_of_a_marked_prompt_is_a_marker_in_the_recording() {
    let (server, alice, id, _dir, _ns) = setup().await;
    let mut term = connect(&server, &alice, &id).await;
    term.send(Message::Binary(
        Frame::Resize {
            cols: 120,
            rows: 30,
        }
        .encode()
        .into(),
    ))
    .await
    .unwrap();
    // What the profile does: the prompt between an A and a B mark.
    type_in(
        &mut term,
        "PS1=\"$(printf '\\033]133;A\\007')debug \\$ $(printf '\\033]133;B\\007')\"\r",
    )
    .await;
    let _ = read_while(&mut term, |s| s.text.contains("debug $ ")).await;
    // A typo fixed with backspaces is recorded as it ran.
    type_in(
        &mut term,
        "echo marked-$((2+3)) >/dev/null; ecgo\x7f\x7fho typed-fixed\r",
    )
    .await;
    let ran = read_while(&mut term, |s| s.text.contains("typed-fixed\r\n")).await;
    assert!(ran.closed.is_none(), "{ran:?}");
    type_in(&mut term, "\r").await;
    type_in(&mut term, "echo second-$((4*4))\r").await;
    let _ = read_while(&mut term, |s| s.text.contains("second-16")).await;
    end_and_wait(&alice, &id).await;

    let (_, events) = recording_of(&alice, &id).await;
    let markers = markers_of(&events);
    let commands: Vec<&str> = markers
        .iter()
        .copied()
        .filter(|m| m.starts_with("$ "))
        .collect();
    assert_eq!(
        commands,
        [
            "$ echo marked-$((2+3)) >/dev/null; echo typed-fixed",
            "$ echo second-$((4*4))"
        ],
        "the empty line is no command, and the prompt setting came before the marks: {markers:?}"
    );
    assert!(markers.contains(&"resized: 120x30"), "{markers:?}");
    // Each command's marker comes before its output.
    let at = |pred: &dyn Fn(&breakglass_shared::recording::Event) -> bool| {
        events.iter().position(pred).unwrap()
    };
    let marker = at(&|e| e.data == "$ echo second-$((4*4))");
    let output = at(&|e| {
        e.code == breakglass_shared::recording::Code::Output && e.data.contains("second-16")
    });
    assert!(marker < output, "{marker} {output}");
}
