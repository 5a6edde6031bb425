//! The audit export: every session requested in a time range, one record each, for someone who
//! has no account to look at the pages (an auditor, a GRC tool). The same records come out of
//! `GET /api/breakglass/export` and `breakglass-server export`, as JSON lines or CSV, or as
//! OCSF events for a SIEM (`ocsf`).
//!
//! The columns are [`ExportRecord`]'s fields, named once: the CSV header is [`COLUMNS`] and
//! the JSON keys are the same names in the same order (a test holds them together). The export
//! is read a page of [`PAGE`] sessions at a time and written as it is read, so its memory does
//! not grow with the range: a year of sessions streams like a day of them.

use std::sync::Arc;

use breakglass_shared::validate::FieldError;
use breakglass_shared::{Session, SessionState};
use bytes::Bytes;
use futures::Stream;
use serde::Serialize;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::store::{ListFilter, Store, StoreError};

use breakglass_shared::ocsf;

/// Sessions read from the store per query.
pub const PAGE: u32 = 500;

/// How the records are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::EnumString)]
#[strum(serialize_all = "lowercase")]
pub enum ExportFormat {
    /// One JSON object per line (`application/x-ndjson`).
    Jsonl,
    /// RFC 4180 CSV with a header row (`text/csv`).
    Csv,
    /// OCSF 1.5.0 events, one JSON object per line, several per session
    /// (`breakglass_shared::ocsf`).
    Ocsf,
}

impl ExportFormat {
    /// The formats, as the `format` parameter names them.
    pub const NAMES: &'static str = "jsonl, csv or ocsf";

    /// The response's media type.
    pub fn content_type(self) -> &'static str {
        match self {
            ExportFormat::Jsonl | ExportFormat::Ocsf => "application/x-ndjson",
            ExportFormat::Csv => "text/csv; charset=utf-8",
        }
    }

    /// The file name extension.
    pub fn extension(self) -> &'static str {
        match self {
            ExportFormat::Jsonl => "jsonl",
            ExportFormat::Csv => "csv",
            ExportFormat::Ocsf => "ocsf.jsonl",
        }
    }
}

/// Which sessions: those requested in `[since, until]`, in `environments`.
#[derive(Debug, Clone)]
pub struct ExportRange {
    /// The earliest request time included.
    pub since: OffsetDateTime,
    /// The latest request time included.
    pub until: OffsetDateTime,
    /// The environments exported (the caller's, already checked); never empty.
    pub environments: Vec<String>,
}

/// Parses an RFC 3339 time for `field`.
fn time_of(field: &'static str, value: &str) -> Result<OffsetDateTime, FieldError> {
    OffsetDateTime::parse(value.trim(), &Rfc3339).map_err(|_| {
        FieldError::new(
            field,
            format!("`{value}` is not an RFC 3339 time; write it like 2026-01-01T00:00:00Z"),
        )
    })
}

/// Reads an export's `since`, `until` (default `now`) and `format` (default JSON lines), as
/// the API's query and the command line's flags give them; the range names no environment
/// yet (who may export what is the caller's to say).
pub fn parse(
    since: &str,
    until: Option<&str>,
    format: Option<&str>,
    now: OffsetDateTime,
) -> Result<(ExportRange, ExportFormat), FieldError> {
    let format = match format {
        None => ExportFormat::Jsonl,
        Some(f) => f.parse().map_err(|_| {
            FieldError::new(
                "format",
                format!("`{f}` is no format; use {}", ExportFormat::NAMES),
            )
        })?,
    };
    let since = time_of("since", since)?;
    let until = match until {
        Some(u) => time_of("until", u)?,
        None => now,
    };
    if until < since {
        return Err(FieldError::new("until", "must not be before `since`"));
    }
    let range = ExportRange {
        since,
        until,
        environments: Vec::new(),
    };
    Ok((range, format))
}

/// The export's columns, in order: the CSV header and the JSON keys.
pub const COLUMNS: [&str; 39] = [
    "id",
    "environment",
    "tier",
    "namespace",
    "pod",
    "target_container",
    "mode",
    "requester",
    "reason",
    "ticket",
    "duration_minutes",
    "granted_minutes",
    "state",
    "approvers",
    "decided_by",
    "glass_broken_by",
    "denial_reason",
    "failure",
    "created_at",
    "decided_at",
    "activating_at",
    "active_at",
    "expires_at",
    "ending_at",
    "finished_at",
    "end_reason",
    "ended_by",
    "grant_name",
    "debug_container",
    "copy_pod",
    "spec_sha256",
    "recording_key",
    "recording_version",
    "recording_sha256",
    "recording_bytes",
    "rekor_uuid",
    "rekor_log_index",
    "review_verdict",
    "review_by",
];

