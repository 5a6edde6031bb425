//! A reviewer's verdict on a finished session, and why a review is refused.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::kinds::SessionState;
use crate::permissions::Permission;

/// A reviewer's verdict on a finished session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::Display)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Verdict {
    /// Nothing wrong seen.
    Ok,
    /// Something needs follow-up.
    Concern,
}

impl Verdict {
    /// Lowercase name used on the wire and in the database (`FromStr` reads it back).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A recorded review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Review {
    /// Who reviewed.
    pub reviewer: String,
    /// When.
    #[serde(with = "time::serde::rfc3339")]
    #[cfg_attr(feature = "server", schema(value_type = String, format = DateTime))]
    pub at: OffsetDateTime,
    /// The verdict.
    pub verdict: Verdict,
    /// Free text.
    pub notes: String,
}

/// Why a review was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReviewError {
    /// Only finished sessions are reviewed.
    #[error("only an Ended or Failed session can be reviewed; this one is {0}")]
    NotFinished(SessionState),
    /// Already reviewed.
    #[error("this session was already reviewed by {0}")]
    AlreadyReviewed(String),
    /// Reviewing one's own session.
    #[error("you cannot review your own session; ask another approver")]
    OwnSession,
    /// Reviewing a session one approved or broke the glass for.
    #[error("you {0} this session, so its review must come from another approver")]
    OwnDecision(&'static str),
    /// Reviewers hold `approve` in the environment.
    #[error("you need the {0} permission in this environment to review")]
    MissingPermission(Permission),
}
