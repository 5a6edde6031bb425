//! Recording markers as people say them: the server writes short stable labels (`approved:
//! Ground`, `ended: TtlExpired`, `watching: bob`) and each command the shell ran (`$ kubectl
//! get pods`); the player's timeline shows them in words, on one line each.

use breakglass_shared::EndReason;

use super::end_reason;

/// The most characters a command's marker shows on the timeline (its `$ ` included); a
/// longer command line ends in `…` there. The session page lists each whole.
const MARKER_COMMAND_CHARS: usize = 40;

/// A recording marker as people say it (the server writes `approved by bob`, `approved:
/// Ground`, `ended: TtlExpired`, `$ kubectl get pods`, `watching: bob`, `left: bob`,
/// `resized: 120x30`, `input paused: no approver watching`).
pub fn marker_label(raw: &str) -> String {
    if raw.starts_with("$ ") {
        // The command as typed, so a reader recognises it; cut, since a label on the seek bar
        // stays on one line and a command may be hundreds of characters long.
        return shorten(raw.trim_end(), MARKER_COMMAND_CHARS);
    }
    if let Some(kind) = raw.strip_prefix("ended: ") {
        // The marker names the kind only; who terminated is on the session, not here.
        return match EndReason::from_parts(kind, None) {
            Some(r) => end_reason(&r, "the requester")
                .trim_end_matches('.')
                .to_string(),
            None if kind == "Terminated" => "terminated".into(),
            None => "ended".into(),
        };
    }
    let named = |prefix: &str| {
        raw.strip_prefix(prefix)
            .filter(|who| !who.trim().is_empty())
    };
    if let Some(who) = named("watching: ") {
        return format!("{who} started watching");
    }
    if let Some(who) = named("left: ") {
        return format!("{who} stopped watching");
    }
    if let Some((cols, rows)) = raw
        .strip_prefix("resized: ")
        .and_then(|size| size.split_once('x'))
        .filter(|(c, r)| is_number(c) && is_number(r))
    {
        return format!("resized to {cols}×{rows}");
    }
    for pause in ["input paused: ", "input resumed: "] {
        if let Some(why) = raw.strip_prefix(pause) {
            return format!("{} ({why})", pause.trim_end_matches(": "));
        }
    }
    match raw {
        "approved: Ground" => "approved automatically".into(),
        "handed over by another server replica" => "continued on another server".into(),
        _ => match raw.strip_prefix("approved: ") {
            Some(rest) => rest.to_string(),
            None => raw.to_string(),
        },
    }
}

/// Whether `s` is a whole number in digits.
fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// `s` in at most `max` characters (not bytes: a cut never splits one), its end replaced by
/// `…` when it is longer.
fn shorten(s: &str, max: usize) -> String {
    if s.chars().nth(max).is_none() {
        return s.to_string();
    }
    let kept: String = s.chars().take(max.saturating_sub(1)).collect();
    format!("{}…", kept.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_read_as_words() {
        assert_eq!(marker_label("ended: UserEnded"), "the requester ended it");
        assert_eq!(
            marker_label("ended: TtlExpired"),
            "The requested time ran out"
        );
        assert_eq!(marker_label("ended: Terminated"), "terminated");
        assert_eq!(marker_label("approved: Ground"), "approved automatically");
        assert_eq!(
            marker_label("approved: glass broken by carol"),
            "glass broken by carol"
        );
        assert_eq!(marker_label("approved by bob"), "approved by bob");
    }

    #[test]
    fn command_markers_read_as_typed_and_long_ones_are_cut() {
        assert_eq!(marker_label("$ kubectl get pods"), "$ kubectl get pods");
        assert_eq!(
            marker_label("$ echo listed-$((6*7))"),
            "$ echo listed-$((6*7))"
        );
        let long = format!(
            "$ kubectl logs deploy/payments --since=1h | grep {}",
            "x".repeat(200)
        );
        let label = marker_label(&long);
        assert_eq!(label.chars().count(), MARKER_COMMAND_CHARS, "{label}");
        assert!(label.ends_with('…') && long.starts_with(label.trim_end_matches('…')));
        // Exactly the limit stays whole; the cut counts characters, never splitting one.
        let exact = format!("$ {}", "é".repeat(MARKER_COMMAND_CHARS - 2));
        assert_eq!(marker_label(&exact), exact);
        let over = format!("$ {}", "é".repeat(MARKER_COMMAND_CHARS));
        assert_eq!(
            marker_label(&over),
            format!("$ {}…", "é".repeat(MARKER_COMMAND_CHARS - 3))
        );
        // No blank before the ellipsis.
        let spaced = format!(
            "$ {} {}",
            "a".repeat(MARKER_COMMAND_CHARS - 4),
            "b".repeat(20)
        );
        assert_eq!(
            marker_label(&spaced),
            format!("$ {}…", "a".repeat(MARKER_COMMAND_CHARS - 4))
        );
    }

    #[test]
    fn watchers_pauses_and_resizes_read_as_sentences() {
        assert_eq!(marker_label("watching: bob"), "bob started watching");
        assert_eq!(marker_label("left: bob"), "bob stopped watching");
        assert_eq!(
            marker_label("input paused: no approver watching"),
            "input paused (no approver watching)"
        );
        assert_eq!(
            marker_label("input resumed: an approver watches"),
            "input resumed (an approver watches)"
        );
        assert_eq!(marker_label("resized: 120x30"), "resized to 120×30");
        // What they do not name stays as the server wrote it.
        assert_eq!(marker_label("watching: "), "watching: ");
        assert_eq!(marker_label("resized: big"), "resized: big");
        assert_eq!(marker_label("refused: text frame"), "refused: text frame");
    }
}
