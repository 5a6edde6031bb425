//! The sessions the store benches seed: a history of `n` sessions as years of use leave it
//! (`history`), stored through the store's bulk insert and settled (`seed`), and the
//! configuration of their two environments (`CONFIG`). `store.rs` reads them through a server,
//! `sweep.rs` sweeps them; both store the same rows.
#![allow(dead_code)]

use std::time::Instant;

use breakglass_server::store::EventDraft;
use breakglass_shared::session::{Verdict, REVIEW_WITHIN};
use breakglass_shared::{Actor, PermissionSet, Session, SessionEvent, SessionState, Tier};
use time::OffsetDateTime;
use uuid::Uuid;

use super::request::request;

/// Requesters besides alice, so a requester filter selects a small share of the rows.
const PEOPLE: usize = 50;

/// Stores `n` sessions through the store's bulk insert; their ids.
pub async fn seed(url: &str, n: usize) -> Vec<Uuid> {
    let t = Instant::now();
    let store = breakglass_server::store::connect(url).await.unwrap();
    let now = OffsetDateTime::now_utc();
    let batch: Vec<Vec<(Session, EventDraft)>> = (0..n).map(|i| history(i, n, now)).collect();
    store.insert_many(&batch).await.unwrap();
    let (rows, events) = store.counts().await.unwrap();
    assert_eq!(rows as usize, n);
    assert_eq!(events as usize, batch.iter().map(Vec::len).sum::<usize>());
    settle(url).await;
    if n > 0 {
        println!(
            "  seeded {n} sessions in {:.1} s (settled){}",
            t.elapsed().as_secs_f64(),
            file_size(url).map_or(String::new(), |b| format!(
                "; the SQLite file and its log: {:.1} MB, {:.0} bytes a session",
                b as f64 / 1e6,
                b as f64 / n as f64
            )),
        );
    }
    batch
        .iter()
        .filter_map(|h| h.first())
        .map(|(s, _)| s.id)
        .collect()
}

/// Leaves the database as years of use would: a store that grew a row at a time has been
/// vacuumed and analysed by PostgreSQL's autovacuum all along, where one bulk insert leaves
/// both to run under the measurement (a 1,000,000-row insert's autovacuum and analyse were
/// the tail of the lists' p99). SQLite keeps no statistics unless asked and has no background
/// work: nothing to do.
async fn settle(url: &str) {
    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        sqlx::query("VACUUM (ANALYZE)")
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
    }
}

/// The bytes of a SQLite database at `url`, with its write-ahead log (`None` for PostgreSQL).
fn file_size(url: &str) -> Option<u64> {
    let path = url.strip_prefix("sqlite://")?;
    let len = |p: String| std::fs::metadata(p).map_or(0, |m| m.len());
    Some(len(path.to_string()) + len(format!("{path}-wal")))
}

/// The newest sessions of every store are live, whatever its size: what waits or runs at a
/// moment is bounded by the approval deadline and the time boxes, not by the history kept.
pub const LIVE: usize = 12;

/// The history of session `i` of `n`: requested over the past months by one of many people,
/// in both tiers, ended in the ways sessions end (withdrawn, denied, expired, and one in 5,000
/// broken glass that failed and is still due a review); the newest [`LIVE`] wait for approval
/// (Flight) or are in progress (Ground, parked without a cluster), made a moment ago so the
/// sweep leaves them alone while the bench runs.
pub fn history(i: usize, n: usize, now: OffsetDateTime) -> Vec<(Session, EventDraft)> {
    let flight = !i.is_multiple_of(3);
    let requester = if i.is_multiple_of(10) {
        "alice".to_string()
    } else {
        format!("person{}", i % PEOPLE)
    };
    let live = i + LIVE >= n;
    let created = if live {
        now
    } else {
        now - time::Duration::minutes((n - i) as i64 + 120)
    };
    let new = if flight {
        request(i, "flight", Tier::Flight, requester.clone())
    } else {
        request(i, "ground", Tier::Ground, requester.clone())
    };
    let s = Session::new_request(Uuid::now_v7(), new, created);
    let person = |name: &str, self_approve: bool| Actor::User {
        name: name.into(),
        permissions: PermissionSet {
            request: true,
            approve: true,
            terminate: true,
            self_approve,
            audit: false,
        },
    };
    let events = match (flight, i % 4) {
        _ if live => vec![],
        (true, _) if i % 5000 == 5 => vec![
            SessionEvent::BreakGlass {
                by: person(&requester, true),
            },
            SessionEvent::BeginActivation,
            SessionEvent::ActivationFailed {
                error: "pod is gone".into(),
            },
        ],
        (true, 0) => vec![SessionEvent::Expire],
        (true, _) => vec![SessionEvent::Deny {
            by: person("bob", false),
            reason: "use the runbook first".into(),
        }],
        (false, _) => vec![SessionEvent::End {
            by: person(&requester, false),
            recycle: false,
        }],
    };
    let created_ev = EventDraft {
        actor: requester,
        kind: "create".into(),
        detail: None,
        at: created,
        notices: Vec::new(),
    };
    let mut h = vec![(s, created_ev)];
    for (k, e) in events.iter().enumerate() {
        let at = created + time::Duration::minutes(5 + k as i64);
        let next = h[h.len() - 1].0.apply(e, at).unwrap();
        let ev = EventDraft {
            actor: e.actor().name().into(),
            kind: e.kind().into(),
            detail: e.detail(),
            at,
            notices: Vec::new(),
        };
        h.push((next, ev));
    }
    // Reviews are done within their week: glass broken longer ago than that was reviewed, so
    // what is due at a moment is bounded by the review deadline like what is live, not by the
    // history kept (before, one in 5,000 of all sessions stayed due: the reviews-due list
    // returned 13 rows at 100,000 sessions and 133 at 1,000,000, and its answer, not its
    // lookup, was what grew).
    let ended_ago = time::Duration::minutes((n - i) as i64 + 120);
    if h[h.len() - 1].0.review_due() && ended_ago > REVIEW_WITHIN {
        let at = created + time::Duration::days(1);
        let next = h[h.len() - 1]
            .0
            .review("carol", &PermissionSet::ALL, Verdict::Ok, "checked", at)
            .unwrap();
        let ev = EventDraft {
            actor: "carol".into(),
            kind: "review".into(),
            detail: Some("ok: checked".into()),
            at,
            notices: Vec::new(),
        };
        h.push((next, ev));
    }
    let last = &h[h.len() - 1].0;
    let want = match (live, flight) {
        (true, true) => last.state == SessionState::PendingApproval,
        (true, false) => last.state.is_in_progress(),
        (false, _) => last.state.is_final(),
    };
    assert!(want, "session {i}: {:?}", last.state);
    h
}

/// Two environments without clusters (nothing here activates), the demo users; the sweep runs
/// but finds nothing due.
pub const CONFIG: &str = r#"
sweep_interval_seconds = 5
approval_expiry_minutes = 60

[dev_login]
enabled = true

[[environments]]
name = "ground"
tier = "ground"
[environments.permissions]
"tower.breakglass.request" = { groups = ["engineers", "sre", "admins"] }
"tower.breakglass.approve" = { groups = ["sre", "admins"] }

[[environments]]
name = "flight"
tier = "flight"
[environments.permissions]
"tower.breakglass.request" = { groups = ["engineers", "sre", "admins"] }
"tower.breakglass.approve" = { groups = ["sre", "admins"] }
"#;
