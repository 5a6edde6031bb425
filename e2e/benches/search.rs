//! The recording search's cost, on SQLite and on PostgreSQL (`BENCH_ONLY=sqlite` or
//! `postgres` for one), at 100 / 300 / 1,000 ended recordings of about 200 KB each:
//!
//! - `search-index-ENGINE`: what the index takes in the database (its tables and indexes, as
//!   the store reports them: SQLite's `dbstat` pages, PostgreSQL's `pg_total_relation_size`)
//!   against the casts it was read from. Target: at most 0.5x (DESIGN.md section 13).
//! - `search-query-ENGINE`: p99 of `GET /recordings/search` through a running server, over a
//!   mix of what reviewers ask (a command found in one recording, a command in every one, a
//!   word on most screens, a word's beginning, two words, a word found nowhere), against the
//!   same server with nothing indexed; rounds interleaved. Target: at most 100 ms.
//!
//! The recordings are made here, as a debug shell's would be (OSC 133 prompts, commands typed a
//! key at a time with their markers, colored listings, process tables, environments, logs
//! written a line at a time with timestamps, order ids and trace hashes, one command found in
//! that recording only),
//! stored in the server's recording store and their sessions seeded as ended through the
//! store's bulk insert; the server's own indexer reads them (its throughput is printed).
#![allow(clippy::unwrap_used)]

#[path = "common/request.rs"]
mod request;

use std::time::{Duration, Instant};

use breakglass_e2e::bench::{self, Dist, Figure, Target};
use breakglass_e2e::server::ServerProcess;
use breakglass_server::recording::{CastBody, LocalStore, RecordingStore};
use breakglass_server::store::EventDraft;
use breakglass_shared::recording::{Code, Event, Header};
use breakglass_shared::session::{Progress, RecordingRef};
use breakglass_shared::{Actor, PermissionSet, Session, SessionEvent, Tier};
use request::request;
use time::OffsetDateTime;
use uuid::Uuid;

/// Bytes of cast per recording.
fn cast_size() -> usize {
    if bench::short() {
        20_000
    } else {
        200_000
    }
}

const CONFIG: &str = r#"
sweep_interval_seconds = 1
approval_expiry_minutes = 60

[dev_login]
enabled = true

[recording]
local_dir = "LOCAL_DIR"

[[environments]]
name = "ground"
tier = "ground"
[environments.permissions]
"tower.breakglass.request" = { groups = ["engineers", "sre", "admins"] }
"tower.breakglass.approve" = { groups = ["sre", "admins"] }
"#;

#[tokio::main]
async fn main() {
    let sizes = bench::sizes(&[100, 300, 1_000], &[10, 30]);
    let rounds = if bench::short() { 5 } else { 40 };
    let largest = *sizes.iter().max().unwrap();
    for engine in ["sqlite", "postgres"] {
        if !bench::part(engine) {
            continue;
        }
        for &n in &sizes {
            let mut empty = Rig::new(engine, 0).await;
            let mut full = Rig::new(engine, n).await;
            for r in 0..rounds {
                if r % 2 == 0 {
                    empty.round(n).await;
                    full.round(n).await;
                } else {
                    full.round(n).await;
                    empty.round(n).await;
                }
            }
            let stats = full.stats().await;
            let mb = |b: i64| b as f64 / 1e6;
            let mut size = Figure::new(
                &format!("search-index-{engine}"),
                "total",
                "MB",
                mb(stats.cast_bytes),
                mb(stats.index_bytes),
            )
            .size(format!("recordings={n}"))
            .baseline_is("the casts the index was read from");
            let base = Dist::from_durations(&empty.took);
            let value = Dist::from_durations(&full.took);
            let mut query = Figure::new(
                &format!("search-query-{engine}"),
                "p99",
                "ms",
                base.p(0.99),
                value.p(0.99),
            )
            .size(format!("recordings={n}"))
            .baseline_is("the same server with nothing indexed, rounds interleaved");
            if n == largest {
                size = size.target(Target::RatioAtMost(0.5));
                query = query.target(Target::AtMost(100.0));
            }
            bench::report(&size);
            bench::report(&query);
            println!(
                "  {engine} {n}: indexed {:.1} MB of casts in {:.1} s ({:.1} MB/s, from the \
                 server's start); index {:.1} MB ({:.0} KB a recording); query p50 {:.1} ms \
                 (empty {:.1}), slowest query's p99: {} {:.1} ms; {} sessions found a round",
                mb(stats.cast_bytes),
                full.indexing.as_secs_f64(),
                mb(stats.cast_bytes) / full.indexing.as_secs_f64().max(1e-9),
                mb(stats.index_bytes),
                stats.index_bytes as f64 / 1e3 / n as f64,
                value.p(0.5),
                base.p(0.5),
                full.slowest().0,
                full.slowest().1,
                full.found,
            );
            println!(
                "  {engine} {n}: where the index's bytes are: {}",
                full.breakdown().await
            );
            full.finish().await;
            empty.finish().await;
        }
    }
}

