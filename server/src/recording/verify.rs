//! Verification of a stored recording against its session row: the final cast, and the chain
//! of segments it was built from (see [`super::segment`]).

use std::fmt;

use breakglass_shared::session::{RecordingRef, RekorEntry};

use super::segment::{parse_segment_key, segment_key, ChainError, ChainReader};
use super::{sha256_hex, RecordingStore, RecordingStoreError, TransparencyLog};

/// Check names, in the order [`verify`] runs them.
pub mod checks {
    /// The version on the row can be fetched ("version missing" when not).
    pub const VERSION_PRESENT: &str = "version present";
    /// Its byte count equals the row's.
    pub const BYTE_COUNT: &str = "byte count";
    /// Its SHA-256 equals the row's.
    pub const HASH_ON_RECORD: &str = "hash on record";
    /// It is a readable asciicast v2 file.
    pub const ASCIICAST: &str = "asciicast";
    /// Every segment is present, in order, each carrying the hash of the one before, and
    /// together they are the recording on the row (skipped for the single-object layout).
    pub const SEGMENTS: &str = "segment chain";
    /// No version was written after it (the row's version is the latest).
    pub const LATEST_VERSION: &str = "latest version";
    /// The row's log entry records this hash, signed by this server's key, signed by the log
    /// and included in its tree (skipped when no log is configured and the row names none).
    pub const TRANSPARENCY_LOG: &str = "transparency log";
}

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckOutcome {
    /// Passed; what was seen.
    Pass(String),
    /// Failed; what differs.
    Fail(String),
    /// Not run (it depends on a failed check, or is not configured).
    Skipped(String),
}

/// One named check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// One of [`checks`].
    pub name: &'static str,
    /// Result.
    pub outcome: CheckOutcome,
}

/// Everything [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// The row's reference that was checked.
    pub recording: RecordingRef,
    /// The store that was asked.
    pub store: String,
    /// Every check in order.
    pub checks: Vec<Check>,
}

impl VerifyReport {
    /// Whether no check failed (skipped checks do not fail a report).
    pub fn ok(&self) -> bool {
        self.failed().is_empty()
    }

    /// Names of the failed checks.
    pub fn failed(&self) -> Vec<&'static str> {
        self.checks
            .iter()
            .filter(|c| matches!(c.outcome, CheckOutcome::Fail(_)))
            .map(|c| c.name)
            .collect()
    }

    /// The outcome of the check called `name`.
    pub fn outcome(&self, name: &str) -> Option<&CheckOutcome> {
        self.checks
            .iter()
            .find(|c| c.name == name)
            .map(|c| &c.outcome)
    }
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "recording {} version {} in {}",
            self.recording.key, self.recording.version, self.store
        )?;
        for c in &self.checks {
            let (tag, text) = match &c.outcome {
                CheckOutcome::Pass(t) => ("PASS", t),
                CheckOutcome::Fail(t) => ("FAIL", t),
                CheckOutcome::Skipped(t) => ("SKIP", t),
            };
            writeln!(f, "  {tag} {:<16} {text}", c.name)?;
        }
        if self.ok() {
            write!(f, "verified: the stored recording matches the session row")
        } else {
            write!(
                f,
                "NOT VERIFIED: failed check(s): {}",
                self.failed().join(", ")
            )
        }
    }
}

