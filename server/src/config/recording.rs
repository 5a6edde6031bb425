//! `[recording]` and `[recording.transparency_log]`, resolved into the recording module's own
//! [`RecordingSettings`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::ConfigError;
use crate::recording::{RecordingSettings, TransparencyLogSettings, WriterConfig};

/// `[recording]`: how the terminal is recorded. Where recordings go is chosen by the
/// `TOWER_BREAKGLASS_MINIO_*` environment variables (an S3 bucket when the endpoint is set),
/// else `local_dir`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordingFileConfig {
    /// Seconds between stored segments of a live recording (default 5): at most this much
    /// is lost when the server dies.
    pub flush_interval_seconds: Option<u64>,
    /// Largest recording in bytes (default 2 GiB); past it the session ends.
    pub max_bytes: Option<u64>,
    /// Output recorded per second on average before the terminal is slowed (default 16 MiB;
    /// 0: no rate). Nothing is dropped: the pod waits.
    pub max_rate_bytes_per_second: Option<u64>,
    /// Most unstored bytes kept in memory while the store fails (default 16 MiB); past it the
    /// session ends (`RecordingFailed`) with everything stored up to then kept.
    pub spool_limit_bytes: Option<u64>,
    /// Record what the person types (`"i"` events) as well as what the terminal shows
    /// (default false).
    pub record_input: Option<bool>,
    /// First retry delay after a failed store, in milliseconds (default 500), doubled per try.
    pub retry_initial_ms: Option<u64>,
    /// Longest retry delay in seconds (default 10).
    pub retry_max_seconds: Option<u64>,
    /// Seconds the end of a session keeps trying to store the final version (default 60).
    pub finish_timeout_seconds: Option<u64>,
    /// Days each final recording is locked in the bucket (GOVERNANCE; default 365).
    pub retention_days: Option<u32>,
    /// Days each segment is locked in the bucket (GOVERNANCE; default 30, at most
    /// `retention_days`).
    pub segment_retention_days: Option<u32>,
    /// Directory of the local store (default `<data_dir>/recordings`).
    pub local_dir: Option<PathBuf>,
    /// A Rekor-compatible transparency log for the final hashes; none when absent.
    pub transparency_log: Option<TransparencyLogFileConfig>,
}

/// `[recording.transparency_log]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransparencyLogFileConfig {
    /// Base URL of the log (`https://rekor.example`), without `/api/v1`.
    pub url: String,
    /// PEM file with the server's ECDSA P-256 private key (PKCS#8) that signs entries
    /// (default `<data_dir>/recording-signing.pem`, created on first start). Replicas must
    /// share it.
    pub signing_key: Option<PathBuf>,
    /// Seconds one request to the log may take (default 10).
    pub timeout_seconds: Option<u64>,
    /// PEM file with the log's own public key; entry timestamps are checked against it
    /// (without it, against the key the log serves at `/api/v1/log/publicKey`).
    pub log_public_key: Option<PathBuf>,
}

const MIB: u64 = 1024 * 1024;

/// `recording.<key>`, or `default` when unset, within `min..=max`.
fn bounded(
    key: &str,
    value: Option<u64>,
    min: u64,
    max: u64,
    default: u64,
) -> Result<u64, ConfigError> {
    super::within(
        format!("recording.{key}"),
        value.unwrap_or(default),
        min,
        max,
    )
}

/// Whole milliseconds of `d` (the writer's defaults are far below `u64::MAX` of them).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl RecordingFileConfig {
    /// Checks every key (named as `recording.<key>` in errors) and fills defaults, which are
    /// [`WriterConfig::default`]'s for the writer's keys.
    pub(super) fn resolve(self, data_dir: &Path) -> Result<RecordingSettings, ConfigError> {
        let d = WriterConfig::default();
        let flush = bounded(
            "flush_interval_seconds",
            self.flush_interval_seconds,
            1,
            300,
            d.flush_interval.as_secs(),
        )?;
        let max_bytes = bounded(
            "max_bytes",
            self.max_bytes,
            64 * 1024,
            16 * 1024 * MIB,
            d.max_bytes as u64,
        )?;
        let max_rate = bounded(
            "max_rate_bytes_per_second",
            self.max_rate_bytes_per_second,
            0,
            16 * 1024 * MIB,
            d.max_rate,
        )?;
        if max_rate != 0 && max_rate < 64 * 1024 {
            return Err(ConfigError::new(
                "recording.max_rate_bytes_per_second",
                "must be 0 (no rate) or at least 65536",
            ));
        }
        let spool = bounded(
            "spool_limit_bytes",
            self.spool_limit_bytes,
            64 * 1024,
            4096 * MIB,
            d.spool_limit as u64,
        )?;
        let retry_initial = bounded(
            "retry_initial_ms",
            self.retry_initial_ms,
            10,
            60_000,
            millis(d.retry_initial),
        )?;
        let retry_max = bounded(
            "retry_max_seconds",
            self.retry_max_seconds,
            1,
            600,
            d.retry_max.as_secs(),
        )?;
        if retry_max * 1000 < retry_initial {
            return Err(ConfigError::new(
                "recording.retry_max_seconds",
                "must not be shorter than recording.retry_initial_ms",
            ));
        }
        let finish = bounded(
            "finish_timeout_seconds",
            self.finish_timeout_seconds,
            1,
            3600,
            d.finish_timeout.as_secs(),
        )?;
        let retention_days = bounded(
            "retention_days",
            self.retention_days.map(u64::from),
            1,
            36_500,
            365,
        )?;
        let segment_retention_days = bounded(
            "segment_retention_days",
            self.segment_retention_days.map(u64::from),
            1,
            retention_days,
            30.min(retention_days),
        )?;
        let transparency_log = self
            .transparency_log
            .map(|t| t.resolve(data_dir))
            .transpose()?;
        Ok(RecordingSettings {
            writer: WriterConfig {
                flush_interval: Duration::from_secs(flush),
                max_bytes: usize::try_from(max_bytes).unwrap_or(usize::MAX),
                segment_bytes: d.segment_bytes,
                max_rate,
                spool_limit: usize::try_from(spool).unwrap_or(usize::MAX),
                record_input: self.record_input.unwrap_or(d.record_input),
                retry_initial: Duration::from_millis(retry_initial),
                retry_max: Duration::from_secs(retry_max),
                finish_timeout: Duration::from_secs(finish),
            },
            retention: Duration::from_secs(retention_days * 24 * 60 * 60),
            segment_retention: Duration::from_secs(segment_retention_days * 24 * 60 * 60),
            local_dir: self
                .local_dir
                .unwrap_or_else(|| data_dir.join("recordings")),
            transparency_log,
        })
    }
}

