//! Anchoring final recording hashes in the transparency log. Two quick tries at the end: the
//! session ends either way (its cluster objects must go), and the sweep keeps trying, one try a
//! pass, for sessions that ended unanchored.

use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use breakglass_shared::session::RekorEntry;
use breakglass_shared::Session;

use super::Recorder;
use crate::recording::LogError;

impl Recorder {
    /// Submits the row's final hash, up to `attempts` times while the log is unreachable;
    /// `None` without a log, a recording, or when the row has an entry already.
    pub(super) async fn submit(&self, s: &Session, attempts: u32) -> Option<RekorEntry> {
        let (Some(log), Some(rec), None) = (&self.log, &s.recording, &s.rekor) else {
            return None;
        };
        let backoff = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(500))
            .with_factor(2.0)
            .with_max_times(attempts.saturating_sub(1) as usize);
        let anchored = (|| log.anchor(&rec.sha256))
            .retry(backoff)
            .when(|e| matches!(e, LogError::Unavailable(_)))
            .notify(|e, _| tracing::warn!(id = %s.id, error = %e, "anchoring failed; retrying"))
            .await;
        match anchored {
            Ok(entry) => {
                tracing::info!(id = %s.id, uuid = %entry.uuid, log_index = entry.log_index, "recording hash anchored");
                self.anchors.with_label_values(&["anchored"]).inc();
                Some(entry)
            }
            Err(e) => {
                tracing::error!(id = %s.id, error = %e, log = log.url(), "the recording hash could not be anchored (the sweep tries again)");
                self.anchors.with_label_values(&["failed"]).inc();
                None
            }
        }
    }
}
