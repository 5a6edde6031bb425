//! Approvals of a Flight request that needs more than one (a quorum): how many, whether each
//! must come through a group no earlier approval came through, and the approvals given. The
//! requester never counts (the approval rule refuses their own request), one person counts
//! once, and a deny by any approver ends the request.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::TransitionError;

/// What a Flight request needs before it runs; fixed when it is made, from its environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Quorum {
    /// Approvals needed (at least 1).
    pub required: u8,
    /// Whether each approval must come through a group that holds `approve` there and that
    /// no earlier approval came through (two people of one team are one voice).
    #[serde(default)]
    pub distinct_groups: bool,
}

impl Default for Quorum {
    fn default() -> Quorum {
        Quorum {
            required: 1,
            distinct_groups: false,
        }
    }
}

impl Quorum {
    /// Approvals needed, never fewer than one.
    pub fn needed(self) -> usize {
        usize::from(self.required.max(1))
    }

    /// The approval `by` gives at `now`, after those `given`, counted through the first of
    /// their approving `groups` not counted yet where the quorum wants distinct groups; or why
    /// it does not count. The same rule serves the request and each extension of it.
    pub(crate) fn admit(
        self,
        given: &[Approval],
        by: &str,
        groups: &[String],
        now: OffsetDateTime,
    ) -> Result<Approval, TransitionError> {
        if given.iter().any(|a| a.by == by) {
            return Err(TransitionError::AlreadyApproved);
        }
        let group = if self.distinct_groups {
            let counted = |g: &String| given.iter().any(|a| a.group.as_ref() == Some(g));
            Some(
                groups
                    .iter()
                    .find(|g| !counted(g))
                    .cloned()
                    .ok_or(TransitionError::GroupCounted)?,
            )
        } else {
            None
        };
        Ok(Approval {
            by: by.to_string(),
            group,
            at: now,
        })
    }
}

/// One approval given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Approval {
    /// The approver.
    pub by: String,
    /// The group it came through, where the quorum asks for distinct groups.
    #[serde(default)]
    pub group: Option<String>,
    /// When.
    #[serde(with = "time::serde::rfc3339")]
    #[cfg_attr(feature = "server", schema(value_type = String, format = DateTime))]
    pub at: OffsetDateTime,
}
