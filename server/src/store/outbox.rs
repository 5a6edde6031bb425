//! The notification outbox (`breakglass_outbox`): one row per notification and receiver.
//!
//! Notices caused by a session change are written by [`Store::insert`](super::Store::insert)
//! and [`Store::compare_and_set`](super::Store::compare_and_set) in the change's own
//! transaction (the drafts ride on its [`EventDraft`](super::EventDraft)), so a change is never
//! stored without its notifications or the other way round. They are written staged
//! (`breakglass_outbox_staged`): one row per notice with its receivers' names and one copy of
//! the payload, the least a change can pay. A worker's claim first moves staged notices into
//! the outbox proper, one row per receiver (leaving out any whose event key and receiver are
//! there already), in the transaction that deletes them, so none is lost or moved twice. The
//! clock's notices (reminders, escalations, overdue reviews) go straight in with
//! [`OutboxStore::enqueue`], once per unique event key and receiver, whichever replica's sweep
//! sees them first.
//!
//! Delivery claims a batch for a while (`claimed_until_ms`): on PostgreSQL the claim skips rows
//! (and staged notices) another replica is claiming (`FOR UPDATE SKIP LOCKED`), so each row has
//! one worker at a time; SQLite serves one replica. A worker that dies leaves its claim to run
//! out, and the row is delivered by the next worker to come by.

use async_trait::async_trait;
use uuid::Uuid;

use super::StoreError;

/// One notification to write, for one receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxDraft {
    /// The delivery's id: the Standard Webhooks `webhook-id`, kept across retries.
    pub id: Uuid,
    /// What makes it unique with the receiver (`<session>/<kind>`, or with the session's
    /// version for what can happen again): the same notice is never written twice.
    pub event_key: String,
    /// The receiver's configured name.
    pub receiver: String,
    /// The notice kind's name (`requested`, `glass_broken`, ...).
    pub kind: String,
    /// The session it is about.
    pub session_id: Uuid,
    /// The payload, JSON (`breakglass_shared::notify::Notification`).
    pub payload: String,
    /// When it was written (ms since the epoch); due at once.
    pub created_at_ms: i64,
}

/// A stored delivery.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Delivery {
    /// Its id (the `webhook-id`).
    pub id: Uuid,
    /// Its unique event key.
    pub event_key: String,
    /// The receiver's name.
    pub receiver: String,
    /// The notice kind's name.
    pub kind: String,
    /// The session.
    pub session_id: Uuid,
    /// The payload, JSON.
    pub payload: String,
    /// `pending`, `sent` or `dead`.
    pub state: String,
    /// Attempts made so far (a claim counts one).
    pub attempts: i64,
    /// When it is due next (ms since the epoch).
    pub next_at_ms: i64,
    /// The replica that claimed it last.
    pub claimed_by: Option<String>,
    /// Until when that claim holds.
    pub claimed_until_ms: i64,
    /// When it was written.
    pub created_at_ms: i64,
    /// When the receiver took it.
    pub sent_at_ms: Option<i64>,
    /// The receiver's last status code (HTTP, or the SMTP reply code).
    pub last_status: Option<i64>,
    /// The last failure, as the worker saw it.
    pub last_error: Option<String>,
}

/// What became of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// The receiver took it (with its status, when it gave one).
    Sent(Option<i64>),
    /// It failed; due again at `retry_at_ms`, or dead when that is `None`.
    Failed {
        /// The receiver's status, if it answered.
        status: Option<i64>,
        /// What went wrong.
        error: String,
        /// When to try again; `None` past the retry window.
        retry_at_ms: Option<i64>,
    },
}

/// The outbox's numbers for the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutboxStats {
    /// Rows not delivered yet (and not dead).
    pub pending: i64,
    /// When the oldest of them was written (ms since the epoch).
    pub oldest_pending_ms: Option<i64>,
}

/// One notice as a change stages it: the drafts of one event key (one payload), and the names
/// of their receivers as a JSON array.
pub(crate) struct StagedNotice<'a> {
    /// The notice's first draft: everything but the receiver is the same in all of them.
    pub draft: &'a OutboxDraft,
    /// The receivers' names, a JSON array.
    pub receivers: String,
    /// How many there are (the pending gauge counts receivers).
    pub count: i64,
}

/// `drafts` (as [`Outbox::drafts`](crate::outbox::Outbox::drafts) makes them: one notice's
/// receivers next to each other) as one staged row per notice.
pub(crate) fn stage(drafts: &[OutboxDraft]) -> Vec<StagedNotice<'_>> {
    drafts
        .chunk_by(|a, b| a.event_key == b.event_key && a.payload == b.payload)
        .map(|group| {
            let names: Vec<&str> = group.iter().map(|d| d.receiver.as_str()).collect();
            StagedNotice {
                draft: &group[0],
                // A list of strings always serialises.
                receivers: serde_json::to_string(&names).unwrap_or_default(),
                count: i64::try_from(names.len()).unwrap_or(i64::MAX),
            }
        })
        .collect()
}

