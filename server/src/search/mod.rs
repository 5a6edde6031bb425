//! Recordings searched like text: the indexer, which reads each ended recording once and
//! stores what it showed (the screen's lines as a person saw them, `shared::screen_text`, and
//! the command lines the shell ran), and the query, which finds the chunks holding a query's
//! words in the store and reads the matching lines and their moments out of them.
//!
//! The indexer runs on every replica, off the sessions' paths: the database queues each
//! recording as its session ends (migration 0016's trigger), and a replica takes one with its
//! `index:<id>` lease, so two replicas never read the same recording, and a recording read
//! half-way by a replica that died is taken again when the lease runs out.

mod chunks;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use breakglass_shared::access::Action;
use breakglass_shared::recording::{Code, Event, Header};
use breakglass_shared::screen_text::{self, Piece, TextLine};
use breakglass_shared::search::{
    line_matches, moment_link, HitKind, SearchHit, SessionHits, HITS_PER_SESSION,
};
use breakglass_shared::{PermissionSet, Session};
use time::OffsetDateTime;
use tracing::Instrument;
use uuid::Uuid;

use crate::recorder::Recorder;
use crate::recording::RecordingStoreError;
use crate::store::{ChunkKind, FoundChunk, IndexedRecording, Readable, Store, StoreError, Term};

/// How long a replica may take over one recording before another may take it.
const INDEX_LEASE: Duration = Duration::from_secs(600);
/// Recordings taken from the queue per look.
const BATCH: i64 = 16;
/// Candidate chunks read per page of the store's answer.
const CANDIDATES: i64 = 200;
/// Pages of candidates read at most per query: a word in every chunk of every recording, or a
/// term shared by many words none of which is the one asked, stops here rather than reading
/// the whole index; the sessions found so far are the answer (the newest).
const PAGES: usize = 8;

/// Reads ended recordings into the search index.
pub struct Indexer {
    store: Arc<dyn Store>,
    recorder: Arc<Recorder>,
    holder: String,
}

impl Indexer {
    /// An indexer over `store`'s queue, reading recordings through `recorder`.
    pub fn new(store: Arc<dyn Store>, recorder: Arc<Recorder>) -> Indexer {
        Indexer {
            store,
            recorder,
            holder: format!("indexer-{}", Uuid::now_v7()),
        }
    }

    /// Indexes what is queued every `interval`, forever.
    pub async fn run(self, interval: Duration) {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.drain()
                .instrument(tracing::debug_span!("index recordings"))
                .await;
        }
    }

    /// Indexes the queued recordings this replica can take, until the queue has none left
    /// for it or the recording store fails; how many it indexed.
    pub async fn drain(&self) -> usize {
        let mut done = 0;
        loop {
            let queued = match self.store.pending_recordings(BATCH).await {
                Ok(q) => q,
                Err(e) => {
                    tracing::warn!(error = %e, "the recordings waiting for the index cannot be read");
                    return done;
                }
            };
            let mut took_any = false;
            for id in queued {
                match self.index_one(id).await {
                    Ok(true) => {
                        took_any = true;
                        done += 1;
                    }
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(%id, error = %e, "recording not indexed; the next look tries again");
                        return done;
                    }
                }
            }
            if !took_any {
                return done;
            }
        }
    }

    /// Indexes recording `id` if this replica takes its lease; true when it stored it.
    async fn index_one(&self, id: Uuid) -> Result<bool, IndexError> {
        let lease = format!("index:{id}");
        let now_ms = now_ms();
        let ttl = i64::try_from(INDEX_LEASE.as_millis()).unwrap_or(i64::MAX);
        if !self
            .store
            .try_lease(&lease, &self.holder, now_ms, ttl)
            .await?
        {
            return Ok(false);
        }
        let result = self.read_and_store(id).await;
        if let Err(e) = self.store.release_lease(&lease, &self.holder).await {
            tracing::debug!(%id, error = %e, "index lease not released; it runs out");
        }
        result
    }

    async fn read_and_store(&self, id: Uuid) -> Result<bool, IndexError> {
        let session = self.store.get(id).await?;
        let cast = match &session {
            Some(s) => match self.recorder.read(s).await {
                Ok(cast) => cast,
                // Gone for good (or never stored): nothing to index, and nothing to retry.
                Err(RecordingStoreError::NotFound { .. }) => None,
                Err(RecordingStoreError::Corrupt(why)) => {
                    return self
                        .store_outcome(id, 0, format!("not indexed: {why}"))
                        .await;
                }
                Err(e) => return Err(IndexError::Recording(e)),
            },
            None => None,
        };
        let Some(cast) = cast else {
            return self.store_outcome(id, 0, "no recording".into()).await;
        };
        let bytes = i64::try_from(cast.len()).unwrap_or(i64::MAX);
        // The emulator runs about 30 ms a MB: off the runtime's threads.
        let index = tokio::task::spawn_blocking(move || index_cast(id, &cast))
            .await
            .map_err(|e| IndexError::Task(e.to_string()))?;
        let started = std::time::Instant::now();
        let stored = self.store.store_index(&index).await?;
        tracing::info!(%id, cast_bytes = bytes, lines = index.lines, chunks = index.chunks.len(),
            store_ms = started.elapsed().as_millis() as u64, "recording indexed");
        Ok(stored)
    }

    async fn store_outcome(
        &self,
        id: Uuid,
        bytes: i64,
        outcome: String,
    ) -> Result<bool, IndexError> {
        tracing::info!(%id, %outcome, "recording left out of the index");
        let index = IndexedRecording {
            session_id: id,
            at: OffsetDateTime::now_utc(),
            cast_bytes: bytes,
            lines: 0,
            outcome,
            chunks: Vec::new(),
        };
        Ok(self.store.store_index(&index).await?)
    }
}

