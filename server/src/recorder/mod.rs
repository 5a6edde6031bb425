//! The recording of each session: started before activation ("no recording, no session"),
//! continued after a restart or on another replica, finished at the end, its final hash
//! anchored. The relay tees into the [`CastWriter`] it gets here; the lifecycle drives the rest
//! through the [`Recordings`] port. Stored versions and failures are reported to the lifecycle
//! as [`RecorderEvent`]s on a channel, never by calling it.
//!
//! One writer per session across replicas: the replica whose writer records a session holds
//! the database lease `recording:<id>` (renewed by this replica's keeper while the writer
//! lives, released once the final version is on the row). Another replica neither starts nor
//! continues that recording while the lease is held; when the holder dies the lease expires and
//! the next replica that needs the recording continues it (`CastWriter::resume`).
//!
//! The terminal works through any replica because the writer follows it: a replica that gets
//! the terminal of a session recorded elsewhere asks for the writer (its `handover:<id>` lease
//! is the request, `Store::ask_handover` the notice that makes the holder read it);
//! the holder closes its terminal, waits for its relay to stop, stores everything with a
//! `handed over` marker and gives the lease up; the new replica continues the cast from the
//! version on the row. A holder that died answers nothing, and its lease running out is the
//! answer. See `docs/recording.md` for why the writer moves instead of the socket being proxied.

mod anchor;
mod finals;
mod handover;
mod keeper;
mod making;
mod reading;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use breakglass_shared::api::SessionChange;
use breakglass_shared::session::{RecordingRef, RekorEntry};
use breakglass_shared::Session;
use prometheus::IntCounterVec;
use tokio::sync::{broadcast, mpsc, oneshot, watch, Mutex};
use uuid::Uuid;

use crate::connections::Connections;
use crate::ports::{RecorderEvent, Recording, RecordingError, Recordings, Terminals};
use crate::recording::{
    recording_key, CastWriter, OnStored, RecordingConfig, RecordingStore, RecordingStoreError,
    Resumable, SessionInfo, TransparencyLog, WriterState,
};
use crate::store::Store;

/// What a [`Recorder`] is built from.
pub struct RecorderParts {
    /// The recording settings (store, writer, log).
    pub config: RecordingConfig,
    /// The database, for the writers' leases and the sessions' rows.
    pub db: Arc<dyn Store>,
    /// This replica's terminals, closed when the recording moves to another replica.
    pub connections: Arc<Connections>,
    /// Committed changes (of every replica): the keeper finishes a recording once its session
    /// left `Active`.
    pub changes: broadcast::Sender<SessionChange>,
    /// Bumped when changes of other replicas may have been missed: the keeper re-reads the
    /// rows of the sessions it records.
    pub missed: watch::Receiver<u64>,
    /// Counter of anchoring attempts, by outcome.
    pub anchors: IntCounterVec,
    /// Where the other replicas reach this one: part of the writers' lease holder name, so a
    /// replica asked to watch a terminal served here knows where to ask.
    pub advertise: Option<url::Url>,
}

/// The recordings of this replica.
pub struct Recorder {
    store: Arc<dyn RecordingStore>,
    log: Option<Arc<TransparencyLog>>,
    config: RecordingConfig,
    db: Arc<dyn Store>,
    connections: Arc<Connections>,
    events: mpsc::Sender<RecorderEvent>,
    anchors: IntCounterVec,
    /// This process's lease holder name.
    holder: String,
    writers: Mutex<HashMap<Uuid, CastWriter>>,
    /// Sessions whose writer is being made here, one lock each: making a writer (its lease,
    /// the store check, the first segment stored, or a stored recording read back) waits on
    /// the database and the store, and holding `writers` through that made every activation
    /// and terminal of the replica wait for each other's (BENCHMARKS.md, "Activation").
    making: std::sync::Mutex<HashMap<Uuid, Arc<Mutex<()>>>>,
    /// Ended sessions whose final cast the sweep found stored (it need not look again).
    finals: std::sync::Mutex<HashSet<Uuid>>,
}

/// Name of the lease of a session's recording.
fn lease_name(id: Uuid) -> String {
    format!("recording:{id}")
}

