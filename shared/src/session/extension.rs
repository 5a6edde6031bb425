//! More time for a running session. The requester asks before the end with a reason; on
//! Ground the time is added at once, on Flight it waits for the same approvals the request
//! needed (its quorum). Every session carries the bounds it was made under (how many
//! extensions, and the longest it may run in all), so a change of configuration never
//! stretches a session already running beyond what it was granted under.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::Approval;

/// How far a session may be extended; fixed when it is made, from its tier's durations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct ExtensionLimits {
    /// Extensions granted at most (0: none; rows from before extensions have 0).
    pub max_count: u8,
    /// The longest the session may run in all, requested time and extensions together.
    pub max_total_minutes: u32,
}

/// An extension given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Extension {
    /// Minutes added.
    pub minutes: u32,
    /// Why the requester asked.
    pub reason: String,
    /// When it was asked.
    #[serde(with = "time::serde::rfc3339")]
    #[cfg_attr(feature = "server", schema(value_type = String, format = DateTime))]
    pub asked_at: OffsetDateTime,
    /// When it was given.
    #[serde(with = "time::serde::rfc3339")]
    #[cfg_attr(feature = "server", schema(value_type = String, format = DateTime))]
    pub granted_at: OffsetDateTime,
    /// Who approved it (Flight), oldest first; empty on Ground.
    #[serde(default)]
    pub approvals: Vec<Approval>,
}

/// An extension asked for and waiting for approval (Flight).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct ExtensionAsk {
    /// Minutes asked.
    pub minutes: u32,
    /// Why.
    pub reason: String,
    /// When.
    #[serde(with = "time::serde::rfc3339")]
    #[cfg_attr(feature = "server", schema(value_type = String, format = DateTime))]
    pub at: OffsetDateTime,
    /// Approvals given so far, oldest first.
    #[serde(default)]
    pub approvals: Vec<Approval>,
}

/// The last extension refused, until the next ask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct ExtensionDenial {
    /// Who refused it.
    pub by: String,
    /// Why (shown to the requester).
    pub reason: String,
    /// When.
    #[serde(with = "time::serde::rfc3339")]
    #[cfg_attr(feature = "server", schema(value_type = String, format = DateTime))]
    pub at: OffsetDateTime,
}

/// A session's extensions: its bounds, what was given, what waits, and the last refusal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Extensions {
    /// The bounds it was made under.
    #[serde(default)]
    pub limits: ExtensionLimits,
    /// Given, oldest first.
    #[serde(default)]
    pub granted: Vec<Extension>,
    /// Waiting for approval (Flight).
    #[serde(default)]
    pub pending: Option<ExtensionAsk>,
    /// The last refusal, cleared by the next ask.
    #[serde(default)]
    pub denied: Option<ExtensionDenial>,
}

impl Extensions {
    /// No extension, under `limits`.
    pub fn under(limits: ExtensionLimits) -> Extensions {
        Extensions {
            limits,
            ..Extensions::default()
        }
    }

    /// Minutes added so far.
    pub fn granted_minutes(&self) -> u32 {
        self.granted.iter().map(|e| e.minutes).sum()
    }

    /// Asks still open to the requester: the bound minus those given or waiting.
    pub fn asks_left(&self) -> usize {
        usize::from(self.limits.max_count)
            .saturating_sub(self.granted.len() + usize::from(self.pending.is_some()))
    }

    /// The most minutes one more ask can add to a session of `requested` minutes.
    pub fn room(&self, requested: u32) -> u32 {
        self.limits
            .max_total_minutes
            .saturating_sub(requested + self.granted_minutes())
    }
}

impl super::Session {
    /// What the recording notes when a change of `kind` touched this session's extensions
    /// (the session as the change left it); `None` for other changes. Times are UTC.
    pub fn extension_note(&self, kind: &str) -> Option<String> {
        let x = &self.extensions;
        let until = || {
            self.expires_at
                .map(|at| at.to_offset(time::UtcOffset::UTC))
                .map(|at| format!(" to {:02}:{:02} UTC", at.hour(), at.minute()))
                .unwrap_or_default()
        };
        let names = |a: &[Approval]| {
            a.iter()
                .map(|a| a.by.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match (kind, &x.pending, x.granted.last()) {
            ("ask_extension", Some(ask), _) => Some(format!(
                "more time asked: {} min: {}",
                ask.minutes, ask.reason
            )),
            ("ask_extension", None, Some(e)) => Some(format!(
                "extended by {} min{}: {}",
                e.minutes,
                until(),
                e.reason
            )),
            ("approve_extension", Some(ask), _) => Some(format!(
                "more time approved by {} ({} of {})",
                names(&ask.approvals),
                ask.approvals.len(),
                self.quorum.needed()
            )),
            ("approve_extension", None, Some(e)) => Some(format!(
                "extended by {} min{}, approved by {}",
                e.minutes,
                until(),
                names(&e.approvals)
            )),
            ("deny_extension", _, _) => x
                .denied
                .as_ref()
                .map(|d| format!("more time refused by {}: {}", d.by, d.reason)),
            _ => None,
        }
    }
}
