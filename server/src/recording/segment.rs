//! The segments of a recording: each flush stores only the bytes no earlier segment holds, as
//! the numbered object `sessions/<id>/segment-<n>` (n = 1, 2, ...), and the end of the session
//! stores the whole cast once as `sessions/<id>.cast` (see `docs/recording.md` for why).
//!
//! A segment's body is exactly its part of the cast, so the cast is the segments' bodies
//! concatenated. Its chain links travel as object metadata (S3 user metadata, a sidecar file
//! in the local store), not in the body, so an idle session's many small segments cost no
//! extra bytes:
//!
//! - `breakglass-segment`: its number;
//! - `breakglass-offset`: how many cast bytes come before it;
//! - `breakglass-prev-sha256`: the SHA-256 of the segment before it (empty for the first);
//! - `breakglass-cast-sha256`: the SHA-256 of the cast up to and including it.
//!
//! [`ChainReader`] reads them back in order and checks every link, naming the first segment
//! that does not fit.

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use super::{Chunks, Meta, RecordingStore, RecordingStoreError};

const INDEX: &str = "breakglass-segment";
const OFFSET: &str = "breakglass-offset";
const PREV: &str = "breakglass-prev-sha256";
const CAST: &str = "breakglass-cast-sha256";

/// The object key of segment `index` of the recording whose final cast is `final_key`
/// (`sessions/<id>.cast` → `sessions/<id>/segment-00000001`).
pub fn segment_key(final_key: &str, index: u64) -> String {
    let stem = final_key.strip_suffix(".cast").unwrap_or(final_key);
    format!("{stem}/segment-{index:08}")
}

/// The final cast's key and the segment number of a segment key; `None` for any other key.
pub fn parse_segment_key(key: &str) -> Option<(String, u64)> {
    let (stem, n) = key.rsplit_once("/segment-")?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((format!("{stem}.cast"), n.parse().ok()?))
}

/// The chain links of one segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentMeta {
    /// Its number (1 for the first).
    pub index: u64,
    /// Cast bytes before it.
    pub offset: u64,
    /// Lowercase hex SHA-256 of the segment before it; empty for the first.
    pub prev_sha256: String,
    /// Lowercase hex SHA-256 of the cast through this segment.
    pub cast_sha256: String,
}

impl SegmentMeta {
    /// As stored.
    pub fn to_meta(&self) -> Meta {
        Meta::from([
            (INDEX.to_string(), self.index.to_string()),
            (OFFSET.to_string(), self.offset.to_string()),
            (PREV.to_string(), self.prev_sha256.clone()),
            (CAST.to_string(), self.cast_sha256.clone()),
        ])
    }

    /// Read back; the text says which link is missing or malformed.
    pub fn from_meta(meta: &Meta) -> Result<SegmentMeta, String> {
        let get = |k: &str| {
            meta.get(k)
                .map(|v| v.trim().to_string())
                .ok_or_else(|| format!("it carries no {k} metadata"))
        };
        let number = |k: &str| {
            get(k)?
                .parse::<u64>()
                .map_err(|_| format!("its {k} metadata is not a number"))
        };
        Ok(SegmentMeta {
            index: number(INDEX)?,
            offset: number(OFFSET)?,
            prev_sha256: get(PREV).unwrap_or_default(),
            cast_sha256: get(CAST)?,
        })
    }
}

/// Where a chain stops being what it should be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    /// A segment the chain needs does not exist.
    #[error("segment {index} is missing (the segments before it hold {bytes} bytes)")]
    Missing {
        /// The first missing segment.
        index: u64,
        /// Cast bytes in the segments before it.
        bytes: u64,
    },
    /// A segment is there but does not fit the chain.
    #[error("segment {index}: {why}")]
    Broken {
        /// The first segment that does not fit.
        index: u64,
        /// What does not fit.
        why: String,
    },
    /// The store failed.
    #[error("{0}")]
    Store(RecordingStoreError),
}

impl From<ChainError> for RecordingStoreError {
    fn from(e: ChainError) -> RecordingStoreError {
        match e {
            ChainError::Store(e) => e,
            other => RecordingStoreError::Corrupt(other.to_string()),
        }
    }
}

/// Where a chain stands after its last stored segment: what the next segment must carry.
#[derive(Debug, Clone, Default)]
pub struct ChainState {
    /// Segments stored so far.
    pub segments: u64,
    /// Cast bytes stored so far.
    pub bytes: u64,
    /// SHA-256 state over those bytes.
    pub hasher: Sha256,
    /// SHA-256 of the last stored segment (`None` before the first).
    pub prev: Option<[u8; 32]>,
}

