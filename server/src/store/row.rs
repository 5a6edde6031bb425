//! The tables' rows as both backends hold them (flat columns, wire names, signed integers) and
//! their conversion to and from the shared types. Rows are read with `FromRow`, except SQLite's
//! lists, which read a whole page as one JSON value (`store/page.rs`); a session's
//! columns are bound in one place, [`SessionRow::bind_fixed`] and [`SessionRow::bind_mutable`],
//! which the insert and the compare-and-set both use.

use std::str::FromStr;

use breakglass_shared::api::SessionEventRecord;
use breakglass_shared::session::{EndReason, Quorum, RecordingRef, RekorEntry, Review};
use breakglass_shared::{Session, SessionState};
use sqlx::{Encode, Postgres, Sqlite, Type};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::store::page::cell;
use crate::store::StoreError;

/// A column value either backend can bind.
pub trait Value<'a>:
    Encode<'a, Sqlite> + Type<Sqlite> + Encode<'a, Postgres> + Type<Postgres> + Send + Sync + 'a
{
}

impl<'a, T> Value<'a> for T where
    T: Encode<'a, Sqlite> + Type<Sqlite> + Encode<'a, Postgres> + Type<Postgres> + Send + Sync + 'a
{
}

/// Takes a session's columns one by one, in [`FIXED`] then [`MUTABLE`] order; a backend
/// implements it to push them into its query.
pub trait Binder<'a> {
    /// Binds `value` to `column`.
    fn bind<T: Value<'a>>(&mut self, column: &'static str, value: &'a T);
}

/// Declares the session row once: the struct `FromRow` decodes, the column lists the SQL is
/// built from and the binders, so names, order and binds cannot drift apart.
macro_rules! session_row {
    (
        fixed { $($f:ident: $ft:ty,)* }
        mutable { $($m:ident: $mt:ty,)* }
    ) => {
        /// A `breakglass_sessions` row.
        #[derive(Debug, sqlx::FromRow)]
        pub struct SessionRow {
            $(pub $f: $ft,)*
            $(pub $m: $mt,)*
        }

        /// Columns written once, when the session is created.
        pub const FIXED: &[&str] = &[$(stringify!($f)),*];
        /// Columns that change over a session's life: what compare-and-set rewrites.
        pub const MUTABLE: &[&str] = &[$(stringify!($m)),*];

        /// A row from its columns as one JSON array, [`FIXED`] then [`MUTABLE`] order, each
        /// as [`crate::store::page::Cell`] reads it: how SQLite's list answers a page
        /// (`SqliteStore`'s `JSON_ROW`).
        impl<'de> serde::Deserialize<'de> for SessionRow {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<SessionRow, D::Error> {
                struct Columns;

                impl<'de> serde::de::Visitor<'de> for Columns {
                    type Value = SessionRow;

                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("a session row: an array of its columns")
                    }

                    fn visit_seq<A: serde::de::SeqAccess<'de>>(
                        self,
                        mut seq: A,
                    ) -> Result<SessionRow, A::Error> {
                        $(let $f = cell::<$ft, A>(&mut seq, stringify!($f))?;)*
                        $(let $m = cell::<$mt, A>(&mut seq, stringify!($m))?;)*
                        if seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                            return Err(serde::de::Error::custom(
                                "the row has more columns than a session",
                            ));
                        }
                        Ok(SessionRow { $($f,)* $($m,)* })
                    }
                }

                d.deserialize_seq(Columns)
            }
        }

        impl SessionRow {
            /// Binds the [`FIXED`] columns, in order.
            pub fn bind_fixed<'a>(&'a self, b: &mut impl Binder<'a>) {
                $(b.bind(stringify!($f), &self.$f);)*
            }

            /// Binds the [`MUTABLE`] columns, in order.
            pub fn bind_mutable<'a>(&'a self, b: &mut impl Binder<'a>) {
                $(b.bind(stringify!($m), &self.$m);)*
            }
        }
    };
}

