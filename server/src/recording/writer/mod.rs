//! [`CastWriter`]: builds one session's asciicast v2 and stores it as a chain of segments, each
//! holding only the bytes no earlier one holds, off the relay's hot path; at the end the whole
//! cast is stored once as the final object, streamed back from the segments.
//!
//! Hot path ([`CastWriter::output`]): one uncontended mutex, UTF-8 validation, JSON escaping
//! straight into the pending buffer (no per-chunk `String`, no serde), no I/O. The flusher task
//! takes the pending bytes under the same short lock (a `mem::take`) and stores them as the
//! next segment outside the lock. Memory holds the unstored tail and the chain's hash state,
//! never the cast; [`CastWriter::ready`] holds the relay back (and so the pod) while the tail
//! is over its bound or the output over its rate.
//!
//! Failure handling: a failed upload keeps everything (the bytes not yet in any stored segment
//! are the *spool*), moves the state to [`WriterState::Retrying`] and retries with exponential
//! backoff, each attempt storing the spool as the next segment. When the spool grows past
//! [`WriterConfig::spool_limit`] while the store is failing, or the cast grows past
//! [`WriterConfig::max_bytes`], the state becomes [`WriterState::Failed`]: the relay must end
//! the session with `EndReason::RecordingFailed` ("no recording, no session"). The flusher
//! still tries to store what it has.
//!
//! The pieces: [`buffer`] (the in-memory tail the handles append to), [`encode`] (event
//! lines), [`flusher`] (storing segments and the final cast, retries) and [`resume`] (reading
//! a stored recording back to continue it).

mod buffer;
mod encode;
mod flusher;
mod resume;

use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant as StdInstant};

use async_trait::async_trait;
use breakglass_shared::recording::Header;
use breakglass_shared::session::RecordingRef;
use time::OffsetDateTime;
use tokio::sync::{watch, Notify};

use super::segment::{segment_key, ChainState};
use super::{CastBody, RecordingStore, RecordingStoreError};
use buffer::{DropGuard, Hot, Shared};
use encode::{write_event, write_time_prefix};
use flusher::Flusher;
pub use resume::{read_back, Resumable, Tail};

/// How a [`CastWriter`] flushes, bounds and retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterConfig {
    /// How often the new bytes are stored as a segment (default 5 s).
    pub flush_interval: Duration,
    /// Largest cast kept (default 2 GiB); past it the recording fails.
    pub max_bytes: usize,
    /// Pending bytes that make the flusher store a segment before the interval is up
    /// (default 4 MiB); the relay is held back at twice this (see [`CastWriter::ready`]).
    pub segment_bytes: usize,
    /// Output recorded per second, on average, before the relay is held back (default
    /// 16 MiB/s; 0: no rate). Nothing is dropped: the pod is slowed.
    pub max_rate: u64,
    /// Most bytes allowed outside any stored version while the store is failing (default
    /// 16 MiB); past it the recording fails.
    pub spool_limit: usize,
    /// Whether typed input is recorded (`"i"` events; default off).
    pub record_input: bool,
    /// First retry delay after a failed upload (default 500 ms), doubled per attempt.
    pub retry_initial: Duration,
    /// Longest retry delay (default 10 s).
    pub retry_max: Duration,
    /// How long [`CastWriter::finish`] keeps trying to store the final version (default 60 s).
    pub finish_timeout: Duration,
}

impl Default for WriterConfig {
    fn default() -> WriterConfig {
        WriterConfig {
            flush_interval: Duration::from_secs(5),
            max_bytes: 2 * 1024 * 1024 * 1024,
            segment_bytes: 4 * 1024 * 1024,
            max_rate: 16 * 1024 * 1024,
            spool_limit: 16 * 1024 * 1024,
            record_input: false,
            retry_initial: Duration::from_millis(500),
            retry_max: Duration::from_secs(10),
            finish_timeout: Duration::from_secs(60),
        }
    }
}

/// What the cast header says about the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// Terminal columns at start.
    pub width: u16,
    /// Terminal rows at start.
    pub height: u16,
    /// Title (for example `breakglass <id> <namespace>/<pod>`).
    pub title: Option<String>,
    /// Unix seconds of the start (`None`: now).
    pub timestamp: Option<i64>,
}

/// Health of a writer, as the relay and the UI see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriterState {
    /// The last upload worked (or none failed yet).
    Healthy,
    /// Uploads fail; the cast is kept in memory and retried.
    Retrying {
        /// When the first failed attempt of this run happened.
        since: OffsetDateTime,
        /// Failed attempts so far.
        attempts: u32,
    },
    /// The recording cannot be kept: the session must end (`RecordingFailed`).
    Failed(String),
}

/// The recording cannot go on (or could not be finished); the reason is for the audit trail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("recording failed: {reason}")]
pub struct RecordingFailed {
    /// Why.
    pub reason: String,
}