impl ChainState {
    /// The links of the next segment, whose body is `payload`; also its own digest.
    pub fn next_meta(&self, payload: &[u8]) -> (SegmentMeta, [u8; 32], Sha256) {
        let mut cast = self.hasher.clone();
        cast.update(payload);
        let meta = SegmentMeta {
            index: self.segments + 1,
            offset: self.bytes,
            prev_sha256: self.prev.map(hex::encode).unwrap_or_default(),
            cast_sha256: hex::encode(cast.clone().finalize()),
        };
        (meta, Sha256::digest(payload).into(), cast)
    }

    /// The state once the next segment (`payload`, hashed as `digest`, cast hash `cast`) is
    /// stored.
    pub fn advance(&mut self, payload_len: u64, digest: [u8; 32], cast: Sha256) {
        self.segments += 1;
        self.bytes += payload_len;
        self.hasher = cast;
        self.prev = Some(digest);
    }

    /// Lowercase hex SHA-256 of the cast so far.
    pub fn sha256_hex(&self) -> String {
        hex::encode(self.hasher.clone().finalize())
    }
}

/// Reads the segments of a recording in order, checking each link; memory holds one segment.
pub struct ChainReader<'a> {
    store: &'a dyn RecordingStore,
    final_key: String,
    upto: Option<u64>,
    state: ChainState,
    last_version: Option<String>,
}

impl<'a> ChainReader<'a> {
    /// The chain of `final_key`, through segment `upto` (each one up to it must exist) or,
    /// with `None`, through the last one stored.
    pub fn new(store: &'a dyn RecordingStore, final_key: &str, upto: Option<u64>) -> Self {
        ChainReader {
            store,
            final_key: final_key.to_string(),
            upto,
            state: ChainState::default(),
            last_version: None,
        }
    }

    /// The next segment's body; `None` after the last one.
    pub async fn next(&mut self) -> Result<Option<Vec<u8>>, ChainError> {
        let index = self.state.segments + 1;
        if self.upto.is_some_and(|u| index > u) {
            return Ok(None);
        }
        let key = segment_key(&self.final_key, index);
        let (body, meta, version) = match self.store.get_with_meta(&key, None).await {
            Ok(found) => found,
            Err(RecordingStoreError::NotFound { .. }) if self.upto.is_none() => return Ok(None),
            Err(RecordingStoreError::NotFound { .. }) => {
                return Err(ChainError::Missing {
                    index,
                    bytes: self.state.bytes,
                })
            }
            Err(e) => return Err(ChainError::Store(e)),
        };
        let broken = |why: String| ChainError::Broken { index, why };
        let meta = SegmentMeta::from_meta(&meta).map_err(broken)?;
        if meta.index != index {
            return Err(broken(format!(
                "it holds segment {} (segments were reordered or copied)",
                meta.index
            )));
        }
        if meta.offset != self.state.bytes {
            return Err(broken(format!(
                "it says {} cast bytes come before it, the segments before it hold {}",
                meta.offset, self.state.bytes
            )));
        }
        let before = self.state.prev.map(hex::encode).unwrap_or_default();
        if !meta.prev_sha256.eq_ignore_ascii_case(&before) {
            // The link names the segment before as the changed one.
            return Err(ChainError::Broken {
                index: (index - 1).max(1),
                why: format!(
                    "it hashes to {before}, but segment {index} recorded {} for it (changed \
                     after segment {index} was stored)",
                    meta.prev_sha256
                ),
            });
        }
        let (_, digest, cast) = self.state.next_meta(&body);
        let cast_hex = hex::encode(cast.clone().finalize());
        if !meta.cast_sha256.eq_ignore_ascii_case(&cast_hex) {
            return Err(broken(format!(
                "the cast through it hashes to {cast_hex}, it recorded {} (its bytes were changed)",
                meta.cast_sha256
            )));
        }
        self.state.advance(body.len() as u64, digest, cast);
        self.last_version = Some(version);
        Ok(Some(body))
    }

    /// Where the chain stands after the segments read so far.
    pub fn state(&self) -> &ChainState {
        &self.state
    }

    /// The version id of the last segment read.
    pub fn last_version(&self) -> Option<&str> {
        self.last_version.as_deref()
    }

    /// Reads through the end, returning where the chain stands.
    pub async fn finish(mut self) -> Result<ChainState, ChainError> {
        while self.next().await?.is_some() {}
        Ok(self.state)
    }
}

#[async_trait]
impl Chunks for ChainReader<'_> {
    async fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, RecordingStoreError> {
        Ok(self.next().await?)
    }
}

