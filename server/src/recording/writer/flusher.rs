//! The flusher task of a writer: every flush interval (or sooner, once a segment's worth is
//! pending) it takes the pending bytes, stores them as the next segment and reports it; while
//! the store fails it retries with exponential backoff, reporting [`WriterState::Retrying`]
//! (or [`WriterState::Failed`] past the spool limit) between attempts, each attempt storing
//! the same segment with what was written meanwhile. At the end it stores the last segment
//! and then the final cast, streamed back from the segments, until the finish timeout.
//!
//! The delays come from `backon`'s exponential schedule, but the loop stays this task's own
//! rather than `backon::Retryable` (one future retried until it succeeds): a wait is cut short
//! when the cast closes or is abandoned, each attempt first takes the bytes written meanwhile,
//! and the end of the session continues the running schedule under its own deadline.

use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use breakglass_shared::session::RecordingRef;
use rand::Rng as _;
use sha2::Digest;
use time::OffsetDateTime;
use tokio::sync::watch;
use tokio::time::Instant;

use super::buffer::Shared;
use super::{OnStored, RecordingFailed, WriterConfig, WriterState};
use crate::recording::segment::{segment_key, ChainReader, ChainState};
use crate::recording::{CastBody, RecordingStore, RecordingStoreError};

/// The delays between failed uploads.
type Delays = <ExponentialBuilder as BackoffBuilder>::Backoff;

/// `retry_initial`, doubled per failed attempt, at most `retry_max`.
fn retry_schedule(config: &WriterConfig) -> ExponentialBuilder {
    ExponentialBuilder::new()
        .with_min_delay(config.retry_initial)
        .with_max_delay(config.retry_max)
        .with_factor(2.0)
        .without_max_times()
}

/// The delay of a writer's first flush, at its start or after a quiet spell: somewhere in the
/// last three quarters of the interval, so that writers woken together do not store their
/// segments, and commit each new version to the session's row, in the same instant of every
/// interval from then on. A thousand terminals that began printing within a second did: every
/// five seconds their three replicas and the database took the whole machine for seconds, and
/// a keystroke's echo, relayed or not, waited up to a quarter of a second (BENCHMARKS.md,
/// "Three replicas").
fn spread(interval: Duration) -> Duration {
    interval.mul_f64(rand::thread_rng().gen_range(0.25..=1.0))
}

/// The flusher task's own state: the bytes taken but not yet in a stored segment, and where
/// the chain of stored segments stands (never the cast itself).
pub(super) struct Flusher {
    shared: Arc<Shared>,
    store: Arc<dyn RecordingStore>,
    on_stored: Box<dyn OnStored>,
    unstored: Vec<u8>,
    chain: ChainState,
    last: RecordingRef,
    attempts: u32,
    since: Option<OffsetDateTime>,
    /// [`retry_schedule`]: no jitter, no limit on attempts (the spool limit and the finish
    /// timeout end a failing recording).
    schedule: ExponentialBuilder,
    /// The running schedule while uploads fail; a success drops it, so the next failure
    /// waits `retry_initial` again.
    delays: Option<Delays>,
    final_tx: watch::Sender<Option<Result<RecordingRef, RecordingFailed>>>,
}

impl Flusher {
    /// Starts the flusher of `shared`, whose stored segments stand at `chain`, the last one
    /// being `last`; it reports the final result on `final_tx`.
    pub(super) fn spawn(
        shared: Arc<Shared>,
        store: Arc<dyn RecordingStore>,
        on_stored: Box<dyn OnStored>,
        chain: ChainState,
        last: RecordingRef,
        final_tx: watch::Sender<Option<Result<RecordingRef, RecordingFailed>>>,
    ) {
        let schedule = retry_schedule(&shared.config);
        let flusher = Flusher {
            shared,
            store,
            on_stored,
            unstored: Vec::new(),
            chain,
            last,
            attempts: 0,
            since: None,
            schedule,
            delays: None,
            final_tx,
        };
        tokio::spawn(flusher.run());
    }

