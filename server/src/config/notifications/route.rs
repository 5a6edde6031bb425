//! An environment's notification route: its `notify`, `escalate_to`, reminder, escalation and
//! review-deadline keys.

use super::{within, ConfigError};

/// An environment's notification route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Receivers of every event there.
    pub receivers: Vec<String>,
    /// Receivers of escalations.
    pub escalate_to: Vec<String>,
    /// When a waiting request is reminded of.
    pub remind_after: Option<time::Duration>,
    /// When a waiting request is escalated.
    pub escalate_after: Option<time::Duration>,
    /// When a due review is overdue, after the session's end.
    pub review_within: time::Duration,
}

impl Route {
    /// Checks an environment's keys (under `key`); the receiver names are checked against
    /// `[notifications]` once both are read ([`Notifications::check_routes`]).
    pub(in crate::config) fn resolve(
        key: &str,
        receivers: Vec<String>,
        escalate_to: Vec<String>,
        remind_after_minutes: Option<u32>,
        escalate_after_minutes: Option<u32>,
        review_within_hours: Option<u32>,
    ) -> Result<Route, ConfigError> {
        let minutes = |name: &str, v: Option<u32>| {
            v.map(|m| {
                within(format!("{key}.{name}"), u64::from(m), 1, 10_080)
                    .map(|m| time::Duration::minutes(m as i64))
            })
            .transpose()
        };
        let remind_after = minutes("remind_after_minutes", remind_after_minutes)?;
        let escalate_after = minutes("escalate_after_minutes", escalate_after_minutes)?;
        if escalate_after.is_some() == escalate_to.is_empty() {
            return Err(ConfigError::new(
                format!("{key}.escalate_after_minutes"),
                "an escalation needs both `escalate_after_minutes` and `escalate_to` (the \
                 receivers told)",
            ));
        }
        if let (Some(r), Some(e)) = (remind_after, escalate_after) {
            if e <= r {
                return Err(ConfigError::new(
                    format!("{key}.escalate_after_minutes"),
                    "must be longer than remind_after_minutes: the reminder comes first",
                ));
            }
        }
        let hours = review_within_hours
            .map(|h| within(format!("{key}.review_within_hours"), u64::from(h), 1, 8_760))
            .transpose()?
            .unwrap_or(168);
        Ok(Route {
            receivers,
            escalate_to,
            remind_after,
            escalate_after,
            review_within: time::Duration::hours(hours as i64),
        })
    }
}
