//! Notifications: which change of a session tells people what, and the versioned payload every
//! receiver is built from.
//!
//! The server writes a notification in the same transaction as the change that causes it (the
//! outbox) and a worker delivers it later; what a change *means* to people is decided here, from
//! the row before and after, so the rule is the same whichever path changed the row (a person,
//! the sweep, another replica) and is tested without a database.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::{Session, SessionState};

/// The version of [`Notification`]'s shape. A receiver that reads `version` can tell a payload
/// it does not know; fields are only ever added within one version.
pub const PAYLOAD_VERSION: u32 = 1;

/// What happened, as the configuration's event filters and the payload's `type` name it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::EnumIter,
    strum::Display,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub enum NoticeKind {
    /// A Flight request waits for approval.
    Requested,
    /// A request was approved (by the last approval it needed).
    Approved,
    /// A request was denied.
    Denied,
    /// The requester withdrew a request before it was decided.
    Withdrawn,
    /// A request was never answered in time.
    Expired,
    /// Someone broke the glass: told to every receiver of the environment, whatever they filter.
    GlassBroken,
    /// The debug container runs; the terminal is open to the requester.
    Active,
    /// A session that ran has ended (the payload says why and who ended it).
    Ended,
    /// A glass-broken session finished and waits for its review.
    ReviewDue,
    /// A review is past the environment's review deadline.
    ReviewOverdue,
    /// A request has waited longer than the environment's reminder time.
    Reminder,
    /// A request has waited longer than the environment's escalation time: told to the
    /// escalation receivers.
    Escalation,
    /// A running session asks for more time (Flight: waits for an approver).
    ExtensionRequested,
}

impl NoticeKind {
    /// The payload's `type`: `session.` and the snake-case name (`session.glass_broken`).
    pub fn type_name(self) -> String {
        format!("session.{}", <&'static str>::from(self))
    }

    /// Whether an environment's approvers are the people this asks something of (a decision,
    /// more time, a review).
    pub fn for_approvers(self) -> bool {
        matches!(
            self,
            NoticeKind::Requested
                | NoticeKind::Reminder
                | NoticeKind::Escalation
                | NoticeKind::GlassBroken
                | NoticeKind::ExtensionRequested
                | NoticeKind::ReviewDue
                | NoticeKind::ReviewOverdue
        )
    }

    /// Whether this tells the requester what became of their own request.
    pub fn for_requester(self) -> bool {
        matches!(
            self,
            NoticeKind::Approved
                | NoticeKind::Denied
                | NoticeKind::Expired
                | NoticeKind::Active
                | NoticeKind::Ended
        )
    }

    /// Whether a receiver's event filter may leave this out (a broken glass reaches everyone).
    pub fn filterable(self) -> bool {
        self != NoticeKind::GlassBroken
    }

    /// Whether this can happen more than once to one session (so its outbox key carries the
    /// session's version).
    pub fn repeats(self) -> bool {
        self == NoticeKind::ExtensionRequested
    }

    /// A line a person reads first (a mail's subject, a chat message's headline).
    pub fn headline(self, s: &Session) -> String {
        let place = format!(
            "{}/{}/{} ({})",
            s.environment,
            s.namespace,
            s.pod,
            s.tier.as_str()
        );
        match self {
            NoticeKind::Requested => format!("{} asks to debug {place}", s.requester),
            NoticeKind::Approved => format!("Approved: {}'s session on {place}", s.requester),
            NoticeKind::Denied => format!("Denied: {}'s request for {place}", s.requester),
            NoticeKind::Withdrawn => format!("Withdrawn: {}'s request for {place}", s.requester),
            NoticeKind::Expired => {
                format!("Expired unanswered: {}'s request for {place}", s.requester)
            }
            NoticeKind::GlassBroken => format!(
                "Glass broken by {} for {}'s session on {place}",
                s.glass_broken_by.as_deref().unwrap_or("an admin"),
                s.requester
            ),
            NoticeKind::Active => format!("Active: {}'s session on {place}", s.requester),
            NoticeKind::Ended => format!("Ended: {}'s session on {place}", s.requester),
            NoticeKind::ReviewDue => format!("Review due: {}'s session on {place}", s.requester),
            NoticeKind::ReviewOverdue => {
                format!("Review overdue: {}'s session on {place}", s.requester)
            }
            NoticeKind::Reminder => {
                format!("Still waiting: {} asks to debug {place}", s.requester)
            }
            NoticeKind::Escalation => format!(
                "Escalated, nobody answered: {} asks to debug {place}",
                s.requester
            ),
            NoticeKind::ExtensionRequested => {
                format!("{} asks for more time on {place}", s.requester)
            }
        }
    }
}

/// What a committed change tells people: from the row before it (`None` for a new request) to
/// the row after. Time-driven notices ([`NoticeKind::Reminder`], [`NoticeKind::Escalation`],
/// [`NoticeKind::ReviewOverdue`]) come from the clock, not from a change, and are not here.
pub fn notices_of(prev: Option<&Session>, next: &Session) -> Vec<NoticeKind> {
    use SessionState as S;
    let was = prev.map(|p| p.state);
    let mut out = Vec::new();
    if was != Some(next.state) {
        match (was, next.state) {
            (None, S::PendingApproval) => out.push(NoticeKind::Requested),
            (Some(S::PendingApproval), S::Approved) if next.glass_broken_by.is_some() => {
                out.push(NoticeKind::GlassBroken);
            }
            (Some(S::PendingApproval), S::Approved) => out.push(NoticeKind::Approved),
            (_, S::Denied) => out.push(NoticeKind::Denied),
            (_, S::Withdrawn) => out.push(NoticeKind::Withdrawn),
            (_, S::Expired) => out.push(NoticeKind::Expired),
            (_, S::Active) => out.push(NoticeKind::Active),
            (_, S::Ended) => out.push(NoticeKind::Ended),
            _ => {}
        }
        if next.review_due() && !prev.is_some_and(Session::review_due) {
            out.push(NoticeKind::ReviewDue);
        }
    }
    let asked = |s: &Session| s.extensions.pending.is_some();
    if asked(next) && !prev.is_some_and(asked) {
        out.push(NoticeKind::ExtensionRequested);
    }
    out
}

/// The links a notification carries: decisions are taken on the session's page, signed in,
/// never from inside a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct NoticeLinks {
    /// The session's page.
    pub session: String,
    /// The recording, at its start (sessions that ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<String>,
}

