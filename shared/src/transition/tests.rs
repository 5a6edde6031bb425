//! The state machine's table, its person rules as `apply` enforces them, reviews and late
//! anchoring, and random event sequences.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use time::Duration;
use uuid::Uuid;

use crate::permissions::{Permission, PermissionSet};
use crate::session::testing::{all_events, req, session_in, user, NOW};
use crate::session::{
    Actor, EndReason, Progress, RecordingRef, RekorEntry, ReviewError, Session, SessionEvent,
    SessionState, Tier, TransitionError, Verdict,
};

/// The whole table: for each tier, state and event, the expected next state or `None` for a
/// refusal. Written out by hand so that any change to the machine shows up here.
fn expected(tier: Tier, state: SessionState, event: &SessionEvent) -> Option<SessionState> {
    use SessionState as S;
    let flight = tier == Tier::Flight;
    match (state, event.kind()) {
        (s, _) if s.is_final() => None,
        (S::PendingApproval, "approve") if flight => Some(S::Approved),
        (S::PendingApproval, "deny") if flight => Some(S::Denied),
        (S::PendingApproval, "break_glass") if flight => Some(S::Approved),
        (S::PendingApproval | S::Approved, "end") => Some(S::Withdrawn),
        (S::Activating | S::Active, "end") => Some(S::Ending),
        (S::Approved | S::Activating | S::Active, "terminate") => Some(S::Ending),
        // Asking changes no state; approving or refusing needs a waiting ask, which no row of
        // the table has (the extension tests cover them).
        (S::Active, "ask_extension") => Some(S::Active),
        (S::Activating | S::Active, "system_end") => Some(S::Ending),
        (S::PendingApproval | S::Approved, "expire") => Some(S::Expired),
        (S::Approved, "begin_activation") => Some(S::Activating),
        (S::Activating, "activated") => Some(S::Active),
        (S::Activating, "activation_failed") => Some(S::Failed),
        (S::Ending, "cleanup_done") => Some(S::Ended),
        (S::Activating | S::Active | S::Ending, "progress") => Some(state),
        _ => None,
    }
}

