//! Session recordings: the asciicast writer that the terminal relay tees into, the stores that
//! keep its segments and final casts (an object-locked S3 bucket in production, a local
//! directory for a first run) and the verification of a stored recording against the session
//! row.
//!
//! How the pieces fit (see `docs/recording.md`):
//!
//! 1. Before a session starts, [`RecordingStore::check`] proves the store is reachable and
//!    protected ("no recording, no session").
//! 2. [`CastWriter::start`] stores a first segment (the header) and spawns its flusher. The
//!    relay calls [`CastWriter::output`] per chunk (and awaits [`CastWriter::ready`]); every few
//!    seconds the flusher stores the bytes written since as the next segment of the chain
//!    ([`segment`]) and reports it through [`OnStored`] (the caller turns it into
//!    `Progress::RecordingStored`).
//! 3. [`CastWriter::finish`] writes the end marker, stores the last segment and then the final
//!    cast `sessions/<id>.cast`, streamed back from the segments; its [`RecordingRef`] (key,
//!    version, SHA-256, bytes) is what goes on the session row.
//! 4. When a transparency log is configured, the final hash is signed and anchored there
//!    ([`TransparencyLog::anchor`]) and the entry goes on the row.
//! 5. [`verify`] fetches the final cast again, checks it and the chain of segments against the
//!    row and the log.

mod local;
mod rekor;
mod s3;
pub mod segment;
mod settings;
mod verify;
mod writer;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use breakglass_shared::session::RecordingRef;
use sha2::{Digest, Sha256};
use uuid::Uuid;

pub use local::LocalStore;
pub(crate) use rekor::{hashedrekord_parts, single_entry, verify_inclusion_proof, verify_set};
pub use rekor::{load_or_create_key, LogError, TransparencyLog};
pub use s3::{
    least_privilege_policy, BucketFinding, FindingStatus, InitBucketOutcome, InitBucketReport,
    S3Config, S3Store, DEFAULT_BUCKET, DEFAULT_REGION,
};
pub use settings::{RecordingSettings, TransparencyLogSettings};
pub use verify::{checks, verify, Check, CheckOutcome, VerifyReport};
pub use writer::{
    ended_reason, handed_over, read_back, CastWriter, OnStored, RecordingFailed, Resumable,
    SessionInfo, Tail, WriterConfig, WriterState,
};

/// `Content-Type` of a stored cast.
pub const CONTENT_TYPE: &str = "application/x-asciicast";

/// Default retention of every final cast (GOVERNANCE mode): 365 days.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// Default retention of every segment (GOVERNANCE mode): 30 days.
pub const DEFAULT_SEGMENT_RETENTION: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// The object key of a session's recording: `sessions/<id>.cast`.
pub fn recording_key(session: Uuid) -> String {
    format!("sessions/{session}.cast")
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordingStoreError {
    /// The key (or the given version of it) does not exist.
    #[error("{key}{} does not exist", version.as_deref().map(|v| format!(" version {v}")).unwrap_or_default())]
    NotFound {
        /// Object key.
        key: String,
        /// Version asked for (`None`: the latest).
        version: Option<String>,
    },
    /// The store could not be reached or failed; retrying later may work.
    #[error("recording store unavailable: {0}")]
    Unavailable(String),
    /// The store answered but is not set up as required (missing bucket, versioning off, no
    /// Object Lock, a permission missing, a directory not writable). Retrying will not help.
    #[error("recording store misconfigured: {0}")]
    Misconfigured(String),
    /// The store refused the request (for example a permission the key lacks).
    #[error("recording store refused the request: {0}")]
    Refused(String),
    /// The key is not a safe relative object key.
    #[error("invalid recording key {0:?}")]
    InvalidKey(String),
    /// What is stored does not check out (a broken segment chain, bytes that do not hash to
    /// what they should): nothing was written from it.
    #[error("stored recording does not check out: {0}")]
    Corrupt(String),
}

/// The answer of [`RecordingStore::put_chunks`] when the pieces of `key` came to `len` bytes
/// that are not the `bytes` bytes hashing to `sha256` it was told.
pub(crate) fn pieces_mismatch(
    key: &str,
    len: u64,
    bytes: u64,
    sha256: &[u8; 32],
) -> RecordingStoreError {
    RecordingStoreError::Corrupt(format!(
        "the pieces of {key} came to {len} bytes that do not hash to the expected {} ({bytes} bytes); nothing stored",
        hex::encode(sha256)
    ))
}

/// The metadata stored with a version (the segment chain's links); empty for a final cast.
pub type Meta = BTreeMap<String, String>;

/// One stored version of a recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredVersion {
    /// The store's version id (S3 `VersionId`; the version number for [`LocalStore`]).
    pub version_id: String,
    /// Lowercase hex SHA-256 of the stored bytes.
    pub sha256: String,
    /// Byte count of the stored bytes.
    pub bytes: u64,
}

