//! [`S3Store`]: recordings in an S3-protocol bucket (AWS S3, MinIO, Versity S3 Gateway) with
//! versioning and Object Lock.
//!
//! Every put carries `x-amz-object-lock-mode: GOVERNANCE` and
//! `x-amz-object-lock-retain-until-date: now + retention` (default 365 days) itself, rather
//! than trusting the bucket's default retention: some servers (versitygw 1.8) do not stamp the
//! default onto each version. It also carries `x-amz-checksum-sha256` of the body, so the
//! server refuses bytes that differ from the hash that will go on the session row.
//!
//! The client is built from explicit settings only (endpoint, region, static key, path-style
//! addressing): no `~/.aws` profile, no instance metadata, no ambient `AWS_*` variables.
//! Setting the bucket up is in [`bucket`].

mod bucket;

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::{ByteStream, DateTime};
use aws_sdk_s3::types::{
    BucketVersioningStatus, ObjectLockEnabled, ObjectLockLegalHoldStatus, ObjectLockMode,
};
use aws_sdk_s3::Client;
use base64::Engine as _;

use super::{
    CastBody, Chunks, Meta, RecordingStore, RecordingStoreError, StoredVersion, CONTENT_TYPE,
    DEFAULT_RETENTION, DEFAULT_SEGMENT_RETENTION,
};

mod findings;
mod multipart;

pub use bucket::{least_privilege_policy, InitBucketOutcome, InitBucketReport};
pub use findings::{BucketFinding, FindingStatus};

/// The default bucket name.
pub const DEFAULT_BUCKET: &str = "tower-breakglass-v2";
/// The default region (the one the signature scope must match).
pub const DEFAULT_REGION: &str = "us-east-1";

/// Connection settings of the recordings bucket.
#[derive(Clone)]
pub struct S3Config {
    /// `http(s)://host:port` of the S3 endpoint.
    pub endpoint: String,
    /// Region to sign with (must match the server's).
    pub region: String,
    /// Bucket name.
    pub bucket: String,
    /// Access key id.
    pub access_key: String,
    /// Secret access key.
    pub secret_key: String,
    /// Retention stamped on every final cast (GOVERNANCE mode).
    pub retention: Duration,
    /// Retention stamped on every segment (GOVERNANCE mode; default 30 days).
    pub segment_retention: Duration,
    /// Upper bound for one operation including the SDK's own retries.
    pub operation_timeout: Duration,
    /// Attempts the SDK makes per operation on transient errors (default 3; the writer
    /// retries on top of this with its own backoff).
    pub sdk_max_attempts: u32,
}

impl fmt::Debug for S3Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Config")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("bucket", &self.bucket)
            .field("access_key", &self.access_key)
            .field("secret_key", &"<redacted>")
            .field("retention", &self.retention)
            .field("segment_retention", &self.segment_retention)
            .field("operation_timeout", &self.operation_timeout)
            .field("sdk_max_attempts", &self.sdk_max_attempts)
            .finish()
    }
}

impl S3Config {
    /// Settings with the default region, bucket, retention and timeout.
    pub fn new(
        endpoint: impl Into<String>,
        access_key: impl Into<String>,
        secret_key: impl Into<String>,
    ) -> S3Config {
        S3Config {
            endpoint: endpoint.into(),
            region: DEFAULT_REGION.to_string(),
            bucket: DEFAULT_BUCKET.to_string(),
            access_key: access_key.into(),
            secret_key: secret_key.into(),
            retention: DEFAULT_RETENTION,
            segment_retention: DEFAULT_SEGMENT_RETENTION,
            operation_timeout: Duration::from_secs(30),
            sdk_max_attempts: 3,
        }
    }

    /// Reads `TOWER_BREAKGLASS_MINIO_ENDPOINT`, `_REGION` (default `us-east-1`), `_BUCKET`
    /// (default `tower-breakglass-v2`), `_ACCESS_KEY` and `_SECRET_KEY`. `Ok(None)` when no
    /// endpoint is set (use the local store); an error when the endpoint is set but a key is
    /// missing.
    pub fn from_env() -> Result<Option<S3Config>, RecordingStoreError> {
        S3Config::from_vars(|name| std::env::var(name).ok())
    }