/// A staged notice as a worker takes it.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct StagedRow {
    event_key: String,
    kind: String,
    session_id: Uuid,
    receivers: String,
    payload: String,
    created_at_ms: i64,
}

/// The outbox's rows of `staged`, in the order the notices were written.
pub(crate) fn fan_out(mut staged: Vec<StagedRow>) -> Vec<OutboxDraft> {
    staged.sort_by_key(|n| n.created_at_ms);
    staged.into_iter().flat_map(StagedRow::drafts).collect()
}

impl StagedRow {
    /// Its rows in the outbox, one per receiver, each with a new id (the `webhook-id` from
    /// here on). A receivers list that does not read (a hand-edited table) becomes one row
    /// for a receiver of that name, which no configuration has: it dies at its first attempt
    /// with an error that names it, on the deliveries page, instead of being lost.
    pub(crate) fn drafts(self) -> Vec<OutboxDraft> {
        let names: Vec<String> =
            serde_json::from_str(&self.receivers).unwrap_or_else(|_| vec![self.receivers.clone()]);
        names
            .into_iter()
            .map(|receiver| OutboxDraft {
                id: Uuid::now_v7(),
                event_key: self.event_key.clone(),
                receiver,
                kind: self.kind.clone(),
                session_id: self.session_id,
                payload: self.payload.clone(),
                created_at_ms: self.created_at_ms,
            })
            .collect()
    }
}

/// Staged notices a claim moves into the outbox at most (the rest wait for the next claim).
pub(crate) const STAGED_BATCH: i64 = 500;