impl NoticeLinks {
    /// The links of `session` under the app's `base` URL (no trailing slash).
    pub fn of(base: &str, session: &Session) -> NoticeLinks {
        let page = format!("{base}/sessions/{}", session.id);
        let ran = session.active_at.is_some() || session.recording.is_some();
        NoticeLinks {
            recording: ran.then(|| format!("{page}/recording?t=0")),
            session: page,
        }
    }
}

/// The payload of every notification (the Standard Webhooks body as is; Slack and mail are
/// rendered from it). Versioned: see [`PAYLOAD_VERSION`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Notification {
    /// The shape's version ([`PAYLOAD_VERSION`]).
    pub version: u32,
    /// `session.` and the event's name, e.g. `session.requested`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The session as the API returns it, as it was right after the change.
    pub session: Session,
    /// Who caused it (`system` for the server's own steps and the clock's notices).
    pub actor: String,
    /// When it happened.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// Where to act on it.
    pub links: NoticeLinks,
}

impl Notification {
    /// The notice `kind` of `session`, caused by `actor` at `at`, linking under `base`.
    pub fn new(
        kind: NoticeKind,
        session: &Session,
        actor: &str,
        at: OffsetDateTime,
        base: &str,
    ) -> Notification {
        Notification {
            version: PAYLOAD_VERSION,
            kind: kind.type_name(),
            links: NoticeLinks::of(base, session),
            session: session.clone(),
            actor: actor.to_string(),
            at,
        }
    }

    /// The event's kind, when `kind` names one this version knows.
    pub fn notice_kind(&self) -> Option<NoticeKind> {
        self.kind.strip_prefix("session.")?.parse().ok()
    }

    /// Who ended the session, in words, for an `ended` notice.
    pub fn ended_by(&self) -> Option<String> {
        use crate::EndReason as R;
        Some(match self.session.end_reason.as_ref()? {
            R::UserEnded => format!("{} (the requester)", self.session.requester),
            R::Terminated { by } => format!("{by} (terminated)"),
            R::TtlExpired => "the server: its time ran out".into(),
            R::PodGone => "the server: the pod went away".into(),
            R::RelayError => "the server: the terminal relay broke".into(),
            R::RecordingFailed => "the server: the recording could not be kept".into(),
            R::AdminForceEnded => "an operator, from the command line".into(),
            R::Revoked => "the server: the requester's right was taken away".into(),
            R::Locked => "the server: a lock".into(),
        })
    }
}

/// One delivery as the admins' page shows it (`GET /notifications/deliveries`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct DeliveryView {
    /// The `webhook-id` it is sent with, the same on every attempt.
    pub webhook_id: String,
    /// The receiver's name.
    pub receiver: String,
    /// The event's name (`requested`, `glass_broken`, ...).
    pub kind: String,
    /// The session it is about.
    pub session_id: uuid::Uuid,
    /// That session's environment.
    pub environment: String,
    /// `pending`, `sent` or `dead`.
    pub state: String,
    /// Attempts so far.
    pub attempts: i64,
    /// When it was written.
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When it is due next (pending ones).
    #[serde(with = "time::serde::rfc3339")]
    pub next_at: OffsetDateTime,
    /// When the receiver took it.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub sent_at: Option<OffsetDateTime>,
    /// The receiver's last status (HTTP status or SMTP reply code).
    pub last_status: Option<i64>,
    /// The last failure.
    pub last_error: Option<String>,
}

