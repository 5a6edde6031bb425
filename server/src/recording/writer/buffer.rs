//! The in-memory cast of one writer: the bytes not yet taken by the flusher, the counters the
//! size bound and the spool limit are checked against, and the state shared by every
//! [`CastWriter`](super::CastWriter) handle and the flusher.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant as StdInstant};

use breakglass_shared::recording::Utf8Carry;
use breakglass_shared::session::RecordingRef;
use tokio::sync::{watch, Notify};

use super::encode::write_event;
use super::{RecordingFailed, WriterConfig, WriterState};

/// Hot state, behind one short mutex.
pub(super) struct Hot {
    /// Bytes appended since the flusher last took them.
    pub(super) pending: Vec<u8>,
    /// Every byte of the cast so far (header included).
    pub(super) total: u64,
    /// Length of the latest stored version.
    pub(super) stored: u64,
    /// The latest stored version.
    pub(super) last: Option<RecordingRef>,
    /// The store is failing (the spool limit applies).
    pub(super) failing: bool,
    /// Set once the recording failed.
    pub(super) failed: Option<String>,
    /// Set once `finish` (or the last handle's drop) closed the cast.
    pub(super) finishing: bool,
    pub(super) out_carry: Utf8Carry,
    pub(super) out_carry_pending: bool,
    pub(super) in_carry: Utf8Carry,
    pub(super) in_carry_pending: bool,
    pub(super) start: StdInstant,
    /// Time already on the cast when this writer took it over (zero for a new cast).
    pub(super) offset: Duration,
    /// Set when another writer took the recording over: this one stores nothing more.
    pub(super) abandoned: Option<String>,
    /// The cast closes for another writer to continue it (no final cast).
    pub(super) handing_over: bool,
    /// The flusher was woken because a segment's worth is pending.
    pub(super) size_woken: bool,
    /// The flusher sleeps with no timer (nothing to store): the next append wakes it.
    pub(super) parked: bool,
    /// `total` when this writer started: the rate counts this run's bytes.
    pub(super) run_start: u64,
    /// When this writer started, on tokio's clock (the one its waits sleep on).
    pub(super) run_clock: tokio::time::Instant,
}

impl Hot {
    /// The state after `total` bytes were stored as `last`; the clock starts at `start`, with
    /// `offset` already on the cast.
    pub(super) fn new(total: u64, last: RecordingRef, start: StdInstant, offset: Duration) -> Hot {
        Hot {
            pending: Vec::new(),
            total,
            stored: total,
            last: Some(last),
            failing: false,
            failed: None,
            finishing: false,
            out_carry: Utf8Carry::default(),
            out_carry_pending: false,
            in_carry: Utf8Carry::default(),
            in_carry_pending: false,
            start,
            offset,
            abandoned: None,
            handing_over: false,
            size_woken: false,
            parked: false,
            run_start: total,
            run_clock: tokio::time::Instant::now(),
        }
    }

    /// Seconds since the cast's start, for the next event.
    pub(super) fn now(&self) -> Duration {
        self.offset + self.start.elapsed()
    }
}

/// What the writer's handles and its flusher share.
pub(super) struct Shared {
    pub(super) hot: Mutex<Hot>,
    /// Wakes the flusher early (the cast closed, or a failure wants its data stored).
    pub(super) wake: Notify,
    /// Wakes relays held back by [`CastWriter::ready`](super::CastWriter::ready) after each
    /// stored segment (or failed attempt).
    pub(super) drained: Notify,
    pub(super) state: watch::Sender<WriterState>,
    pub(super) final_rx: watch::Receiver<Option<Result<RecordingRef, RecordingFailed>>>,
    pub(super) config: WriterConfig,
    pub(super) key: String,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, Hot> {
        self.hot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks the recording failed (first reason wins) and wakes the flusher to store what it has.
    pub(super) fn fail(&self, hot: &mut Hot, reason: String) -> RecordingFailed {
        if hot.failed.is_none() {
            tracing::error!(key = %self.key, %reason, "recording failed");
            hot.failed = Some(reason.clone());
            self.state.send_replace(WriterState::Failed(reason));
            self.wake.notify_one();
        }
        RecordingFailed {
            reason: hot.failed.clone().unwrap_or_default(),
        }
    }

    pub(super) fn check_open(&self, hot: &Hot) -> Result<(), RecordingFailed> {
        if let Some(reason) = hot.abandoned.as_ref().or(hot.failed.as_ref()) {
            return Err(RecordingFailed {
                reason: reason.clone(),
            });
        }
        if hot.finishing {
            return Err(RecordingFailed {
                reason: "the recording is already finished".into(),
            });
        }
        Ok(())
    }

    /// Accounts for `before..` just appended: enforces the size bound and the spool limit.
    pub(super) fn after_append(&self, hot: &mut Hot, before: usize) -> Result<(), RecordingFailed> {
        let added = (hot.pending.len() - before) as u64;
        if hot.total + added > self.config.max_bytes as u64 {
            hot.pending.truncate(before);
            let reason = format!(
                "the recording reached its maximum size of {} bytes",
                self.config.max_bytes
            );
            return Err(self.fail(hot, reason));
        }
        hot.total += added;
        if hot.parked && added > 0 {
            hot.parked = false;
            self.wake.notify_one();
        }
        if !hot.size_woken && hot.pending.len() >= self.config.segment_bytes {
            // A segment's worth: store it now rather than at the next interval.
            hot.size_woken = true;
            self.wake.notify_one();
        }
        let spooled = hot.total - hot.stored;
        if hot.failing && spooled > self.config.spool_limit as u64 {
            let reason = format!(
                "the recording store is failing and {spooled} unstored bytes exceed the spool limit of {} bytes",
                self.config.spool_limit
            );
            return Err(self.fail(hot, reason));
        }
        Ok(())
    }

    /// Closes the cast: decodes what the carries hold back and writes the end marker.
    pub(super) fn close(&self, hot: &mut Hot, reason: &str) {
        self.close_with(hot, &format!("ended: {reason}"));
    }

    /// Closes this writer's run of the cast with `marker` as its last event (the end marker,
    /// or a handover another writer continues after).
    pub(super) fn close_with(&self, hot: &mut Hot, marker: &str) {
        if hot.finishing {
            return;
        }
        let before = hot.pending.len();
        let t = hot.now();
        let rest = hot.out_carry.finish();
        if !rest.is_empty() {
            write_event(&mut hot.pending, t, b'o', &rest);
        }
        let rest = hot.in_carry.finish();
        if !rest.is_empty() && self.config.record_input {
            write_event(&mut hot.pending, t, b'i', &rest);
        }
        write_event(&mut hot.pending, t, b'm', marker);
        hot.total += (hot.pending.len() - before) as u64;
        hot.finishing = true;
        self.wake.notify_one();
    }
}

/// Closes the cast when the last [`CastWriter`] handle goes away without `finish`.
pub(super) struct DropGuard(pub(super) Arc<Shared>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        let mut hot = self.0.lock();
        self.0.close(&mut hot, "recording writer dropped");
    }
}
