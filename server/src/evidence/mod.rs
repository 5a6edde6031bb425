//! The evidence bundle: one tar an auditor checks offline, with standard tools, for each of the
//! sessions it holds: that the recording is the one on record (its hash on the row, in the
//! transparency log's entry signed by this server's key, the entry signed by the log and
//! included in its tree), that it was approved by whom for exactly which spec, and that the
//! events agree with the row. `VERIFY.md` at its root gives the commands; [`verify`] runs the
//! same checks (`breakglass-server verify-evidence`).
//!
//! Layout (`<id>` per session):
//!
//! - `VERIFY.md`, and `keys/recording-signing.pub` (this server's key, which signs the log
//!   entries) and `keys/log.pub` (the log's key) when a transparency log is configured;
//! - `<id>/session.json` (the row as the API returns it), `<id>/events.json` (oldest first);
//! - `<id>/spec.json`: the approved spec's document, the exact bytes its hash is over;
//! - `<id>/recording.cast`, and `<id>/segments.json` (the segments' chain links, while the
//!   store still holds them);
//! - `<id>/rekor-entry.json`: the log's answer for the row's entry, as it sent it.

pub mod verify;

use std::sync::Arc;

use breakglass_shared::Session;
use serde::Serialize;
use uuid::Uuid;

use crate::recording::segment::{parse_segment_key, read_recording, segment_key, SegmentMeta};
use crate::recording::{RecordingStore, RecordingStoreError, TransparencyLog};
use crate::store::{Store, StoreError};

/// The guide at the bundle's root.
pub const GUIDE: &str = include_str!("VERIFY.md");

/// Where a bundle's parts come from.
#[derive(Clone)]
pub struct Sources {
    /// Rows and events.
    pub store: Arc<dyn Store>,
    /// The recordings.
    pub recordings: Arc<dyn RecordingStore>,
    /// The transparency log, when configured (else the bundle has no entries and no keys).
    pub log: Option<Arc<TransparencyLog>>,
}

/// Why a bundle could not be made.
#[derive(Debug, thiserror::Error)]
pub enum EvidenceError {
    /// No such session.
    #[error("no session {0}")]
    NotFound(Uuid),
    /// The database failed.
    #[error("the database: {0}")]
    Store(#[from] StoreError),
    /// The recording store failed.
    #[error("the recording of {id}: {source}")]
    Recording {
        /// The session.
        id: Uuid,
        /// What the store said.
        source: RecordingStoreError,
    },
    /// The transparency log failed.
    #[error("the transparency log, for {id}: {message}")]
    Log {
        /// The session.
        id: Uuid,
        /// What went wrong.
        message: String,
    },
    /// Writing the archive failed.
    #[error("writing the bundle: {0}")]
    Write(#[from] std::io::Error),
}

/// One segment's chain links with its length, as `segments.json` lists them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SegmentLink {
    /// Its number, from 1.
    pub index: u64,
    /// Cast bytes before it.
    pub offset: u64,
    /// Its length in bytes.
    pub bytes: u64,
    /// The SHA-256 of the segment before it (empty for the first).
    pub prev_sha256: String,
    /// The SHA-256 of the cast through it.
    pub cast_sha256: String,
}

/// The chain links of the recording whose final cast is `final_key`, read until the first
/// segment the store no longer holds (segments may expire once the final cast is stored).
async fn segment_links(
    store: &dyn RecordingStore,
    final_key: &str,
) -> Result<Vec<SegmentLink>, RecordingStoreError> {
    let mut out = Vec::new();
    for index in 1u64.. {
        match store
            .get_with_meta(&segment_key(final_key, index), None)
            .await
        {
            Ok((body, meta, _)) => {
                let m = SegmentMeta::from_meta(&meta).map_err(RecordingStoreError::Corrupt)?;
                out.push(SegmentLink {
                    index: m.index,
                    offset: m.offset,
                    bytes: body.len() as u64,
                    prev_sha256: m.prev_sha256,
                    cast_sha256: m.cast_sha256,
                });
            }
            Err(RecordingStoreError::NotFound { .. }) => break,
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Adds `bytes` as `path` (mode 0644, the session's time as its date) to `tar`.
fn add<W: std::io::Write>(
    tar: &mut tar::Builder<W>,
    path: &str,
    bytes: &[u8],
    mtime: u64,
) -> std::io::Result<()> {
    let mut header = tar::Header::new_ustar();
    header.set_size(bytes.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(mtime);
    header.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut header, path, bytes)
}

fn json(v: &impl Serialize) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(v).unwrap_or_default();
    out.push(b'\n');
    out
}

/// Writes the bundle of sessions `ids`, in that order, to `out`.
pub async fn write<W: std::io::Write>(
    src: &Sources,
    ids: &[Uuid],
    out: W,
) -> Result<W, EvidenceError> {
    let mut tar = tar::Builder::new(out);
    let now = time::OffsetDateTime::now_utc().unix_timestamp().max(0) as u64;
    add(&mut tar, "VERIFY.md", GUIDE.as_bytes(), now)?;
    if let Some(log) = &src.log {
        add(
            &mut tar,
            "keys/recording-signing.pub",
            log.public_key_pem().as_bytes(),
            now,
        )?;
        let pem = log
            .log_public_key_pem()
            .await
            .map_err(|e| EvidenceError::Log {
                id: Uuid::nil(),
                message: e.to_string(),
            })?;
        add(&mut tar, "keys/log.pub", pem.as_bytes(), now)?;
    }
    for id in ids {
        let s = src
            .store
            .get(*id)
            .await?
            .ok_or(EvidenceError::NotFound(*id))?;
        session(src, &s, &mut tar).await?;
    }
    Ok(tar.into_inner()?)
}

/// One session's directory.
async fn session<W: std::io::Write>(
    src: &Sources,
    s: &Session,
    tar: &mut tar::Builder<W>,
) -> Result<(), EvidenceError> {
    let id = s.id;
    let mtime = s
        .finished_at
        .unwrap_or(s.created_at)
        .unix_timestamp()
        .max(0) as u64;
    let dir = id.to_string();
    add(tar, &format!("{dir}/session.json"), &json(s), mtime)?;
    // Read after the row: the session may have changed since.
    let events =
        crate::store::events_as_of(src.store.as_ref(), s, src.store.events(id).await?).await?;
    add(tar, &format!("{dir}/events.json"), &json(&events), mtime)?;
    if let Some(spec) = &s.spec {
        add(
            tar,
            &format!("{dir}/spec.json"),
            spec.document.as_bytes(),
            mtime,
        )?;
    }
    if let Some(rec) = &s.recording {
        let recording = |source| EvidenceError::Recording { id, source };
        let cast = read_recording(src.recordings.as_ref(), rec, false)
            .await
            .map_err(recording)?;
        add(tar, &format!("{dir}/recording.cast"), &cast, mtime)?;
        let final_key = parse_segment_key(&rec.key).map_or(rec.key.clone(), |(k, _)| k);
        let links = segment_links(src.recordings.as_ref(), &final_key)
            .await
            .map_err(recording)?;
        if !links.is_empty() {
            add(tar, &format!("{dir}/segments.json"), &json(&links), mtime)?;
        }
    }
    if let (Some(entry), Some(log)) = (&s.rekor, &src.log) {
        let answer = log
            .entry_answer(&entry.uuid)
            .await
            .map_err(|e| EvidenceError::Log {
                id,
                message: e.to_string(),
            })?;
        add(
            tar,
            &format!("{dir}/rekor-entry.json"),
            answer.as_bytes(),
            mtime,
        )?;
    }
    Ok(())
}
