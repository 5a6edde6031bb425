//! What goes into the notification outbox: for a session change, or a notice the clock gives,
//! one row per receiver that the environment's route names and that takes the event; and for a
//! SIEM the route names, one row per OCSF event the change adds.
//!
//! The lifecycle asks [`Outbox::drafts`] inside its write (the rows ride on the event draft into
//! the compare-and-set's transaction) and pokes [`Outbox::wake`] after the commit, so this
//! replica's worker (`notify`) delivers at once; the other replicas' workers find due rows on
//! their next poll. Nothing here waits on a receiver.

use std::sync::Arc;

use breakglass_shared::notify::{notices_of, NoticeKind, Notification};
use breakglass_shared::{ocsf, Session};
use time::OffsetDateTime;
use tokio::sync::Notify;
use uuid::Uuid;

use crate::config::{Config, Target};
use crate::store::OutboxDraft;

/// Routes changes to receivers.
pub struct Outbox {
    config: Arc<Config>,
    base: String,
    wake: Notify,
}

impl Outbox {
    /// Routes under `config`'s environments and receivers; links point at `public_url`, or at
    /// the listen address when none is set.
    pub fn new(config: Arc<Config>) -> Outbox {
        let base = match &config.public_url {
            Some(p) => p.origin.clone(),
            None if config.listen.ip().is_unspecified() => {
                format!("http://localhost:{}", config.listen.port())
            }
            None => format!("http://{}", config.listen),
        };
        Outbox {
            config,
            base,
            wake: Notify::new(),
        }
    }

    /// Whether any receiver is configured (without one, nothing is ever written).
    pub fn has_receivers(&self) -> bool {
        !self.config.notifications.receivers.is_empty()
    }

    /// The app's base URL that links start with.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The rows of the change from `prev` (`None`: a new request) to `next`, caused by
    /// `actor` at `at`.
    pub fn drafts(
        &self,
        prev: Option<&Session>,
        next: &Session,
        actor: &str,
        at: OffsetDateTime,
    ) -> Vec<OutboxDraft> {
        if !self.has_receivers() {
            return Vec::new();
        }
        let mut out: Vec<OutboxDraft> = notices_of(prev, next)
            .into_iter()
            .flat_map(|kind| self.drafts_of(kind, next, actor, at))
            .collect();
        out.extend(self.siem_drafts(prev, next, actor, at));
        out
    }

    /// The rows of the SIEMs `next`'s environment routes to: one per OCSF event the change
    /// adds (`ocsf::changed`) and SIEM, its event key `<session>/ocsf/<moment>` (each moment
    /// is written once, whichever path changed the row).
    fn siem_drafts(
        &self,
        prev: Option<&Session>,
        next: &Session,
        actor: &str,
        at: OffsetDateTime,
    ) -> Vec<OutboxDraft> {
        let Some(env) = self.config.environment(&next.environment) else {
            return Vec::new();
        };
        let siems: Vec<&str> = env
            .notify
            .receivers
            .iter()
            .filter_map(|n| self.config.notifications.receiver(n))
            .filter(|r| matches!(r.target, Target::Siem(_)))
            .map(|r| r.name.as_str())
            .collect();
        if siems.is_empty() {
            return Vec::new();
        }
        let created_at_ms = unix_ms(at);
        let mut out = Vec::new();
        for (moment, event) in ocsf::changed(prev, next, actor) {
            let payload = event.to_string();
            for name in &siems {
                out.push(OutboxDraft {
                    id: Uuid::now_v7(),
                    event_key: format!("{}/ocsf/{moment}", next.id),
                    receiver: (*name).to_string(),
                    kind: format!("ocsf.{moment}"),
                    session_id: next.id,
                    payload: payload.clone(),
                    created_at_ms,
                });
            }
        }
        out
    }

    /// The rows of one notice `kind` about `session`.
    pub fn drafts_of(
        &self,
        kind: NoticeKind,
        session: &Session,
        actor: &str,
        at: OffsetDateTime,
    ) -> Vec<OutboxDraft> {
        let Some(env) = self.config.environment(&session.environment) else {
            return Vec::new();
        };
        let route = &env.notify;
        let names: Vec<&String> = match kind {
            NoticeKind::Escalation => route.escalate_to.iter().collect(),
            NoticeKind::GlassBroken => {
                let mut all: Vec<&String> = route.receivers.iter().collect();
                all.extend(
                    route
                        .escalate_to
                        .iter()
                        .filter(|n| !route.receivers.contains(n)),
                );
                all
            }
            _ => route.receivers.iter().collect(),
        };
        let receivers: Vec<_> = names
            .into_iter()
            .filter_map(|n| self.config.notifications.receiver(n))
            .filter(|r| r.takes(kind))
            .collect();
        if receivers.is_empty() {
            return Vec::new();
        }
        let note = Notification::new(kind, session, actor, at, &self.base);
        // A notification is plain data: it serialises.
        let payload = serde_json::to_string(&note).unwrap_or_default();
        let kind_name: &'static str = kind.into();
        let event_key = if kind.repeats() {
            format!("{}/{kind_name}/{}", session.id, session.version)
        } else {
            format!("{}/{kind_name}", session.id)
        };
        let created_at_ms = unix_ms(at);
        receivers
            .into_iter()
            .map(|r| OutboxDraft {
                id: Uuid::now_v7(),
                event_key: event_key.clone(),
                receiver: r.name.clone(),
                kind: kind_name.to_string(),
                session_id: session.id,
                payload: payload.clone(),
                created_at_ms,
            })
            .collect()
    }

    /// Tells this replica's worker that rows were written.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Resolves at the next [`Outbox::wake`] (or at once, if one came since the last wait).
    pub async fn woken(&self) {
        self.wake.notified().await;
    }

    /// The notices the clock owes at `now` for these sessions: reminders and escalations of
    /// requests that wait (`pending`), overdue reviews (`review_due`: glass-broken sessions
    /// finished without one). The outbox's unique key keeps each to once.
    pub fn clock_drafts(
        &self,
        pending: &[Session],
        review_due: &[Session],
        now: OffsetDateTime,
    ) -> Vec<OutboxDraft> {
        let mut out = Vec::new();
        for s in pending {
            let Some(env) = self.config.environment(&s.environment) else {
                continue;
            };
            let waited = now - s.created_at;
            if env.notify.remind_after.is_some_and(|d| waited >= d) {
                out.extend(self.drafts_of(NoticeKind::Reminder, s, "system", now));
            }
            if env.notify.escalate_after.is_some_and(|d| waited >= d) {
                out.extend(self.drafts_of(NoticeKind::Escalation, s, "system", now));
            }
        }
        for s in review_due {
            let Some(env) = self.config.environment(&s.environment) else {
                continue;
            };
            if s.finished_at
                .is_some_and(|end| now - end >= env.notify.review_within)
            {
                out.extend(self.drafts_of(NoticeKind::ReviewOverdue, s, "system", now));
            }
        }
        out
    }
}

/// Milliseconds since the epoch of `at`.
pub fn unix_ms(at: OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}