/// The outbox; every store has one.
#[async_trait]
pub trait OutboxStore: Send + Sync {
    /// Writes `drafts` in one transaction, leaving out any whose event key and receiver are
    /// there already; how many were new.
    async fn enqueue(&self, drafts: &[OutboxDraft]) -> Result<u64, StoreError>;
    /// Moves staged notices into the outbox, then claims up to `limit` due deliveries for
    /// `holder` until `until_ms`, counting an attempt on each (one transaction).
    async fn claim_deliveries(
        &self,
        holder: &str,
        now_ms: i64,
        until_ms: i64,
        limit: i64,
    ) -> Result<Vec<Delivery>, StoreError>;
    /// Records each attempt on its delivery, in one transaction, where `holder` still has it
    /// claimed; how many it still had.
    async fn finish_deliveries(
        &self,
        holder: &str,
        outcomes: &[(Uuid, Attempt)],
        now_ms: i64,
    ) -> Result<u64, StoreError>;
    /// The latest `limit` deliveries, newest first, optionally only those in `state`.
    async fn deliveries(
        &self,
        state: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Delivery>, StoreError>;
    /// The pending count and the oldest pending row's age.
    async fn outbox_stats(&self) -> Result<OutboxStats, StoreError>;
}

/// Rows per INSERT (outbox rows, or a change's staged notices): well under both engines' bound
/// on bound parameters, so a change's notices are one INSERT.
pub(crate) const OUTBOX_BATCH: usize = 500;

/// [`OutboxStore`] for a backend, and `push_staged` / `insert_staged`, with which the session
/// writes add their notices to the change's own event statement. `$claim_lock` is what the
/// claim's inner select ends with; the backend's `STAGED_TAKE` is how a claim takes staged
/// notices.
macro_rules! outbox_sql {
    ($store:ident, $db:ty, $claim_lock:expr) => {
        /// Appends to `q` one INSERT of the staged rows of `batch` (at most [`OUTBOX_BATCH`]).
        fn push_staged<'a>(
            q: &mut sqlx::QueryBuilder<'a, $db>,
            batch: Vec<crate::store::outbox::StagedNotice<'a>>,
        ) {
            q.push(
                "INSERT INTO breakglass_outbox_staged \
                 (event_key, kind, session_id, receivers, receiver_count, payload, created_at_ms) ",
            );
            q.push_values(batch, |mut row, n| {
                row.push_bind(n.draft.event_key.as_str())
                    .push_bind(n.draft.kind.as_str())
                    .push_bind(n.draft.session_id)
                    .push_bind(n.receivers)
                    .push_bind(n.count)
                    .push_bind(n.draft.payload.as_str())
                    .push_bind(n.draft.created_at_ms);
            });
        }

        /// Writes `staged`, in batches of [`OUTBOX_BATCH`] notices.
        async fn insert_staged(
            conn: &mut <$db as sqlx::Database>::Connection,
            mut staged: Vec<crate::store::outbox::StagedNotice<'_>>,
        ) -> Result<(), crate::store::StoreError> {
            while !staged.is_empty() {
                let rest = staged.split_off(staged.len().min(crate::store::outbox::OUTBOX_BATCH));
                let mut q = sqlx::QueryBuilder::<$db>::new("");
                push_staged(&mut q, staged);
                q.build().execute(&mut *conn).await?;
                staged = rest;
            }
            Ok(())
        }

        /// Writes `drafts` into the outbox, [`OUTBOX_BATCH`] rows an INSERT, leaving out what
        /// is there already; how many were new.
        async fn insert_outbox(
            conn: &mut <$db as sqlx::Database>::Connection,
            drafts: &[crate::store::outbox::OutboxDraft],
        ) -> Result<u64, crate::store::StoreError> {
            let mut new = 0;
            for batch in drafts.chunks(crate::store::outbox::OUTBOX_BATCH) {
                let mut q = sqlx::QueryBuilder::<$db>::new(
                    "INSERT INTO breakglass_outbox \
                     (id, event_key, receiver, kind, session_id, payload, next_at_ms, created_at_ms) ",
                );
                q.push_values(batch, |mut row, d| {
                    row.push_bind(d.id)
                        .push_bind(d.event_key.as_str())
                        .push_bind(d.receiver.as_str())
                        .push_bind(d.kind.as_str())
                        .push_bind(d.session_id)
                        .push_bind(d.payload.as_str())
                        .push_bind(d.created_at_ms)
                        .push_bind(d.created_at_ms);
                });
                q.push(" ON CONFLICT (event_key, receiver) DO NOTHING");
                new += q.build().execute(&mut *conn).await?.rows_affected();
            }
            Ok(new)
        }

        #[async_trait::async_trait]
        impl crate::store::outbox::OutboxStore for $store {
            async fn enqueue(
                &self,
                drafts: &[crate::store::outbox::OutboxDraft],
            ) -> Result<u64, crate::store::StoreError> {
                if drafts.is_empty() {
                    return Ok(0);
                }
                let mut tx = self.pool.begin().await?;
                let new = insert_outbox(&mut tx, drafts).await?;
                tx.commit().await?;
                Ok(new)
            }

            async fn claim_deliveries(
                &self,
                holder: &str,
                now_ms: i64,
                until_ms: i64,
                limit: i64,
            ) -> Result<Vec<crate::store::outbox::Delivery>, crate::store::StoreError> {
                let mut tx = self.pool.begin().await?;
                let staged: Vec<crate::store::outbox::StagedRow> = sqlx::query_as(STAGED_TAKE)
                    .bind(crate::store::outbox::STAGED_BATCH)
                    .fetch_all(&mut *tx)
                    .await?;
                if !staged.is_empty() {
                    insert_outbox(&mut tx, &crate::store::outbox::fan_out(staged)).await?;
                }
                let sql = format!(
                    "UPDATE breakglass_outbox SET claimed_by = $1, claimed_until_ms = $2, \
                     attempts = attempts + 1 \
                     WHERE id IN (SELECT id FROM breakglass_outbox \
                     WHERE state = 'pending' AND next_at_ms <= $3 AND claimed_until_ms <= $3 \
                     ORDER BY next_at_ms LIMIT $4{}) \
                     RETURNING *",
                    $claim_lock
                );
                let claimed = sqlx::query_as(&sql)
                    .bind(holder)
                    .bind(until_ms)
                    .bind(now_ms)
                    .bind(limit)
                    .fetch_all(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(claimed)
            }

            async fn finish_deliveries(
                &self,
                holder: &str,
                outcomes: &[(uuid::Uuid, crate::store::outbox::Attempt)],
                now_ms: i64,
            ) -> Result<u64, crate::store::StoreError> {
                use crate::store::outbox::Attempt;
                if outcomes.is_empty() {
                    return Ok(0);
                }
                let mut done = 0;
                let mut tx = self.pool.begin().await?;
                // What was sent is written in one statement per status code (almost always
                // one): a round's outcomes cost one commit, not one each.
                let mut statuses: Vec<Option<i64>> = outcomes
                    .iter()
                    .filter_map(|(_, a)| match a {
                        Attempt::Sent(status) => Some(*status),
                        Attempt::Failed { .. } => None,
                    })
                    .collect();
                statuses.sort_unstable();
                statuses.dedup();
                for status in statuses {
                    let mut q = sqlx::QueryBuilder::<$db>::new(
                        "UPDATE breakglass_outbox SET state = 'sent', sent_at_ms = ",
                    );
                    q.push_bind(now_ms)
                        .push(", last_status = ")
                        .push_bind(status)
                        .push(", last_error = NULL, claimed_until_ms = 0 WHERE claimed_by = ")
                        .push_bind(holder)
                        .push(" AND state = 'pending' AND id IN (");
                    let mut ids = q.separated(", ");
                    for (id, a) in outcomes {
                        if *a == Attempt::Sent(status) {
                            ids.push_bind(*id);
                        }
                    }
                    q.push(")");
                    done += q.build().execute(&mut *tx).await?.rows_affected();
                }
                for (id, a) in outcomes {
                    let Attempt::Failed { status, error, retry_at_ms } = a else {
                        continue;
                    };
                    done += sqlx::query(
                        "UPDATE breakglass_outbox SET state = $1, next_at_ms = $2, \
                         last_status = $3, last_error = $4, claimed_until_ms = 0 \
                         WHERE id = $5 AND claimed_by = $6 AND state = 'pending'",
                    )
                    .bind(if retry_at_ms.is_some() { "pending" } else { "dead" })
                    .bind(retry_at_ms.unwrap_or(now_ms))
                    .bind(*status)
                    .bind(error.as_str())
                    .bind(*id)
                    .bind(holder)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                }
                tx.commit().await?;
                Ok(done)
            }

            async fn deliveries(
                &self,
                state: Option<&str>,
                limit: i64,
            ) -> Result<Vec<crate::store::outbox::Delivery>, crate::store::StoreError> {
                Ok(sqlx::query_as(
                    "SELECT * FROM breakglass_outbox WHERE ($1 IS NULL OR state = $1) \
                     ORDER BY id DESC LIMIT $2",
                )
                .bind(state)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?)
            }

            async fn outbox_stats(
                &self,
            ) -> Result<crate::store::outbox::OutboxStats, crate::store::StoreError> {
                // Staged notices are pending too, once per receiver.
                let row = sqlx::query(
                    "SELECT (SELECT COUNT(*) FROM breakglass_outbox WHERE state = 'pending') \
                     + (SELECT CAST(COALESCE(SUM(receiver_count), 0) AS BIGINT) \
                     FROM breakglass_outbox_staged) AS pending, \
                     (SELECT MIN(m) FROM (\
                     SELECT MIN(created_at_ms) AS m FROM breakglass_outbox WHERE state = 'pending' \
                     UNION ALL SELECT MIN(created_at_ms) FROM breakglass_outbox_staged) t) AS oldest",
                )
                .fetch_one(&self.pool)
                .await?;
                Ok(crate::store::outbox::OutboxStats {
                    pending: sqlx::Row::try_get(&row, "pending")?,
                    oldest_pending_ms: sqlx::Row::try_get(&row, "oldest")?,
                })
            }
        }
    };
}

pub(crate) use outbox_sql;

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(key: &str, receiver: &str, payload: &str) -> OutboxDraft {
        OutboxDraft {
            id: Uuid::now_v7(),
            event_key: key.into(),
            receiver: receiver.into(),
            kind: "ended".into(),
            session_id: Uuid::nil(),
            payload: payload.into(),
            created_at_ms: 7,
        }
    }