/// Receives every version the writer stored, in order (the caller turns it into
/// `Progress::RecordingStored`). Awaited by the flusher before its next upload.
#[async_trait]
pub trait OnStored: Send + Sync + 'static {
    /// `version` is now stored.
    async fn stored(&self, version: RecordingRef);
}

#[async_trait]
impl<F> OnStored for F
where
    F: Fn(RecordingRef) + Send + Sync + 'static,
{
    async fn stored(&self, version: RecordingRef) {
        self(version);
    }
}

/// The reason of a cast's `ended: <reason>` marker when that is its last event (the cast was
/// finished), else `None`.
pub fn ended_reason(cast: &[u8]) -> Option<String> {
    last_marker(cast)?
        .strip_prefix("ended: ")
        .map(str::to_string)
}

/// Whether the cast's last event is the `handed over: <why>` marker of a writer that stopped
/// for another replica to continue (rather than one that died mid-write).
pub fn handed_over(cast: &[u8]) -> bool {
    last_marker(cast).is_some_and(|m| m.starts_with("handed over: "))
}

/// The text of the cast's last event when that is a marker.
fn last_marker(cast: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(cast).ok()?;
    let last = text.lines().rev().find(|l| !l.trim().is_empty())?;
    let event: breakglass_shared::recording::Event = serde_json::from_str(last).ok()?;
    (event.code == breakglass_shared::recording::Code::Marker).then_some(event.data)
}

/// Floors that keep a hand-built config from spinning the flusher.
fn normalized(mut config: WriterConfig) -> WriterConfig {
    config.flush_interval = config.flush_interval.max(Duration::from_millis(10));
    config.retry_initial = config.retry_initial.max(Duration::from_millis(1));
    config.retry_max = config.retry_max.max(config.retry_initial);
    config.segment_bytes = config.segment_bytes.max(1024);
    config
}

/// The recording of one session. Cheap to clone; all clones write the same cast.
#[derive(Clone)]
pub struct CastWriter {
    shared: Arc<Shared>,
    _guard: Arc<DropGuard>,
}

impl std::fmt::Debug for CastWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CastWriter")
            .field("key", &self.shared.key)
            .field("state", &*self.shared.state.borrow())
            .finish()
    }
}

impl CastWriter {
    /// Stores the header as the first version of `key` (so a store that cannot take the
    /// recording stops the session before it starts), reports it to `on_stored`, and spawns
    /// the flusher. Must be called inside a tokio runtime.
    pub async fn start(
        store: Arc<dyn RecordingStore>,
        key: impl Into<String>,
        info: SessionInfo,
        config: WriterConfig,
        on_stored: impl OnStored,
    ) -> Result<CastWriter, RecordingStoreError> {
        let key = key.into();
        let config = normalized(config);
        let timestamp = info
            .timestamp
            .unwrap_or_else(|| OffsetDateTime::now_utc().unix_timestamp());
        let header = Header {
            version: 2,
            width: info.width,
            height: info.height,
            timestamp: Some(timestamp),
            title: info.title,
        }
        .to_line()
        .into_bytes();
        if header.len() > config.max_bytes {
            return Err(RecordingStoreError::Misconfigured(format!(
                "the recording's maximum size ({} bytes) is smaller than its header",
                config.max_bytes
            )));
        }
        let chain = ChainState::default();
        CastWriter::open(store, key, chain, header, Duration::ZERO, config, on_stored).await
    }

    /// Continues `from`, a recording of `key` stored by an earlier writer (this server before
    /// a restart, say; see [`read_back`]): the cast keeps its header and every event, new
    /// events continue its clock, and a `resumed: <why>` marker says where. A recording of
    /// the single-object layout is carried over whole as the first segment. Stores the marker
    /// at once as the next segment, reports it to `on_stored`, and spawns the flusher.
    pub async fn resume(
        store: Arc<dyn RecordingStore>,
        key: impl Into<String>,
        from: Resumable,
        why: &str,
        config: WriterConfig,
        on_stored: impl OnStored,
    ) -> Result<CastWriter, RecordingStoreError> {
        let key = key.into();
        let config = normalized(config);
        let (chain, carried, offset) = resume::continuation(&key, from)?;
        let mut initial = carried;
        write_event(&mut initial, offset, b'm', &format!("resumed: {why}"));
        CastWriter::open(store, key, chain, initial, offset, config, on_stored).await
    }

