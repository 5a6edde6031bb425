//! Reading a stored recording back so another writer can continue it: the segments are read
//! in order with every link checked, keeping only the header, the last line and the chain's
//! hash state (never the cast); a recording of the single-object layout (before segments) is
//! read whole, as it always was.

use std::time::Duration;

use breakglass_shared::recording::{Event, Header};
use breakglass_shared::session::RecordingRef;
use time::OffsetDateTime;

use crate::recording::segment::{segment_key, ChainReader, ChainState};
use crate::recording::{RecordingStore, RecordingStoreError};

/// A stored recording, as far as continuing it needs.
#[derive(Debug, Clone)]
pub enum Resumable {
    /// The single-object layout: the latest version of `sessions/<id>.cast`, whole.
    Single(Vec<u8>),
    /// The segment layout.
    Segments(Box<Tail>),
}

/// What continuing a chain of segments needs.
#[derive(Debug, Clone)]
pub struct Tail {
    /// The cast's first line (its header).
    pub header_line: String,
    /// The cast's last line.
    pub last_line: String,
    /// Where the chain stands.
    pub chain: ChainState,
    /// The last segment, in the session row's form.
    pub last: RecordingRef,
}

impl Resumable {
    /// The reason of the `ended: <reason>` marker when that is the last event.
    pub fn ended_reason(&self) -> Option<String> {
        match self {
            Resumable::Single(bytes) => super::ended_reason(bytes),
            Resumable::Segments(t) => super::ended_reason(t.last_line.as_bytes()),
        }
    }

    /// Whether the last event is a `handed over` marker.
    pub fn handed_over(&self) -> bool {
        match self {
            Resumable::Single(bytes) => super::handed_over(bytes),
            Resumable::Segments(t) => super::handed_over(t.last_line.as_bytes()),
        }
    }
}

/// The first and last non-empty lines of `body`.
fn first_and_last(body: &[u8]) -> (Option<String>, Option<String>) {
    let text = String::from_utf8_lossy(body);
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let first = lines.next().map(str::to_string);
    let last = lines
        .next_back()
        .map(str::to_string)
        .or_else(|| first.clone());
    (first, last)
}

/// Reads the recording whose final cast is `final_key` back: its segments, checked link by
/// link, or (when it has none) the single object of the older layout.
pub async fn read_back(
    store: &dyn RecordingStore,
    final_key: &str,
) -> Result<Resumable, RecordingStoreError> {
    let mut reader = ChainReader::new(store, final_key, None);
    let (mut header, mut last) = (None, None);
    while let Some(body) = reader.next().await? {
        let (f, l) = first_and_last(&body);
        if header.is_none() {
            header = f;
        }
        if l.is_some() {
            last = l;
        }
    }
    let chain = reader.state().clone();
    if chain.segments == 0 {
        return Ok(Resumable::Single(store.get(final_key, None).await?));
    }
    let version = reader.last_version().unwrap_or_default().to_string();
    let header_line = header.ok_or_else(|| {
        RecordingStoreError::Corrupt(format!(
            "the first segment of {final_key} has no header line"
        ))
    })?;
    let last_line = last.unwrap_or_else(|| header_line.clone());
    Ok(Resumable::Segments(Box::new(Tail {
        last: RecordingRef {
            key: segment_key(final_key, chain.segments),
            version,
            sha256: chain.sha256_hex(),
            bytes: chain.bytes,
        },
        header_line,
        last_line,
        chain,
    })))
}

/// Where a continued cast stands: the chain to extend, the bytes to carry over into its next
/// segment (a whole single-object cast; nothing for segments) and the clock.
pub(super) fn continuation(
    key: &str,
    from: Resumable,
) -> Result<(ChainState, Vec<u8>, Duration), RecordingStoreError> {
    let unreadable = |e: String| {
        RecordingStoreError::Misconfigured(format!(
            "the stored recording {key} cannot be continued: {e}"
        ))
    };
    let (chain, carried, header, last) = match from {
        Resumable::Single(existing) => {
            let text = std::str::from_utf8(&existing).map_err(|e| unreadable(e.to_string()))?;
            let (header, events) =
                breakglass_shared::recording::parse(text).map_err(|e| unreadable(e.to_string()))?;
            if !text.ends_with('\n') {
                return Err(unreadable("its last line is incomplete".into()));
            }
            let last = events.last().map_or(0.0, |e| e.time);
            (ChainState::default(), existing, header, last)
        }
        Resumable::Segments(tail) => {
            let header: Header = serde_json::from_str(&tail.header_line)
                .map_err(|e| unreadable(format!("its header: {e}")))?;
            let last = if tail.last_line == tail.header_line {
                0.0
            } else {
                serde_json::from_str::<Event>(&tail.last_line)
                    .map_err(|e| unreadable(format!("its last event: {e}")))?
                    .time
            };
            (tail.chain.clone(), Vec::new(), header, last)
        }
    };
    // Continue the clock from the wall time since the header's start (the time the server
    // was down counts), never before the last event already written.
    let wall = header.timestamp.map_or(0.0, |ts| {
        (OffsetDateTime::now_utc().unix_timestamp() - ts).max(0) as f64
    });
    let offset = Duration::try_from_secs_f64(last.max(wall)).unwrap_or(Duration::ZERO);
    Ok((chain, carried, offset))
}
