//! Text for people: durations, ages, states, end reasons and search results. Pure functions
//! (host-tested).

use breakglass_shared::session::{short_id, Mode, Verdict};
use breakglass_shared::{EndReason, Session, SessionState, Tier};

mod events;
mod markers;
mod search;
pub use events::folded as folded_events;
pub use markers::marker_label;
pub use search::{field_message, found_summary, marked, more_moments, pending_note};
use time::OffsetDateTime;
use uuid::Uuid;

/// How the pages name session `id`: `session` and its [`short_id`], the random tail of the
/// id, as in the names of its cluster objects. Not the id's first digits: in a UUIDv7 they
/// are the creation time, the same for every session made within about a minute.
pub fn session_label(id: Uuid) -> String {
    format!("session {}", short_id(&id))
}

/// `1:05:09`, `5:09` or `0:09` for a number of seconds (negative counts as zero).
pub fn clock(secs: f64) -> String {
    let s = secs.max(0.0).floor() as u64;
    let (h, m, s) = (s / 3600, (s / 60) % 60, s % 60);
    if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// `x` with one decimal, trailing `.0` dropped (`12.3`, `4`), without float formatting (which
/// would add its tables to the wasm).
pub fn tenths(x: f64) -> String {
    let t = (x.max(0.0) * 10.0).round() as u64;
    if t.is_multiple_of(10) {
        format!("{}", t / 10)
    } else {
        format!("{}.{}", t / 10, t % 10)
    }
}

/// Seconds written as digits with at most one `.` (`12`, `12.3`, `.5`), as `?t=` links hold
/// them; `None` for anything else (a sign, an exponent, `inf`, `NaN`), so such a link plays
/// from the start. Not `str::parse::<f64>`: that puts core's float parser in the wasm, and
/// every number the player reads otherwise comes from the browser or `serde_json` already.
/// Exact (the nearest `f64`) for up to 15 significant digits, far more than a time needs.
pub fn parse_seconds(s: &str) -> Option<f64> {
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if whole.len() + frac.len() == 0
        || !whole
            .bytes()
            .chain(frac.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    // All digits as one integer, then one division: both exact up to 2^53 and 10^22, so the
    // result is the correctly rounded quotient.
    let mut digits = 0.0f64;
    let mut scale = 1.0f64;
    for b in whole.bytes() {
        digits = digits * 10.0 + f64::from(b - b'0');
    }
    for b in frac.bytes() {
        digits = digits * 10.0 + f64::from(b - b'0');
        scale *= 10.0;
    }
    Some(digits / scale)
}

/// Time left, compact: `12 min 05 s`, `45 s`, `1 h 02 min`.
pub fn time_left(secs: i64) -> String {
    let s = secs.max(0);
    if s >= 3600 {
        format!("{} h {:02} min", s / 3600, (s / 60) % 60)
    } else if s >= 60 {
        format!("{} min {:02} s", s / 60, s % 60)
    } else {
        format!("{s} s")
    }
}

/// How much of its time box a session used: `12 min 05 s of 30 min`.
pub fn time_used(from: OffsetDateTime, to: OffsetDateTime, minutes: u32) -> String {
    let secs = (to - from).whole_seconds();
    format!("{} of {minutes} min", time_left(secs))
}

/// How long ago: `just now`, `42 s ago`, `5 min ago`, `3 h ago`, `2 d ago`.
pub fn ago(secs: i64) -> String {
    match secs.max(0) {
        0..=4 => "just now".into(),
        s @ 5..=59 => format!("{s} s ago"),
        s @ 60..=3599 => format!("{} min ago", s / 60),
        s @ 3600..=86_399 => format!("{} h ago", s / 3600),
        s => format!("{} d ago", s / 86_400),
    }
}

/// Seconds from `at` to `now_secs` (Unix seconds).
pub fn age_secs(at: OffsetDateTime, now_secs: i64) -> i64 {
    now_secs - at.unix_timestamp()
}

/// `2024-05-01 14:03:07 UTC`.
pub fn timestamp(at: OffsetDateTime) -> String {
    let at = at.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second()
    )
}

/// A state as people say it.
pub fn state_label(s: SessionState) -> &'static str {
    match s {
        SessionState::PendingApproval => "waiting for approval",
        SessionState::Approved => "approved",
        SessionState::Activating => "activating",
        SessionState::Active => "active",
        SessionState::Ending => "ending",
        SessionState::Ended => "ended",
        SessionState::Denied => "denied",
        SessionState::Expired => "expired",
        SessionState::Withdrawn => "withdrawn",
        SessionState::Failed => "failed",
    }
}