    /// [`S3Config::from_env`] over any variable source (empty values count as unset).
    pub fn from_vars(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<S3Config>, RecordingStoreError> {
        let var = |suffix: &str| {
            get(&format!("TOWER_BREAKGLASS_MINIO_{suffix}"))
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let Some(endpoint) = var("ENDPOINT") else {
            return Ok(None);
        };
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(RecordingStoreError::Misconfigured(format!(
                "TOWER_BREAKGLASS_MINIO_ENDPOINT must start with http:// or https://, got {endpoint:?}"
            )));
        }
        let required = |suffix: &str| {
            var(suffix).ok_or_else(|| {
                RecordingStoreError::Misconfigured(format!(
                    "TOWER_BREAKGLASS_MINIO_ENDPOINT is set but TOWER_BREAKGLASS_MINIO_{suffix} is not"
                ))
            })
        };
        let mut c = S3Config::new(endpoint, required("ACCESS_KEY")?, required("SECRET_KEY")?);
        if let Some(region) = var("REGION") {
            c.region = region;
        }
        if let Some(bucket) = var("BUCKET") {
            c.bucket = bucket;
        }
        Ok(Some(c))
    }
}

/// An S3-protocol bucket with versioning and Object Lock.
#[derive(Debug, Clone)]
pub struct S3Store {
    client: Client,
    config: S3Config,
}

/// HTTP status and S3 error code of a failed call, if the server answered.
fn status_and_code<E: ProvideErrorMetadata>(
    err: &SdkError<E, HttpResponse>,
) -> (Option<u16>, Option<String>) {
    (
        err.raw_response().map(|r| r.status().as_u16()),
        err.code().map(str::to_string),
    )
}

/// One sentence for a failed call.
fn describe_err<E>(what: &str, err: &SdkError<E, HttpResponse>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match (status_and_code(err), err.message()) {
        ((Some(status), Some(code)), Some(msg)) => format!("{what}: HTTP {status} {code}: {msg}"),
        ((Some(status), Some(code)), None) => format!("{what}: HTTP {status} {code}"),
        ((Some(status), None), _) => format!("{what}: HTTP {status}"),
        _ => format!("{what}: {}", DisplayErrorContext(err)),
    }
}

/// Maps a failed call to a [`RecordingStoreError`].
fn classify<E>(
    what: &str,
    key: Option<(&str, Option<&str>)>,
    err: &SdkError<E, HttpResponse>,
) -> RecordingStoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let text = describe_err(what, err);
    let (status, code) = status_and_code(err);
    match (status, code.as_deref()) {
        (_, Some("NoSuchBucket")) => RecordingStoreError::Misconfigured(format!(
            "{text} (create it with `breakglass-server recordings init-bucket`)"
        )),
        (_, Some("NoSuchKey" | "NoSuchVersion" | "NotFound")) | (Some(404), _) => match key {
            Some((k, v)) => RecordingStoreError::NotFound {
                key: k.to_string(),
                version: v.map(str::to_string),
            },
            None => RecordingStoreError::Misconfigured(text),
        },
        (Some(403), _) | (_, Some("AccessDenied")) => RecordingStoreError::Refused(text),
        (Some(s), _) if (400..500).contains(&s) => RecordingStoreError::Refused(text),
        (Some(501), _) => RecordingStoreError::Misconfigured(text),
        _ => RecordingStoreError::Unavailable(text),
    }
}

impl S3Store {
    /// A client for `config` (no network traffic yet).
    pub fn new(config: S3Config) -> Result<S3Store, RecordingStoreError> {
        use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
        if config.access_key.is_empty() || config.secret_key.is_empty() {
            return Err(RecordingStoreError::Misconfigured(
                "the S3 access key and secret key must not be empty".into(),
            ));
        }
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(Provider::Rustls(CryptoMode::Ring))
            .build_https();
        let sdk = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .endpoint_url(config.endpoint.clone())
            .region(Region::new(config.region.clone()))
            .credentials_provider(Credentials::new(
                config.access_key.clone(),
                config.secret_key.clone(),
                None,
                None,
                "breakglass-static",
            ))
            .force_path_style(true)
            .http_client(http)
            .retry_config(RetryConfig::standard().with_max_attempts(config.sdk_max_attempts.max(1)))
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(5))
                    .operation_timeout(config.operation_timeout)
                    .build(),
            )
            .build();
        Ok(S3Store {
            client: Client::from_conf(sdk),
            config,
        })
    }

    /// The SDK client (for tools and tests).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The settings.
    pub fn config(&self) -> &S3Config {
        &self.config
    }
}

fn retain_until(retention: Duration) -> DateTime {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let until = now.saturating_add(retention);
    DateTime::from_secs(i64::try_from(until.as_secs()).unwrap_or(i64::MAX))
}