    /// Stores `initial` as the next segment after `chain` (this writer's first) and spawns
    /// the flusher.
    async fn open(
        store: Arc<dyn RecordingStore>,
        key: String,
        chain: ChainState,
        initial: Vec<u8>,
        offset: Duration,
        config: WriterConfig,
        on_stored: impl OnStored,
    ) -> Result<CastWriter, RecordingStoreError> {
        let mut chain = chain;
        let total = chain.bytes + initial.len() as u64;
        if total > config.max_bytes as u64 {
            return Err(RecordingStoreError::Misconfigured(format!(
                "the recording's maximum size ({} bytes) is smaller than what is already recorded ({total} bytes)",
                config.max_bytes,
            )));
        }
        let start = StdInstant::now();
        let (meta, digest, cast) = chain.next_meta(&initial);
        let seg = segment_key(&key, meta.index);
        let len = initial.len() as u64;
        let body = CastBody::with_digest(initial, digest).with_meta(meta.to_meta());
        let stored = store.put_segment(&seg, body).await?;
        chain.advance(len, digest, cast);
        let first = RecordingRef {
            key: seg,
            version: stored.version_id,
            sha256: chain.sha256_hex(),
            bytes: chain.bytes,
        };
        on_stored.stored(first.clone()).await;

        let (final_tx, final_rx) = watch::channel(None);
        let (state, _) = watch::channel(WriterState::Healthy);
        let shared = Arc::new(Shared {
            hot: Mutex::new(Hot::new(total, first.clone(), start, offset)),
            wake: Notify::new(),
            drained: Notify::new(),
            state,
            final_rx,
            config,
            key,
        });
        Flusher::spawn(
            shared.clone(),
            store,
            Box::new(on_stored),
            chain,
            first,
            final_tx,
        );
        Ok(CastWriter {
            _guard: Arc::new(DropGuard(shared.clone())),
            shared,
        })
    }

    /// Waits while this writer cannot take more output without outgrowing its bounds: the
    /// unstored tail is over twice [`WriterConfig::segment_bytes`] while the store is healthy
    /// (a slow store slows the pod), or this run's output is ahead of
    /// [`WriterConfig::max_rate`]. While the store fails it does not wait: the spool limit
    /// decides then. The relay awaits it after each chunk, before reading more from the pod.
    pub async fn ready(&self) -> Result<(), RecordingFailed> {
        loop {
            let drained = self.shared.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            let pause = {
                let hot = self.shared.lock();
                if let Some(reason) = hot.abandoned.as_ref().or(hot.failed.as_ref()) {
                    return Err(RecordingFailed {
                        reason: reason.clone(),
                    });
                }
                let tail = hot.total - hot.stored;
                let bound = 2 * self.shared.config.segment_bytes as u64;
                if !hot.failing && !hot.finishing && tail > bound {
                    None
                } else {
                    match self.shared.config.max_rate {
                        0 => return Ok(()),
                        rate => {
                            // A second's worth of burst, then the average.
                            let run = (hot.total - hot.run_start) as f64;
                            let due = Duration::from_secs_f64(run / rate as f64);
                            let ahead = due.saturating_sub(hot.run_clock.elapsed());
                            if ahead <= Duration::from_secs(1) {
                                return Ok(());
                            }
                            Some(ahead - Duration::from_secs(1))
                        }
                    }
                }
            };
            match pause {
                None => drained.await,
                Some(d) => tokio::time::sleep(d).await,
            }
        }
    }

    /// Waits until the first `len` bytes of the cast are stored (asking the flusher to store
    /// now rather than at its next interval) and returns the stored version that holds them:
    /// a watcher's first screen is drawn from exactly that prefix.
    pub async fn stored_through(&self, len: u64) -> Result<RecordingRef, RecordingFailed> {
        loop {
            let drained = self.shared.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            {
                let mut hot = self.shared.lock();
                if let Some(reason) = hot.abandoned.as_ref().or(hot.failed.as_ref()) {
                    return Err(RecordingFailed {
                        reason: reason.clone(),
                    });
                }
                if hot.stored >= len {
                    if let Some(last) = hot.last.clone() {
                        return Ok(last);
                    }
                }
                hot.size_woken = true;
            }
            self.shared.wake.notify_one();
            drained.await;
        }
    }

    /// Records terminal output (raw bytes; UTF-8 split across chunks is carried over).
    /// The relay's hot path: call it per chunk and end the session on `Err`.
    pub fn output(&self, bytes: &[u8]) -> Result<(), RecordingFailed> {
        self.text_event(bytes, b'o')
    }

    /// Records typed input when [`WriterConfig::record_input`] is on (a no-op otherwise).
    pub fn input(&self, bytes: &[u8]) -> Result<(), RecordingFailed> {
        if !self.shared.config.record_input {
            return Ok(());
        }
        self.text_event(bytes, b'i')
    }

    /// Records a terminal resize (`"r"` event, `COLSxROWS`).
    pub fn resize(&self, cols: u16, rows: u16) -> Result<(), RecordingFailed> {
        let mut hot = self.shared.lock();
        self.shared.check_open(&hot)?;
        let before = hot.pending.len();
        let t = hot.now();
        write_time_prefix(&mut hot.pending, t, b'r');
        let _ = writeln!(hot.pending, "{cols}x{rows}\"]");
        self.shared.after_append(&mut hot, before)
    }