/// CSS modifier of a state badge.
pub fn state_class(s: SessionState) -> &'static str {
    match s {
        SessionState::PendingApproval => "state state-pending",
        SessionState::Approved | SessionState::Activating => "state state-progress",
        SessionState::Active => "state state-active",
        SessionState::Ending => "state state-progress",
        SessionState::Ended | SessionState::Withdrawn | SessionState::Expired => "state state-done",
        SessionState::Denied | SessionState::Failed => "state state-bad",
    }
}

/// Why a session ended, as a sentence about `requester`'s session.
pub fn end_reason(r: &EndReason, requester: &str) -> String {
    match r {
        EndReason::UserEnded => format!("{requester} ended it."),
        EndReason::Terminated { by } => format!("{by} terminated it."),
        EndReason::TtlExpired => "The requested time ran out.".into(),
        EndReason::PodGone => "The pod went away.".into(),
        EndReason::RelayError => "The terminal connection to the pod broke.".into(),
        EndReason::RecordingFailed => {
            "The recording could not be kept, so the session could not go on.".into()
        }
        EndReason::AdminForceEnded => "An operator ended it.".into(),
        EndReason::Revoked => "Its requester's access was taken away while it ran.".into(),
        EndReason::Locked => "An admin locked its environment or its requester.".into(),
    }
}

/// The session panel's headline: the state, with who made it so where someone did. `mine`:
/// the reader is the requester.
pub fn headline(s: &Session, mine: bool) -> String {
    match s.state {
        SessionState::PendingApproval if mine => "Your request is waiting for approval".into(),
        SessionState::PendingApproval => {
            format!("{}'s request is waiting for approval", s.requester)
        }
        SessionState::Approved => match (&s.glass_broken_by, &s.approver) {
            (Some(by), _) => format!("Glass broken by {by}"),
            (None, Some(by)) if s.tier == Tier::Flight => format!("Approved by {by}"),
            _ => "Approved automatically (Ground)".into(),
        },
        SessionState::Activating => "Activating".into(),
        SessionState::Active => "Active".into(),
        SessionState::Ending => "Ending".into(),
        SessionState::Ended => match &s.end_reason {
            Some(EndReason::Terminated { by }) => format!("Terminated by {by}"),
            _ => "Ended".into(),
        },
        SessionState::Denied => match &s.approver {
            Some(by) => format!("Denied by {by}"),
            None => "Denied".into(),
        },
        SessionState::Expired => "Expired".into(),
        SessionState::Withdrawn => "Withdrawn".into(),
        SessionState::Failed => "Activation failed".into(),
    }
}

/// The sentence under the headline: what it means now, in words the headline has not used.
pub fn outcome(s: &Session) -> String {
    match s.state {
        SessionState::PendingApproval => "A second person with approve rights decides.".into(),
        SessionState::Approved | SessionState::Activating => {
            "The debug container is being prepared; the terminal opens here when it runs.".into()
        }
        SessionState::Active => "The terminal is attached to the debug container.".into(),
        SessionState::Ending => "Closing the terminal and cleaning up the cluster.".into(),
        SessionState::Ended => match &s.end_reason {
            Some(EndReason::Terminated { .. }) => "Its terminal was closed.".into(),
            Some(r) => end_reason(r, &s.requester),
            None => "It is over.".into(),
        },
        SessionState::Denied => match &s.denial_reason {
            Some(why) => format!("Reason: {why}"),
            None => "No reason was given.".into(),
        },
        SessionState::Expired => {
            if s.approver.is_some() || s.glass_broken_by.is_some() {
                "The debug container did not start in time.".into()
            } else {
                "Nobody approved it in time.".into()
            }
        }
        SessionState::Withdrawn => {
            format!("{} took the request back before it started.", s.requester)
        }
        SessionState::Failed => match &s.failure {
            Some(f) => f.clone(),
            None => "The server gave no reason.".into(),
        },
    }
}