impl StoredVersion {
    /// The session-row form of this version of `key`.
    pub fn to_ref(&self, key: &str) -> RecordingRef {
        RecordingRef {
            key: key.to_string(),
            version: self.version_id.clone(),
            sha256: self.sha256.clone(),
            bytes: self.bytes,
        }
    }
}

/// The bytes of one version with their SHA-256 (computed once by whoever builds it; the S3
/// store sends it as `x-amz-checksum-sha256`, so the server refuses a body that does not match).
#[derive(Debug, Clone)]
pub struct CastBody {
    bytes: Vec<u8>,
    sha256: [u8; 32],
    meta: Meta,
}

impl CastBody {
    /// Hashes `bytes`.
    pub fn new(bytes: Vec<u8>) -> CastBody {
        let sha256 = Sha256::digest(&bytes).into();
        CastBody {
            bytes,
            sha256,
            meta: Meta::new(),
        }
    }

    /// `bytes` with a digest already computed incrementally by the writer.
    pub(crate) fn with_digest(bytes: Vec<u8>, sha256: [u8; 32]) -> CastBody {
        debug_assert_eq!(<[u8; 32]>::from(Sha256::digest(&bytes)), sha256);
        CastBody {
            bytes,
            sha256,
            meta: Meta::new(),
        }
    }

    /// The same body stored with `meta` (a segment's chain links).
    pub fn with_meta(mut self, meta: Meta) -> CastBody {
        self.meta = meta;
        self
    }

    /// The metadata stored with the bytes.
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The raw SHA-256 digest.
    pub fn digest(&self) -> [u8; 32] {
        self.sha256
    }

    /// Lowercase hex SHA-256.
    pub fn sha256_hex(&self) -> String {
        hex::encode(self.sha256)
    }

    /// Byte count.
    pub fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

impl From<Vec<u8>> for CastBody {
    fn from(bytes: Vec<u8>) -> CastBody {
        CastBody::new(bytes)
    }
}

/// The bytes of an object handed over piece by piece, so that a large one is never held
/// whole (the final cast assembled from its segments).
#[async_trait]
pub trait Chunks: Send {
    /// The next piece; `None` at the end.
    async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, RecordingStoreError>;
}

/// Where recordings are kept. Every [`put_version`](RecordingStore::put_version) stores a new
/// version of the key; nothing is ever overwritten or deleted through this trait.
#[async_trait]
pub trait RecordingStore: Send + Sync + 'static {
    /// Stores `body` (with its metadata) as a new version of `key`, locked for the store's
    /// retention.
    async fn put_version(
        &self,
        key: &str,
        body: CastBody,
    ) -> Result<StoredVersion, RecordingStoreError>;

    /// Stores a segment: like [`put_version`](RecordingStore::put_version), but locked for the
    /// segments' own (shorter) retention.
    async fn put_segment(
        &self,
        key: &str,
        body: CastBody,
    ) -> Result<StoredVersion, RecordingStoreError>;

    /// Stores the bytes `chunks` yields as a new version of `key` without holding them whole.
    /// They must come to `bytes` bytes hashing to `sha256`; otherwise nothing is stored and the
    /// answer is [`RecordingStoreError::Corrupt`] (or the source's own error).
    async fn put_chunks(
        &self,
        key: &str,
        chunks: &mut dyn Chunks,
        sha256: [u8; 32],
        bytes: u64,
    ) -> Result<StoredVersion, RecordingStoreError>;

    /// Lifts the hold segments `1..=count` of `final_key` carried while they were the only
    /// copy of their bytes (they keep their own shorter lock), now that the final cast is
    /// stored. A store without holds has nothing to do.
    async fn release_segments(
        &self,
        final_key: &str,
        count: u64,
    ) -> Result<(), RecordingStoreError> {
        let _ = (final_key, count);
        Ok(())
    }