/// One session as exported. Times are RFC 3339 (UTC); absent values are empty cells in CSV
/// and `null` in JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExportRecord {
    /// The session's id (UUIDv7).
    pub id: Uuid,
    /// The environment (cluster).
    pub environment: String,
    /// `ground` or `flight`, as at request time.
    pub tier: String,
    /// The debugged pod's namespace.
    pub namespace: String,
    /// The debugged pod.
    pub pod: String,
    /// The container whose processes the debug container could see.
    pub target_container: Option<String>,
    /// `live` (ephemeral container) or `copy` (a hardened copy of the pod).
    pub mode: String,
    /// Who asked.
    pub requester: String,
    /// Why, in the requester's words.
    pub reason: String,
    /// The ticket or incident URL given.
    pub ticket: Option<String>,
    /// The time asked for, in minutes.
    pub duration_minutes: u32,
    /// The time granted in the end, extensions included.
    pub granted_minutes: u32,
    /// The state at the time of the export.
    pub state: String,
    /// Everyone who approved (Flight), oldest first, `;`-separated, each `name@time`.
    pub approvers: Option<String>,
    /// Who decided: the last approver, or who denied it.
    pub decided_by: Option<String>,
    /// Who broke the glass (activated a Flight session without a second person).
    pub glass_broken_by: Option<String>,
    /// Why it was denied.
    pub denial_reason: Option<String>,
    /// Why activation failed.
    pub failure: Option<String>,
    /// Requested.
    pub created_at: String,
    /// Approved, denied or glass broken (Ground: the request time).
    pub decided_at: Option<String>,
    /// Activation started.
    pub activating_at: Option<String>,
    /// The terminal could open.
    pub active_at: Option<String>,
    /// Access ended at the latest.
    pub expires_at: Option<String>,
    /// Ending started.
    pub ending_at: Option<String>,
    /// Reached its final state.
    pub finished_at: Option<String>,
    /// Why it ended (`UserEnded`, `Terminated`, `TtlExpired`, `AdminForceEnded`, ...).
    pub end_reason: Option<String>,
    /// Who or what ended it: the person, or `system` for the server's own steps.
    pub ended_by: Option<String>,
    /// The grant RoleBinding.
    pub grant_name: Option<String>,
    /// The debug (ephemeral) container.
    pub debug_container: Option<String>,
    /// The copy pod (copy mode).
    pub copy_pod: Option<String>,
    /// The approved spec's SHA-256 (the objects activation creates), lowercase hex; empty for
    /// requests made where no cluster was served.
    pub spec_sha256: Option<String>,
    /// The recording's object key.
    pub recording_key: Option<String>,
    /// The recording's object version (the locked one).
    pub recording_version: Option<String>,
    /// The recording's SHA-256, lowercase hex.
    pub recording_sha256: Option<String>,
    /// The recording's size in bytes.
    pub recording_bytes: Option<u64>,
    /// The transparency-log entry of that hash.
    pub rekor_uuid: Option<String>,
    /// Its index in the log.
    pub rekor_log_index: Option<i64>,
    /// The review's verdict.
    pub review_verdict: Option<String>,
    /// The reviewer, with the review's time (`name@time`).
    pub review_by: Option<String>,
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

