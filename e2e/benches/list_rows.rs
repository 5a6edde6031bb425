//! Where a page of 201 sessions spends its time, inside one process, on both engines: the
//! store's list (`Store::list`) of a full page against one of an environment with no rows,
//! the JSON encoding of the page, and sqlx's own fetch of the rows without decoding them
//! (`SELECT *`, one column, one row). Not part of `scripts/bench.sh`: it takes apart the
//! per-row cost behind the store figures (BENCHMARKS.md, store fixes 7 and 8), and
//! `perf record -g` on it gives the profile those fixes cite.
#![allow(clippy::unwrap_used)]

#[path = "common/request.rs"]
mod request;

use std::time::Instant;

use breakglass_server::store::{EventDraft, ListFilter};
use breakglass_shared::{Session, Tier};
use request::request;
use time::OffsetDateTime;
use uuid::Uuid;

/// Sessions stored; the page is the newest 201 of them.
const STORED: usize = 5_000;

#[tokio::main]
async fn main() {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    for engine in ["sqlite", "postgres"] {
        let dir = tempfile::tempdir().unwrap();
        let url = match engine {
            "sqlite" => format!("sqlite://{}/bench.db", dir.path().display()),
            _ => breakglass_e2e::postgres::fresh_database().await.unwrap(),
        };
        let store = breakglass_server::store::connect(&url).await.unwrap();
        let now = OffsetDateTime::now_utc();
        let batch: Vec<Vec<(Session, EventDraft)>> = (0..STORED).map(|i| history(i, now)).collect();
        store.insert_many(&batch).await.unwrap();
        let filter = |env: &str| ListFilter {
            environments_in: Some(vec![env.into(), "ground".into()]),
            environment: (env != "ground").then(|| env.to_string()),
            limit: 201,
            ..Default::default()
        };
        let (full, empty) = (filter("ground"), filter("nothing"));
        for _ in 0..30 {
            store.list(&full).await.unwrap();
        }
        let t = Instant::now();
        for _ in 0..rounds {
            assert!(store.list(&empty).await.unwrap().is_empty());
        }
        let empty_ms = ms(t, rounds);
        let t = Instant::now();
        let mut page = Vec::new();
        for _ in 0..rounds {
            page = store.list(&full).await.unwrap();
        }
        let full_ms = ms(t, rounds);
        assert_eq!(page.len(), 201);
        let t = Instant::now();
        let mut bytes = 0;
        for _ in 0..rounds {
            bytes = serde_json::to_vec(&page).unwrap().len();
        }
        let json_ms = ms(t, rounds);
        println!(
            "{engine}: Store::list of no rows {empty_ms:.3} ms, of 201 rows {full_ms:.3} ms \
             ({:.1} us a row); JSON of the page {json_ms:.3} ms ({bytes} bytes, {:.1} us a row)",
            (full_ms - empty_ms) * 1000.0 / 201.0,
            json_ms * 1000.0 / 201.0
        );
        for (what, sql) in [
            (
                "201 rows, every column",
                "SELECT * FROM breakglass_sessions ORDER BY id DESC LIMIT 201",
            ),
            (
                "201 rows, the id",
                "SELECT id FROM breakglass_sessions ORDER BY id DESC LIMIT 201",
            ),
            (
                "1 row, the id",
                "SELECT id FROM breakglass_sessions ORDER BY id DESC LIMIT 1",
            ),
        ] {
            let took = match engine {
                "sqlite" => {
                    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
                    raw(rounds, || sqlx::query(sql).fetch_all(&pool)).await
                }
                _ => {
                    let pool = sqlx::PgPool::connect(&url).await.unwrap();
                    raw(rounds, || sqlx::query(sql).fetch_all(&pool)).await
                }
            };
            println!("{engine}:   sqlx fetch, {what}, nothing decoded: {took:.3} ms");
        }
    }
}

/// Milliseconds a round since `t`.
fn ms(t: Instant, rounds: usize) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0 / rounds as f64
}

/// Milliseconds a round of `fetch`, after 30 unmeasured.
async fn raw<F, R, T>(rounds: usize, fetch: F) -> f64
where
    F: Fn() -> R,
    R: std::future::Future<Output = Result<T, sqlx::Error>>,
{
    for _ in 0..30 {
        fetch().await.unwrap();
    }
    let t = Instant::now();
    for _ in 0..rounds {
        fetch().await.unwrap();
    }
    ms(t, rounds)
}

/// Session `i`: a Ground request (approved at once) with its creation event.
fn history(i: usize, now: OffsetDateTime) -> Vec<(Session, EventDraft)> {
    let new = request(i, "ground", Tier::Ground, format!("person{}", i % 50));
    let created = EventDraft {
        actor: new.requester.clone(),
        kind: "create".into(),
        detail: None,
        at: now,
        notices: Vec::new(),
    };
    vec![(Session::new_request(Uuid::now_v7(), new, now), created)]
}
