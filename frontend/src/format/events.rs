//! A session's event history as sentences: the events table stores stable kinds
//! (`break_glass`, `cleanup_done`) and states, which are for machines, not for the people
//! reading the history.

use breakglass_shared::api::SessionEventRecord;
use breakglass_shared::{EndReason, SessionState};
use serde::Deserialize;

use super::end_reason;

/// One event as a sentence; `requester` is the session's.
pub fn event_sentence(e: &SessionEventRecord, requester: &str) -> String {
    let who = e.actor.as_str();
    let detail = e.detail.as_deref().unwrap_or_default();
    match e.kind.as_str() {
        "create" if e.to_state == SessionState::Approved => {
            format!("{who} asked for access; approved automatically (Ground).")
        }
        "create" => format!("{who} asked for access."),
        "approve" => format!("{who} approved the request."),
        "deny" if detail.is_empty() => format!("{who} denied the request."),
        "deny" => format!("{who} denied the request: {detail}"),
        "break_glass" => format!("{who} broke the glass: approved without a second person."),
        "end" if e.to_state == SessionState::Withdrawn => format!("{who} withdrew the request."),
        "end" => format!("{who} ended the session."),
        "terminate" => format!("{who} terminated the session."),
        "ask_extension" => match detail.split_once(" min: ") {
            Some((minutes, why)) => format!("{who} asked for {minutes} more minutes: {why}"),
            None => format!("{who} asked for more time."),
        },
        "approve_extension" => format!("{who} approved more time."),
        "deny_extension" if detail.is_empty() => format!("{who} refused more time."),
        "deny_extension" => format!("{who} refused more time: {detail}"),
        "system_end" => match EndReason::from_parts(detail, None) {
            Some(r) => format!("Ending: {}", lower_first(&end_reason(&r, requester))),
            None => "The server ended the session.".into(),
        },
        "expire" if e.from_state == Some(SessionState::PendingApproval) => {
            "Nobody approved the request in time.".into()
        }
        "expire" => "The debug container did not start in time.".into(),
        "begin_activation" => "Activation started.".into(),
        "activated" => "The debug container runs: the session is active.".into(),
        "activation_failed" if detail.is_empty() => "Activation failed.".into(),
        "activation_failed" => format!("Activation failed: {detail}"),
        // What the cleanup left is only known from its steps: `folded` says which.
        "cleanup_done" => CLEANED.into(),
        "progress" => match serde_json::from_str::<ProgressWords>(detail) {
            Ok(p) => p.sentence(),
            Err(_) => "A step in the cluster was done.".into(),
        },
        "review" => match detail.split_once(": ") {
            Some((verdict, notes)) if !notes.is_empty() => {
                format!("{who} reviewed it ({}): {notes}", verdict_word(verdict))
            }
            Some((verdict, _)) => format!("{who} reviewed it ({}).", verdict_word(verdict)),
            None => format!("{who} reviewed it."),
        },
        other => format!("{}.", upper_first(&other.replace('_', " "))),
    }
}

/// What a progress event's sentence needs of its detail, a
/// [`Progress`](breakglass_shared::session::Progress) in JSON
/// (`{"kind":"DebugContainerAdded","name":"debug-1"}`): the tag and the two strings it shows.
/// Read as this flat struct rather than as `Progress`, whose internally tagged deserialiser
/// (serde buffering the whole object first) took 15 KB of the wasm.
#[derive(Deserialize)]
struct ProgressWords {
    kind: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    detail: String,
    #[serde(default)]
    left: bool,
}

/// The end of a cleanup whose every step removed what it was for, and only then.
const CLEANED: &str = "Everything the session created in the cluster is removed.";

/// The end of a cleanup with a step that left something in the cluster (said in that step).
const NOT_CLEANED: &str =
    "Cleanup finished, but not everything the session created is gone from the cluster: \
     the step above says what is left.";

/// Whether `e` is a cleanup step that left something of the session in the cluster.
fn left_something(e: &SessionEventRecord) -> bool {
    e.kind == "progress"
        && e.detail
            .as_deref()
            .and_then(|d| serde_json::from_str::<ProgressWords>(d).ok())
            .is_some_and(|p| p.kind == "CleanupStep" && p.left)
}

