//! How long requests and sessions may take and how often the sweep looks at them:
//! `[durations]`, `approval_expiry_minutes`, `sweep_interval_seconds`,
//! `activation_timeout_seconds`, `orphan_min_age_seconds`.

use breakglass_shared::validate::DurationBounds;
use breakglass_shared::Tier;
use serde::Deserialize;

use super::{within, ConfigError};

/// Duration bounds per tier.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TierDurations {
    /// Ground bounds (default 5..=60, proposing 30, two extensions).
    #[serde(default)]
    pub ground: DurationBounds,
    /// Flight bounds (default 5..=60, proposing 30, two extensions).
    #[serde(default)]
    pub flight: DurationBounds,
}

impl TierDurations {
    /// Bounds for `tier`.
    pub fn for_tier(&self, tier: Tier) -> DurationBounds {
        match tier {
            Tier::Ground => self.ground,
            Tier::Flight => self.flight,
        }
    }

    /// Each tier's bounds are ordered and at most a day long.
    fn check(&self) -> Result<(), ConfigError> {
        for (tier, b) in [("ground", self.ground), ("flight", self.flight)] {
            if b.min_minutes == 0
                || b.min_minutes > b.default_minutes
                || b.default_minutes > b.max_minutes
            {
                return Err(ConfigError::new(
                    format!("durations.{tier}"),
                    "needs 0 < min_minutes <= default_minutes <= max_minutes",
                ));
            }
            if b.max_minutes > 24 * 60 {
                return Err(ConfigError::new(
                    format!("durations.{tier}.max_minutes"),
                    "must be at most 1440 (one day)",
                ));
            }
            if b.max_extensions > 10 {
                return Err(ConfigError::new(
                    format!("durations.{tier}.max_extensions"),
                    "must be at most 10: a session that needs more is a new session",
                ));
            }
        }
        Ok(())
    }
}

/// The file's keys of this section.
pub(super) struct SessionsFile {
    pub durations: TierDurations,
    pub approval_expiry_minutes: Option<u32>,
    pub sweep_interval_seconds: Option<u64>,
    pub activation_timeout_seconds: Option<u64>,
    pub orphan_min_age_seconds: Option<u64>,
}

/// The resolved section.
pub(super) struct Sessions {
    pub durations: TierDurations,
    pub approval_expiry: time::Duration,
    pub sweep_interval: std::time::Duration,
    pub activation_timeout: std::time::Duration,
    pub orphan_min_age: std::time::Duration,
}

impl SessionsFile {
    /// Checks the bounds and fills the defaults (60 minutes, 5 s, 60 s, 60 s).
    pub fn resolve(self) -> Result<Sessions, ConfigError> {
        self.durations.check()?;
        let approval_expiry_minutes = self.approval_expiry_minutes.unwrap_or(60);
        if approval_expiry_minutes == 0 {
            return Err(ConfigError::new(
                "approval_expiry_minutes",
                "must be at least 1",
            ));
        }
        let sweep = within(
            "sweep_interval_seconds",
            self.sweep_interval_seconds.unwrap_or(5),
            1,
            300,
        )?;
        let activation_timeout = within(
            "activation_timeout_seconds",
            self.activation_timeout_seconds.unwrap_or(60),
            1,
            900,
        )?;
        // At least a second: the sweep reads the live sessions before it lists the cluster, and
        // an object younger than this may belong to a session created in between.
        let orphan_min_age = within(
            "orphan_min_age_seconds",
            self.orphan_min_age_seconds.unwrap_or(60),
            1,
            3600,
        )?;
        Ok(Sessions {
            durations: self.durations,
            approval_expiry: time::Duration::minutes(i64::from(approval_expiry_minutes)),
            sweep_interval: std::time::Duration::from_secs(sweep),
            activation_timeout: std::time::Duration::from_secs(activation_timeout),
            orphan_min_age: std::time::Duration::from_secs(orphan_min_age),
        })
    }
}