    #[test]
    fn one_staged_row_per_notice_naming_its_receivers_and_back() {
        let drafts = [
            draft("s/ended", "a", "{}"),
            draft("s/ended", "b \"quoted\"", "{}"),
            draft("s/ocsf/end", "siem", "[1]"),
        ];
        let staged = stage(&drafts);
        let rows: Vec<_> = staged
            .iter()
            .map(|n| (n.draft.event_key.as_str(), n.receivers.as_str(), n.count))
            .collect();
        assert_eq!(
            rows,
            [
                ("s/ended", r#"["a","b \"quoted\""]"#, 2),
                ("s/ocsf/end", r#"["siem"]"#, 1)
            ]
        );
        let back = fan_out(
            staged
                .iter()
                .map(|n| StagedRow {
                    event_key: n.draft.event_key.clone(),
                    kind: n.draft.kind.clone(),
                    session_id: n.draft.session_id,
                    receivers: n.receivers.clone(),
                    payload: n.draft.payload.clone(),
                    created_at_ms: n.draft.created_at_ms,
                })
                .collect(),
        );
        let strip = |d: &OutboxDraft| OutboxDraft {
            id: Uuid::nil(),
            ..d.clone()
        };
        assert_eq!(
            back.iter().map(strip).collect::<Vec<_>>(),
            drafts.iter().map(strip).collect::<Vec<_>>()
        );
    }

    #[test]
    fn an_unreadable_receivers_list_becomes_one_row_that_names_it() {
        let row = StagedRow {
            event_key: "k".into(),
            kind: "ended".into(),
            session_id: Uuid::nil(),
            receivers: "not a list".into(),
            payload: "{}".into(),
            created_at_ms: 1,
        };
        let drafts = row.drafts();
        assert_eq!(drafts.len(), 1);
        assert_eq!(drafts[0].receiver, "not a list");
    }
}
