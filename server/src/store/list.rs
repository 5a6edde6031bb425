//! The list query: one filter, the SQL both backends run for it. Most of this module is
//! about plans, not results: each filter is written so the engine takes the index that gives a
//! page of that filter newest first, without statistics (SQLite gathers none) and without
//! estimating expressions it cannot (PostgreSQL); `BENCHMARKS.md` has the plans and times
//! behind each choice.

use breakglass_shared::SessionState;
use time::OffsetDateTime;
use uuid::Uuid;

/// What to list. Results come newest first.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Only this environment.
    pub environment: Option<String>,
    /// Only this state.
    pub state: Option<SessionState>,
    /// Only this requester.
    pub requester: Option<String>,
    /// Only these environments (visibility); `None` means all.
    pub environments_in: Option<Vec<String>>,
    /// Exclude this requester (for "awaiting my approval").
    pub requester_not: Option<String>,
    /// Only sessions in [`SessionState::IN_PROGRESS`].
    pub in_progress: bool,
    /// Only glass-broken sessions finished without a review ([`Session::review_due`]).
    pub review_due: bool,
    /// Only sessions this person decided.
    pub approver: Option<String>,
    /// Only requests made at or before this time (approval deadlines).
    pub created_by: Option<OffsetDateTime>,
    /// Only sessions whose time box ends at or before this time (TTL ends).
    pub expires_by: Option<OffsetDateTime>,
    /// Only sessions finished after this time whose recording hash is not anchored yet.
    pub unanchored_since: Option<OffsetDateTime>,
    /// Only sessions finished after this time whose row names a recording segment rather
    /// than the final recording (their end could not store it).
    pub final_missing_since: Option<OffsetDateTime>,
    /// Only ids older than this one (paging).
    pub before: Option<Uuid>,
    /// Page size.
    pub limit: u32,
}

/// Defines, for backend `$db`, `list_query(filter, around)`: the `SELECT` of a [`ListFilter`],
/// or `None` when the filter can match nothing (no environment visible).
macro_rules! list_query {
    ($db:ty) => {
        /// `AND <column> IN (...)` of `values`, bound; `column` may be an expression of one.
        fn push_in<'a, 'v: 'a>(
            q: &mut QueryBuilder<'a, $db>,
            column: &str,
            values: impl IntoIterator<Item = &'v str>,
        ) {
            q.push(" AND ").push(column).push(" IN (");
            let mut sep = q.separated(", ");
            for v in values {
                sep.push_bind(v);
            }
            q.push(")");
        }

        /// The wire names of `states`.
        fn names(states: &[SessionState]) -> impl Iterator<Item = &'static str> + '_ {
            states.iter().map(|s| s.as_str())
        }

        /// `around` is the backend's frame of the page's query ([`Store::list`] on each
        /// engine): SQL before it, and after.
        fn list_query<'a>(
            f: &'a ListFilter,
            around: (&str, &str),
        ) -> Option<QueryBuilder<'a, $db>> {
            if f.environments_in.as_ref().is_some_and(|v| v.is_empty()) {
                return None;
            }
            let mut q: QueryBuilder<'_, $db> = QueryBuilder::new(format!(
                "{}SELECT * FROM breakglass_sessions WHERE 1 = 1",
                around.0
            ));
            // The filters that find few rows in any table (sessions in progress, reviews
            // due) lead the plan: the environment is then matched by an expression no
            // index serves. Given an environment index that yields ids newest first,
            // SQLite, which keeps no statistics, walked every row of the environment for
            // them (100,000 sessions: 35 ms in progress, 207 ms reviews due) rather than
            // take the handful from the state index or the partial index and sort them.
            let environment = if f.in_progress || f.review_due {
                " AND environment || '' = "
            } else {
                " AND environment = "
            };
            if let Some(e) = &f.environment {
                q.push(environment).push_bind(e.as_str());
            }
            if let Some(s) = f.state {
                q.push(" AND state = ").push_bind(s.as_str());
            }
            if let Some(r) = &f.requester {
                q.push(" AND requester = ").push_bind(r.as_str());
            }
            if let Some(r) = &f.requester_not {
                q.push(" AND requester <> ").push_bind(r.as_str());
            }
            if f.in_progress {
                push_in(&mut q, "state", names(&SessionState::IN_PROGRESS));
            }
            // The terms of the partial index of migration 0006, which holds only the due
            // sessions, so the page is read from it whatever the table's size; the states
            // by an expression, or the state index (every ended session) is taken instead.
            if f.review_due {
                q.push(" AND glass_broken_by IS NOT NULL AND review_at IS NULL");
                push_in(&mut q, "state || ''", names(&SessionState::REVIEWABLE));
            }
            if let Some(a) = &f.approver {
                q.push(" AND approver = ").push_bind(a.as_str());
            }
            // One environment asked for: visibility is then a yes or no, decided here, so
            // the query names that environment alone and its combined indexes give the
            // page. The visibility expression below beside it made PostgreSQL, which cannot
            // estimate it, take every row of the combination and sort them (a requester's
            // 6,666 of 100,000: 9.7 ms, against 0.2 ms without it).
            let visible = match (&f.environment, f.environments_in.as_deref()) {
                (Some(e), Some(v)) if !v.contains(e) => return None,
                (Some(_), _) => None,
                (None, v) => v,
            };
            // Several visible environments are matched by an expression no index serves:
            // an environment index cannot give them newest first, and a planner without
            // statistics (SQLite gathers none itself) would sort every visible row (100,000:
            // 19 ms on SQLite, 200 ms on PostgreSQL) instead of walking the ids backwards.
            match visible {
                Some([one]) => {
                    q.push(environment).push_bind(one.as_str());
                }
                Some(envs) => push_in(&mut q, "environment || ''", envs.iter().map(String::as_str)),
                None => {}
            }
            // Times are bound in UTC, as every stored time is: SQLite compares them as text,
            // and the same instant written with another offset would compare as another.
            if let Some(t) = f.created_by {
                q.push(" AND created_at <= ")
                    .push_bind($crate::store::list::utc(t));
            }
            if let Some(t) = f.expires_by {
                q.push(" AND expires_at <= ")
                    .push_bind($crate::store::list::utc(t));
            }
            if let Some(t) = f.unanchored_since {
                q.push(" AND recording_key IS NOT NULL AND rekor_uuid IS NULL AND finished_at > ")
                    .push_bind($crate::store::list::utc(t));
            }
            if let Some(t) = f.final_missing_since {
                q.push(" AND recording_key LIKE '%/segment-%' AND finished_at > ")
                    .push_bind($crate::store::list::utc(t));
            }
            if let Some(b) = f.before {
                q.push(" AND id < ").push_bind(b);
            }
            q.push(" ORDER BY id DESC LIMIT ")
                .push_bind(i64::from(f.limit));
            q.push(around.1);
            Some(q)
        }
    };
}

pub(crate) use list_query;

/// `t` in UTC, the offset every stored time has.
pub(crate) fn utc(t: OffsetDateTime) -> OffsetDateTime {
    t.to_offset(time::UtcOffset::UTC)
}