    async fn run(mut self) {
        let interval = self.shared.config.flush_interval;
        let mut next = Instant::now() + spread(interval);
        loop {
            let parked = self.park();
            tokio::select! {
                () = tokio::time::sleep_until(next), if !parked => {}
                () = self.shared.wake.notified() => {}
            }
            if parked {
                // Woken from a quiet spell: what woke it is stored within an interval from
                // now, unless it has to go at once (a finish, an abandon, a failure, a
                // segment's worth).
                next = Instant::now() + spread(interval);
                if !self.urgent() {
                    continue;
                }
            }
            let abandoned = self.shared.lock().abandoned.clone();
            if let Some(reason) = abandoned {
                self.final_tx
                    .send_replace(Some(Err(RecordingFailed { reason })));
                return;
            }
            if self.take() {
                let result = self.finish().await;
                self.final_tx.send_replace(Some(result));
                return;
            }
            let now = Instant::now();
            // Woken early (a failure wants its data stored): honour a running backoff.
            if now < next && self.attempts > 0 {
                continue;
            }
            if self.unstored.is_empty() {
                next = now + interval;
                continue;
            }
            next = match self.upload().await {
                Ok(()) => Instant::now() + interval,
                Err(_) => Instant::now() + self.backoff(),
            };
        }
    }

    /// With nothing unstored and nothing pending, marks the flusher parked and returns true:
    /// it then waits for the next append instead of waking every interval to find nothing
    /// (a thousand idle terminals were a thousand timers: BENCHMARKS.md, "Relay and
    /// recording").
    fn park(&self) -> bool {
        if !self.unstored.is_empty() || self.attempts > 0 {
            return false;
        }
        let mut hot = self.shared.lock();
        let quiet = hot.pending.is_empty()
            && !hot.finishing
            && hot.abandoned.is_none()
            && hot.failed.is_none();
        hot.parked = quiet;
        quiet
    }

    /// Whether the writer wants its bytes handled now rather than at the next interval.
    fn urgent(&self) -> bool {
        let mut hot = self.shared.lock();
        hot.parked = false;
        hot.finishing || hot.abandoned.is_some() || hot.failed.is_some() || hot.size_woken
    }

    /// Moves the pending bytes behind the unstored ones; returns whether the cast is closed.
    fn take(&mut self) -> bool {
        let (taken, finishing) = {
            let mut hot = self.shared.lock();
            let taken = if hot.pending.is_empty() {
                Vec::new()
            } else {
                // The next period likely writes about as much: start there (bounded), so the
                // hot path rarely reallocates; idle sessions keep no buffer at all.
                let keep = hot.pending.len().min(1024 * 1024);
                std::mem::replace(&mut hot.pending, Vec::with_capacity(keep))
            };
            hot.size_woken = false;
            (taken, hot.finishing)
        };
        if self.unstored.is_empty() {
            self.unstored = taken;
        } else {
            self.unstored.extend_from_slice(&taken);
        }
        finishing
    }

    /// How long to wait after the failed attempt just made: the next delay of the schedule.
    fn backoff(&mut self) -> Duration {
        let schedule = self.schedule;
        self.delays
            .get_or_insert_with(|| schedule.build())
            .next()
            .unwrap_or(self.shared.config.retry_max)
    }

    /// Stores the unstored bytes as the next segment.
    async fn upload(&mut self) -> Result<(), RecordingStoreError> {
        let (meta, digest, cast) = self.chain.next_meta(&self.unstored);
        let key = segment_key(&self.shared.key, meta.index);
        let body = CastBody::with_digest(self.unstored.clone(), digest).with_meta(meta.to_meta());
        let len = body.len();
        match self.store.put_segment(&key, body).await {
            Ok(v) => {
                self.chain.advance(len, digest, cast);
                self.unstored = Vec::new();
                let r = RecordingRef {
                    key,
                    version: v.version_id,
                    sha256: self.chain.sha256_hex(),
                    bytes: self.chain.bytes,
                };
                self.last = r.clone();
                let recovered = self.attempts > 0;
                self.attempts = 0;
                self.since = None;
                self.delays = None;
                {
                    let mut hot = self.shared.lock();
                    hot.stored = self.chain.bytes;
                    hot.failing = false;
                    hot.last = Some(r.clone());
                    if hot.failed.is_none() && recovered {
                        tracing::info!(key = %self.shared.key, "recording store recovered");
                        self.shared.state.send_replace(WriterState::Healthy);
                    }
                }
                self.shared.drained.notify_waiters();
                self.on_stored.stored(r).await;
                Ok(())
            }
            Err(e) => {
                self.attempts += 1;
                let since = *self.since.get_or_insert_with(OffsetDateTime::now_utc);
                tracing::warn!(key = %self.shared.key, attempts = self.attempts, error = %e,
                    "storing a recording segment failed; retrying");
                let mut hot = self.shared.lock();
                hot.failing = true;
                if hot.failed.is_none() {
                    let spooled = hot.total - hot.stored;
                    if spooled > self.shared.config.spool_limit as u64 {
                        let reason = format!(
                            "the recording store is failing ({e}) and {spooled} unstored bytes exceed the spool limit of {} bytes",
                            self.shared.config.spool_limit
                        );
                        self.shared.fail(&mut hot, reason);
                    } else {
                        self.shared.state.send_replace(WriterState::Retrying {
                            since,
                            attempts: self.attempts,
                        });
                    }
                }
                // A relay held back by the memory bound may now go on to the spool limit.
                self.shared.drained.notify_waiters();
                Err(e)
            }
        }
    }