session_row! {
    fixed {
        id: Uuid,
        environment: String,
        tier: String,
        namespace: String,
        pod: String,
        target_container: Option<String>,
        mode: String,
        reason: String,
        ticket: Option<String>,
        duration_minutes: i64,
        requester: String,
        created_at: OffsetDateTime,
        quorum_required: i64,
        quorum_distinct: bool,
        spec_json: Option<String>,
    }
    mutable {
        // Asked at the request, or at the end (`SessionEvent::End`).
        recycle: bool,
        approver: Option<String>,
        approvals_json: String,
        extensions_json: String,
        glass_broken_by: Option<String>,
        state: String,
        end_reason: Option<String>,
        end_reason_by: Option<String>,
        denial_reason: Option<String>,
        failure: Option<String>,
        version: i64,
        decided_at: Option<OffsetDateTime>,
        activating_at: Option<OffsetDateTime>,
        active_at: Option<OffsetDateTime>,
        expires_at: Option<OffsetDateTime>,
        ending_at: Option<OffsetDateTime>,
        finished_at: Option<OffsetDateTime>,
        grant_name: Option<String>,
        debug_container: Option<String>,
        copy_pod: Option<String>,
        process_access_annotated: bool,
        recording_key: Option<String>,
        recording_version: Option<String>,
        recording_sha256: Option<String>,
        recording_bytes: Option<i64>,
        rekor_uuid: Option<String>,
        rekor_log_index: Option<i64>,
        review_reviewer: Option<String>,
        review_at: Option<OffsetDateTime>,
        review_verdict: Option<String>,
        review_notes: Option<String>,
    }
}

/// A `breakglass_events` row.
#[derive(Debug, sqlx::FromRow)]
pub struct EventRow {
    id: i64,
    session_id: Uuid,
    actor: String,
    at: OffsetDateTime,
    from_state: Option<String>,
    to_state: String,
    kind: String,
    detail: Option<String>,
}

fn corrupt(id: Uuid, column: &'static str, value: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        id: id.to_string(),
        column,
        value: value.into(),
    }
}

/// Parses a stored wire name (state, tier, mode, verdict); a hand-edited value is
/// [`StoreError::Corrupt`].
fn wire<T: FromStr>(id: Uuid, column: &'static str, value: String) -> Result<T, StoreError> {
    value.parse().map_err(|_| corrupt(id, column, value))
}

impl From<&Session> for SessionRow {
    fn from(s: &Session) -> SessionRow {
        let rec = s.recording.as_ref();
        let review = s.review.as_ref();
        SessionRow {
            id: s.id,
            environment: s.environment.clone(),
            tier: s.tier.as_str().to_string(),
            namespace: s.namespace.clone(),
            pod: s.pod.clone(),
            target_container: s.target_container.clone(),
            mode: s.mode.as_str().to_string(),
            reason: s.reason.clone(),
            ticket: s.ticket.clone(),
            duration_minutes: i64::from(s.duration_minutes),
            recycle: s.recycle,
            requester: s.requester.clone(),
            created_at: s.created_at,
            quorum_required: i64::from(s.quorum.required),
            quorum_distinct: s.quorum.distinct_groups,
            spec_json: s
                .spec
                .as_ref()
                .and_then(|sp| serde_json::to_string(sp).ok()),
            approver: s.approver.clone(),
            approvals_json: serde_json::to_string(&s.approvals).unwrap_or_else(|_| "[]".into()),
            extensions_json: serde_json::to_string(&s.extensions).unwrap_or_else(|_| "{}".into()),
            glass_broken_by: s.glass_broken_by.clone(),
            state: s.state.as_str().to_string(),
            end_reason: s.end_reason.as_ref().map(|r| r.kind().to_string()),
            end_reason_by: s
                .end_reason
                .as_ref()
                .and_then(EndReason::by)
                .map(str::to_string),
            denial_reason: s.denial_reason.clone(),
            failure: s.failure.clone(),
            version: s.version,
            decided_at: s.decided_at,
            activating_at: s.activating_at,
            active_at: s.active_at,
            expires_at: s.expires_at,
            ending_at: s.ending_at,
            finished_at: s.finished_at,
            grant_name: s.grant_name.clone(),
            debug_container: s.debug_container.clone(),
            copy_pod: s.copy_pod.clone(),
            process_access_annotated: s.process_access_annotated,
            recording_key: rec.map(|r| r.key.clone()),
            recording_version: rec.map(|r| r.version.clone()),
            recording_sha256: rec.map(|r| r.sha256.clone()),
            recording_bytes: rec.map(|r| i64::try_from(r.bytes).unwrap_or(i64::MAX)),
            rekor_uuid: s.rekor.as_ref().map(|e| e.uuid.clone()),
            rekor_log_index: s.rekor.as_ref().map(|e| e.log_index),
            review_reviewer: review.map(|r| r.reviewer.clone()),
            review_at: review.map(|r| r.at),
            review_verdict: review.map(|r| r.verdict.as_str().to_string()),
            review_notes: review.map(|r| r.notes.clone()),
        }
    }
}

