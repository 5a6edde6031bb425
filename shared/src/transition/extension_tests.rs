//! Extensions: the requester asks while the session runs; Ground gives at once, Flight waits
//! for the session's quorum; the bounds it was made under hold.

#![allow(clippy::unwrap_used)]

use time::Duration;

use crate::permissions::PermissionSet;
use crate::session::testing::{session_in, user, NOW};
use crate::session::{Quorum, Session, SessionEvent, SessionState, Tier, TransitionError};

fn running(tier: Tier) -> Session {
    let mut s = session_in(SessionState::Active, tier);
    s.active_at = Some(NOW);
    s.expires_at = Some(NOW + Duration::minutes(30));
    s
}

fn ask(minutes: u32) -> SessionEvent {
    SessionEvent::AskExtension {
        by: user("alice", PermissionSet::NONE),
        minutes,
        reason: "the dump is still running".into(),
    }
}

fn approve(by: &str, groups: &[&str]) -> SessionEvent {
    SessionEvent::ApproveExtension {
        by: user(by, PermissionSet::ALL),
        groups: groups.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn ground_gives_the_time_at_once_and_moves_the_deadline() {
    let s = running(Tier::Ground);
    let later = NOW + Duration::minutes(20);
    let next = s.apply(&ask(15), later).unwrap();
    assert_eq!(next.state, SessionState::Active);
    assert_eq!(next.expires_at, Some(NOW + Duration::minutes(45)));
    assert_eq!(next.granted_minutes(), 45);
    assert_eq!(next.extensions.granted.len(), 1);
    assert_eq!(next.extensions.granted[0].granted_at, later);
    assert!(next.extensions.granted[0].approvals.is_empty());
    assert!(next.extensions.pending.is_none());
}

#[test]
fn flight_waits_for_the_quorum_of_the_request() {
    let mut s = running(Tier::Flight);
    s.quorum = Quorum {
        required: 2,
        distinct_groups: true,
    };
    let asked = s.apply(&ask(20), NOW).unwrap();
    assert_eq!(
        asked.expires_at, s.expires_at,
        "nothing given before approval"
    );
    assert_eq!(asked.extensions.pending.as_ref().unwrap().minutes, 20);

    let once = asked.apply(&approve("bob", &["sre"]), NOW).unwrap();
    assert_eq!(
        once.expires_at, s.expires_at,
        "one of two approvals gives nothing"
    );
    // The same person, or a second person of the same group, does not count again.
    assert_eq!(
        once.apply(&approve("bob", &["sre"]), NOW),
        Err(TransitionError::AlreadyApproved)
    );
    assert_eq!(
        once.apply(&approve("carol", &["sre"]), NOW),
        Err(TransitionError::GroupCounted)
    );
    let twice = once.apply(&approve("carol", &["dba"]), NOW).unwrap();
    assert_eq!(twice.expires_at, Some(NOW + Duration::minutes(50)));
    assert_eq!(twice.extensions.granted[0].approvals.len(), 2);
    assert!(twice.extensions.pending.is_none());
}

#[test]
fn the_requester_cannot_approve_their_own_extension_and_nobody_on_ground() {
    let asked = running(Tier::Flight).apply(&ask(10), NOW).unwrap();
    assert_eq!(
        asked.apply(&approve("alice", &[]), NOW),
        Err(TransitionError::OwnRequest)
    );
    let without = SessionEvent::ApproveExtension {
        by: user("bob", PermissionSet::NONE),
        groups: vec![],
    };
    assert!(matches!(
        asked.apply(&without, NOW),
        Err(TransitionError::MissingPermission(_))
    ));
    assert_eq!(
        running(Tier::Ground).apply(&approve("bob", &[]), NOW),
        Err(TransitionError::NotFlight)
    );
}

#[test]
fn a_refusal_keeps_the_deadline_and_is_shown_until_the_next_ask() {
    let asked = running(Tier::Flight).apply(&ask(10), NOW).unwrap();
    let deny = SessionEvent::DenyExtension {
        by: user("bob", PermissionSet::ALL),
        reason: "hand over to the day shift".into(),
    };
    let denied = asked.apply(&deny, NOW).unwrap();
    assert_eq!(denied.expires_at, asked.expires_at);
    assert!(denied.extensions.pending.is_none());
    assert_eq!(denied.extensions.denied.as_ref().unwrap().by, "bob");
    assert_eq!(
        denied.apply(&deny, NOW),
        Err(TransitionError::NoExtensionWaiting)
    );
    let again = denied.apply(&ask(5), NOW).unwrap();
    assert!(again.extensions.denied.is_none());
    assert_eq!(again.extensions.pending.as_ref().unwrap().minutes, 5);
}

#[test]
fn the_bounds_the_session_was_made_under_hold() {
    let s = running(Tier::Ground);
    // 30 requested, 60 at most: 30 fit, not 31, and never 0.
    assert_eq!(
        s.apply(&ask(31), NOW),
        Err(TransitionError::BeyondMaximum { room: 30 })
    );
    assert_eq!(
        s.apply(&ask(0), NOW),
        Err(TransitionError::BeyondMaximum { room: 30 })
    );
    let once = s.apply(&ask(10), NOW).unwrap();
    let twice = once.apply(&ask(10), NOW).unwrap();
    assert_eq!(twice.granted_minutes(), 50);
    assert_eq!(
        twice.apply(&ask(5), NOW),
        Err(TransitionError::NoExtensionsLeft { max: 2 })
    );
    let mut none = running(Tier::Ground);
    none.extensions.limits.max_count = 0;
    let refused = none.apply(&ask(5), NOW).unwrap_err();
    assert!(
        refused.to_string().contains("cannot be extended"),
        "{refused}"
    );
    assert_eq!(refused.field(), None);
    assert_eq!(
        TransitionError::BeyondMaximum { room: 3 }.field(),
        Some("minutes")
    );
}

#[test]
fn only_the_requester_asks_only_while_it_runs_and_before_its_deadline() {
    let s = running(Tier::Flight);
    let bob = SessionEvent::AskExtension {
        by: user("bob", PermissionSet::ALL),
        minutes: 5,
        reason: "x".into(),
    };
    assert!(matches!(
        s.apply(&bob, NOW),
        Err(TransitionError::NotRequester { .. })
    ));
    let asked = s.apply(&ask(5), NOW).unwrap();
    assert_eq!(
        asked.apply(&ask(5), NOW),
        Err(TransitionError::ExtensionWaiting)
    );
    assert_eq!(
        s.apply(&ask(5), NOW + Duration::minutes(30)),
        Err(TransitionError::DeadlinePassed)
    );
    for state in [SessionState::Activating, SessionState::Ending] {
        assert!(matches!(
            session_in(state, Tier::Ground).apply(&ask(5), NOW),
            Err(TransitionError::WrongState { .. })
        ));
    }
}

#[test]
fn the_ceiling_covers_every_extension_still_possible() {
    let s = running(Tier::Ground);
    assert_eq!(s.ceiling_minutes(), 60);
    let twice = s.apply(&ask(5), NOW).unwrap().apply(&ask(5), NOW).unwrap();
    assert_eq!(twice.ceiling_minutes(), 40, "no ask left: what was given");
    let mut none = running(Tier::Ground);
    none.extensions.limits.max_count = 0;
    assert_eq!(none.ceiling_minutes(), 30);
}

#[test]
fn the_recording_notes_each_step_in_utc() {
    let s = running(Tier::Flight);
    let asked = s.apply(&ask(15), NOW).unwrap();
    assert_eq!(
        asked.extension_note("ask_extension").unwrap(),
        "more time asked: 15 min: the dump is still running"
    );
    let given = asked.apply(&approve("bob", &[]), NOW).unwrap();
    assert_eq!(
        given.extension_note("approve_extension").unwrap(),
        "extended by 15 min to 12:45 UTC, approved by bob"
    );
    let ground = running(Tier::Ground).apply(&ask(5), NOW).unwrap();
    assert_eq!(
        ground.extension_note("ask_extension").unwrap(),
        "extended by 5 min to 12:35 UTC: the dump is still running"
    );
    assert_eq!(ground.extension_note("terminate"), None);
}
