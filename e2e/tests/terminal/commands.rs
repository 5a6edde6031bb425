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
    // Up to the prompt after it: a line typed before that prompt shows is typed ahead.
    let ran = read_while(&mut term, |s| {
        s.text
            .split_once("typed-fixed\r\n")
            .is_some_and(|(_, after)| after.contains("debug $ "))
    })
    .await;
    assert!(ran.closed.is_none(), "{ran:?}");
    // Typed ahead while the shell is busy: its echo comes before the prompt that reads it, so
    // it is not taken for a command (and neither is its output).
    type_in(&mut term, "sleep 1\r").await;
    type_in(&mut term, "echo ahead-$((1+1))\r").await;
    let _ = read_while(&mut term, |s| {
        s.text
            .split_once("ahead-2")
            .is_some_and(|(_, after)| after.contains("debug $ "))
    })
    .await;
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
        commands.first(),
        Some(&"$ echo marked-$((2+3)) >/dev/null; echo typed-fixed"),
        "{markers:?}"
    );
    assert_eq!(commands.get(1), Some(&"$ sleep 1"), "{markers:?}");
    assert_eq!(
        commands.last(),
        Some(&"$ echo second-$((4*4))"),
        "{markers:?}"
    );
    // The typed-ahead line is either read as typed (its echo came after the prompt) or not at
    // all; its output never passes for a command.
    assert!(
        commands.len() == 3 || commands[2] == "$ echo ahead-$((1+1))",
        "{markers:?}"
    );
    assert!(commands.len() <= 4, "{markers:?}");
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