impl ExportRecord {
    /// The record of `s`, ended by `ended_by` (the actor that moved it to `Ending`, if any).
    pub fn of(s: &Session, ended_by: Option<String>) -> ExportRecord {
        let at = |t: Option<OffsetDateTime>| t.map(rfc3339);
        let approvers = (!s.approvals.is_empty()).then(|| {
            s.approvals
                .iter()
                .map(|a| format!("{}@{}", a.by, rfc3339(a.at)))
                .collect::<Vec<_>>()
                .join(";")
        });
        ExportRecord {
            id: s.id,
            environment: s.environment.clone(),
            tier: s.tier.as_str().to_string(),
            namespace: s.namespace.clone(),
            pod: s.pod.clone(),
            target_container: s.target_container.clone(),
            mode: s.mode.as_str().to_string(),
            requester: s.requester.clone(),
            reason: s.reason.clone(),
            ticket: s.ticket.clone(),
            duration_minutes: s.duration_minutes,
            granted_minutes: s.granted_minutes(),
            state: s.state.to_string(),
            approvers,
            decided_by: s.approver.clone(),
            glass_broken_by: s.glass_broken_by.clone(),
            denial_reason: s.denial_reason.clone(),
            failure: s.failure.clone(),
            created_at: rfc3339(s.created_at),
            decided_at: at(s.decided_at),
            activating_at: at(s.activating_at),
            active_at: at(s.active_at),
            expires_at: at(s.expires_at),
            ending_at: at(s.ending_at),
            finished_at: at(s.finished_at),
            end_reason: s.end_reason.as_ref().map(|r| r.kind().to_string()),
            ended_by: ended_by.or_else(|| {
                // A request that never ran ended by its requester's withdrawal.
                (s.state == SessionState::Withdrawn).then(|| s.requester.clone())
            }),
            grant_name: s.grant_name.clone(),
            debug_container: s.debug_container.clone(),
            copy_pod: s.copy_pod.clone(),
            spec_sha256: s.spec.as_ref().map(|sp| sp.sha256.clone()),
            recording_key: s.recording.as_ref().map(|r| r.key.clone()),
            recording_version: s.recording.as_ref().map(|r| r.version.clone()),
            recording_sha256: s.recording.as_ref().map(|r| r.sha256.clone()),
            recording_bytes: s.recording.as_ref().map(|r| r.bytes),
            rekor_uuid: s.rekor.as_ref().map(|r| r.uuid.clone()),
            rekor_log_index: s.rekor.as_ref().map(|r| r.log_index),
            review_verdict: s.review.as_ref().map(|r| r.verdict.to_string()),
            review_by: s
                .review
                .as_ref()
                .map(|r| format!("{}@{}", r.reviewer, rfc3339(r.at))),
        }
    }
}

/// A CSV cell a spreadsheet would run as a formula (`=`, `+`, `-`, `@`, tab or carriage return
/// first: a reason typed by a requester, opened by an auditor) is written with a leading `'`,
/// as OWASP advises; JSON lines are written as they are.
fn defused(cell: &str) -> std::borrow::Cow<'_, str> {
    if cell.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{cell}").into()
    } else {
        cell.into()
    }
}

/// Writes `sessions` (each with who ended it) in `format` (with the CSV header first when
/// `header`).
fn encode(sessions: &[(Session, Option<String>)], format: ExportFormat, header: bool) -> Vec<u8> {
    let records = || {
        sessions
            .iter()
            .map(|(s, by)| ExportRecord::of(s, by.clone()))
    };
    match format {
        ExportFormat::Ocsf => {
            let mut out = Vec::new();
            for (s, by) in sessions {
                for e in ocsf::events(s, by.as_deref()) {
                    if serde_json::to_writer(&mut out, &e).is_ok() {
                        out.push(b'\n');
                    }
                }
            }
            out
        }
        ExportFormat::Jsonl => {
            let mut out = Vec::new();
            for r in records() {
                // A record is plain data: it serialises.
                if serde_json::to_writer(&mut out, &r).is_ok() {
                    out.push(b'\n');
                }
            }
            out
        }
        ExportFormat::Csv => {
            let mut w = csv::WriterBuilder::new()
                .has_headers(false)
                .from_writer(Vec::new());
            if header {
                let _ = w.write_record(COLUMNS);
            }
            // csv's serializer gives the cells in the struct's order; read back, each is then
            // defused on its way into the output.
            let mut raw = csv::WriterBuilder::new()
                .has_headers(false)
                .from_writer(Vec::new());
            for r in records() {
                let _ = raw.serialize(&r);
            }
            let raw = raw.into_inner().unwrap_or_default();
            let mut read = csv::ReaderBuilder::new()
                .has_headers(false)
                .from_reader(raw.as_slice());
            for cells in read.records().flatten() {
                let _ = w.write_record(cells.iter().map(|c| defused(c).into_owned()));
            }
            w.into_inner().unwrap_or_default()
        }
    }
}