/// The queries of a round: what a reviewer asks, by name (`{k}` is a recording's number).
const QUERIES: [(&str, &str); 6] = [
    ("one-recording", "incident-{k}"),
    ("command-everywhere", "kubectl get pods"),
    ("common-word", "running"),
    ("word-beginning", "orde"),
    ("two-words", "state paid"),
    ("nowhere", "zyxwvutsrq"),
];

/// A database with `n` ended recordings indexed, a server on it, and the queries' times.
struct Rig {
    url: String,
    _dir: tempfile::TempDir,
    server: ServerProcess,
    http: reqwest::Client,
    cookie: String,
    store: std::sync::Arc<dyn breakglass_server::store::Store>,
    /// From the server's start until nothing waited for the index.
    indexing: Duration,
    took: Vec<Duration>,
    each: Vec<Vec<Duration>>,
    found: usize,
}

impl Rig {
    async fn new(engine: &str, n: usize) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let url = match engine {
            "sqlite" => format!("sqlite://{}/bench.db", dir.path().display()),
            _ => breakglass_e2e::postgres::fresh_database().await.unwrap(),
        };
        let recordings = dir.path().join("recordings");
        let store = breakglass_server::store::connect(&url).await.unwrap();
        seed(store.as_ref(), &LocalStore::new(&recordings), n).await;
        let cfg = dir.path().join("server.toml");
        std::fs::write(
            &cfg,
            CONFIG.replace("LOCAL_DIR", &recordings.display().to_string()),
        )
        .unwrap();
        let started = Instant::now();
        let server = ServerProcess::start(
            &cfg,
            &dir.path().join("data"),
            &[
                ("BREAKGLASS_DATABASE_URL", &url),
                ("BREAKGLASS_NO_CLUSTERS", "true"),
            ],
        )
        .await
        .unwrap();
        while store.pending_count().await.unwrap() > 0 {
            assert!(
                started.elapsed() < Duration::from_secs(1800),
                "the index did not catch up\n{}",
                server.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let indexing = started.elapsed();
        let api = server.login("bob").await.unwrap();
        let rig = Rig {
            url,
            _dir: dir,
            cookie: api.cookie_header(),
            http: reqwest::Client::new(),
            server,
            store,
            indexing,
            took: Vec::new(),
            each: vec![Vec::new(); QUERIES.len()],
            found: 0,
        };
        // Unmeasured: connections opened, the database's caches warm.
        for (_, q) in QUERIES {
            rig.ask(&q.replace("{k}", "0")).await;
        }
        rig
    }

    /// Asks `q`; how long until its last byte, and how many sessions it found.
    async fn ask(&self, q: &str) -> (Duration, usize) {
        let t = Instant::now();
        let body = self
            .http
            .get(format!(
                "{}/api/breakglass/recordings/search",
                self.server.url
            ))
            .query(&[("q", q)])
            .header("cookie", &self.cookie)
            .send()
            .await
            .unwrap()
            .error_for_status()
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let took = t.elapsed();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        (took, v["sessions"].as_array().map_or(0, Vec::len))
    }

    async fn round(&mut self, n: usize) {
        self.found = 0;
        for (i, (_, q)) in QUERIES.iter().enumerate() {
            let q = q.replace("{k}", &(self.took.len() % n.max(1)).to_string());
            let (took, found) = self.ask(&q).await;
            self.took.push(took);
            self.each[i].push(took);
            self.found += found;
        }
    }

    fn slowest(&self) -> (&'static str, f64) {
        QUERIES
            .iter()
            .zip(&self.each)
            .map(|((name, _), d)| (*name, Dist::from_durations(d).p(0.99)))
            .fold(("", 0.0), |a, b| if b.1 > a.1 { b } else { a })
    }

    /// The index's bytes by table and index, and the chunks' own columns.
    async fn breakdown(&self) -> String {
        let mut parts: Vec<(String, i64)> = if self.url.starts_with("sqlite") {
            let pool = sqlx::SqlitePool::connect(&self.url).await.unwrap();
            let rows = sqlx::query_as(
                "SELECT name, SUM(pgsize) FROM dbstat WHERE name LIKE '%recording_words%' \
                 OR name LIKE '%recording_chunks%' GROUP BY name",
            )
            .fetch_all(&pool)
            .await
            .unwrap();
            pool.close().await;
            rows
        } else {
            let pool = sqlx::PgPool::connect(&self.url).await.unwrap();
            let rows = sqlx::query_as(
                "SELECT 'heap', pg_relation_size('breakglass_recording_chunks') UNION ALL \
                 SELECT 'toast', pg_table_size('breakglass_recording_chunks') \
                   - pg_relation_size('breakglass_recording_chunks') UNION ALL \
                 SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) \
                   FROM pg_index WHERE indrelid = 'breakglass_recording_chunks'::regclass",
            )
            .fetch_all(&pool)
            .await
            .unwrap();
            pool.close().await;
            rows
        };
        let columns: (i64, i64, i64) = self.column_bytes().await;
        parts.push(("(text)".into(), columns.0));
        parts.push(("(moments)".into(), columns.1));
        parts.push(("(words)".into(), columns.2));
        parts
            .iter()
            .map(|(name, b)| format!("{name} {:.2} MB", *b as f64 / 1e6))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The bytes of the chunks' compressed text, moments and words (as stored).
    async fn column_bytes(&self) -> (i64, i64, i64) {
        let sql_sqlite = "SELECT SUM(length(body)), SUM(length(lines_ms)), 0 \
                          FROM breakglass_recording_chunks";
        let sql_pg = "SELECT SUM(length(body))::BIGINT, SUM(length(lines_ms))::BIGINT, \
                      SUM(pg_column_size(words))::BIGINT FROM breakglass_recording_chunks";
        if self.url.starts_with("sqlite") {
            let pool = sqlx::SqlitePool::connect(&self.url).await.unwrap();
            let r = sqlx::query_as(sql_sqlite).fetch_one(&pool).await.unwrap();
            pool.close().await;
            r
        } else {
            let pool = sqlx::PgPool::connect(&self.url).await.unwrap();
            let r = sqlx::query_as(sql_pg).fetch_one(&pool).await.unwrap();
            pool.close().await;
            r
        }
    }

    async fn stats(&self) -> breakglass_server::store::IndexStats {
        self.store.index_stats().await.unwrap()
    }

    async fn finish(self) {
        let Rig {
            mut server,
            store,
            url,
            ..
        } = self;
        server.kill().await.unwrap();
        drop(store);
        if url.starts_with("postgres") {
            breakglass_e2e::postgres::drop_database(&url).await.unwrap();
        }
    }
}

/// Stores `n` recordings and their sessions, ended, through the bulk insert.
async fn seed(store: &dyn breakglass_server::store::Store, recordings: &LocalStore, n: usize) {
    let now = OffsetDateTime::now_utc();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut batch = Vec::with_capacity(n);
    for i in 0..n {
        let s = Session::new_request(
            Uuid::now_v7(),
            request(i, "ground", Tier::Ground, format!("person{}", i % 40)),
            now - time::Duration::minutes((n - i) as i64 + 60),
        );
        let key = format!("sessions/{}.cast", s.id);
        let stored = recordings
            .put_version(&key, CastBody::new(cast(i, &mut rng)))
            .await
            .unwrap();
        batch.push(ended(s, stored.to_ref(&key), now));
    }
    for part in batch.chunks(200) {
        store.insert_many(part).await.unwrap();
    }
}

/// The history of a session that ran with recording `r` and ended.
fn ended(first: Session, r: RecordingRef, now: OffsetDateTime) -> Vec<(Session, EventDraft)> {
    let by = Actor::User {
        name: first.requester.clone(),
        permissions: PermissionSet::ALL,
    };
    let draft = |kind: &str| EventDraft {
        actor: first.requester.clone(),
        kind: kind.into(),
        detail: None,
        at: now,
        notices: Vec::new(),
    };
    let mut h = vec![(first.clone(), draft("create"))];
    for e in [
        SessionEvent::BeginActivation,
        SessionEvent::Progress(Progress::RecordingStored(r)),
        SessionEvent::Activated,
        SessionEvent::End { by, recycle: false },
        SessionEvent::CleanupDone,
    ] {
        let next = h.last().unwrap().0.apply(&e, now).unwrap();
        h.push((next, draft("change")));
    }
    h
}

fn next(rng: &mut u64) -> u64 {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    *rng
}

/// Recording `i`: a debug shell's session of about [`cast_size`] bytes.
fn cast(i: usize, rng: &mut u64) -> Vec<u8> {
    let header = Header {
        version: 2,
        width: 120,
        height: 30,
        timestamp: None,
        title: None,
    };
    let mut out = header.to_line();
    let mut t = 0.0f64;
    let push = |out: &mut String, t: f64, code: Code, data: String| {
        out.push_str(
            &Event {
                time: t,
                code,
                data,
            }
            .to_line(),
        );
    };
    let mut k = 0usize;
    while out.len() < cast_size() {
        let cmd = match (k, next(rng) % 6) {
            (3, _) => format!("grep -rn incident-{i} /etc/app"),
            (_, 0) => "kubectl get pods -n payments".to_string(),
            (_, 1) => "tail -n 40 /var/log/app/orders.log".to_string(),
            (_, 2) => "ps aux".to_string(),
            (_, 3) => "env | sort".to_string(),
            (_, 4) => "ls -la --color /app".to_string(),
            _ => "curl -s localhost:8080/healthz".to_string(),
        };
        k += 1;
        t += 1.0 + (next(rng) % 4000) as f64 / 1000.0;
        push(
            &mut out,
            t,
            Code::Output,
            "\x1b]133;A\x07debug $ \x1b]133;B\x07".into(),
        );
        // Typed: each key's echo is an event of its own, as the relay records it.
        for c in cmd.chars() {
            t += 0.05 + (next(rng) % 150) as f64 / 1000.0;
            push(&mut out, t, Code::Output, c.to_string());
        }
        t += 0.2;
        push(&mut out, t, Code::Marker, format!("$ {cmd}"));
        // A log is written a line at a time (an event each); the rest at once.
        let per_line = cmd.starts_with("tail");
        let mut lines = String::from("\r\n");
        let count = 10 + next(rng) % 30;
        for _ in 0..count {
            let h = next(rng);
            let line = match cmd.as_bytes()[0] {
                b'k' => format!(
                    "orders-worker-{:05x}-{:05x}   1/1   \x1b[32mRunning\x1b[0m   {}   {}h",
                    h & 0xfffff,
                    (h >> 20) & 0xfffff,
                    h % 5,
                    h % 90
                ),
                b't' => format!(
                    "2026-12-0{}T{:02}:{:02}:{:02}.{:03}Z INFO order {} state=paid amount={}.{:02} trace={:016x}",
                    1 + h % 6,
                    h % 24,
                    (h >> 5) % 60,
                    (h >> 11) % 60,
                    (h >> 17) % 1000,
                    h % 1_000_000,
                    h % 500,
                    h % 100,
                    h
                ),
                b'p' => format!(
                    "app      {:5}  {}.{}  1.{}  {:6} {:5} ?  Ss   09:{:02}   0:{:02} /app/bin/orders --port 8080",
                    h % 30000,
                    h % 9,
                    h % 10,
                    h % 10,
                    h % 900000,
                    h % 90000,
                    h % 60,
                    h % 60
                ),
                b'e' => format!("ORDERS_SETTING_{}=value-{:x}", h % 200, h % 0xffff),
                b'l' => format!(
                    "-rw-r--r-- 1 app app {:6} Dec  {} 0{}:{:02} \x1b[01;34mfile-{:x}.json\x1b[0m",
                    h % 100000,
                    1 + h % 6,
                    h % 10,
                    h % 60,
                    h % 0xfffff
                ),
                b'g' => format!("/etc/app/incidents.yaml:{}: incident-{i} runbook step {}", h % 300, h % 9),
                _ => format!("{{\"status\":\"ok\",\"uptime\":{},\"checks\":{{\"db\":\"ok\"}}}}", h % 100000),
            };
            lines.push_str(&line);
            lines.push_str("\r\n");
            if per_line {
                t += 0.01;
                push(&mut out, t, Code::Output, std::mem::take(&mut lines));
            }
        }
        t += 0.05;
        if !lines.is_empty() {
            push(&mut out, t, Code::Output, lines);
        }
    }
    out.into_bytes()
}