fn now_ms() -> i64 {
    i64::try_from(time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
}

/// Reports each stored version to the lifecycle and waits until the row names it.
struct ReportStored {
    id: Uuid,
    events: mpsc::Sender<RecorderEvent>,
}

#[async_trait]
impl OnStored for ReportStored {
    async fn stored(&self, version: RecordingRef) {
        let (done, on_row) = oneshot::channel();
        let event = RecorderEvent::Stored {
            id: self.id,
            version,
            done,
        };
        if self.events.send(event).await.is_ok() {
            let _ = on_row.await;
        }
    }
}

impl Recorder {
    /// The recorder over `parts`, with the receiver of its events for the lifecycle. Spawns
    /// the keeper, which lives as long as the recorder.
    pub fn new(
        parts: RecorderParts,
    ) -> Result<(Arc<Recorder>, mpsc::Receiver<RecorderEvent>), RecordingStoreError> {
        let (events, rx) = mpsc::channel(1024);
        let recorder = Arc::new(Recorder {
            store: parts.config.open_store()?,
            log: parts.config.open_log()?,
            config: parts.config,
            db: parts.db,
            connections: parts.connections,
            events,
            anchors: parts.anchors,
            holder: match &parts.advertise {
                Some(url) => format!("{}@{url}", Uuid::now_v7()),
                None => Uuid::now_v7().to_string(),
            },
            writers: Mutex::new(HashMap::new()),
            making: std::sync::Mutex::default(),
            finals: std::sync::Mutex::default(),
        });
        keeper::spawn(
            Arc::downgrade(&recorder),
            parts.changes.subscribe(),
            parts.missed,
        );
        Ok((recorder, rx))
    }

    /// The recording store.
    pub fn store(&self) -> &Arc<dyn RecordingStore> {
        &self.store
    }

    /// The transparency log final hashes are anchored in, when configured.
    pub fn log(&self) -> Option<&TransparencyLog> {
        self.log.as_deref()
    }

    /// Where an evidence bundle reads recordings and log entries from, with `store`'s rows.
    pub fn evidence_sources(
        &self,
        store: Arc<dyn crate::store::Store>,
    ) -> crate::evidence::Sources {
        crate::evidence::Sources {
            store,
            recordings: self.store.clone(),
            log: self.log.clone(),
        }
    }

    /// How long a lease outlives its last renewal: a crashed holder's sessions are continued
    /// by another replica after this.
    pub fn lease_ttl(&self) -> Duration {
        (self.config.writer.flush_interval * 3).max(Duration::from_secs(10))
    }

    /// Takes or renews this replica's lease on the recording of `id`; false when another
    /// live replica holds it.
    async fn claim(&self, id: Uuid) -> Result<bool, RecordingError> {
        let ttl = i64::try_from(self.lease_ttl().as_millis()).unwrap_or(i64::MAX);
        self.db
            .try_lease(&lease_name(id), &self.holder, now_ms(), ttl)
            .await
            .map_err(|e| RecordingError::Lease(Arc::new(e)))
    }

    /// Renews this replica's leases on the recordings of `ids` in one statement per
    /// [`crate::store::LEASE_BATCH`]; returns the ids whose lease another replica holds now
    /// (or nobody: released, or its row gone).
    async fn renew(&self, ids: &[Uuid]) -> Result<Vec<Uuid>, RecordingError> {
        let ttl = i64::try_from(self.lease_ttl().as_millis()).unwrap_or(i64::MAX);
        let names: Vec<String> = ids.iter().map(|id| lease_name(*id)).collect();
        let renewed: HashSet<String> = self
            .db
            .renew_leases(&names, &self.holder, now_ms().saturating_add(ttl))
            .await
            .map_err(|e| RecordingError::Lease(Arc::new(e)))?
            .into_iter()
            .collect();
        Ok(ids
            .iter()
            .zip(&names)
            .filter(|(_, name)| !renewed.contains(*name))
            .map(|(id, _)| *id)
            .collect())
    }

    async fn release(&self, id: Uuid) {
        if let Err(e) = self.db.release_lease(&lease_name(id), &self.holder).await {
            tracing::debug!(%id, error = %e, "recording lease not released; it expires");
        }
    }

    fn held_elsewhere(&self) -> RecordingError {
        RecordingError::HeldElsewhere {
            lease_seconds: self.lease_ttl().as_secs(),
        }
    }

    /// Where the replica holding the writer of session `id` (and so its terminal) is reached,
    /// when another replica holds it and said where; `Ok(None)` when nobody holds it or the
    /// holder did not say.
    pub async fn served_at(&self, id: Uuid) -> Result<Option<url::Url>, crate::store::StoreError> {
        let holder = self.db.lease_holder(&lease_name(id), now_ms()).await?;
        Ok(holder.filter(|h| *h != self.holder).and_then(|h| {
            h.split_once('@')
                .and_then(|(_, url)| url::Url::parse(url).ok())
        }))
    }

    /// The writer of session `id` when this replica holds it: never takes one over (a watcher
    /// must not move the requester's terminal), never makes one.
    pub async fn writer_here(&self, id: Uuid) -> Option<CastWriter> {
        self.writers.lock().await.get(&id).cloned()
    }

    /// The live recording of an active session on this replica, continuing the stored one
    /// when this replica has none yet (it restarted, or another replica ran the session). When
    /// another replica writes it, that one is asked to hand the writer over, and this waits
    /// until it did (or, if it died, until its lease ran out).
    pub async fn writer_for(&self, s: &Session) -> Result<CastWriter, RecordingError> {
        if let Some(w) = self.writers.lock().await.get(&s.id) {
            return Ok(w.clone());
        }
        let _making = self.making(s.id).await;
        if let Some(w) = self.writers.lock().await.get(&s.id) {
            return Ok(w.clone());
        }
        if !self.claim(s.id).await? {
            let ttl = i64::try_from(self.lease_ttl().as_millis()).unwrap_or(i64::MAX);
            let asked = self
                .db
                .try_lease(&handover::name(s.id), &self.holder, now_ms(), ttl)
                .await;
            if let Err(e) = asked.as_ref() {
                tracing::warn!(id = %s.id, error = %e, "cannot write the request for the recording's writer; waiting for its lease");
            } else if let Err(e) = self.db.ask_handover(s.id).await {
                tracing::warn!(id = %s.id, error = %e, "cannot ask for the recording's writer; waiting for its lease");
            }
            let got = self.await_lease(s.id).await;
            let _ = self
                .db
                .release_lease(&handover::name(s.id), &self.holder)
                .await;
            if !got? {
                return Err(self.held_elsewhere());
            }
        }
        // The previous writer put its last version on the row before giving the lease up.
        let current = match self.db.get(s.id).await {
            Ok(Some(now)) => now,
            _ => s.clone(),
        };
        if current.state != breakglass_shared::SessionState::Active {
            self.release(s.id).await;
            return Err(RecordingError::Resume(format!(
                "the session is {:?} now, so its terminal is closed",
                current.state
            )));
        }
        let existing = self.latest(s.id).await?;
        let why = if existing.handed_over() {
            "handed over by another server replica"
        } else {
            "server restarted"
        };
        let w = self.resume(&current, existing, why).await?;
        self.writers.lock().await.insert(s.id, w.clone());
        Ok(w)
    }

    /// Waits (up to the lease's lifetime) until this replica holds the lease of `id`; false
    /// when another replica still holds it then.
    async fn await_lease(&self, id: Uuid) -> Result<bool, RecordingError> {
        let deadline = tokio::time::Instant::now() + self.lease_ttl() + Duration::from_secs(2);
        loop {
            if self.claim(id).await? {
                return Ok(true);
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The stored recording of `id`, read back (its segments checked) to continue it.
    async fn latest(&self, id: Uuid) -> Result<Resumable, RecordingError> {
        let key = recording_key(id);
        crate::recording::read_back(self.store.as_ref(), &key)
            .await
            .map_err(|e| RecordingError::ResumeFailed {
                what: "the recording of this session cannot be read, so it cannot continue",
                source: Arc::new(e),
            })
    }

    /// A new writer continuing the stored recording of `s`. The stored bytes must extend what
    /// the session row names byte for byte, so a recording changed behind the server's back
    /// is never continued.
    async fn resume(
        &self,
        s: &Session,
        existing: Resumable,
        why: &str,
    ) -> Result<CastWriter, RecordingError> {
        let key = recording_key(s.id);
        if let Some(row) = &s.recording {
            if !self.continues(row, &existing).await {
                return Err(RecordingError::Resume(format!(
                    "the stored recording {key} does not continue what the session row names \
                     ({} sha256 {}, {} bytes); it is not continued (run verify-recording)",
                    row.key, row.sha256, row.bytes
                )));
            }
        }
        let writer = CastWriter::resume(
            self.store.clone(),
            key,
            existing,
            why,
            self.config.writer.clone(),
            self.report_stored(s.id),
        )
        .await
        .map_err(|e| RecordingError::ResumeFailed {
            what: "the recording could not be continued",
            source: Arc::new(e),
        })?;
        tracing::info!(id = %s.id, %why, "recording resumed");
        self.report_failure(s.id, &writer);
        Ok(writer)
    }

    fn report_stored(&self, id: Uuid) -> ReportStored {
        ReportStored {
            id,
            events: self.events.clone(),
        }
    }

    /// "No recording, no session": reports the writer's failure once, as an event.
    fn report_failure(&self, id: Uuid, writer: &CastWriter) {
        let mut state = writer.watch_state();
        let events = self.events.clone();
        tokio::spawn(async move {
            while state.changed().await.is_ok() {
                let now = state.borrow().clone();
                if let WriterState::Failed(reason) = now {
                    let _ = events.send(RecorderEvent::Failed { id, reason }).await;
                    break;
                }
            }
        });
    }

    /// Stores the final version of the recording of `s` and gives up its lease. When another
    /// replica writes it, waits (up to the lease's lifetime) for it to finish or for its
    /// lease to expire. When no replica has a live writer but a recording is stored and not
    /// yet finished (a server restarted), that one is continued and finished. Returns the
    /// version the row must name from now on, when this replica stored or found it.
    async fn end(&self, s: &Session, reason: &str) -> Option<RecordingRef> {
        let id = s.id;
        // Finish a live writer while it stays registered: a concurrent `end` finishes the same
        // writer (same result) instead of continuing the recording a second time.
        let live = self.writers.lock().await.get(&id).cloned();
        if let Some(w) = live {
            let done = w.finish(reason).await;
            if let Err(e) = &done {
                tracing::warn!(%id, error = %e, "final recording version not stored; earlier versions are kept");
            }
            self.writers.lock().await.remove(&id);
            self.release(id).await;
            return done.ok();
        }
        s.recording.as_ref()?;
        match self.await_lease(id).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(%id, "another replica still holds the recording; it finishes it");
                return None;
            }
            Err(e) => {
                tracing::warn!(%id, error = %e, "the recording could not be finished; earlier versions are kept");
                return None;
            }
        }
        // The lease is ours: whoever wrote before has finished or is gone.
        let done = self.finish_stored(s, reason).await;
        if let Err(e) = &done {
            tracing::warn!(%id, error = %e, "the recording could not be finished; earlier versions are kept");
        }
        self.release(id).await;
        done.ok().flatten()
    }

    /// Continues a stored, unfinished recording just to write its end; a recording whose end
    /// is stored but not its final cast (the server died in between) gets its final cast.
    async fn finish_stored(
        &self,
        s: &Session,
        reason: &str,
    ) -> Result<Option<RecordingRef>, RecordingError> {
        let bytes = self.latest(s.id).await?;
        if bytes.ended_reason().is_some() {
            let key = recording_key(s.id);
            let done = match &bytes {
                Resumable::Segments(tail) => match self.store_final(&tail.last).await? {
                    Some(built) => built,
                    // Built before: the final cast's hash and length are the last segment's.
                    None => RecordingRef {
                        version: self.final_version(&key).await?,
                        key,
                        sha256: tail.last.sha256.clone(),
                        bytes: tail.last.bytes,
                    },
                },
                Resumable::Single(whole) => RecordingRef {
                    version: self.final_version(&key).await?,
                    key,
                    sha256: crate::recording::sha256_hex(whole),
                    bytes: whole.len() as u64,
                },
            };
            self.report_final(s, &done).await;
            return Ok(Some(done));
        }
        // Read the row again: the previous writer may have stored versions since `s`.
        let current = match self.db.get(s.id).await {
            Ok(Some(now)) => now,
            _ => s.clone(),
        };
        let w = self.resume(&current, bytes, "server restarted").await?;
        match w.finish(reason).await {
            Ok(done) => Ok(Some(done)),
            Err(e) => {
                tracing::warn!(id = %s.id, error = %e, "final recording version not stored; earlier versions are kept");
                Ok(None)
            }
        }
    }

    /// The latest stored version of the final cast `key`.
    async fn final_version(&self, key: &str) -> Result<String, RecordingError> {
        self.store
            .latest_version(key)
            .await
            .map_err(|e| RecordingError::ResumeFailed {
                what: "the final version of the recording cannot be found",
                source: Arc::new(e),
            })
    }

    /// Puts the stored final version `done` on the row when the row names another: the writer
    /// that finished it could not (the database was down, or the server died in between), and
    /// the row must name the version with the end, the one verification and the log hold to.
    async fn report_final(&self, s: &Session, done: &RecordingRef) {
        let current = match self.db.get(s.id).await {
            Ok(Some(now)) => now,
            _ => s.clone(),
        };
        let on_row = current.recording.as_ref().is_some_and(|r| {
            r.key == done.key && r.version == done.version && r.bytes == done.bytes
        });
        if !on_row {
            self.report_stored(s.id).stored(done.clone()).await;
        }
    }

    /// Starts a new recording of `s` with its header and approval marker stored.
    async fn start_new(&self, s: &Session) -> Result<CastWriter, RecordingError> {
        let info = SessionInfo {
            width: 80,
            height: 24,
            title: Some(format!(
                "breakglass {} {}/{}/{}",
                s.id, s.environment, s.namespace, s.pod
            )),
            timestamp: None,
        };
        let writer = CastWriter::start(
            self.store.clone(),
            recording_key(s.id),
            info,
            self.config.writer.clone(),
            self.report_stored(s.id),
        )
        .await
        .map_err(|e| RecordingError::Start(Arc::new(e)))?;
        let label = match (&s.approver, &s.glass_broken_by) {
            (_, Some(by)) => format!("approved: glass broken by {by}"),
            (Some(a), _) => format!("approved by {a}"),
            _ => "approved: Ground".to_string(),
        };
        let _ = writer.marker(&label);
        self.report_failure(s.id, &writer);
        Ok(writer)
    }
}

#[async_trait]
impl Recordings for Recorder {
    /// The header is stored at once, so an unreachable store fails the activation before
    /// anything is created in the cluster. A session whose row already names a recording
    /// (activation re-driven after a restart) continues that recording.
    async fn start(&self, s: &Session) -> Result<Recording, RecordingError> {
        let _making = self.making(s.id).await;
        if self.writers.lock().await.contains_key(&s.id) {
            return Ok(Recording::Here);
        }
        if !self.claim(s.id).await? {
            return Ok(Recording::Elsewhere);
        }
        self.store
            .check()
            .await
            .map_err(|e| RecordingError::StoreUnavailable(Arc::new(e)))?;
        let writer = if s.recording.is_some() {
            let existing = self.latest(s.id).await?;
            self.resume(s, existing, "server restarted during activation")
                .await?
        } else {
            self.start_new(s).await?
        };
        self.writers.lock().await.insert(s.id, writer);
        Ok(Recording::Here)
    }

    async fn marker(&self, id: Uuid, label: &str) {
        if let Some(w) = self.writers.lock().await.get(&id) {
            let _ = w.marker(label);
        }
    }

    async fn finish(&self, s: &Session, reason: &str) -> Option<RecordingRef> {
        self.end(s, reason).await
    }

    async fn anchor(&self, s: &Session, attempts: u32) -> Option<RekorEntry> {
        self.submit(s, attempts).await
    }

    fn anchors(&self) -> bool {
        self.log.is_some()
    }
}

impl Recorder {
    /// Closes the terminal of `id` here because its recording moved to another replica.
    async fn lost(&self, id: Uuid) {
        self.connections
            .close(
                id,
                breakglass_shared::terminal::close::RELAY_ERROR,
                self.held_elsewhere().to_string(),
            )
            .await;
    }
}
