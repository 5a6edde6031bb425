//! Sessions and events for the tests of the model, the rules and the state machine.

use time::macros::datetime;
use time::OffsetDateTime;
use uuid::Uuid;

use super::{
    Actor, EndReason, Mode, NewSession, Progress, Session, SessionEvent, SessionState, Tier,
};
use crate::permissions::PermissionSet;

/// The moment every test session is made and changed at.
pub(crate) const NOW: OffsetDateTime = datetime!(2026-01-01 12:00 UTC);

pub(crate) fn req(tier: Tier) -> NewSession {
    NewSession {
        environment: "prod".into(),
        tier,
        namespace: "shop".into(),
        pod: "web-1".into(),
        target_container: None,
        mode: Mode::Live,
        reason: "checking a stuck worker".into(),
        ticket: None,
        duration_minutes: 30,
        recycle: true,
        requester: "alice".into(),
        quorum: crate::session::Quorum::default(),
        extension_limits: crate::session::ExtensionLimits {
            max_count: 2,
            max_total_minutes: 60,
        },
    }
}

pub(crate) fn user(name: &str, permissions: PermissionSet) -> Actor {
    Actor::User {
        name: name.into(),
        permissions,
    }
}

/// alice's request in `state`, approved by dave where Flight needs it (dave is no one
/// the tables below ask about, so the approver's own rules stay out of them).
pub(crate) fn session_in(state: SessionState, tier: Tier) -> Session {
    let mut s = Session::new_request(Uuid::from_u128(7), req(tier), NOW);
    s.state = state;
    if tier == Tier::Flight && state != SessionState::PendingApproval {
        s.approver = Some("dave".into());
    }
    if matches!(state, SessionState::Ending | SessionState::Ended) {
        s.end_reason = Some(EndReason::UserEnded);
    }
    s
}

/// One representative of every event, each caused by an actor that is allowed to cause it
/// somewhere, so the table below isolates the state rule.
pub(crate) fn all_events() -> Vec<SessionEvent> {
    let approver = user("bob", PermissionSet::ALL);
    vec![
        SessionEvent::Approve {
            by: approver.clone(),
            groups: vec![],
        },
        SessionEvent::Deny {
            by: approver.clone(),
            reason: "not now".into(),
        },
        SessionEvent::BreakGlass {
            by: user("alice", PermissionSet::ALL),
        },
        SessionEvent::End {
            by: user("alice", PermissionSet::NONE),
            recycle: false,
        },
        SessionEvent::AskExtension {
            by: user("alice", PermissionSet::NONE),
            minutes: 10,
            reason: "the dump is still running".into(),
        },
        SessionEvent::ApproveExtension {
            by: approver.clone(),
            groups: vec![],
        },
        SessionEvent::DenyExtension {
            by: approver.clone(),
            reason: "not now".into(),
        },
        SessionEvent::Terminate { by: approver },
        SessionEvent::SystemEnd {
            reason: EndReason::TtlExpired,
        },
        SessionEvent::Expire,
        SessionEvent::BeginActivation,
        SessionEvent::Activated,
        SessionEvent::ActivationFailed {
            error: "boom".into(),
        },
        SessionEvent::CleanupDone,
        SessionEvent::Progress(Progress::GrantCreated {
            name: "breakglass-x".into(),
        }),
    ]
}