impl TryFrom<SessionRow> for Session {
    type Error = StoreError;

    fn try_from(row: SessionRow) -> Result<Session, StoreError> {
        let id = row.id;
        let state = wire(id, "state", row.state)?;
        let end_reason = match row.end_reason {
            Some(kind) => Some(
                EndReason::from_parts(&kind, row.end_reason_by.as_deref())
                    .ok_or_else(|| corrupt(id, "end_reason", kind))?,
            ),
            None => None,
        };
        let recording = match (row.recording_key, row.recording_sha256) {
            (Some(key), Some(sha256)) => Some(RecordingRef {
                key,
                version: row.recording_version.unwrap_or_default(),
                sha256,
                bytes: u64::try_from(row.recording_bytes.unwrap_or(0)).unwrap_or(0),
            }),
            _ => None,
        };
        let rekor = row.rekor_uuid.map(|uuid| RekorEntry {
            uuid,
            log_index: row.rekor_log_index.unwrap_or(0),
        });
        let review = match (row.review_reviewer, row.review_at, row.review_verdict) {
            (Some(reviewer), Some(at), Some(verdict)) => Some(Review {
                reviewer,
                at,
                verdict: wire(id, "review_verdict", verdict)?,
                notes: row.review_notes.unwrap_or_default(),
            }),
            _ => None,
        };
        let duration = row.duration_minutes;
        let required = row.quorum_required;
        let quorum = Quorum {
            required: u8::try_from(required)
                .map_err(|_| corrupt(id, "quorum_required", required.to_string()))?,
            distinct_groups: row.quorum_distinct,
        };
        let approvals = serde_json::from_str(&row.approvals_json)
            .map_err(|_| corrupt(id, "approvals_json", row.approvals_json.clone()))?;
        let extensions = serde_json::from_str(&row.extensions_json)
            .map_err(|_| corrupt(id, "extensions_json", row.extensions_json.clone()))?;
        let spec = row
            .spec_json
            .as_deref()
            .map(|j| serde_json::from_str(j).map_err(|_| corrupt(id, "spec_json", j)))
            .transpose()?;
        Ok(Session {
            id,
            environment: row.environment,
            tier: wire(id, "tier", row.tier)?,
            namespace: row.namespace,
            pod: row.pod,
            target_container: row.target_container,
            mode: wire(id, "mode", row.mode)?,
            reason: row.reason,
            ticket: row.ticket,
            duration_minutes: u32::try_from(duration)
                .map_err(|_| corrupt(id, "duration_minutes", duration.to_string()))?,
            recycle: row.recycle,
            requester: row.requester,
            approver: row.approver,
            quorum,
            approvals,
            extensions,
            glass_broken_by: row.glass_broken_by,
            state,
            end_reason,
            denial_reason: row.denial_reason,
            failure: row.failure,
            version: row.version,
            created_at: row.created_at,
            decided_at: row.decided_at,
            activating_at: row.activating_at,
            active_at: row.active_at,
            expires_at: row.expires_at,
            ending_at: row.ending_at,
            finished_at: row.finished_at,
            grant_name: row.grant_name,
            debug_container: row.debug_container,
            copy_pod: row.copy_pod,
            process_access_annotated: row.process_access_annotated,
            recording,
            rekor,
            review,
            spec,
        })
    }
}

impl TryFrom<EventRow> for SessionEventRecord {
    type Error = StoreError;

