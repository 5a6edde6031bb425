//! [`CastWriter`]: builds one session's asciicast v2 in memory and stores the whole cast so far
//! as a new version every few seconds, off the relay's hot path.
//!
//! Hot path ([`CastWriter::output`]): one uncontended mutex, UTF-8 validation, JSON escaping
//! straight into the pending buffer (no per-chunk `String`, no serde), no I/O. The flusher task
//! takes the pending bytes under the same short lock (a `mem::take`), appends them to its own
//! copy of the cast, advances an incremental SHA-256 and uploads outside the lock.
//!
//! Failure handling: a failed upload keeps everything (the bytes not yet in any stored version
//! are the *spool*), moves the state to [`WriterState::Retrying`] and retries with exponential
//! backoff, each attempt uploading the complete cast so far. When the spool grows past
//! [`WriterConfig::spool_limit`] while the store is failing, or the cast grows past
//! [`WriterConfig::max_bytes`], the state becomes [`WriterState::Failed`]: the relay must end
//! the session with `EndReason::RecordingFailed` ("no recording, no session"). The flusher
//! still tries to store what it has.

use std::io::Write as _;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant as StdInstant};

use async_trait::async_trait;
use breakglass_shared::recording::{Header, Utf8Carry};
use breakglass_shared::session::RecordingRef;
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use super::{CastBody, RecordingStore, StoreError};

/// How a [`CastWriter`] flushes, bounds and retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterConfig {
    /// How often the cast so far is stored as a new version (default 5 s).
    pub flush_interval: Duration,
    /// Largest cast kept (default 64 MiB); past it the recording fails.
    pub max_bytes: usize,
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
            max_bytes: 64 * 1024 * 1024,
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
        self(version)
    }
}

/// The reason of a cast's `ended: <reason>` marker when that is its last event (the cast was
/// finished), else `None`.
pub fn ended_reason(cast: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(cast).ok()?;
    let last = text.lines().rev().find(|l| !l.trim().is_empty())?;
    let event: breakglass_shared::recording::Event = serde_json::from_str(last).ok()?;
    (event.code == breakglass_shared::recording::Code::Marker)
        .then(|| event.data.strip_prefix("ended: ").map(str::to_string))
        .flatten()
}

/// Floors that keep a hand-built config from spinning the flusher.
fn normalized(mut config: WriterConfig) -> WriterConfig {
    config.flush_interval = config.flush_interval.max(Duration::from_millis(10));
    config.retry_initial = config.retry_initial.max(Duration::from_millis(1));
    config.retry_max = config.retry_max.max(config.retry_initial);
    config
}

/// Hot state, behind one short mutex.
struct Hot {
    /// Bytes appended since the flusher last took them.
    pending: Vec<u8>,
    /// Every byte of the cast so far (header included).
    total: u64,
    /// Length of the latest stored version.
    stored: u64,
    /// The latest stored version.
    last: Option<RecordingRef>,
    /// The store is failing (the spool limit applies).
    failing: bool,
    /// Set once the recording failed.
    failed: Option<String>,
    /// Set once `finish` (or the last handle's drop) closed the cast.
    finishing: bool,
    out_carry: Utf8Carry,
    out_carry_pending: bool,
    in_carry: Utf8Carry,
    in_carry_pending: bool,
    start: StdInstant,
    /// Time already on the cast when this writer took it over (zero for a new cast).
    offset: Duration,
    /// Set when another writer took the recording over: this one stores nothing more.
    abandoned: Option<String>,
}

impl Hot {
    /// Seconds since the cast's start, for the next event.
    fn now(&self) -> Duration {
        self.offset + self.start.elapsed()
    }
}