/// Where the stream is.
struct Cursor {
    before: Option<Uuid>,
    first: bool,
    done: bool,
}

/// The export of `range` in `format`, newest first, written as it is read (a page of
/// sessions per chunk; the CSV header in the first chunk, even when nothing matches).
pub fn stream(
    store: Arc<dyn Store>,
    range: ExportRange,
    format: ExportFormat,
) -> impl Stream<Item = Result<Bytes, StoreError>> + Send {
    // The first page starts just after `until`: a UUIDv7 begins with its millisecond, so the
    // walk down the primary key starts there instead of at the newest row.
    let start_ms = (range.until.unix_timestamp_nanos() / 1_000_000 + 1).max(0);
    let start = Uuid::new_v7(uuid::Timestamp::from_unix(
        uuid::NoContext,
        u64::try_from(start_ms / 1000).unwrap_or(0),
        u32::try_from((start_ms % 1000) * 1_000_000).unwrap_or(0),
    ));
    let start = Uuid::from_u128(start.as_u128() & !((1u128 << 80) - 1));
    let cursor = Cursor {
        before: Some(start),
        first: true,
        done: false,
    };
    futures::stream::try_unfold(cursor, move |mut c| {
        let (store, range) = (store.clone(), range.clone());
        async move {
            if c.done {
                return Ok(None);
            }
            let page = store
                .list(&ListFilter {
                    environments_in: Some(range.environments.clone()),
                    created_by: Some(range.until),
                    before: c.before,
                    limit: PAGE,
                    ..ListFilter::default()
                })
                .await?;
            c.done = page.len() < PAGE as usize;
            c.before = page.last().map(|s| s.id);
            let mut kept: Vec<Session> = Vec::with_capacity(page.len());
            for s in page {
                if s.created_at < range.since {
                    c.done = true;
                    break;
                }
                kept.push(s);
            }
            let ids: Vec<Uuid> = kept.iter().map(|s| s.id).collect();
            let mut enders: std::collections::HashMap<Uuid, String> =
                store.enders(&ids).await?.into_iter().collect();
            let sessions: Vec<(Session, Option<String>)> = kept
                .into_iter()
                .map(|s| {
                    let by = enders.remove(&s.id);
                    (s, by)
                })
                .collect();
            let bytes = encode(&sessions, format, c.first);
            c.first = false;
            Ok(Some((Bytes::from(bytes), c)))
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_json_keys_are_the_csv_columns_in_order() {
        let s = breakglass_shared::Session::new_request(
            Uuid::now_v7(),
            breakglass_shared::session::NewSession {
                environment: "dev".into(),
                tier: breakglass_shared::Tier::Flight,
                namespace: "shop".into(),
                pod: "web-0".into(),
                target_container: None,
                mode: breakglass_shared::Mode::Live,
                reason: "=HYPERLINK(\"x\") the pager fired".into(),
                ticket: None,
                duration_minutes: 15,
                recycle: false,
                requester: "alice".into(),
                quorum: Default::default(),
                extension_limits: Default::default(),
            },
            OffsetDateTime::now_utc(),
        );
        let r = ExportRecord::of(&s, None);
        // The struct's own order, as csv's serializer (and serde_json's) writes it.
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize(&r).unwrap();
        let own = String::from_utf8(w.into_inner().unwrap()).unwrap();
        assert_eq!(own.lines().next().unwrap(), COLUMNS.join(","));
        let json = serde_json::to_string(&r).unwrap();
        let mut at = 0;
        for c in COLUMNS {
            let found = json[at..].find(&format!("\"{c}\":")).unwrap();
            at += found;
        }
        let csv = String::from_utf8(encode(&[(s, None)], ExportFormat::Csv, true)).unwrap();
        let mut lines = csv.lines();
        assert_eq!(lines.next().unwrap(), COLUMNS.join(","));
        assert!(lines
            .next()
            .unwrap()
            .contains("\"'=HYPERLINK(\"\"x\"\") the pager fired\""));
    }

    #[test]
    fn the_guide_lists_the_columns_in_order() {
        let guide = include_str!("../../../docs/export.md");
        let listed: Vec<&str> = guide
            .lines()
            .filter_map(|l| l.strip_prefix("| `")?.split('`').next())
            .collect();
        assert_eq!(listed, COLUMNS.to_vec(), "docs/export.md's table drifted");
    }
}
