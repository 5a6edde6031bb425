//! The recording settings the server's configuration resolves to. They live here, not in
//! `config`, so that the recording module depends on nothing of the server's config file:
//! `config` builds these from `[recording]` and hands them over.

use std::path::PathBuf;
use std::time::Duration;

use super::WriterConfig;

/// The resolved `[recording]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordingSettings {
    /// Flush, bounds and retries of the writer.
    pub writer: WriterConfig,
    /// Lock period of each final S3 recording.
    pub retention: Duration,
    /// Lock period of each S3 segment.
    pub segment_retention: Duration,
    /// Local store directory (used when no S3 endpoint is set).
    pub local_dir: PathBuf,
    /// The transparency log, when configured.
    pub transparency_log: Option<TransparencyLogSettings>,
}

/// The resolved `[recording.transparency_log]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransparencyLogSettings {
    /// Base URL without a trailing slash.
    pub url: String,
    /// The signing key's PEM file.
    pub signing_key: PathBuf,
    /// Per-request timeout.
    pub timeout: Duration,
    /// The log's pinned public key file, if any.
    pub log_public_key: Option<PathBuf>,
}
