//! What `breakglass-server doctor --bucket` checks of the recordings bucket, read with the
//! server's own settings: versioning, Object Lock with a default retention, and lifecycle rules
//! that would expire recordings before their retention ends. Each finding says how to fix it.

use std::fmt;

use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::types::{BucketVersioningStatus, ExpirationStatus, ObjectLockEnabled};

use super::bucket::is_not_implemented;
use super::{classify, S3Store};
use crate::recording::RecordingStoreError;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindingStatus {
    /// As it should be.
    Ok,
    /// Missing or wrong: recordings are not protected or kept as they should be.
    Problem,
    /// The S3 server cannot say (it does not implement the setting).
    Unknown,
}

/// One check of the bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketFinding {
    /// What was checked (`versioning`, `object lock`, `lifecycle`).
    pub check: &'static str,
    /// How it came out.
    pub status: FindingStatus,
    /// What the bucket reports.
    pub detail: String,
    /// What to do, for a problem.
    pub fix: Option<String>,
}

impl fmt::Display for BucketFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = match self.status {
            FindingStatus::Ok => "ok",
            FindingStatus::Problem => "PROBLEM",
            FindingStatus::Unknown => "UNKNOWN",
        };
        write!(f, "{word:<8} {:<12} {}", self.check, self.detail)?;
        if let Some(fix) = &self.fix {
            write!(f, "\n         fix: {fix}")?;
        }
        Ok(())
    }
}

const INIT: &str = "breakglass-server recordings init-bucket (with an administrator key)";

impl S3Store {
    /// Checks the bucket's versioning, Object Lock default retention and lifecycle rules.
    pub async fn bucket_findings(&self) -> Result<Vec<BucketFinding>, RecordingStoreError> {
        let bucket = self.config.bucket.as_str();
        let mut out = Vec::new();
        let versioning = self
            .client
            .get_bucket_versioning()
            .bucket(bucket)
            .send()
            .await
            .map_err(|e| classify("get bucket versioning", None, &e))?;
        out.push(match versioning.status() {
            Some(BucketVersioningStatus::Enabled) => BucketFinding {
                check: "versioning",
                status: FindingStatus::Ok,
                detail: "Enabled".into(),
                fix: None,
            },
            other => BucketFinding {
                check: "versioning",
                status: FindingStatus::Problem,
                detail: format!(
                    "{}: a new version could replace a recording unseen",
                    other.map_or("never enabled", BucketVersioningStatus::as_str)
                ),
                fix: Some(INIT.into()),
            },
        });

        let lock = self.object_lock_configuration().await?;
        let enabled = lock
            .as_ref()
            .is_some_and(|c| c.object_lock_enabled() == Some(&ObjectLockEnabled::Enabled));
        let default = lock
            .as_ref()
            .and_then(|c| c.rule())
            .and_then(|r| r.default_retention());
        let retention_days = default.and_then(|d| {
            d.days()
                .or_else(|| d.years().map(|y| y.saturating_mul(365)))
        });
        out.push(match (enabled, default) {
            (false, _) => BucketFinding {
                check: "object lock",
                status: FindingStatus::Problem,
                detail: "not enabled: recordings can be deleted or overwritten".into(),
                fix: Some(format!(
                    "Object Lock can only be turned on when a bucket is made: make a new one \
                     with {INIT}, point [recording] bucket at it and copy the recordings over"
                )),
            },
            (true, None) => BucketFinding {
                check: "object lock",
                status: FindingStatus::Problem,
                detail: "enabled without a default retention (a version stored without the \
                         server's own retention would not be locked)"
                    .into(),
                fix: Some(INIT.into()),
            },
            (true, Some(d)) => BucketFinding {
                check: "object lock",
                status: FindingStatus::Ok,
                detail: format!(
                    "default retention {} {}",
                    d.mode().map_or("(no mode)", |m| m.as_str()),
                    retention_days.map_or("(no period)".into(), |n| format!("{n} days"))
                ),
                fix: None,
            },
        });

        out.push(
            match self
                .client
                .get_bucket_lifecycle_configuration()
                .bucket(bucket)
                .send()
                .await
            {
                Err(e) if is_not_implemented(&e) => BucketFinding {
                    check: "lifecycle",
                    status: FindingStatus::Unknown,
                    detail: "the S3 server does not implement lifecycle rules (501): recordings \
                             are kept until someone deletes them after their lock"
                        .into(),
                    fix: None,
                },
                Err(e) if e.code() == Some("NoSuchLifecycleConfiguration") => BucketFinding {
                    check: "lifecycle",
                    status: FindingStatus::Problem,
                    detail: "no rule: every version is kept for good and the bucket only grows"
                        .into(),
                    fix: Some(INIT.into()),
                },
                Err(e) => return Err(classify("get bucket lifecycle", None, &e)),
                Ok(l) => {
                    let keep = retention_days.unwrap_or(0);
                    let early: Vec<String> = l
                        .rules()
                        .iter()
                        .filter(|r| r.status() == &ExpirationStatus::Enabled)
                        .filter_map(|r| {
                            let days = r.expiration().and_then(aws_sdk_s3::types::LifecycleExpiration::days).or_else(|| {
                                r.noncurrent_version_expiration()
                                    .and_then(aws_sdk_s3::types::NoncurrentVersionExpiration::noncurrent_days)
                            })?;
                            (days < keep).then(|| {
                                format!("{} after {days} days", r.id().unwrap_or("(no id)"))
                            })
                        })
                        .collect();
                    if early.is_empty() {
                        BucketFinding {
                            check: "lifecycle",
                            status: FindingStatus::Ok,
                            detail: format!(
                                "{} rule(s), none expiring before the {keep}-day retention",
                                l.rules().len()
                            ),
                            fix: None,
                        }
                    } else {
                        BucketFinding {
                            check: "lifecycle",
                            status: FindingStatus::Problem,
                            detail: format!(
                                "expires versions before their {keep}-day retention ends: {}",
                                early.join(", ")
                            ),
                            fix: Some(format!(
                                "make those rules' days at least {keep} (the lock refuses the \
                                 early expiry, and the storage keeps retrying it)"
                            )),
                        }
                    }
                }
            },
        );
        Ok(out)
    }
}