struct Shared {
    hot: Mutex<Hot>,
    wake: Notify,
    state: watch::Sender<WriterState>,
    final_rx: watch::Receiver<Option<Result<RecordingRef, RecordingFailed>>>,
    config: WriterConfig,
    key: String,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Hot> {
        self.hot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks the recording failed (first reason wins) and wakes the flusher to store what it has.
    fn fail(&self, hot: &mut Hot, reason: String) -> RecordingFailed {
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

    fn check_open(&self, hot: &Hot) -> Result<(), RecordingFailed> {
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
    fn after_append(&self, hot: &mut Hot, before: usize) -> Result<(), RecordingFailed> {
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
    fn close(&self, hot: &mut Hot, reason: &str) {
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
        write_event(&mut hot.pending, t, b'm', &format!("ended: {reason}"));
        hot.total += (hot.pending.len() - before) as u64;
        hot.finishing = true;
        self.wake.notify_one();
    }
}

/// Closes the cast when the last [`CastWriter`] handle goes away without `finish`.
struct DropGuard(Arc<Shared>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        let mut hot = self.0.lock();
        self.0.close(&mut hot, "recording writer dropped");
    }
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
    ) -> Result<CastWriter, StoreError> {
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
            return Err(StoreError::Misconfigured(format!(
                "the recording's maximum size ({} bytes) is smaller than its header",
                config.max_bytes
            )));
        }
        CastWriter::open(store, key, header, Duration::ZERO, None, config, on_stored).await
    }

    /// Continues `existing`, a stored version of `key` written by an earlier writer (this
    /// server before a restart, say): the cast keeps its header and every event, new events
    /// continue its clock, and a `resumed: <why>` marker says where. Stores the continued cast
    /// at once as a new version, reports it to `on_stored`, and spawns the flusher.
    pub async fn resume(
        store: Arc<dyn RecordingStore>,
        key: impl Into<String>,
        existing: Vec<u8>,
        why: &str,
        config: WriterConfig,
        on_stored: impl OnStored,
    ) -> Result<CastWriter, StoreError> {
        let key = key.into();
        let config = normalized(config);
        let unreadable = |e: String| {
            StoreError::Misconfigured(format!(
                "the stored recording {key} cannot be continued: {e}"
            ))
        };
        let text = std::str::from_utf8(&existing).map_err(|e| unreadable(e.to_string()))?;
        let (header, events) =
            breakglass_shared::recording::parse(text).map_err(|e| unreadable(e.to_string()))?;
        if !text.ends_with('\n') {
            return Err(unreadable("its last line is incomplete".into()));
        }
        // Continue the clock from the wall time since the header's start (the time the server
        // was down counts), never before the last event already written.
        let last = events.last().map_or(0.0, |e| e.time);
        let wall = header.timestamp.map_or(0.0, |ts| {
            (OffsetDateTime::now_utc().unix_timestamp() - ts).max(0) as f64
        });
        let offset = Duration::try_from_secs_f64(last.max(wall)).unwrap_or(Duration::ZERO);
        let mut marker = Vec::new();
        write_event(&mut marker, offset, b'm', &format!("resumed: {why}"));
        CastWriter::open(
            store,
            key,
            existing,
            offset,
            Some(marker),
            config,
            on_stored,
        )
        .await
    }

    /// Stores `initial` (+ `first_event`) as the first version of this writer's run and
    /// spawns the flusher.
    async fn open(
        store: Arc<dyn RecordingStore>,
        key: String,
        initial: Vec<u8>,
        offset: Duration,
        first_event: Option<Vec<u8>>,
        config: WriterConfig,
        on_stored: impl OnStored,
    ) -> Result<CastWriter, StoreError> {
        let mut initial = initial;
        if let Some(e) = first_event {
            initial.extend_from_slice(&e);
        }
        if initial.len() > config.max_bytes {
            return Err(StoreError::Misconfigured(format!(
                "the recording's maximum size ({} bytes) is smaller than what is already recorded ({} bytes)",
                config.max_bytes,
                initial.len()
            )));
        }
        let start = StdInstant::now();
        let mut hasher = Sha256::new();
        hasher.update(&initial);
        let body = CastBody::with_digest(initial.clone(), hasher.clone().finalize().into());
        let first = store.put_version(&key, body).await?.to_ref(&key);
        on_stored.stored(first.clone()).await;

        let (final_tx, final_rx) = watch::channel(None);
        let (state, _) = watch::channel(WriterState::Healthy);
        let total = initial.len() as u64;
        let shared = Arc::new(Shared {
            hot: Mutex::new(Hot {
                pending: Vec::new(),
                total,
                stored: total,
                last: Some(first.clone()),
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
            }),
            wake: Notify::new(),
            state,
            final_rx,
            config,
            key,
        });
        let flusher = Flusher {
            shared: shared.clone(),
            store,
            on_stored: Box::new(on_stored),
            full: initial,
            hasher,
            stored_len: total,
            last: first,
            attempts: 0,
            since: None,
            final_tx,
        };
        tokio::spawn(flusher.run());
        Ok(CastWriter {
            _guard: Arc::new(DropGuard(shared.clone())),
            shared,
        })
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

/// The flusher task's own state: the complete cast so far and its running hash.
struct Flusher {
    shared: Arc<Shared>,
    store: Arc<dyn RecordingStore>,
    on_stored: Box<dyn OnStored>,
    full: Vec<u8>,
    hasher: Sha256,
    stored_len: u64,
    last: RecordingRef,
    attempts: u32,
    since: Option<OffsetDateTime>,
    final_tx: watch::Sender<Option<Result<RecordingRef, RecordingFailed>>>,
}

impl Flusher {
    async fn run(mut self) {
        let interval = self.shared.config.flush_interval;
        let mut next = Instant::now() + interval;
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(next) => {}
                () = self.shared.wake.notified() => {}
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
            if self.full.len() as u64 == self.stored_len {
                next = now + interval;
                continue;
            }
            next = match self.upload().await {
                Ok(()) => Instant::now() + interval,
                Err(_) => Instant::now() + self.backoff(),
            };
        }
    }

    /// Moves the pending bytes into the full cast; returns whether the cast is closed.
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
            (taken, hot.finishing)
        };
        self.hasher.update(&taken);
        self.full.extend_from_slice(&taken);
        finishing
    }