/// Why a recording was not indexed this time (each is retried at the next look).
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The database.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The recording store.
    #[error("the recording store: {0}")]
    Recording(RecordingStoreError),
    /// The reading task.
    #[error("the indexing task failed: {0}")]
    Task(String),
}

fn now_ms() -> i64 {
    i64::try_from(OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
}

/// What cast `bytes` showed, as the index stores it: the screen's lines and the command lines.
pub fn index_cast(id: Uuid, bytes: &[u8]) -> IndexedRecording {
    let text = String::from_utf8_lossy(bytes);
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Option<Header> = lines.next().and_then(|l| serde_json::from_str(l).ok());
    let size = header.map_or((80, 24), |h| {
        breakglass_shared::terminal::clamp_size(h.width, h.height)
    });
    // A line that does not parse (a cut last line) is skipped: the rest still shows.
    let events = lines.filter_map(|l| serde_json::from_str::<Event>(l).ok());
    let mut commands = Vec::new();
    let pieces = events.filter_map(|e| match e.code {
        Code::Output => Some(Piece::Output(e.time, e.data)),
        Code::Resize => {
            let (c, r) = e.data.trim().split_once('x')?;
            Some(Piece::Resize(e.time, c.parse().ok()?, r.parse().ok()?))
        }
        Code::Marker => {
            if e.data.starts_with("$ ") {
                commands.push(TextLine {
                    time: e.time,
                    text: e.data.replace(['\n', '\r'], " "),
                });
            }
            None
        }
        Code::Input => None,
    });
    let screen = screen_text::lines_of(size, pieces);
    let mut chunks = chunks::chunk(&commands, ChunkKind::Command, 0);
    let first = i64::try_from(chunks.len()).unwrap_or(0);
    chunks.extend(chunks::chunk(&screen, ChunkKind::Screen, first));
    IndexedRecording {
        session_id: id,
        at: OffsetDateTime::now_utc(),
        cast_bytes: i64::try_from(bytes.len()).unwrap_or(i64::MAX),
        lines: i64::try_from(screen.len() + commands.len()).unwrap_or(i64::MAX),
        outcome: "indexed".into(),
        chunks,
    }
}

/// The sessions whose recordings show every one of `words`, newest first, with their first
/// moments: at most `limit` sessions, of those `may_read` allows (`readable` narrows the
/// store's search to them).
pub async fn find(
    store: &dyn Store,
    words: &[String],
    readable: &Readable,
    may_read: impl Fn(&Session) -> bool,
    limit: usize,
) -> Result<Vec<SessionHits>, StoreError> {
    let terms: Vec<Term> = words
        .iter()
        .map(|w| {
            let (text, prefix) = chunks::term(w);
            Term { text, prefix }
        })
        .collect();
    let mut by_session: HashMap<Uuid, Vec<SearchHit>> = HashMap::new();
    let mut below = None;
    for _ in 0..PAGES {
        let found = store
            .find_chunks(&terms, readable, below, CANDIDATES)
            .await?;
        let last_page = found.len() < CANDIDATES as usize;
        below = found.last().map(|c| c.id);
        for c in found {
            hits_of(c, words, &mut by_session);
        }
        if last_page || by_session.len() >= limit {
            break;
        }
    }
    let ids: Vec<Uuid> = by_session.keys().copied().collect();
    let mut sessions: Vec<Session> = store
        .get_many(&ids)
        .await?
        .into_iter()
        .filter(|s| may_read(s))
        .collect();
    sessions.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
    sessions.truncate(limit);
    Ok(sessions
        .into_iter()
        .filter_map(|s| {
            let mut hits = by_session.remove(&s.id)?;
            hits.sort_by(|a, b| {
                (a.kind != HitKind::Command, a.at)
                    .partial_cmp(&(b.kind != HitKind::Command, b.at))
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
            let more = hits.len().saturating_sub(HITS_PER_SESSION);
            hits.truncate(HITS_PER_SESSION);
            Some(SessionHits {
                session: s,
                hits,
                more: u32::try_from(more).unwrap_or(u32::MAX),
            })
        })
        .collect())
}

/// The lines of chunk `c` that hold every one of `words`, as hits of its session (a chunk
/// whose terms matched but none of whose lines does adds nothing).
fn hits_of(c: FoundChunk, words: &[String], by_session: &mut HashMap<Uuid, Vec<SearchHit>>) {
    let Some(lines) = chunks::lines_of(&c.lines_ms, &c.body) else {
        tracing::warn!(session = %c.session_id, chunk = c.id, "an index chunk does not decode; skipped");
        return;
    };
    let kind = if c.kind == "command" {
        HitKind::Command
    } else {
        HitKind::Screen
    };
    let mut hits = lines
        .into_iter()
        .filter(|l| line_matches(&l.text, words))
        .map(|l| SearchHit {
            at: l.time,
            kind,
            link: moment_link(c.session_id, l.time),
            text: l.text,
        })
        .peekable();
    if hits.peek().is_some() {
        by_session.entry(c.session_id).or_default().extend(hits);
    }
}

/// Whether `user` with `permissions` there may read `s`'s recording (the rule of the
/// recording's own routes).
pub fn may_read(s: &Session, user: &str, permissions: &PermissionSet) -> bool {
    s.may(Action::ReadRecording, user, permissions).is_ok()
}