    fn try_from(row: EventRow) -> Result<SessionEventRecord, StoreError> {
        let session_id = row.session_id;
        Ok(SessionEventRecord {
            id: row.id,
            session_id,
            actor: row.actor,
            at: row.at,
            from_state: row
                .from_state
                .map(|f| wire::<SessionState>(session_id, "state", f))
                .transpose()?,
            to_state: wire(session_id, "state", row.to_state)?,
            kind: row.kind,
            detail: row.detail,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use breakglass_shared::session::{NewSession, Verdict};
    use breakglass_shared::{Mode, Tier};
    use time::macros::datetime;

    use super::*;

    fn full() -> Session {
        let now = datetime!(2026-01-01 12:00 UTC);
        let req = NewSession {
            environment: "prod".into(),
            tier: Tier::Flight,
            namespace: "shop".into(),
            pod: "web-1".into(),
            target_container: Some("app".into()),
            mode: Mode::Copy,
            reason: "checking a stuck worker".into(),
            ticket: Some("https://t.example/INC-1".into()),
            duration_minutes: 30,
            recycle: false,
            requester: "alice".into(),
            quorum: breakglass_shared::session::Quorum::default(),
            extension_limits: breakglass_shared::session::ExtensionLimits {
                max_count: 2,
                max_total_minutes: 60,
            },
        };
        let mut s = Session::new_request(Uuid::from_u128(7), req, now);
        s.extensions
            .granted
            .push(breakglass_shared::session::Extension {
                minutes: 10,
                reason: "the dump is still running".into(),
                asked_at: now,
                granted_at: now,
                approvals: vec![],
            });
        s.state = SessionState::Ended;
        s.approver = Some("bob".into());
        s.end_reason = Some(EndReason::Terminated { by: "carol".into() });
        s.version = 9;
        s.active_at = Some(now);
        s.recording = Some(RecordingRef {
            key: "sessions/x.cast".into(),
            version: "3".into(),
            sha256: "00".repeat(32),
            bytes: 10,
        });
        s.rekor = Some(RekorEntry {
            uuid: "ab".repeat(40),
            log_index: 4,
        });
        s.review = Some(Review {
            reviewer: "bob".into(),
            at: now,
            verdict: Verdict::Concern,
            notes: "odd".into(),
        });
        s
    }

    #[test]
    fn a_session_survives_the_row() {
        let s = full();
        assert_eq!(Session::try_from(SessionRow::from(&s)).unwrap(), s);
    }

    #[test]
    fn hand_edited_values_are_corrupt_and_name_their_column() {
        type Edit = fn(&mut SessionRow);
        let cases: [(&str, Edit); 5] = [
            ("tier", |r| r.tier = "sky".into()),
            ("mode", |r| r.mode = "exec".into()),
            ("state", |r| r.state = "Paused".into()),
            ("end_reason", |r| r.end_reason_by = None),
            ("review_verdict", |r| r.review_verdict = Some("meh".into())),
        ];
        for (column, edit) in cases {
            let mut row = SessionRow::from(&full());
            edit(&mut row);
            match Session::try_from(row) {
                Err(StoreError::Corrupt { column: c, .. }) => assert_eq!(c, column),
                other => panic!("{column}: {other:?}"),
            }
        }
    }

    /// The table as its migrations make it: the first one's columns and those added later.
    #[test]
    fn the_row_has_every_column_of_the_schema() {
        for (schema, added) in [
            (
                include_str!("../../migrations/sqlite/0001_init.sql"),
                [
                    include_str!("../../migrations/sqlite/0009_quorum.sql"),
                    include_str!("../../migrations/sqlite/0010_extensions.sql"),
                    include_str!("../../migrations/sqlite/0014_spec.sql"),
                ]
                .concat(),
            ),
            (
                include_str!("../../migrations/postgres/0001_init.sql"),
                [
                    include_str!("../../migrations/postgres/0009_quorum.sql"),
                    include_str!("../../migrations/postgres/0010_extensions.sql"),
                    include_str!("../../migrations/postgres/0014_spec.sql"),
                ]
                .concat(),
            ),
        ] {
            let table = schema
                .split("CREATE TABLE breakglass_sessions (")
                .nth(1)
                .and_then(|t| t.split(");").next())
                .unwrap();
            let mut columns: Vec<&str> = table
                .lines()
                .filter_map(|l| l.split_whitespace().next())
                .chain(
                    added
                        .split("ADD COLUMN ")
                        .skip(1)
                        .filter_map(|c| c.split_whitespace().next()),
                )
                .collect();
            let mut ours = [FIXED, MUTABLE].concat();
            columns.sort_unstable();
            ours.sort_unstable();
            assert_eq!(columns, ours);
        }
    }
}
