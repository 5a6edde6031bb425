//! Setting up the recordings bucket (`breakglass-server recordings init-bucket`) and the
//! least-privilege policy for the server's own key; needs an administrator key, unlike the
//! store itself.

use std::fmt;

use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::types::{
    BucketLifecycleConfiguration, BucketLocationConstraint, BucketVersioningStatus,
    CreateBucketConfiguration, DefaultRetention, ExpirationStatus, LifecycleExpiration,
    LifecycleRule, LifecycleRuleFilter, NoncurrentVersionExpiration, ObjectLockConfiguration,
    ObjectLockEnabled, ObjectLockRetentionMode, ObjectLockRule, VersioningConfiguration,
};

use super::{
    classify, describe_err, status_and_code, HttpResponse, S3Store, SdkError, DEFAULT_REGION,
};
use crate::recording::RecordingStoreError;

/// Id of the lifecycle rule `init-bucket` installs.
const LIFECYCLE_RULE_ID: &str = "breakglass-recordings-365d";
/// Days of the default retention and of the lifecycle rule `init-bucket` installs.
const BUCKET_DAYS: i32 = 365;

/// The outcome of one `init-bucket` step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitBucketOutcome {
    /// Changed now.
    Done(String),
    /// Already as wanted (or deliberately left as found).
    AlreadyDone(String),
    /// The server does not implement it (for example versitygw's lifecycle: 501).
    NotSupported(String),
}

impl fmt::Display for InitBucketOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitBucketOutcome::Done(s) => write!(f, "done: {s}"),
            InitBucketOutcome::AlreadyDone(s) => write!(f, "ok: {s}"),
            InitBucketOutcome::NotSupported(s) => write!(f, "NOT SUPPORTED: {s}"),
        }
    }
}

/// What `init-bucket` did, step by step.
#[derive(Debug, Clone)]
pub struct InitBucketReport {
    /// Bucket name.
    pub bucket: String,
    /// (step, outcome) in order: bucket, versioning, object lock, lifecycle.
    pub steps: Vec<(&'static str, InitBucketOutcome)>,
}

impl fmt::Display for InitBucketReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (step, outcome) in &self.steps {
            writeln!(f, "{step:<16} {outcome}")?;
        }
        Ok(())
    }
}

/// The least-privilege policy for the server's key: put (with retention) and get of
/// `sessions/*`, plus reading the two bucket settings the pre-session check looks at.
/// With `principal` (an access key or ARN) it is a bucket policy; without, an identity
/// policy to attach to the user (MinIO, AWS IAM).
pub fn least_privilege_policy(bucket: &str, principal: Option<&str>) -> serde_json::Value {
    let mut objects = serde_json::json!({
        "Sid": "BreakglassRecordingsPutGet",
        "Effect": "Allow",
        "Action": ["s3:PutObject", "s3:PutObjectRetention", "s3:PutObjectLegalHold", "s3:GetObject", "s3:GetObjectVersion", "s3:AbortMultipartUpload"],
        "Resource": [format!("arn:aws:s3:::{bucket}/sessions/*")],
    });
    let mut settings = serde_json::json!({
        "Sid": "BreakglassRecordingsCheckBucket",
        "Effect": "Allow",
        "Action": ["s3:GetBucketVersioning", "s3:GetBucketObjectLockConfiguration"],
        "Resource": [format!("arn:aws:s3:::{bucket}")],
    });
    if let Some(p) = principal {
        for s in [&mut objects, &mut settings] {
            s["Principal"] = serde_json::json!({ "AWS": [p] });
        }
    }
    serde_json::json!({ "Version": "2012-10-17", "Statement": [objects, settings] })
}

pub(super) fn is_not_implemented<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> bool {
    let (status, code) = status_and_code(err);
    status == Some(501) || code.as_deref() == Some("NotImplemented")
}

impl S3Store {
    /// The bucket's Object Lock configuration, `None` when it has none (`init-bucket` and
    /// `doctor --bucket` both read it).
    pub(super) async fn object_lock_configuration(
        &self,
    ) -> Result<Option<ObjectLockConfiguration>, RecordingStoreError> {
        match self
            .client
            .get_object_lock_configuration()
            .bucket(&self.config.bucket)
            .send()
            .await
        {
            Ok(out) => Ok(out.object_lock_configuration().cloned()),
            Err(e) if e.code() == Some("ObjectLockConfigurationNotFoundError") => Ok(None),
            Err(e) => Err(classify("get object lock configuration", None, &e)),
        }
    }