impl S3Store {
    /// Puts `body` (with its metadata) as a new version of `key`, locked for `retention`, and
    /// under a legal hold too when `hold`.
    async fn put_locked(
        &self,
        key: &str,
        body: CastBody,
        retention: Duration,
        hold: bool,
    ) -> Result<StoredVersion, RecordingStoreError> {
        let sha256 = body.sha256_hex();
        let checksum = base64::engine::general_purpose::STANDARD.encode(body.digest());
        let bytes = body.len();
        let meta = body.meta().clone();
        let out = self
            .client
            .put_object()
            .bucket(&self.config.bucket)
            .key(key)
            .content_type(CONTENT_TYPE)
            .checksum_sha256(checksum)
            .object_lock_mode(ObjectLockMode::Governance)
            .object_lock_retain_until_date(retain_until(retention))
            .set_object_lock_legal_hold_status(hold.then_some(ObjectLockLegalHoldStatus::On))
            .set_metadata((!meta.is_empty()).then(|| meta.into_iter().collect()))
            .body(ByteStream::from(body.into_bytes()))
            .send()
            .await
            .map_err(|e| classify(&format!("put {key}"), None, &e))?;
        Ok(StoredVersion {
            version_id: self.version_of(key, out.version_id())?,
            sha256,
            bytes,
        })
    }

    /// The version id a write answered with; an error when versioning is off.
    fn version_of(&self, key: &str, id: Option<&str>) -> Result<String, RecordingStoreError> {
        id.filter(|v| !v.is_empty() && *v != "null")
            .map(str::to_string)
            .ok_or_else(|| {
                RecordingStoreError::Misconfigured(format!(
                    "put {key}: the server returned no version id (is versioning enabled on bucket {}?)",
                    self.config.bucket
                ))
            })
    }
}

#[async_trait]
impl RecordingStore for S3Store {
    async fn put_version(
        &self,
        key: &str,
        body: CastBody,
    ) -> Result<StoredVersion, RecordingStoreError> {
        self.put_locked(key, body, self.config.retention, false)
            .await
    }

    async fn put_segment(
        &self,
        key: &str,
        body: CastBody,
    ) -> Result<StoredVersion, RecordingStoreError> {
        // Held until the final cast is stored: before that a segment is the only copy of its
        // bytes and must outlive its own shorter lock, whatever happens to the session.
        self.put_locked(key, body, self.config.segment_retention, true)
            .await
    }