/// A review's verdict as a reader says it.
pub fn verdict_label(v: Verdict) -> &'static str {
    match v {
        Verdict::Ok => "no concerns",
        Verdict::Concern => "concern raised",
    }
}

/// How the session reaches the pod, in words.
pub fn mode_label(m: Mode) -> &'static str {
    match m {
        Mode::Live => "debug container in the running pod",
        Mode::Copy => "hardened copy of the pod",
    }
}

/// A review as a sentence about its reviewer.
pub fn review_sentence(reviewer: &str, v: Verdict) -> String {
    match v {
        Verdict::Ok => format!("{reviewer} saw no concerns"),
        Verdict::Concern => format!("{reviewer} raised a concern"),
    }
}

/// Why nothing was recorded for `s`, when nothing was or will be: the recording page says this
/// instead of offering a player. `None` once a terminal may have run (or is about to).
pub fn nothing_recorded(s: &Session) -> Option<String> {
    if s.recording.is_some() {
        return None;
    }
    let why = match s.state {
        SessionState::PendingApproval => {
            "The request is waiting for approval; recording starts when its terminal opens."
                .to_string()
        }
        SessionState::Approved | SessionState::Activating => {
            "The session has not started yet; recording starts when its terminal opens.".to_string()
        }
        SessionState::Denied
        | SessionState::Expired
        | SessionState::Withdrawn
        | SessionState::Failed => {
            format!(
                "Nothing was recorded: this session never ran. {}",
                outcome(s)
            )
        }
        SessionState::Active | SessionState::Ending | SessionState::Ended => return None,
    };
    Some(why)
}

/// "1 of 2 approvals: bob (sre)" for a request that needs more than one; `None` when one
/// approval is all it needs.
pub fn approvals_line(s: &Session) -> Option<String> {
    let needed = s.quorum.needed();
    if needed < 2 {
        return None;
    }
    let given = s.approvals.len();
    let who: Vec<String> = s
        .approvals
        .iter()
        .map(|a| match &a.group {
            Some(g) => format!("{} ({g})", a.by),
            None => a.by.clone(),
        })
        .collect();
    let mut line = format!("{given} of {needed} approvals");
    if !who.is_empty() {
        line.push_str(&format!(": {}", who.join(", ")));
    }
    if s.quorum.distinct_groups {
        line.push_str("; each from another group");
    }
    Some(line)
}