    /// Creates the bucket with Object Lock (which turns versioning on), makes sure versioning
    /// is on, sets the default retention GOVERNANCE 365 days unless a default is already set,
    /// and tries a 365-day lifecycle rule on `sessions/` (reported as not supported, not as a
    /// failure, when the server answers 501). Needs an administrator key. Idempotent.
    pub async fn init_bucket(&self) -> Result<InitBucketReport, RecordingStoreError> {
        let bucket = self.config.bucket.as_str();
        let mut steps = Vec::new();

        // 1. The bucket, with Object Lock.
        let mut create = self
            .client
            .create_bucket()
            .bucket(bucket)
            .object_lock_enabled_for_bucket(true);
        if self.config.region != DEFAULT_REGION {
            create = create.create_bucket_configuration(
                CreateBucketConfiguration::builder()
                    .location_constraint(BucketLocationConstraint::from(
                        self.config.region.as_str(),
                    ))
                    .build(),
            );
        }
        match create.send().await {
            Ok(_) => steps.push((
                "bucket",
                InitBucketOutcome::Done(format!("created {bucket} with Object Lock enabled")),
            )),
            Err(e)
                if matches!(
                    e.code(),
                    Some("BucketAlreadyOwnedByYou" | "BucketAlreadyExists")
                ) =>
            {
                steps.push((
                    "bucket",
                    InitBucketOutcome::AlreadyDone(format!("{bucket} already exists")),
                ));
            }
            Err(e) => return Err(classify("create bucket", None, &e)),
        }

        // 2. Versioning (Object Lock turns it on; an existing bucket may lack it).
        let versioning = self
            .client
            .get_bucket_versioning()
            .bucket(bucket)
            .send()
            .await
            .map_err(|e| classify("get bucket versioning", None, &e))?;
        if versioning.status() == Some(&BucketVersioningStatus::Enabled) {
            steps.push((
                "versioning",
                InitBucketOutcome::AlreadyDone("Enabled".into()),
            ));
        } else {
            self.client
                .put_bucket_versioning()
                .bucket(bucket)
                .versioning_configuration(
                    VersioningConfiguration::builder()
                        .status(BucketVersioningStatus::Enabled)
                        .build(),
                )
                .send()
                .await
                .map_err(|e| classify("enable bucket versioning", None, &e))?;
            steps.push(("versioning", InitBucketOutcome::Done("Enabled".into())));
        }

        // 3. Default retention GOVERNANCE 365 days (an existing default is kept as found).
        let existing = self.object_lock_configuration().await?;
        let existing_default = existing
            .as_ref()
            .filter(|c| c.object_lock_enabled() == Some(&ObjectLockEnabled::Enabled))
            .and_then(|c| c.rule())
            .and_then(|r| r.default_retention())
            .map(|d| {
                (
                    d.mode().map(|m| m.as_str().to_string()).unwrap_or_default(),
                    d.days(),
                    d.years(),
                )
            });
        match existing_default {
            Some((mode, Some(BUCKET_DAYS), None)) if mode == "GOVERNANCE" => steps.push((
                "object lock",
                InitBucketOutcome::AlreadyDone("default retention GOVERNANCE 365 days".into()),
            )),
            Some((mode, days, years)) => steps.push((
                "object lock",
                InitBucketOutcome::AlreadyDone(format!(
                    "kept the existing default retention {mode} {} (not changed; the server \
                     stamps GOVERNANCE + retention on every version itself)",
                    match (days, years) {
                        (Some(d), _) => format!("{d} days"),
                        (_, Some(y)) => format!("{y} years"),
                        _ => "(no period)".into(),
                    }
                )),
            )),
            None => {
                self.client
                    .put_object_lock_configuration()
                    .bucket(bucket)
                    .object_lock_configuration(
                        ObjectLockConfiguration::builder()
                            .object_lock_enabled(ObjectLockEnabled::Enabled)
                            .rule(
                                ObjectLockRule::builder()
                                    .default_retention(
                                        DefaultRetention::builder()
                                            .mode(ObjectLockRetentionMode::Governance)
                                            .days(BUCKET_DAYS)
                                            .build(),
                                    )
                                    .build(),
                            )
                            .build(),
                    )
                    .send()
                    .await
                    .map_err(|e| classify("put object lock configuration", None, &e))?;
                steps.push((
                    "object lock",
                    InitBucketOutcome::Done("default retention GOVERNANCE 365 days".into()),
                ));
            }
        }

        // 4. Lifecycle: expire recordings after 365 days (after their lock ran out).
        let rule = LifecycleRule::builder()
            .id(LIFECYCLE_RULE_ID)
            .filter(LifecycleRuleFilter::builder().prefix("sessions/").build())
            .status(ExpirationStatus::Enabled)
            .expiration(LifecycleExpiration::builder().days(BUCKET_DAYS).build())
            .noncurrent_version_expiration(
                NoncurrentVersionExpiration::builder()
                    .noncurrent_days(BUCKET_DAYS)
                    .build(),
            )
            .build()
            .map_err(|e| RecordingStoreError::Misconfigured(format!("lifecycle rule: {e}")))?;
        let lifecycle = BucketLifecycleConfiguration::builder()
            .rules(rule)
            .build()
            .map_err(|e| {
                RecordingStoreError::Misconfigured(format!("lifecycle configuration: {e}"))
            })?;
        match self
            .client
            .put_bucket_lifecycle_configuration()
            .bucket(bucket)
            .lifecycle_configuration(lifecycle)
            .send()
            .await
        {
            Ok(_) => steps.push((
                "lifecycle",
                InitBucketOutcome::Done(format!(
                    "rule {LIFECYCLE_RULE_ID}: sessions/ versions expire after 365 days"
                )),
            )),
            Err(e) if is_not_implemented(&e) => steps.push((
                "lifecycle",
                InitBucketOutcome::NotSupported(format!(
                    "{}; recordings will be kept past 365 days unless the storage expires them",
                    describe_err("put bucket lifecycle", &e)
                )),
            )),
            Err(e) => return Err(classify("put bucket lifecycle", None, &e)),
        }

        Ok(InitBucketReport {
            bucket: bucket.to_string(),
            steps,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_is_least_privilege() {
        let p = least_privilege_policy("bkt", Some("recorder"));
        let text = p.to_string();
        assert!(text.contains("arn:aws:s3:::bkt/sessions/*"));
        assert!(!text.contains("Delete"));
        assert_eq!(p["Statement"][0]["Principal"]["AWS"][0], "recorder");
        assert!(least_privilege_policy("bkt", None)["Statement"][0]
            .get("Principal")
            .is_none());
    }
}