/// Fetches the version named on the row, recomputes its SHA-256 and compares hash and byte
/// count with the row; also checks that no later version exists and that the cast parses.
/// With a transparency log, the row's entry is fetched and checked against the row's hash.
pub async fn verify(
    store: &dyn RecordingStore,
    log: Option<&TransparencyLog>,
    recording: &RecordingRef,
    rekor: Option<&RekorEntry>,
) -> VerifyReport {
    use checks::*;
    let mut out = Vec::new();
    let mut push = |name, outcome| out.push(Check { name, outcome });
    // A row naming a segment: the end could not store the final cast (the sweep builds it
    // later), so its latest version is checked against the row's whole-cast hash.
    let named_segment = parse_segment_key(&recording.key);
    let final_key = named_segment
        .as_ref()
        .map_or(recording.key.clone(), |(k, _)| k.clone());
    let version = (!recording.version.is_empty() && named_segment.is_none())
        .then_some(recording.version.as_str());

    match store.get(&final_key, version).await {
        Err(e) => {
            let text = match (&e, &named_segment) {
                (RecordingStoreError::NotFound { .. }, Some((_, n))) => format!(
                    "version missing: the final recording {final_key} is not stored (yet); the row \
                     names segment {n}: the session is live, or its end could not store it and the \
                     sweep builds it"
                ),
                (RecordingStoreError::NotFound { .. }, None) => format!("version missing: {e}"),
                (other, _) => format!("version missing or unreadable: {other}"),
            };
            push(VERSION_PRESENT, CheckOutcome::Fail(text));
            for name in [BYTE_COUNT, HASH_ON_RECORD, ASCIICAST] {
                push(
                    name,
                    CheckOutcome::Skipped("no bytes to check (version missing)".into()),
                );
            }
        }
        Ok(bytes) => {
            push(
                VERSION_PRESENT,
                CheckOutcome::Pass(match &named_segment {
                    None => format!("version {} fetched", recording.version),
                    Some((_, n)) => format!(
                        "{final_key} fetched (built after the end; the row names its segment {n})"
                    ),
                }),
            );
            let len = bytes.len() as u64;
            push(
                BYTE_COUNT,
                if len == recording.bytes {
                    CheckOutcome::Pass(format!("{len} bytes"))
                } else {
                    CheckOutcome::Fail(format!(
                        "stored version has {len} bytes, the row says {}",
                        recording.bytes
                    ))
                },
            );
            let sha = sha256_hex(&bytes);
            push(
                HASH_ON_RECORD,
                if sha.eq_ignore_ascii_case(&recording.sha256) {
                    CheckOutcome::Pass(format!("sha256 {sha}"))
                } else {
                    CheckOutcome::Fail(format!(
                        "stored version hashes to {sha}, the row says {}",
                        recording.sha256
                    ))
                },
            );
            push(
                ASCIICAST,
                match std::str::from_utf8(&bytes)
                    .map_err(|e| e.to_string())
                    .and_then(|t| breakglass_shared::recording::parse(t).map_err(|e| e.to_string()))
                {
                    Ok((h, events)) => CheckOutcome::Pass(format!(
                        "asciicast v2, {}x{}, {} events",
                        h.width,
                        h.height,
                        events.len()
                    )),
                    Err(e) => CheckOutcome::Fail(e),
                },
            );
        }
    }

    push(
        SEGMENTS,
        chain_outcome(store, &final_key, named_segment.map(|(_, n)| n), recording).await,
    );

    push(
        LATEST_VERSION,
        match store.latest_version(&final_key).await {
            Ok(_) if version.is_none() => {
                CheckOutcome::Pass("the latest version was the one checked".into())
            }
            Ok(latest) if Some(latest.as_str()) == version => {
                CheckOutcome::Pass("no version was written after it".into())
            }
            Ok(latest) => CheckOutcome::Fail(format!(
                "version {latest} was written after the recorded version {}",
                recording.version
            )),
            Err(e) => CheckOutcome::Fail(format!("cannot read the latest version: {e}")),
        },
    );

    let log_outcome = match (log, rekor) {
        (None, None) => CheckOutcome::Skipped(
            "not configured (no transparency log; the hash is not anchored)".into(),
        ),
        (None, Some(e)) => CheckOutcome::Fail(format!(
            "the row names log entry {} (log index {}), but no transparency log is configured \
             here to check it (set [recording.transparency_log])",
            e.uuid, e.log_index
        )),
        (Some(l), None) => CheckOutcome::Fail(format!(
            "a transparency log is configured ({}), but the row names no entry: the final hash \
             was never anchored",
            l.url()
        )),
        (Some(l), Some(e)) => match l.check(e, &recording.sha256).await {
            Ok(seen) => CheckOutcome::Pass(seen),
            Err(why) => CheckOutcome::Fail(why),
        },
    };
    push(TRANSPARENCY_LOG, log_outcome);

    VerifyReport {
        recording: recording.clone(),
        store: store.describe(),
        checks: out,
    }
}

/// Reads the segments through the one the row names (or through the last stored) and
/// compares them with the row: the first segment that is missing, out of place or changed is
/// named. No segments at all is the single-object layout (recordings stored before segments,
/// or whose segments were removed once their own retention ran out): skipped.
async fn chain_outcome(
    store: &dyn RecordingStore,
    final_key: &str,
    upto: Option<u64>,
    row: &RecordingRef,
) -> CheckOutcome {
    let mut reader = ChainReader::new(store, final_key, upto);
    let read = async {
        while reader.next().await?.is_some() {}
        Ok::<_, ChainError>(())
    }
    .await;
    let state = reader.state().clone();
    if let Err(e) = read {
        return CheckOutcome::Fail(e.to_string());
    }
    if state.segments == 0 {
        // A lone segment 2 means segment 1 was removed, not that there never were any.
        return match store.get_with_meta(&segment_key(final_key, 2), None).await {
            Ok(_) => CheckOutcome::Fail(ChainError::Missing { index: 1, bytes: 0 }.to_string()),
            Err(_) => CheckOutcome::Skipped(
                "no segments: a recording of the single-object layout (stored before segments), \
                 or its segments were removed after their retention; the final recording is \
                 checked alone"
                    .into(),
            ),
        };
    }
    let n = state.segments;
    if state.bytes < row.bytes {
        // The chain ended early: the next segment is gone (or was never stored).
        return CheckOutcome::Fail(
            ChainError::Missing {
                index: n + 1,
                bytes: state.bytes,
            }
            .to_string()
                + &format!("; the recording has {} bytes", row.bytes),
        );
    }
    let sha = state.sha256_hex();
    if state.bytes != row.bytes || !sha.eq_ignore_ascii_case(&row.sha256) {
        return CheckOutcome::Fail(format!(
            "the {n} segments hold {} bytes hashing to {sha}, the row says {} bytes, sha256 {} \
             (a segment after the end, or every segment from some point rewritten)",
            state.bytes, row.bytes, row.sha256
        ));
    }
    CheckOutcome::Pass(format!(
        "{n} segments, each carrying the hash of the one before, together the recorded {} bytes",
        state.bytes
    ))
}