/// `30 min`, or with extensions `30 min, extended by 15 (45 min)`.
pub fn duration_line(s: &Session) -> String {
    match s.extensions.granted_minutes() {
        0 => format!("{} min", s.duration_minutes),
        more => format!(
            "{} min, extended by {more} ({} min)",
            s.duration_minutes,
            s.granted_minutes()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_made_a_millisecond_apart_have_different_labels() {
        // Two UUIDv7 as the server makes them: the time in milliseconds, then random bits.
        let at = 1_767_268_800_000;
        let first = uuid::Builder::from_unix_timestamp_millis(at, &[0x11; 10]).into_uuid();
        let next = uuid::Builder::from_unix_timestamp_millis(at + 1, &[0x22; 10]).into_uuid();
        assert_eq!(
            first.to_string()[..8],
            next.to_string()[..8],
            "same leading digits"
        );
        assert_ne!(session_label(first), session_label(next));
        assert_eq!(
            session_label(first),
            format!("session {}", short_id(&first))
        );
    }

    #[test]
    fn clocks_and_ages() {
        assert_eq!(clock(9.9), "0:09");
        assert_eq!(clock(309.0), "5:09");
        assert_eq!(clock(3909.0), "1:05:09");
        assert_eq!(clock(-3.0), "0:00");
        assert_eq!(tenths(12.345), "12.3");
        assert_eq!(tenths(4.0), "4");
        assert_eq!(tenths(0.5), "0.5");
        assert_eq!(tenths(-1.0), "0");
        assert_eq!(time_left(45), "45 s");
        assert_eq!(time_left(725), "12 min 05 s");
        assert_eq!(time_left(3720), "1 h 02 min");
        assert_eq!(ago(2), "just now");
        assert_eq!(ago(42), "42 s ago");
        assert_eq!(ago(300), "5 min ago");
        assert_eq!(ago(3 * 86_400), "3 d ago");
    }

    #[test]
    fn seconds_as_links_write_them() {
        assert_eq!(parse_seconds("12"), Some(12.0));
        assert_eq!(parse_seconds("12.3"), Some(12.3));
        assert_eq!(parse_seconds("0.1"), Some(0.1));
        assert_eq!(parse_seconds(".5"), Some(0.5));
        assert_eq!(parse_seconds("7."), Some(7.0));
        assert_eq!(parse_seconds("3600.25"), Some(3600.25));
        // What `links::recording` writes comes back as the same number.
        for t in [0.1, 2.5, 59.9, 3599.9, 86_400.7] {
            assert_eq!(
                parse_seconds(&tenths(t)),
                Some((t * 10.0f64).round() / 10.0)
            );
        }
        // Anything else plays from the start.
        for bad in [
            "", ".", "-3", "+3", "1e3", "1E3", "inf", "NaN", "1.2.3", " 1", "1,5", "0x10",
        ] {
            assert_eq!(parse_seconds(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn timestamps() {
        let at = OffsetDateTime::from_unix_timestamp(1_700_000_000)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH);
        assert_eq!(timestamp(at), "2023-11-14 22:13:20 UTC");
        assert_eq!(
            time_used(at, at + time::Duration::seconds(725), 30),
            "12 min 05 s of 30 min"
        );
        assert_eq!(time_used(at, at, 5), "0 s of 5 min");
    }

    #[test]
    fn end_reasons_name_who() {
        assert_eq!(
            end_reason(&EndReason::Terminated { by: "carol".into() }, "alice"),
            "carol terminated it."
        );
        assert_eq!(
            end_reason(&EndReason::UserEnded, "alice"),
            "alice ended it."
        );
        // What the terminal's end note says when the time runs out.
        assert_eq!(
            end_reason(&EndReason::TtlExpired, "alice"),
            "The requested time ran out."
        );
    }

    #[test]
    fn headline_and_outcome_do_not_repeat_the_state() {
        let mut s = crate::fixtures::session(0, SessionState::PendingApproval, 1);
        s.state = SessionState::Approved;
        s.approver = Some("bob".into());
        let (h, o) = (headline(&s, true), outcome(&s));
        assert_eq!(h, "Approved by bob");
        assert!(!o.to_ascii_lowercase().contains("approv"), "{o}");
        s.state = SessionState::Ended;
        s.end_reason = Some(EndReason::UserEnded);
        assert_eq!(
            (headline(&s, true), outcome(&s)),
            ("Ended".into(), "alice ended it.".into())
        );
        s.state = SessionState::Denied;
        s.denial_reason = Some("not now".into());
        assert_eq!(headline(&s, false), "Denied by bob");
        assert_eq!(outcome(&s), "Reason: not now");
    }

    #[test]
    fn a_recording_page_says_why_nothing_was_recorded() {
        let mut s = crate::fixtures::session(0, SessionState::PendingApproval, 1);
        assert!(nothing_recorded(&s).is_some_and(|w| w.contains("waiting for approval")));
        s.state = SessionState::Withdrawn;
        let why = nothing_recorded(&s).unwrap_or_default();
        assert!(
            why.contains("never ran") && why.contains("took the request back"),
            "{why}"
        );
        s.state = SessionState::Active;
        assert_eq!(nothing_recorded(&s), None);
        assert_eq!(
            review_sentence("carol", Verdict::Concern),
            "carol raised a concern"
        );
    }

    #[test]
    fn a_quorum_says_how_many_approvals_it_has_and_from_whom() {
        let mut s =
            crate::fixtures::session(1, breakglass_shared::SessionState::PendingApproval, 1);
        assert_eq!(approvals_line(&s), None, "one approval needs no count");
        s.quorum = breakglass_shared::session::Quorum {
            required: 2,
            distinct_groups: true,
        };
        assert_eq!(
            approvals_line(&s).as_deref(),
            Some("0 of 2 approvals; each from another group")
        );
        s.approvals.push(breakglass_shared::session::Approval {
            by: "bob".into(),
            group: Some("sre".into()),
            at: s.created_at,
        });
        assert_eq!(
            approvals_line(&s).as_deref(),
            Some("1 of 2 approvals: bob (sre); each from another group")
        );
    }
}