impl ProgressWords {
    fn sentence(&self) -> String {
        let name = &self.name;
        match self.kind.as_str() {
            "GrantCreated" => "Access granted in the cluster.".into(),
            "ProcessAccessAnnotated" => {
                "The pod was marked so the debug container may see its processes.".into()
            }
            "DebugContainerAdded" => format!("Debug container {name} added to the pod."),
            "CopyPodCreated" => format!("Copy of the pod created as {name}."),
            "RecordingStored" => "Recording saved.".into(),
            "Anchored" => {
                "The recording's fingerprint was published in the transparency log.".into()
            }
            "CleanupStep" if self.left => format!("Left in the cluster: {}.", self.detail),
            "CleanupStep" => format!("Cleaned up: {}.", self.detail),
            _ => "A step in the cluster was done.".into(),
        }
    }
}

fn verdict_word(v: &str) -> &str {
    match v {
        "ok" | "Ok" => "no concerns",
        "concern" | "Concern" => "concern raised",
        other => other,
    }
}

// ASCII only: the sentences and event kinds start with an ASCII letter (or with a user name,
// left as it is when it does not), and Unicode's case tables would cost the wasm more than
// these two functions are worth.
fn lower_first(s: &str) -> String {
    let mut out = s.to_string();
    if let Some(first) = out.get_mut(..1) {
        first.make_ascii_lowercase();
    }
    out
}

fn upper_first(s: &str) -> String {
    let mut out = s.to_string();
    if let Some(first) = out.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    out
}