    /// Records a marker (`"m"` event), e.g. `approved`, `active`.
    pub fn marker(&self, label: &str) -> Result<(), RecordingFailed> {
        let mut hot = self.shared.lock();
        self.shared.check_open(&hot)?;
        let before = hot.pending.len();
        let t = hot.now();
        write_event(&mut hot.pending, t, b'm', label);
        self.shared.after_append(&mut hot, before)
    }

    fn text_event(&self, bytes: &[u8], code: u8) -> Result<(), RecordingFailed> {
        if bytes.is_empty() {
            return Ok(());
        }
        let mut guard = self.shared.lock();
        let hot = &mut *guard;
        self.shared.check_open(hot)?;
        let before = hot.pending.len();
        let t = hot.now();
        let (carry, carry_pending) = if code == b'i' {
            (&mut hot.in_carry, &mut hot.in_carry_pending)
        } else {
            (&mut hot.out_carry, &mut hot.out_carry_pending)
        };
        // Fast path: nothing held back and the chunk is whole UTF-8 (the common case).
        match std::str::from_utf8(bytes) {
            Ok(s) if !*carry_pending => write_event(&mut hot.pending, t, code, s),
            _ => {
                let s = carry.push(bytes);
                *carry_pending = !carry.clone().finish().is_empty();
                if !s.is_empty() {
                    write_event(&mut hot.pending, t, code, &s);
                }
            }
        }
        self.shared.after_append(hot, before)
    }

    /// Writes the `ended: <reason>` marker, stores the final version (retrying up to
    /// [`WriterConfig::finish_timeout`]) and returns it: the reference for the session row.
    /// Calling it again returns the same result.
    pub async fn finish(&self, reason: &str) -> Result<RecordingRef, RecordingFailed> {
        {
            let mut hot = self.shared.lock();
            self.shared.close(&mut hot, reason);
        }
        self.stored_last().await
    }

    /// Stops this writer for another one to continue the same recording (the session goes on
    /// elsewhere): a `handed over: <why>` marker, everything stored like at [`finish`], but no
    /// end marker, so the cast stays open for [`CastWriter::resume`]. Returns the last version.
    ///
    /// [`finish`]: CastWriter::finish
    pub async fn hand_off(&self, why: &str) -> Result<RecordingRef, RecordingFailed> {
        {
            let mut hot = self.shared.lock();
            if !hot.finishing {
                hot.handing_over = true;
            }
            self.shared
                .close_with(&mut hot, &format!("handed over: {why}"));
        }
        self.stored_last().await
    }

    /// Waits for the flusher to store the closed cast; its last version.
    async fn stored_last(&self) -> Result<RecordingRef, RecordingFailed> {
        let mut rx = self.shared.final_rx.clone();
        let result = match rx.wait_for(Option::is_some).await {
            Ok(v) => v.clone(),
            Err(_) => None,
        };
        result.unwrap_or_else(|| {
            Err(RecordingFailed {
                reason: "the recording's flusher stopped unexpectedly".into(),
            })
        })
    }

    /// Stops this writer without storing anything more (no end marker either): another writer
    /// continues the same recording. `finish` then returns `Err` with `why`.
    pub fn abandon(&self, why: &str) {
        let mut hot = self.shared.lock();
        if hot.abandoned.is_none() {
            hot.abandoned = Some(why.to_string());
            hot.finishing = true;
            self.shared.wake.notify_one();
        }
    }

    /// Whether the cast was closed (`finish` called, the last handle dropped) or abandoned.
    pub fn is_closed(&self) -> bool {
        self.shared.lock().finishing
    }

    /// The current health.
    pub fn state(&self) -> WriterState {
        self.shared.state.borrow().clone()
    }

    /// A receiver that sees every change of [`CastWriter::state`] (the relay selects on it
    /// and ends the session on [`WriterState::Failed`]).
    pub fn watch_state(&self) -> watch::Receiver<WriterState> {
        self.shared.state.subscribe()
    }

    /// The latest stored version.
    pub fn last_stored(&self) -> Option<RecordingRef> {
        self.shared.lock().last.clone()
    }

    /// Bytes the writer holds now: taken from the relay but not yet in a stored segment (the
    /// flusher's attempt in flight aside). Bounded by the tail bound or, while the store
    /// fails, the spool limit, however long the cast.
    pub fn unstored(&self) -> u64 {
        let hot = self.shared.lock();
        hot.total - hot.stored
    }

    /// Bytes of the cast so far.
    pub fn len(&self) -> u64 {
        self.shared.lock().total
    }

    /// Never true: a cast always has its header.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The object key.
    pub fn key(&self) -> &str {
        &self.shared.key
    }
}