#[test]
fn every_state_event_pair_is_a_transition_or_a_typed_error() {
    let mut checked = 0;
    for tier in [Tier::Ground, Tier::Flight] {
        for state in SessionState::ALL {
            for event in all_events() {
                let s = session_in(state, tier);
                let got = s.apply(&event, NOW);
                match (expected(tier, state, &event), got) {
                    (Some(want), Ok(next)) => {
                        assert_eq!(next.state, want, "{tier:?} {state} {}", event.kind());
                        assert_eq!(next.version, s.version + 1);
                    }
                    (None, Err(e)) => {
                        if state.is_final() {
                            assert_eq!(e, TransitionError::Final { state });
                        }
                    }
                    (want, got) => {
                        panic!(
                            "{tier:?} {state} {}: want {want:?}, got {got:?}",
                            event.kind()
                        )
                    }
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 2 * 10 * 15);
}

#[test]
fn requester_cannot_approve_own_request() {
    let s = session_in(SessionState::PendingApproval, Tier::Flight);
    let e = s
        .apply(
            &SessionEvent::Approve {
                by: user("alice", PermissionSet::ALL),
                groups: vec![],
            },
            NOW,
        )
        .unwrap_err();
    assert_eq!(e, TransitionError::OwnRequest);
    assert!(e.is_forbidden());
}

#[test]
fn approve_needs_the_permission_and_break_glass_needs_self() {
    let s = session_in(SessionState::PendingApproval, Tier::Flight);
    let mut only_request = PermissionSet::NONE;
    only_request.request = true;
    assert_eq!(
        s.apply(
            &SessionEvent::Approve {
                by: user("carol", only_request),
                groups: vec![],
            },
            NOW
        ),
        Err(TransitionError::MissingPermission(Permission::Approve))
    );
    let mut approver = PermissionSet::NONE;
    approver.approve = true;
    assert_eq!(
        s.apply(
            &SessionEvent::BreakGlass {
                by: user("alice", approver)
            },
            NOW
        ),
        Err(TransitionError::MissingPermission(Permission::SelfApprove))
    );
    let next = s
        .apply(
            &SessionEvent::BreakGlass {
                by: user("alice", PermissionSet::ALL),
            },
            NOW,
        )
        .unwrap();
    assert_eq!(next.glass_broken_by.as_deref(), Some("alice"));
    assert!(next.is_authorized_for_flight());
}

#[test]
fn ending_can_recycle_the_pod_only_where_the_tier_allows_in_live_mode() {
    let end = |recycle| SessionEvent::End {
        by: user("alice", PermissionSet::ALL),
        recycle,
    };
    let mut ground = session_in(SessionState::Active, Tier::Ground);
    ground.recycle = false;
    let next = ground.apply(&end(true), NOW).unwrap();
    assert!(next.recycle);
    assert_eq!(next.state, SessionState::Ending);
    assert!(!ground.apply(&end(false), NOW).unwrap().recycle);
    // Refused, naming the field; the session is as it was.
    let flight = session_in(SessionState::Active, Tier::Flight);
    let e = flight.apply(&end(true), NOW).unwrap_err();
    assert_eq!(e.field(), Some("recycle"), "{e}");
    assert!(e.to_string().contains("Flight"), "{e}");
    let mut copy = ground.clone();
    copy.mode = crate::Mode::Copy;
    let e = copy.apply(&end(true), NOW).unwrap_err();
    assert_eq!(e.field(), Some("recycle"), "{e}");
    // Before activation it withdraws; there is nothing to recycle.
    let pending = session_in(SessionState::Approved, Tier::Ground);
    let withdrawn = pending.apply(&end(true), NOW).unwrap();
    assert_eq!(withdrawn.state, SessionState::Withdrawn);
}

#[test]
fn only_the_requester_ends_and_terminate_needs_permission() {
    let s = session_in(SessionState::Active, Tier::Ground);
    assert!(matches!(
        s.apply(
            &SessionEvent::End {
                by: user("bob", PermissionSet::ALL),
                recycle: false,
            },
            NOW
        ),
        Err(TransitionError::NotRequester { .. })
    ));
    assert_eq!(
        s.apply(
            &SessionEvent::Terminate {
                by: user("bob", PermissionSet::NONE)
            },
            NOW
        ),
        Err(TransitionError::MissingPermission(Permission::Terminate))
    );
    let next = s
        .apply(
            &SessionEvent::Terminate {
                by: user("bob", PermissionSet::ALL),
            },
            NOW,
        )
        .unwrap();
    assert_eq!(
        next.end_reason,
        Some(EndReason::Terminated { by: "bob".into() })
    );
    let done = next.apply(&SessionEvent::CleanupDone, NOW).unwrap();
    assert_eq!(done.state, SessionState::Ended);
    assert_eq!(
        done.end_reason,
        Some(EndReason::Terminated { by: "bob".into() })
    );
}

#[test]
fn people_cannot_send_system_events_and_the_system_cannot_approve() {
    let s = session_in(SessionState::PendingApproval, Tier::Flight);
    assert!(matches!(
        s.apply(
            &SessionEvent::Approve {
                by: Actor::System,
                groups: vec![]
            },
            NOW
        ),
        Err(TransitionError::WrongActor { .. })
    ));
    let a = session_in(SessionState::Active, Tier::Flight);
    assert!(matches!(
        a.apply(
            &SessionEvent::SystemEnd {
                reason: EndReason::UserEnded
            },
            NOW
        ),
        Err(TransitionError::WrongActor { .. })
    ));
}

#[test]
fn activation_sets_the_deadline_and_refuses_an_unapproved_flight_row() {
    let s = session_in(SessionState::Activating, Tier::Ground);
    let a = s.apply(&SessionEvent::Activated, NOW).unwrap();
    assert_eq!(a.expires_at, Some(NOW + Duration::minutes(30)));
    let mut forged = session_in(SessionState::Approved, Tier::Flight);
    forged.approver = Some("alice".into());
    assert!(forged.apply(&SessionEvent::BeginActivation, NOW).is_err());
}

#[test]
fn late_anchoring_only_once_on_an_ended_recorded_session() {
    let entry = RekorEntry {
        uuid: "ab".repeat(40),
        log_index: 7,
    };
    let recording = RecordingRef {
        key: "sessions/x.cast".into(),
        version: "3".into(),
        sha256: "00".repeat(32),
        bytes: 10,
    };
    for state in SessionState::ALL {
        let mut s = session_in(state, Tier::Flight);
        s.recording = Some(recording.clone());
        let r = s.anchor_late(&entry);
        if state == SessionState::Ended {
            let next = r.unwrap();
            assert_eq!(next.version, s.version + 1);
            assert_eq!(next.rekor.as_ref(), Some(&entry));
            let mut only_entry = next.clone();
            only_entry.rekor = None;
            only_entry.version = s.version;
            assert_eq!(only_entry, s, "nothing else changes");
            assert!(next.anchor_late(&entry).is_err(), "only once");
        } else {
            assert!(r.is_err(), "{state:?}");
        }
    }
    let mut unrecorded = session_in(SessionState::Ended, Tier::Ground);
    unrecorded.recording = None;
    assert!(unrecorded.anchor_late(&entry).is_err());
}

#[test]
fn review_rules() {
    let mut s = session_in(SessionState::Ended, Tier::Flight);
    s.glass_broken_by = Some("alice".into());
    assert!(s.review_due());
    s.finished_at = Some(NOW);
    assert_eq!(s.review_deadline(), Some(NOW + time::Duration::days(7)));
    assert_eq!(
        s.review("alice", &PermissionSet::ALL, Verdict::Ok, "", NOW),
        Err(ReviewError::OwnSession)
    );
    assert_eq!(
        s.review("bob", &PermissionSet::NONE, Verdict::Ok, "", NOW),
        Err(ReviewError::MissingPermission(Permission::Approve))
    );
    let r = s
        .review("bob", &PermissionSet::ALL, Verdict::Concern, "odd", NOW)
        .unwrap();
    assert!(!r.review_due());
    assert_eq!(r.review_deadline(), None, "reviewed: nothing is due");
    assert!(matches!(
        r.review("carol", &PermissionSet::ALL, Verdict::Ok, "", NOW),
        Err(ReviewError::AlreadyReviewed(_))
    ));
    let active = session_in(SessionState::Active, Tier::Flight);
    assert_eq!(
        active.review("bob", &PermissionSet::ALL, Verdict::Ok, "", NOW),
        Err(ReviewError::NotFinished(SessionState::Active))
    );
}

fn arb_actor() -> impl Strategy<Value = Actor> {
    prop_oneof![
        Just(Actor::System),
        (
            prop::sample::select(vec!["alice", "bob", "carol"]),
            any::<[bool; 4]>()
        )
            .prop_map(|(n, p)| Actor::User {
                name: n.into(),
                permissions: PermissionSet {
                    request: p[0],
                    approve: p[1],
                    terminate: p[2],
                    self_approve: p[3],
                    audit: false,
                },
            }),
    ]
}

fn arb_event() -> impl Strategy<Value = SessionEvent> {
    prop_oneof![
        arb_actor().prop_map(|by| SessionEvent::Approve { by, groups: vec![] }),
        arb_actor().prop_map(|by| SessionEvent::Deny {
            by,
            reason: "no".into()
        }),
        arb_actor().prop_map(|by| SessionEvent::BreakGlass { by }),
        (arb_actor(), any::<bool>()).prop_map(|(by, recycle)| SessionEvent::End { by, recycle }),
        arb_actor().prop_map(|by| SessionEvent::Terminate { by }),
        Just(SessionEvent::SystemEnd {
            reason: EndReason::PodGone
        }),
        Just(SessionEvent::Expire),
        Just(SessionEvent::BeginActivation),
        Just(SessionEvent::Activated),
        Just(SessionEvent::ActivationFailed { error: "x".into() }),
        Just(SessionEvent::CleanupDone),
        Just(SessionEvent::Progress(Progress::ProcessAccessAnnotated)),
    ]
}

proptest! {
    #[test]
    fn random_sequences_never_leave_a_final_state_nor_skip_flight_approval(
        flight in any::<bool>(),
        events in prop::collection::vec(arb_event(), 0..40),
    ) {
        let tier = if flight { Tier::Flight } else { Tier::Ground };
        let mut s = Session::new_request(Uuid::from_u128(9), req(tier), NOW);
        for e in &events {
            let before = s.clone();
            if let Ok(next) = s.apply(e, NOW) {
                prop_assert!(!before.state.is_final(), "left final state {}", before.state);
                prop_assert_eq!(next.version, before.version + 1);
                s = next;
            }
            let past_approval = matches!(
                s.state,
                SessionState::Approved | SessionState::Activating | SessionState::Active
                    | SessionState::Ending | SessionState::Ended | SessionState::Failed
            );
            if tier == Tier::Flight && past_approval {
                prop_assert!(s.is_authorized_for_flight(), "Flight skipped approval: {:?}", s);
                if let Some(a) = &s.approver { prop_assert_ne!(a, &s.requester); }
            }
        }
    }
}

/// A request of `alice` in Flight needing `required` approvals (through distinct groups when
/// `distinct`).
fn quorum_request(required: u8, distinct: bool) -> Session {
    let mut r = req(Tier::Flight);
    r.quorum = crate::session::Quorum {
        required,
        distinct_groups: distinct,
    };
    Session::new_request(Uuid::nil(), r, NOW)
}

fn approve(s: &Session, who: &str, groups: &[&str]) -> Result<Session, TransitionError> {
    let event = SessionEvent::Approve {
        by: user(who, crate::permissions::PermissionSet::ALL),
        groups: groups.iter().map(ToString::to_string).collect(),
    };
    s.apply(&event, NOW)
}

#[test]
fn a_quorum_counts_each_approver_once_and_runs_when_it_is_reached() {
    let s = quorum_request(2, false);
    assert_eq!(approve(&s, "alice", &[]), Err(TransitionError::OwnRequest));
    let one = approve(&s, "bob", &["sre"]).unwrap();
    assert_eq!(one.state, SessionState::PendingApproval);
    assert_eq!((one.approvals.len(), one.approver.as_deref()), (1, None));
    assert!(!one.is_authorized_for_flight());
    assert_eq!(
        approve(&one, "bob", &["sre"]),
        Err(TransitionError::AlreadyApproved)
    );
    let two = approve(&one, "carol", &["sre"]).unwrap();
    assert_eq!(two.state, SessionState::Approved);
    assert_eq!(two.approver.as_deref(), Some("carol"));
    assert_eq!(
        two.approvals
            .iter()
            .map(|a| a.by.as_str())
            .collect::<Vec<_>>(),
        ["bob", "carol"]
    );
    assert!(two.is_authorized_for_flight());
    // A deny by any approver ends the request, approvals given or not.
    let denied = one
        .apply(
            &SessionEvent::Deny {
                by: user("dan", crate::permissions::PermissionSet::ALL),
                reason: "not now".into(),
            },
            NOW,
        )
        .unwrap();
    assert_eq!(denied.state, SessionState::Denied);
}

#[test]
fn a_quorum_of_distinct_groups_counts_one_voice_per_group() {
    let s = quorum_request(2, true);
    let one = approve(&s, "bob", &["sre"]).unwrap();
    assert_eq!(one.approvals[0].group.as_deref(), Some("sre"));
    assert_eq!(
        approve(&one, "dan", &["sre"]),
        Err(TransitionError::GroupCounted)
    );
    assert_eq!(
        approve(&one, "dan", &[]),
        Err(TransitionError::GroupCounted)
    );
    let two = approve(&one, "erin", &["sre", "dba"]).unwrap();
    assert_eq!(two.approvals[1].group.as_deref(), Some("dba"));
    assert_eq!(two.state, SessionState::Approved);
    // An approved row that claims fewer approvals than its quorum never activates.
    let mut forged = one.clone();
    forged.state = SessionState::Approved;
    forged.approver = Some("bob".into());
    assert!(forged.apply(&SessionEvent::BeginActivation, NOW).is_err());
}