impl TransparencyLogFileConfig {
    /// Checks the URL and the timeout (named as `recording.transparency_log.<key>`); the
    /// signing key defaults to `<data_dir>/recording-signing.pem`.
    fn resolve(self, data_dir: &Path) -> Result<TransparencyLogSettings, ConfigError> {
        let url = self.url.trim().trim_end_matches('/').to_string();
        let rest = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"));
        if rest.is_none_or(str::is_empty) {
            return Err(ConfigError::new(
                "recording.transparency_log.url",
                "must be an http:// or https:// URL of a Rekor-compatible log",
            ));
        }
        let timeout = bounded(
            "transparency_log.timeout_seconds",
            self.timeout_seconds,
            1,
            300,
            10,
        )?;
        Ok(TransparencyLogSettings {
            url,
            signing_key: self
                .signing_key
                .unwrap_or_else(|| data_dir.join("recording-signing.pem")),
            timeout: Duration::from_secs(timeout),
            log_public_key: self.log_public_key,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::parse;
    use super::*;

    #[test]
    fn recording_section_defaults_and_values() {
        let c = parse("").unwrap();
        assert_eq!(c.recording.writer, WriterConfig::default());
        assert_eq!(
            c.recording.local_dir,
            PathBuf::from(".breakglass/recordings")
        );
        assert_eq!(c.recording.retention.as_secs(), 365 * 86_400);
        assert_eq!(c.recording.segment_retention.as_secs(), 30 * 86_400);
        assert!(c.recording.writer.max_bytes >= 1 << 30);
        assert!(c.recording.transparency_log.is_none());
        let c = parse(
            "[recording]\nflush_interval_seconds = 2\nrecord_input = true\nmax_bytes = 1048576\nspool_limit_bytes = 65536\nretry_initial_ms = 100\nretry_max_seconds = 3\nfinish_timeout_seconds = 9\nretention_days = 30\nsegment_retention_days = 7\nmax_rate_bytes_per_second = 1048576\nlocal_dir = \"/srv/rec\"\n[recording.transparency_log]\nurl = \"http://127.0.0.1:3000/\"\nlog_public_key = \"/etc/rekor.pub\"",
        )
        .unwrap();
        let w = &c.recording.writer;
        assert_eq!(w.flush_interval.as_secs(), 2);
        assert!(w.record_input);
        assert_eq!((w.max_bytes, w.spool_limit), (1_048_576, 65_536));
        assert_eq!(w.retry_initial.as_millis(), 100);
        assert_eq!((w.retry_max.as_secs(), w.finish_timeout.as_secs()), (3, 9));
        assert_eq!(c.recording.retention.as_secs(), 30 * 86_400);
        assert_eq!(c.recording.segment_retention.as_secs(), 7 * 86_400);
        assert_eq!(w.max_rate, 1_048_576);
        assert!(
            parse("[recording]\nretention_days = 10\nsegment_retention_days = 11")
                .unwrap_err()
                .to_string()
                .contains("recording.segment_retention_days")
        );
        assert_eq!(c.recording.local_dir, PathBuf::from("/srv/rec"));
        let t = c.recording.transparency_log.unwrap();
        assert_eq!(t.url, "http://127.0.0.1:3000");
        assert_eq!(
            t.signing_key,
            PathBuf::from(".breakglass/recording-signing.pem")
        );
        assert_eq!(t.timeout.as_secs(), 10);
        assert_eq!(t.log_public_key, Some(PathBuf::from("/etc/rekor.pub")));
    }
}