    fn backoff(&self) -> Duration {
        let c = &self.shared.config;
        let exp = self.attempts.saturating_sub(1).min(16);
        c.retry_initial.saturating_mul(1u32 << exp).min(c.retry_max)
    }

    /// Stores the complete cast so far as a new version.
    async fn upload(&mut self) -> Result<(), StoreError> {
        let digest: [u8; 32] = self.hasher.clone().finalize().into();
        let body = CastBody::with_digest(self.full.clone(), digest);
        let len = body.len();
        match self.store.put_version(&self.shared.key, body).await {
            Ok(v) => {
                let r = v.to_ref(&self.shared.key);
                self.stored_len = len;
                self.last = r.clone();
                let recovered = self.attempts > 0;
                self.attempts = 0;
                self.since = None;
                {
                    let mut hot = self.shared.lock();
                    hot.stored = len;
                    hot.failing = false;
                    hot.last = Some(r.clone());
                    if hot.failed.is_none() && recovered {
                        tracing::info!(key = %self.shared.key, "recording store recovered");
                        self.shared.state.send_replace(WriterState::Healthy);
                    }
                }
                self.on_stored.stored(r).await;
                Ok(())
            }
            Err(e) => {
                self.attempts += 1;
                let since = *self.since.get_or_insert_with(OffsetDateTime::now_utc);
                tracing::warn!(key = %self.shared.key, attempts = self.attempts, error = %e,
                    "storing a recording version failed; retrying");
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
                Err(e)
            }
        }
    }

