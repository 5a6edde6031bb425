//! Recordings searched like text, end to end: a real shell's session ends, the server indexes
//! its recording (from whichever store the run records to), and the search finds the command
//! at the moment its marker holds and its output line at the moment it was printed.

use breakglass_e2e::wait_until;
use breakglass_shared::recording::Code;

use super::watching::{read_while, type_in};
use super::*;

#[tokio::test]
async fn a_search_finds_the_command_and_its_output_at_their_moments() {
    let (server, alice, id, _dir, _ns) = setup().await;
    let mut term = connect(&server, &alice, &id).await;
    type_in(
        &mut term,
        "PS1=\"$(printf '\\033]133;A\\007')debug \\$ $(printf '\\033]133;B\\007')\"\r",
    )
    .await;
    let _ = read_while(&mut term, |s| s.text.contains("debug $ ")).await;
    // A slip rubbed out before Enter: the index holds the line as it ran and was shown.
    type_in(&mut term, "echo needle-$((6*7)) haystacq\x7fk\r").await;
    let ran = read_while(&mut term, |s| s.text.contains("needle-42 haystack\r\n")).await;
    assert!(ran.closed.is_none(), "{ran:?}");
    end_and_wait(&alice, &id).await;
    let (_, events) = recording_of(&alice, &id).await;

    let found = wait_until("the recording to be indexed and found", T, || async {
        let (status, body) = alice.get("/recordings/search?q=needle+haystack").await?;
        anyhow::ensure!(status == 200, "{status}: {body}");
        let listed = body["sessions"].as_array().cloned().unwrap_or_default();
        Ok(listed
            .into_iter()
            .find(|s| s["session"]["id"] == id.as_str()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", server.log_text()));

    let hits = found["hits"].as_array().unwrap();
    let command = "$ echo needle-$((6*7)) haystack";
    let marker_at = events
        .iter()
        .find(|e| e.code == Code::Marker && e.data == command)
        .map(|e| e.time)
        .unwrap_or_else(|| panic!("no marker {command:?} in {events:?}"));
    assert_eq!(hits[0]["kind"], "command", "{found}");
    assert_eq!(hits[0]["text"], command, "{found}");
    // Moments are kept to the millisecond.
    let near = |hit: &serde_json::Value, t: f64| (hit["at"].as_f64().unwrap() - t).abs() < 0.001;
    assert!(near(&hits[0], marker_at), "{marker_at} {found}");
    // The link opens the player at a tenth of a second no earlier than the hit's moment (so
    // the line is on the screen it opens with) and less than a tenth after it.
    let link = hits[0]["link"].as_str().unwrap();
    let t: f64 = link
        .strip_prefix(&format!("/sessions/{id}/recording?t="))
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{link}"));
    let at = hits[0]["at"].as_f64().unwrap();
    assert!(
        t >= at - 1e-6 && t < at + 0.1 && (t * 10.0 - (t * 10.0).round()).abs() < 1e-9,
        "{link} for a hit at {at}"
    );
    // The output line, at the moment of the output event that printed it.
    let printed_at = events
        .iter()
        .find(|e| e.code == Code::Output && e.data.contains("needle-42 haystack\r\n"))
        .map(|e| e.time)
        .unwrap();
    let output = hits
        .iter()
        .find(|h| h["kind"] == "screen" && h["text"] == "needle-42 haystack")
        .unwrap_or_else(|| panic!("no screen line in {found}"));
    assert!(near(output, printed_at), "{printed_at} {found}");
    // The slip is on no line anyone saw.
    let (_, body) = alice.get("/recordings/search?q=haystacq").await.unwrap();
    assert_eq!(body["sessions"], serde_json::json!([]), "{body}");
}