    async fn release_segments(
        &self,
        final_key: &str,
        count: u64,
    ) -> Result<(), RecordingStoreError> {
        use futures::{StreamExt as _, TryStreamExt as _};
        futures::stream::iter(1..=count)
            .map(|n| async move {
                let key = super::segment::segment_key(final_key, n);
                self.client
                    .put_object_legal_hold()
                    .bucket(&self.config.bucket)
                    .key(&key)
                    .legal_hold(
                        aws_sdk_s3::types::ObjectLockLegalHold::builder()
                            .status(ObjectLockLegalHoldStatus::Off)
                            .build(),
                    )
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| classify(&format!("release the hold on {key}"), None, &e))
            })
            .buffer_unordered(16)
            .try_collect::<()>()
            .await
    }

    async fn put_chunks(
        &self,
        key: &str,
        chunks: &mut dyn Chunks,
        sha256: [u8; 32],
        bytes: u64,
    ) -> Result<StoredVersion, RecordingStoreError> {
        multipart::put_chunks(self, key, chunks, sha256, bytes).await
    }

    async fn get(&self, key: &str, version: Option<&str>) -> Result<Vec<u8>, RecordingStoreError> {
        Ok(self.get_with_meta(key, version).await?.0)
    }

    async fn get_with_meta(
        &self,
        key: &str,
        version: Option<&str>,
    ) -> Result<(Vec<u8>, Meta, String), RecordingStoreError> {
        let out = self
            .client
            .get_object()
            .bucket(&self.config.bucket)
            .key(key)
            .set_version_id(version.map(str::to_string))
            .send()
            .await
            .map_err(|e| classify(&format!("get {key}"), Some((key, version)), &e))?;
        let meta: Meta = out
            .metadata()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        let id = out
            .version_id()
            .map(str::to_string)
            .or_else(|| version.map(str::to_string))
            .unwrap_or_default();
        let data = out.body.collect().await.map_err(|e| {
            RecordingStoreError::Unavailable(format!("get {key}: reading the body: {e}"))
        })?;
        Ok((data.into_bytes().to_vec(), meta, id))
    }

    async fn latest_version(&self, key: &str) -> Result<String, RecordingStoreError> {
        Ok(self.latest_size(key).await?.0)
    }

    async fn latest_size(&self, key: &str) -> Result<(String, u64), RecordingStoreError> {
        let out = self
            .client
            .head_object()
            .bucket(&self.config.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| classify(&format!("head {key}"), Some((key, None)), &e))?;
        let version = out
            .version_id()
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .ok_or_else(|| {
                RecordingStoreError::Misconfigured(format!(
                    "head {key}: the server reported no version id"
                ))
            })?;
        let len = out
            .content_length()
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| {
                RecordingStoreError::Misconfigured(format!(
                    "head {key}: the server reported no length"
                ))
            })?;
        Ok((version, len))
    }

    async fn retention(
        &self,
        key: &str,
        version: Option<&str>,
    ) -> Result<Option<super::Lock>, RecordingStoreError> {
        // HEAD, not GetObjectRetention: every S3 server answers it with the lock's headers
        // (versitygw's GetObjectRetention body is not one the SDK reads).
        let out = self
            .client
            .head_object()
            .bucket(&self.config.bucket)
            .key(key)
            .set_version_id(version.map(str::to_string))
            .send()
            .await
            .map_err(|e| classify(&format!("head {key}"), Some((key, version)), &e))?;
        Ok(Some(super::Lock {
            mode: out.object_lock_mode().map(|m| m.as_str().to_string()),
            retain_until: out
                .object_lock_retain_until_date()
                .and_then(|d| time::OffsetDateTime::from_unix_timestamp(d.secs()).ok()),
            legal_hold: out
                .object_lock_legal_hold_status()
                .is_some_and(|h| h.as_str() == "ON"),
        }))
    }

    async fn check(&self) -> Result<(), RecordingStoreError> {
        let bucket = &self.config.bucket;
        let hint = "the server's key needs s3:GetBucketVersioning and \
                    s3:GetBucketObjectLockConfiguration on the bucket (see `recordings init-bucket`)";
        let versioning = self
            .client
            .get_bucket_versioning()
            .bucket(bucket)
            .send()
            .await
            .map_err(|e| match classify("get bucket versioning", None, &e) {
                RecordingStoreError::Refused(m) => {
                    RecordingStoreError::Misconfigured(format!("{m}; {hint}"))
                }
                other => other,
            })?;
        if versioning.status() != Some(&BucketVersioningStatus::Enabled) {
            return Err(RecordingStoreError::Misconfigured(format!(
                "versioning is not enabled on bucket {bucket} (run `breakglass-server recordings init-bucket`)"
            )));
        }
        let lock = self
            .client
            .get_object_lock_configuration()
            .bucket(bucket)
            .send()
            .await
            .map_err(|e| {
                if e.code() == Some("ObjectLockConfigurationNotFoundError") {
                    return RecordingStoreError::Misconfigured(format!(
                        "Object Lock is not enabled on bucket {bucket} (it must be created with it: \
                         `breakglass-server recordings init-bucket`)"
                    ));
                }
                match classify("get object lock configuration", None, &e) {
                    RecordingStoreError::Refused(m) => RecordingStoreError::Misconfigured(format!("{m}; {hint}")),
                    other => other,
                }
            })?;
        let enabled = lock
            .object_lock_configuration()
            .and_then(|c| c.object_lock_enabled())
            == Some(&ObjectLockEnabled::Enabled);
        if !enabled {
            return Err(RecordingStoreError::Misconfigured(format!(
                "Object Lock is not enabled on bucket {bucket}"
            )));
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!(
            "s3 bucket {} at {} (region {})",
            self.config.bucket, self.config.endpoint, self.config.region
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn config_from_vars() {
        let vars = |pairs: &[(&str, &str)]| {
            let m: HashMap<String, String> = pairs
                .iter()
                .map(|(k, v)| (format!("TOWER_BREAKGLASS_MINIO_{k}"), v.to_string()))
                .collect();
            move |name: &str| m.get(name).cloned()
        };
        assert!(S3Config::from_vars(vars(&[])).ok().flatten().is_none());
        assert!(S3Config::from_vars(vars(&[("ENDPOINT", "")]))
            .ok()
            .flatten()
            .is_none());
        let c = S3Config::from_vars(vars(&[
            ("ENDPOINT", "http://127.0.0.1:9000"),
            ("ACCESS_KEY", "a"),
            ("SECRET_KEY", "s"),
        ]))
        .ok()
        .flatten()
        .expect("config");
        assert_eq!(c.bucket, DEFAULT_BUCKET);
        assert_eq!(c.region, DEFAULT_REGION);
        assert_eq!(c.retention, DEFAULT_RETENTION);
        assert!(!format!("{c:?}").contains("\"s\""), "secret redacted");
        let err = S3Config::from_vars(vars(&[("ENDPOINT", "http://x"), ("ACCESS_KEY", "a")]))
            .expect_err("missing secret");
        assert!(
            err.to_string()
                .contains("TOWER_BREAKGLASS_MINIO_SECRET_KEY"),
            "{err}"
        );
        assert!(S3Config::from_vars(vars(&[
            ("ENDPOINT", "ftp://x"),
            ("ACCESS_KEY", "a"),
            ("SECRET_KEY", "s")
        ]))
        .is_err());
        let c = S3Config::from_vars(vars(&[
            ("ENDPOINT", "https://s3.example"),
            ("ACCESS_KEY", "a"),
            ("SECRET_KEY", "s"),
            ("REGION", "eu-west-1"),
            ("BUCKET", "b"),
        ]))
        .ok()
        .flatten()
        .expect("config");
        assert_eq!((c.region.as_str(), c.bucket.as_str()), ("eu-west-1", "b"));
    }
}