/// Reads the whole cast of a chain into memory (for a live recording's player; the final
/// object serves ended ones).
pub async fn read_chain(
    store: &dyn RecordingStore,
    final_key: &str,
    upto: Option<u64>,
) -> Result<Vec<u8>, ChainError> {
    let mut reader = ChainReader::new(store, final_key, upto);
    let mut out = Vec::new();
    while let Some(body) = reader.next().await? {
        out.extend_from_slice(&body);
    }
    Ok(out)
}

/// The whole cast `row` names: the final recording (the row's version of it), or, for a row
/// naming a segment (the session is live, or its end could not store the final recording),
/// the final recording when built since, else the segments concatenated. `live` reads what
/// is newest rather than what the row names.
pub async fn read_recording(
    store: &dyn RecordingStore,
    row: &breakglass_shared::session::RecordingRef,
    live: bool,
) -> Result<Vec<u8>, RecordingStoreError> {
    match parse_segment_key(&row.key) {
        None => {
            let version = Some(row.version.as_str()).filter(|v| !live && !v.is_empty());
            store.get(&row.key, version).await
        }
        Some((final_key, n)) => {
            if !live {
                match store.get(&final_key, None).await {
                    Ok(bytes) => return Ok(bytes),
                    Err(RecordingStoreError::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(read_chain(store, &final_key, (!live).then_some(n)).await?)
        }
    }
}

/// Lifts the holds of segments `1..=count` of `final_key` once its final cast is stored. A
/// failure is logged, not returned: the segments are only kept longer, nothing is lost.
pub async fn release_after_final(store: &dyn RecordingStore, final_key: &str, count: u64) {
    if let Err(e) = store.release_segments(final_key, count).await {
        tracing::warn!(key = %final_key, error = %e, "the segments stay held after the final cast was stored; they are kept longer, nothing is lost");
    }
}

/// Builds the final recording of the chain whose last segment `last` names (its hash and
/// length being the whole cast's), reading the segments back with every link checked, unless
/// the final cast is stored already, its latest version being the whole cast's length (`None`).
/// A broken chain stores nothing and answers [`RecordingStoreError::Corrupt`] naming the segment.
pub async fn build_final(
    store: &dyn RecordingStore,
    last: &breakglass_shared::session::RecordingRef,
) -> Result<Option<super::StoredVersion>, RecordingStoreError> {
    let Some((final_key, n)) = parse_segment_key(&last.key) else {
        return Ok(None);
    };
    // Built already when the latest version has the whole cast's length. Earlier versions of
    // an old single-object recording that was continued in segments are shorter: not built.
    match store.latest_size(&final_key).await {
        Ok((_, len)) if len == last.bytes => return Ok(None),
        // A longer final cast means `last` is behind what was stored: building from it would
        // put a shorter cast over the whole one, and readers get the latest version.
        Ok((_, len)) if len > last.bytes => {
            return Err(RecordingStoreError::Corrupt(format!(
                "a final cast of {len} bytes is stored already, longer than the {} bytes up to {}; nothing is stored over it",
                last.bytes, last.key
            )))
        }
        Ok(_) | Err(RecordingStoreError::NotFound { .. }) => {}
        Err(e) => return Err(e),
    }
    let digest: [u8; 32] = hex::decode(&last.sha256)
        .ok()
        .and_then(|d| d.try_into().ok())
        .ok_or_else(|| {
            RecordingStoreError::Corrupt(format!(
                "the row's hash {:?} is not a SHA-256",
                last.sha256
            ))
        })?;
    let mut chain = ChainReader::new(store, &final_key, Some(n));
    let stored = store
        .put_chunks(&final_key, &mut chain, digest, last.bytes)
        .await?;
    release_after_final(store, &final_key, n).await;
    Ok(Some(stored))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_keys_round_trip() {
        let k = segment_key("sessions/abc.cast", 7);
        assert_eq!(k, "sessions/abc/segment-00000007");
        assert_eq!(parse_segment_key(&k), Some(("sessions/abc.cast".into(), 7)));
        assert_eq!(parse_segment_key("sessions/abc.cast"), None);
        assert_eq!(parse_segment_key("sessions/abc/segment-"), None);
        assert_eq!(parse_segment_key("sessions/abc/segment-1x"), None);
    }

    #[test]
    fn meta_round_trips_and_names_what_is_missing() {
        let m = SegmentMeta {
            index: 3,
            offset: 10,
            prev_sha256: "ab".into(),
            cast_sha256: "cd".into(),
        };
        assert_eq!(SegmentMeta::from_meta(&m.to_meta()), Ok(m));
        let err = SegmentMeta::from_meta(&Meta::new()).expect_err("no links");
        assert!(err.contains(INDEX), "{err}");
    }
}
