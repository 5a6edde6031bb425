//! The model's own rules: the first row, and the names on the wire.

#![allow(clippy::unwrap_used)]

use serde_json::json;
use uuid::Uuid;

use super::testing::{all_events, req, NOW};
use super::*;

#[test]
fn ground_skips_approval_and_keeps_recycle() {
    let s = Session::new_request(Uuid::from_u128(1), req(Tier::Ground), NOW);
    assert_eq!(s.state, SessionState::Approved);
    assert!(s.recycle);
    let f = Session::new_request(Uuid::from_u128(1), req(Tier::Flight), NOW);
    assert_eq!(f.state, SessionState::PendingApproval);
    assert!(!f.recycle, "Flight never recycles");
}

#[test]
fn names_round_trip() {
    for s in SessionState::ALL {
        assert_eq!(SessionState::parse(s.as_str()), Some(s));
    }
    for r in [
        EndReason::UserEnded,
        EndReason::Terminated { by: "x".into() },
        EndReason::TtlExpired,
        EndReason::PodGone,
        EndReason::RelayError,
        EndReason::RecordingFailed,
        EndReason::AdminForceEnded,
        EndReason::Revoked,
        EndReason::Locked,
    ] {
        assert_eq!(EndReason::from_parts(r.kind(), r.by()), Some(r.clone()));
    }
    assert_eq!(short_id(&Uuid::from_u128(0xabcdef12)), "abcdef12");
}

#[test]
fn derived_names_are_the_wire_names() {
    let serde_name = |v: serde_json::Value| v.as_str().map(str::to_string);
    for s in SessionState::ALL {
        assert_eq!(serde_name(json!(s)).as_deref(), Some(s.as_str()));
        assert_eq!(s.to_string(), s.as_str());
    }
    assert_eq!(
        [Tier::Ground.as_str(), Tier::Flight.as_str()],
        ["ground", "flight"]
    );
    assert_eq!([Mode::Live.as_str(), Mode::Copy.as_str()], ["live", "copy"]);
    assert_eq!(
        [Verdict::Ok.as_str(), Verdict::Concern.as_str()],
        ["ok", "concern"]
    );
    for t in [Tier::Ground, Tier::Flight] {
        assert_eq!(serde_name(json!(t)).as_deref(), Some(t.as_str()));
        assert_eq!(t.as_str().parse::<Tier>(), Ok(t));
    }
    for m in [Mode::Live, Mode::Copy] {
        assert_eq!(serde_name(json!(m)).as_deref(), Some(m.as_str()));
        assert_eq!(m.as_str().parse::<Mode>(), Ok(m));
    }
    for v in [Verdict::Ok, Verdict::Concern] {
        assert_eq!(serde_name(json!(v)).as_deref(), Some(v.as_str()));
        assert_eq!(v.as_str().parse::<Verdict>(), Ok(v));
    }
    let r = EndReason::Terminated { by: "x".into() };
    assert_eq!(json!(r)["kind"], "Terminated");
    assert_eq!(r.kind(), "Terminated");
    assert_eq!(EndReason::from_parts("Terminated", None), None);
    let kinds: Vec<&str> = all_events().iter().map(SessionEvent::kind).collect();
    assert_eq!(
        kinds,
        [
            "approve",
            "deny",
            "break_glass",
            "end",
            "ask_extension",
            "approve_extension",
            "deny_extension",
            "terminate",
            "system_end",
            "expire",
            "begin_activation",
            "activated",
            "activation_failed",
            "cleanup_done",
            "progress"
        ]
    );
}
