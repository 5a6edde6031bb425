//! Text for people: durations, ages, states and end reasons. Pure functions (host-tested).

use breakglass_shared::{EndReason, Session, SessionState};
use time::OffsetDateTime;

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

/// Why a session ended, as a sentence.
pub fn end_reason(r: &EndReason) -> String {
    match r {
        EndReason::UserEnded => "ended by the requester".into(),
        EndReason::Terminated { by } => format!("terminated by {by}"),
        EndReason::TtlExpired => "the requested time ran out".into(),
        EndReason::PodGone => "the pod went away".into(),
        EndReason::RelayError => "the terminal connection to the pod broke".into(),
        EndReason::RecordingFailed => {
            "the recording could not be kept (no recording, no session)".into()
        }
        EndReason::AdminForceEnded => "ended by an operator".into(),
    }
}

/// One line saying where a final or waiting session stands.
pub fn outcome(s: &Session) -> String {
    match s.state {
        SessionState::PendingApproval => "waiting for a second person to approve".into(),
        SessionState::Approved => match (&s.glass_broken_by, &s.approver) {
            (Some(by), _) => format!("glass broken by {by}; activation starts shortly"),
            (None, Some(by)) if s.tier == breakglass_shared::Tier::Flight => {
                format!("approved by {by}; activation starts shortly")
            }
            _ => "approved; activation starts shortly".into(),
        },
        SessionState::Activating => "adding the debug container to the pod…".into(),
        SessionState::Active => "active: the terminal is attached to the debug container".into(),
        SessionState::Ending => "ending: closing the terminal and cleaning up".into(),
        SessionState::Ended => match &s.end_reason {
            Some(r) => format!("ended: {}", end_reason(r)),
            None => "ended".into(),
        },
        SessionState::Denied => match (&s.approver, &s.denial_reason) {
            (Some(by), Some(why)) => format!("denied by {by}: {why}"),
            (None, Some(why)) => format!("denied: {why}"),
            _ => "denied".into(),
        },
        SessionState::Expired => "expired: nobody approved it in time".into(),
        SessionState::Withdrawn => "withdrawn by the requester".into(),
        SessionState::Failed => match &s.failure {
            Some(f) => format!("activation failed: {f}"),
            None => "activation failed".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn timestamps() {
        let at = OffsetDateTime::from_unix_timestamp(1_700_000_000)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH);
        assert_eq!(timestamp(at), "2023-11-14 22:13:20 UTC");
    }

    #[test]
    fn end_reasons_name_who() {
        assert_eq!(
            end_reason(&EndReason::Terminated { by: "carol".into() }),
            "terminated by carol"
        );
    }
}
