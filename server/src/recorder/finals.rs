//! The final cast of a recording stored in segments: checked against the row before a
//! recording is continued, stored after an end the server did not live to complete, and
//! rebuilt by the sweep for a session that ended without it. Each time the segments are read
//! back through [`ChainReader`], so a broken chain builds nothing.

use std::sync::Arc;

use breakglass_shared::session::RecordingRef;
use breakglass_shared::{Session, SessionState};
use uuid::Uuid;

/// Most final recordings built per sweep pass (each reads its whole recording back).
const FINALS_PER_PASS: usize = 3;

use super::Recorder;
use crate::ports::RecordingError;
use crate::recording::segment::{parse_segment_key, segment_key, SegmentMeta};
use crate::recording::{sha256_hex, RecordingStoreError, Resumable};
use crate::store::ListFilter;

impl Recorder {
    /// Whether `stored` extends what the row names byte for byte: the same prefix hash for a
    /// single object, or the same cast hash and length recorded by the segment it names.
    pub(super) async fn continues(&self, row: &RecordingRef, stored: &Resumable) -> bool {
        let prefix_of = |bytes: &[u8]| {
            let prefix = usize::try_from(row.bytes).ok().and_then(|n| bytes.get(..n));
            prefix.map(sha256_hex).as_deref() == Some(row.sha256.as_str())
        };
        match (parse_segment_key(&row.key), stored) {
            (None, Resumable::Single(bytes)) => prefix_of(bytes),
            (Some(_), Resumable::Single(_)) => false,
            // A single-object recording carried over as the first segment, before the row
            // heard of it.
            (None, Resumable::Segments(tail)) => {
                let first = segment_key(&recording_key_of(row), 1);
                tail.chain.segments >= 1
                    && matches!(self.store.get(&first, None).await, Ok(b) if prefix_of(&b))
            }
            (Some((_, n)), Resumable::Segments(tail)) => {
                if n > tail.chain.segments {
                    return false;
                }
                let Ok((body, meta, _)) = self.store.get_with_meta(&row.key, None).await else {
                    return false;
                };
                SegmentMeta::from_meta(&meta).is_ok_and(|m| {
                    m.cast_sha256.eq_ignore_ascii_case(&row.sha256)
                        && m.offset + body.len() as u64 == row.bytes
                })
            }
        }
    }

    /// Stores the final cast of the chain that ends with the segment `last` names (its hash
    /// and length being the whole cast's), unless one is stored already. Returns the new
    /// final cast's reference, `None` when there was one.
    pub(super) async fn store_final(
        &self,
        last: &RecordingRef,
    ) -> Result<Option<RecordingRef>, RecordingError> {
        let Some((final_key, _)) = parse_segment_key(&last.key) else {
            return Ok(None);
        };
        let stored = crate::recording::segment::build_final(self.store.as_ref(), last)
            .await
            .map_err(|e| match e {
                RecordingStoreError::Corrupt(why) => RecordingError::Resume(format!(
                    "the final recording was not built: {why} (run verify-recording)"
                )),
                other => RecordingError::StoreUnavailable(Arc::new(other)),
            })?;
        let Some(stored) = stored else {
            return Ok(None);
        };
        tracing::info!(key = %final_key, bytes = last.bytes, "final recording built from its segments");
        Ok(Some(stored.to_ref(&final_key)))
    }

    /// For the sweep: builds the final cast of an ended session whose row still names a
    /// segment (the end could not store it), from the segments up to that one, after checking
    /// their chain. True when it built one now.
    pub async fn rebuild_final(&self, s: &Session) -> Result<bool, RecordingError> {
        let Some(row) = s
            .recording
            .as_ref()
            .filter(|r| parse_segment_key(&r.key).is_some())
        else {
            return Ok(false);
        };
        if self.final_known(s.id) {
            return Ok(false);
        }
        let built = self.store_final(row).await?.is_some();
        self.finals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(s.id);
        Ok(built)
    }

    /// For the sweep: [`Recorder::rebuild_final`] for the sessions of the last week that
    /// ended without their final cast, a few per pass, stopping at the first store failure.
    /// Returns how many were built.
    pub async fn rebuild_finals(&self, now: time::OffsetDateTime) -> usize {
        let filter = ListFilter {
            state: Some(SessionState::Ended),
            final_missing_since: Some(now - time::Duration::days(7)),
            limit: 200,
            ..Default::default()
        };
        let due = match self.db.list(&filter).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the recordings without a final cast");
                return 0;
            }
        };
        let mut built = 0;
        for s in due
            .iter()
            .filter(|s| !self.final_known(s.id))
            .take(FINALS_PER_PASS)
        {
            match self.rebuild_final(s).await {
                Ok(true) => built += 1,
                Ok(false) => {}
                Err(RecordingError::StoreUnavailable(e)) => {
                    tracing::warn!(id = %s.id, error = %e, "the final recording was not built; the next pass tries again");
                    break;
                }
                Err(e) => {
                    // A broken chain stays broken: verification names the segment.
                    tracing::error!(id = %s.id, error = %e, "the final recording cannot be built");
                    self.finals
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .insert(s.id);
                }
            }
        }
        built
    }

    fn final_known(&self, id: Uuid) -> bool {
        self.finals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(&id)
    }
}

/// The final cast's key for a row naming it or one of its segments.
fn recording_key_of(row: &RecordingRef) -> String {
    parse_segment_key(&row.key).map_or_else(|| row.key.clone(), |(k, _)| k)
}