    /// Stores the last segment and then the final cast, retrying until the finish timeout.
    /// A handover stores no final cast (the next writer continues the segments).
    async fn finish(&mut self) -> Result<RecordingRef, RecordingFailed> {
        let deadline = Instant::now() + self.shared.config.finish_timeout;
        loop {
            self.take();
            if self.unstored.is_empty() {
                break;
            }
            if let Err(e) = self.upload().await {
                let wait = self.backoff();
                if Instant::now() + wait > deadline {
                    let reason = format!(
                        "the last segment could not be stored ({e}); the last stored one is {} ({} bytes)",
                        self.last.key, self.last.bytes
                    );
                    let mut hot = self.shared.lock();
                    return Err(self.shared.fail(&mut hot, reason));
                }
                tokio::time::sleep(wait).await;
            }
        }
        let (failed, handing_over) = {
            let hot = self.shared.lock();
            (hot.failed.clone(), hot.handing_over)
        };
        if !handing_over {
            self.store_final(deadline).await;
        }
        match failed {
            // Everything is stored, but the session still lost recording time.
            Some(reason) => Err(RecordingFailed { reason }),
            None => Ok(self.last.clone()),
        }
    }

    /// Stores the final cast, streamed back from the segments (the chain checked on the way),
    /// until `deadline`; reports it. When that fails the last segment stays the recording's
    /// reference (its hash is the whole cast's), and the sweep builds the final cast later.
    async fn store_final(&mut self, deadline: Instant) {
        let key = self.shared.key.clone();
        let digest: [u8; 32] = self.chain.hasher.clone().finalize().into();
        loop {
            let mut chain = ChainReader::new(self.store.as_ref(), &key, Some(self.chain.segments));
            let stored = self
                .store
                .put_chunks(&key, &mut chain, digest, self.chain.bytes)
                .await;
            let e = match stored {
                Ok(v) => {
                    crate::recording::segment::release_after_final(
                        self.store.as_ref(),
                        &key,
                        self.chain.segments,
                    )
                    .await;
                    let r = v.to_ref(&key);
                    self.last = r.clone();
                    self.shared.lock().last = Some(r.clone());
                    self.on_stored.stored(r).await;
                    return;
                }
                Err(e) => e,
            };
            let wait = self.backoff();
            if matches!(e, RecordingStoreError::Corrupt(_)) || Instant::now() + wait > deadline {
                tracing::error!(%key, error = %e, last = %self.last.key,
                    "the final cast was not stored; the segments are kept and the sweep builds it");
                return;
            }
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_flushes_spread_over_the_last_three_quarters_of_the_interval() {
        let interval = Duration::from_secs(4);
        let delays: Vec<Duration> = (0..1000).map(|_| spread(interval)).collect();
        assert!(delays.iter().all(|d| (interval / 4..=interval).contains(d)));
        // Spread, not one instant: both halves of the range are drawn.
        let early = delays.iter().filter(|d| **d < interval * 5 / 8).count();
        assert!(
            (300..700).contains(&early),
            "{early} of 1000 in the first half"
        );
    }

    #[test]
    fn retry_delays_start_at_the_initial_delay_and_double_up_to_the_longest() {
        let ms = Duration::from_millis;
        for (initial, max) in [
            (ms(500), ms(10_000)),
            (ms(50), ms(200)),
            (ms(10), ms(600_000)),
            (ms(333), ms(1_000)),
            (ms(7), ms(7)),
        ] {
            let config = WriterConfig {
                retry_initial: initial,
                retry_max: max,
                ..WriterConfig::default()
            };
            let delays: Vec<Duration> = retry_schedule(&config).build().take(24).collect();
            for (attempt, got) in (1u32..).zip(delays) {
                let want = initial.saturating_mul(1 << (attempt - 1).min(20)).min(max);
                // backon doubles in f32: within 10 ppm (a few microseconds at the longest
                // delays), far below the timer's millisecond resolution.
                assert!(
                    got.abs_diff(want) <= want / 100_000,
                    "initial {initial:?} max {max:?} attempt {attempt}: {got:?}, want {want:?}"
                );
            }
        }
    }
}