/// The states a delivery is in.
pub const DELIVERY_STATES: [&str; 3] = ["pending", "sent", "dead"];

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::session::testing::{req, session_in, user, NOW};
    use crate::{EndReason, PermissionSet, SessionEvent, Tier};

    fn flight_request() -> Session {
        session_in(SessionState::PendingApproval, Tier::Flight)
    }

    fn run(s: &Session, e: SessionEvent) -> Session {
        s.apply(&e, NOW).unwrap()
    }

    #[test]
    fn a_request_then_each_decision_tells_its_own_event() {
        let s = flight_request();
        assert_eq!(notices_of(None, &s), vec![NoticeKind::Requested]);
        let ground = Session::new_request(uuid::Uuid::from_u128(8), req(Tier::Ground), NOW);
        assert!(notices_of(None, &ground).is_empty(), "Ground asks nobody");
        let bob = || user("bob", PermissionSet::ALL);
        let approved = run(
            &s,
            SessionEvent::Approve {
                by: bob(),
                groups: vec![],
            },
        );
        assert_eq!(notices_of(Some(&s), &approved), vec![NoticeKind::Approved]);
        let reason = "not now, sorry".to_string();
        let denied = run(&s, SessionEvent::Deny { by: bob(), reason });
        assert_eq!(notices_of(Some(&s), &denied), vec![NoticeKind::Denied]);
        let expired = run(&s, SessionEvent::Expire);
        assert_eq!(notices_of(Some(&s), &expired), vec![NoticeKind::Expired]);
        let alice = user("alice", PermissionSet::NONE);
        let withdrawn = run(
            &s,
            SessionEvent::End {
                by: alice,
                recycle: false,
            },
        );
        assert_eq!(
            notices_of(Some(&s), &withdrawn),
            vec![NoticeKind::Withdrawn]
        );
    }

    #[test]
    fn a_broken_glass_is_its_own_event_and_its_end_asks_for_a_review() {
        let s = flight_request();
        let carol = || user("carol", PermissionSet::ALL);
        let broken = run(&s, SessionEvent::BreakGlass { by: carol() });
        assert_eq!(notices_of(Some(&s), &broken), vec![NoticeKind::GlassBroken]);
        let activating = run(&broken, SessionEvent::BeginActivation);
        assert!(notices_of(Some(&broken), &activating).is_empty());
        let active = run(&activating, SessionEvent::Activated);
        assert_eq!(
            notices_of(Some(&activating), &active),
            vec![NoticeKind::Active]
        );
        let ending = run(&active, SessionEvent::Terminate { by: carol() });
        assert!(notices_of(Some(&active), &ending).is_empty());
        let ended = run(&ending, SessionEvent::CleanupDone);
        assert_eq!(
            notices_of(Some(&ending), &ended),
            vec![NoticeKind::Ended, NoticeKind::ReviewDue]
        );
        let note = Notification::new(NoticeKind::Ended, &ended, "system", NOW, "https://bg");
        assert_eq!(note.ended_by().unwrap(), "carol (terminated)");
        assert_eq!(note.kind, "session.ended");
        assert_eq!(note.notice_kind(), Some(NoticeKind::Ended));
        assert!(matches!(
            ended.end_reason,
            Some(EndReason::Terminated { .. })
        ));
        assert_eq!(
            note.links.recording.as_deref(),
            Some(format!("https://bg/sessions/{}/recording?t=0", ended.id).as_str())
        );
    }

    #[test]
    fn asking_for_more_time_tells_once_per_ask() {
        let s = session_in(SessionState::Active, Tier::Flight);
        let alice = user("alice", PermissionSet::NONE);
        let reason = "the dump is still running".to_string();
        let asked = run(
            &s,
            SessionEvent::AskExtension {
                by: alice,
                minutes: 10,
                reason,
            },
        );
        assert_eq!(
            notices_of(Some(&s), &asked),
            vec![NoticeKind::ExtensionRequested]
        );
        assert!(notices_of(Some(&asked), &asked).is_empty());
    }

    #[test]
    fn the_same_state_tells_nothing() {
        let s = flight_request();
        assert!(notices_of(Some(&s), &s).is_empty());
    }

    #[test]
    fn every_kind_has_a_type_that_parses_back() {
        use strum::IntoEnumIterator;
        for k in NoticeKind::iter() {
            let n = Notification::new(k, &flight_request(), "x", NOW, "http://h");
            assert_eq!(n.notice_kind(), Some(k));
            assert!(!k.headline(&n.session).is_empty());
        }
    }
}