/// The history with runs of the same sentence folded into one (`Recording saved (12 times)`):
/// (first event's index, sentence).
pub fn folded(events: &[SessionEventRecord], requester: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String, usize)> = Vec::new();
    let mut left = false;
    for (i, e) in events.iter().enumerate() {
        left |= left_something(e);
        let mut line = event_sentence(e, requester);
        if left && e.kind == "cleanup_done" {
            line = NOT_CLEANED.into();
        }
        match out.last_mut() {
            Some((_, last, n)) if *last == line => *n += 1,
            _ => out.push((i, line, 1)),
        }
    }
    out.into_iter()
        .map(|(i, line, n)| {
            if n > 1 {
                (i, format!("{} ({n} times)", line.trim_end_matches('.')))
            } else {
                (i, line)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use breakglass_shared::session::{Progress, RecordingRef, RekorEntry};
    use time::OffsetDateTime;
    use uuid::Uuid;

    fn ev(
        kind: &str,
        from: Option<SessionState>,
        to: SessionState,
        detail: Option<&str>,
    ) -> SessionEventRecord {
        SessionEventRecord {
            id: 1,
            session_id: Uuid::nil(),
            actor: if kind == "approve" {
                "bob".into()
            } else {
                "system".into()
            },
            at: OffsetDateTime::UNIX_EPOCH,
            from_state: from,
            to_state: to,
            kind: kind.into(),
            detail: detail.map(str::to_string),
        }
    }

    #[test]
    fn no_identifier_reaches_the_reader() {
        use SessionState::*;
        let stored = serde_json::to_string(&Progress::RecordingStored(RecordingRef {
            key: "k".into(),
            version: "v".into(),
            sha256: "00".into(),
            bytes: 1,
        }))
        .unwrap_or_default();
        let lines = [
            ev("approve", Some(PendingApproval), Approved, None),
            ev("system_end", Some(Active), Ending, Some("TtlExpired")),
            ev("cleanup_done", Some(Ending), Ended, None),
            ev("progress", Some(Active), Active, Some(&stored)),
        ]
        .iter()
        .map(|e| event_sentence(e, "alice"))
        .collect::<Vec<_>>();
        assert_eq!(lines[0], "bob approved the request.");
        assert_eq!(lines[1], "Ending: the requested time ran out.");
        assert_eq!(
            lines[2],
            "Everything the session created in the cluster is removed."
        );
        assert_eq!(lines[3], "Recording saved.");
        for l in &lines {
            for id in ["_", "→", "PendingApproval", "TtlExpired", "{"] {
                assert!(!l.contains(id), "{l:?} shows {id:?}");
            }
        }
    }

    #[test]
    fn first_letters_change_case_in_ascii_only() {
        assert_eq!(
            lower_first("The requested time ran out."),
            "the requested time ran out."
        );
        assert_eq!(upper_first("pod gone"), "Pod gone");
        assert_eq!(lower_first("Édith ended it."), "Édith ended it.");
        assert_eq!(upper_first(""), "");
    }

    #[test]
    fn every_progress_reads_as_its_own_sentence() {
        let sentence = |p: Progress| {
            let detail = serde_json::to_string(&p).unwrap_or_default();
            event_sentence(
                &ev("progress", None, SessionState::Active, Some(&detail)),
                "alice",
            )
        };
        let recording = RecordingRef {
            key: "k".into(),
            version: "v".into(),
            sha256: "00".into(),
            bytes: 1,
        };
        let anchored = RekorEntry {
            uuid: "u".into(),
            log_index: 7,
        };
        let all = [
            Progress::GrantCreated { name: "g".into() },
            Progress::ProcessAccessAnnotated,
            Progress::DebugContainerAdded {
                name: "debug-1".into(),
            },
            Progress::CopyPodCreated {
                name: "web-1-copy".into(),
                container: "debug".into(),
            },
            Progress::RecordingStored(recording),
            Progress::Anchored(anchored),
            Progress::CleanupStep {
                detail: "grant".into(),
                left: false,
            },
            Progress::CleanupStep {
                detail: "debug container debug-1 still runs: it did not end".into(),
                left: true,
            },
        ]
        .map(sentence);
        assert_eq!(all[2], "Debug container debug-1 added to the pod.");
        assert_eq!(all[3], "Copy of the pod created as web-1-copy.");
        assert_eq!(all[6], "Cleaned up: grant.");
        assert_eq!(
            all[7],
            "Left in the cluster: debug container debug-1 still runs: it did not end."
        );
        for (i, s) in all.iter().enumerate() {
            assert_ne!(s, "A step in the cluster was done.", "variant {i}");
            assert!(all[..i].iter().all(|t| t != s), "{s:?} twice");
        }
    }

    #[test]
    fn repeated_steps_fold() {
        use SessionState::*;
        let stored = serde_json::to_string(&Progress::CleanupStep {
            detail: "x".into(),
            left: false,
        })
        .unwrap_or_default();
        let events = [
            ev("activated", Some(Activating), Active, None),
            ev("progress", Some(Active), Active, Some(&stored)),
            ev("progress", Some(Active), Active, Some(&stored)),
        ];
        let f = folded(&events, "alice");
        assert_eq!(f.len(), 2);
        assert_eq!(f[1], (1, "Cleaned up: x (2 times)".to_string()));
    }

    /// The page says the cluster is clean only when every cleanup step removed what it was for;
    /// a step that left a debug container running makes the end say so, whatever comes after.
    #[test]
    fn the_end_of_a_cleanup_says_clean_only_when_it_is() {
        use SessionState::*;
        let step = |left: bool| {
            serde_json::to_string(&Progress::CleanupStep {
                detail: "debug container debug-1 still runs: it did not end".into(),
                left,
            })
            .unwrap_or_default()
        };
        let (kept, stopped) = (step(true), step(false));
        let grant = serde_json::to_string(&Progress::CleanupStep {
            detail: "deleted grant g".into(),
            left: false,
        })
        .unwrap_or_default();
        let end = |steps: &[&str]| {
            let mut events = vec![ev("system_end", Some(Active), Ending, Some("TtlExpired"))];
            events.extend(
                steps
                    .iter()
                    .map(|d| ev("progress", Some(Ending), Ending, Some(d))),
            );
            events.push(ev("cleanup_done", Some(Ending), Ended, None));
            folded(&events, "alice")
                .last()
                .map(|(_, line)| line.clone())
                .unwrap_or_default()
        };
        assert_eq!(end(&[&stopped, &grant]), CLEANED);
        assert_eq!(end(&[&kept, &grant]), NOT_CLEANED);
        assert_eq!(end(&[]), CLEANED);
        // A row written before steps said what they left reads as it did.
        let old = r#"{"kind":"CleanupStep","detail":"deleted grant g"}"#;
        assert_eq!(end(&[old]), CLEANED);
    }
}