    /// Stores the closed cast, retrying until the finish timeout.
    async fn finish(&mut self) -> Result<RecordingRef, RecordingFailed> {
        let deadline = Instant::now() + self.shared.config.finish_timeout;
        loop {
            self.take();
            if self.full.len() as u64 == self.stored_len {
                let failed = self.shared.lock().failed.clone();
                return match failed {
                    // Everything is stored, but the session still lost recording time.
                    Some(reason) => Err(RecordingFailed { reason }),
                    None => Ok(self.last.clone()),
                };
            }
            if let Err(e) = self.upload().await {
                let wait = self.backoff();
                if Instant::now() + wait > deadline {
                    let reason = format!(
                        "the final version could not be stored ({e}); the last stored version is {} ({} bytes)",
                        self.last.version, self.last.bytes
                    );
                    let mut hot = self.shared.lock();
                    return Err(self.shared.fail(&mut hot, reason));
                }
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// `[<secs>.<micros>, "<code>", "` — the start of an event line.
fn write_time_prefix(buf: &mut Vec<u8>, t: Duration, code: u8) {
    let _ = write!(buf, "[{}.{:06}, \"", t.as_secs(), t.subsec_micros());
    buf.push(code);
    buf.extend_from_slice(b"\", \"");
}

/// One complete event line with `data` escaped as a JSON string.
fn write_event(buf: &mut Vec<u8>, t: Duration, code: u8, data: &str) {
    buf.reserve(data.len() + 32);
    write_time_prefix(buf, t, code);
    write_json_str_body(buf, data);
    buf.extend_from_slice(b"\"]\n");
}

/// For each byte: 0 = copy as is, `u` = `\u00XX`, else the letter after a backslash.
static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

const HEX: &[u8; 16] = b"0123456789abcdef";

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// Whether any of the 8 bytes in `w` needs escaping: a control byte (< 0x20), `"` or `\\`.
/// (Word-at-a-time "has a byte less than n / equal to b" tests; exact for "any".)
#[inline]
fn word_needs_escape(w: u64) -> bool {
    let has_zero = |v: u64| v.wrapping_sub(LO) & !v & HI != 0;
    (w.wrapping_sub(LO * 0x20) & !w & HI) != 0
        || has_zero(w ^ (LO * u64::from(b'"')))
        || has_zero(w ^ (LO * u64::from(b'\\')))
}

/// Appends `s` escaped for the inside of a JSON string, skipping plain bytes 8 at a time and
/// copying runs of them in one go.
fn write_json_str_body(buf: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let len = bytes.len();
    let (mut i, mut start) = (0, 0);
    while i < len {
        while i + 8 <= len {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[i..i + 8]);
            if word_needs_escape(u64::from_le_bytes(word)) {
                break;
            }
            i += 8;
        }
        if i >= len {
            break;
        }
        let b = bytes[i];
        let esc = ESCAPE[b as usize];
        if esc != 0 {
            buf.extend_from_slice(&bytes[start..i]);
            if esc == b'u' {
                buf.extend_from_slice(b"\\u00");
                buf.push(HEX[(b >> 4) as usize]);
                buf.push(HEX[(b & 0xf) as usize]);
            } else {
                buf.push(b'\\');
                buf.push(esc);
            }
            start = i + 1;
        }
        i += 1;
    }
    buf.extend_from_slice(&bytes[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use breakglass_shared::recording::{parse, Code};
    use rand::{Rng, SeedableRng};

    fn line(t: Duration, code: u8, data: &str) -> String {
        let mut buf = Vec::new();
        write_event(&mut buf, t, code, data);
        String::from_utf8(buf).unwrap_or_default()
    }

    #[test]
    fn escaping_matches_serde_json() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let alphabet: Vec<char> = ('\u{0}'..='\u{7f}')
            .chain(['é', '€', '𝄞', '\u{2028}', '\u{fffd}'])
            .collect();
        for _ in 0..2000 {
            let n = rng.gen_range(0..40);
            let s: String = (0..n)
                .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                .collect();
            let l = line(Duration::from_micros(1_234_567), b'o', &s);
            let v: (f64, String, String) = serde_json::from_str(&l).expect("valid JSON");
            assert_eq!(v, (1.234567, "o".to_string(), s));
        }
        // Long plain runs with rare escapes: exercises the 8-bytes-at-a-time skip.
        for _ in 0..2000 {
            let n = rng.gen_range(0..200);
            let s: String = (0..n)
                .map(|_| match rng.gen_range(0..40) {
                    0 => alphabet[rng.gen_range(0..alphabet.len())],
                    1 => '\u{1f}',
                    2 => '\u{7f}',
                    3 => '\u{20}',
                    _ => char::from(rng.gen_range(b'!'..=b'~')),
                })
                .collect();
            let l = line(Duration::ZERO, b'o', &s);
            let v: (f64, String, String) = serde_json::from_str(&l).expect("valid JSON");
            assert_eq!(v.2, s);
        }
        for b in 0u8..=0x7f {
            let s = format!("{0}{0}{0}{0}{0}{0}{0}{0}{0}", char::from(b));
            let v: (f64, String, String) =
                serde_json::from_str(&line(Duration::ZERO, b'o', &s)).expect("valid JSON");
            assert_eq!(v.2, s, "byte {b:#x}");
        }
        assert_eq!(
            line(Duration::from_millis(5), b'o', "a\"\\\u{1b}[0m\r\n"),
            "[0.005000, \"o\", \"a\\\"\\\\\\u001b[0m\\r\\n\"]\n"
        );
    }

    #[test]
    fn events_parse_with_the_shared_reader() {
        let header = Header {
            version: 2,
            width: 80,
            height: 24,
            timestamp: Some(1),
            title: None,
        }
        .to_line();
        let text = format!(
            "{header}{}{}",
            line(Duration::ZERO, b'o', "hi"),
            line(Duration::from_secs(2), b'm', "ended: UserEnded")
        );
        let (_, events) = parse(&text).expect("parses");
        assert_eq!(events[0].code, Code::Output);
        assert_eq!(events[1].code, Code::Marker);
        assert_eq!(events[1].time, 2.0);
    }
}