    /// The bytes of `version` of `key` (`None`: the latest version).
    async fn get(&self, key: &str, version: Option<&str>) -> Result<Vec<u8>, RecordingStoreError>;

    /// The bytes and metadata of `version` of `key` (`None`: the latest version).
    async fn get_with_meta(
        &self,
        key: &str,
        version: Option<&str>,
    ) -> Result<(Vec<u8>, Meta, String), RecordingStoreError>;

    /// The id of the latest version of `key`.
    async fn latest_version(&self, key: &str) -> Result<String, RecordingStoreError>;

    /// The id and length of the latest version of `key`, without reading it.
    async fn latest_size(&self, key: &str) -> Result<(String, u64), RecordingStoreError>;

    /// The lock on `version` of `key` as the store reports it: `(mode, retain until, legal
    /// hold)`, or `None` for a store that keeps no locks (a local directory).
    async fn retention(
        &self,
        key: &str,
        version: Option<&str>,
    ) -> Result<Option<Lock>, RecordingStoreError> {
        let _ = (key, version);
        Ok(None)
    }

    /// Reachable, and set up to keep recordings (bucket exists with versioning and Object
    /// Lock; or the directory is writable). Called before a session starts.
    async fn check(&self) -> Result<(), RecordingStoreError>;

    /// A short description for logs and reports (`s3://bucket at http://...`, `dir:/path`).
    fn describe(&self) -> String;
}

/// Which store to use.
#[derive(Debug, Clone)]
pub enum Backend {
    /// An S3-protocol bucket with versioning and Object Lock (production).
    S3(S3Config),
    /// A local directory (the embedded default for a first run; no lock, no versioning by
    /// the storage itself).
    Local(PathBuf),
}

/// An object version's lock, as an S3 store reports it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Lock {
    /// `GOVERNANCE` or `COMPLIANCE`; `None` when the version carries no lock.
    pub mode: Option<String>,
    /// Until when.
    pub retain_until: Option<time::OffsetDateTime>,
    /// Whether a legal hold is on.
    pub legal_hold: bool,
}

/// Everything the recording module needs, independent of the server's config file.
#[derive(Debug, Clone)]
pub struct RecordingConfig {
    /// Where versions go.
    pub backend: Backend,
    /// How the writer flushes, bounds and retries.
    pub writer: WriterConfig,
    /// Where final hashes are anchored, when configured.
    pub transparency_log: Option<TransparencyLogSettings>,
}

impl RecordingConfig {
    /// The server's `[recording]` section over the `TOWER_BREAKGLASS_MINIO_*` variables: the S3
    /// store when `TOWER_BREAKGLASS_MINIO_ENDPOINT` is set (see [`S3Config::from_env`]), else a
    /// [`LocalStore`] in `local_dir`.
    pub fn from_settings(
        settings: &RecordingSettings,
    ) -> Result<RecordingConfig, RecordingStoreError> {
        let backend = match S3Config::from_env()? {
            Some(s3) => Backend::S3(S3Config {
                retention: settings.retention,
                segment_retention: settings.segment_retention,
                ..s3
            }),
            None => Backend::Local(settings.local_dir.clone()),
        };
        Ok(RecordingConfig {
            backend,
            writer: settings.writer.clone(),
            transparency_log: settings.transparency_log.clone(),
        })
    }

    /// Opens the configured store (does not call [`RecordingStore::check`]).
    pub fn open_store(&self) -> Result<Arc<dyn RecordingStore>, RecordingStoreError> {
        Ok(match &self.backend {
            Backend::S3(c) => Arc::new(S3Store::new(c.clone())?),
            Backend::Local(dir) => Arc::new(LocalStore::new(dir.clone())),
        })
    }

    /// Opens the configured transparency log (creating the signing key when missing).
    pub fn open_log(&self) -> Result<Option<Arc<TransparencyLog>>, RecordingStoreError> {
        self.transparency_log
            .as_ref()
            .map(|t| TransparencyLog::open(t).map(Arc::new))
            .transpose()
            .map_err(RecordingStoreError::Misconfigured)
    }
}
