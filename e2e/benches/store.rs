//! List and get through the HTTP API of a running server with 10,000 / 100,000 / 1,000,000
//! sessions stored, against the same server on an empty store (DESIGN.md section 13: p99 at
//! most 10 ms and 2x at the largest), on SQLite and on PostgreSQL (`BENCH_ONLY=sqlite` or
//! `postgres` for one). The SQLite file's size per session is printed with the seeding.
//!
//! The lists are the ones the web app asks for (`frontend/src`), with its page sizes: the
//! approval queue, the sessions in progress, the reviews due, the home page's own cards, an
//! environment's history (unfiltered, by a common state, by a rare one, by requester) and the
//! pod page's "mine here". Each round asks every one once, in turn; the figure is the p99 over
//! all of them, and the slowest list's own p99 is printed beside it, so a missing index shows
//! by name, with the rows and bytes the lists returned.
//!
//! The rows are seeded with the store's own bulk insert (`Store::insert_many`: the column
//! binders, checks and triggers of every insert, in one transaction), from sessions driven to
//! their states by the shared state machine, before the server starts on the database.
#![allow(clippy::unwrap_used)]

#[path = "common/history.rs"]
mod history;
#[path = "common/request.rs"]
mod request;

use std::time::{Duration, Instant};

use breakglass_e2e::bench::{self, Dist, Figure, Target};
use breakglass_e2e::server::ServerProcess;
use breakglass_shared::api::SessionPage;
use history::{seed, CONFIG};
use uuid::Uuid;

#[tokio::main]
async fn main() {
    let sizes = bench::sizes(&[10_000, 100_000, 1_000_000], &[200, 2_000]);
    let rounds = if bench::short() { 30 } else { 100 };
    let largest = *sizes.iter().max().unwrap();
    for engine in ["sqlite", "postgres"] {
        if !bench::part(engine) {
            continue;
        }
        for &n in &sizes {
            // The empty store beside the full one, their rounds interleaved (each first in
            // turn), so both meet the same moments of the machine: a burst of another
            // process's work lands in both distributions, not in one of them.
            let mut empty = Rig::new(engine, 0).await;
            let mut full = Rig::new(engine, n).await;
            for r in 0..rounds {
                if r % 2 == 0 {
                    empty.round().await;
                    full.round().await;
                } else {
                    full.round().await;
                    empty.round().await;
                }
            }
            let empty = empty.finish().await;
            let m = full.finish().await;
            for (what, base, value) in [("list", &empty.list, &m.list), ("get", &empty.get, &m.get)]
            {
                let mut fig = Figure::new(
                    &format!("store-{what}-{engine}"),
                    "p99",
                    "ms",
                    base.p(0.99),
                    value.p(0.99),
                )
                .size(format!("sessions={n}"))
                .baseline_is("the same server on an empty store, rounds interleaved");
                if n == largest {
                    fig = fig.target(Target::AtMostAndRatio {
                        abs: 10.0,
                        ratio: 2.0,
                    });
                }
                bench::report(&fig);
            }
            println!(
                "  {engine} {n}: list p50 {:.2} ms (empty {:.2}), slowest list {} p99 {:.2} ms; \
                 get p50 {:.2} ms (empty {:.2}), of a missing id p50/p99 {:.2}/{:.2} ms (empty \
                 {:.2}/{:.2}); the lists return {} rows, {:.0} KB, a round",
                m.list.p(0.5),
                empty.list.p(0.5),
                m.slowest.0,
                m.slowest.1,
                m.get.p(0.5),
                empty.get.p(0.5),
                m.missing.p(0.5),
                m.missing.p(0.99),
                empty.missing.p(0.5),
                empty.missing.p(0.99),
                m.rows,
                m.bytes as f64 / 1000.0,
            );
        }
    }
}

struct Measured {
    list: Dist,
    get: Dist,
    /// Gets of an id not stored (what the empty store's gets all are).
    missing: Dist,
    /// The list whose own p99 is the highest, and that p99.
    slowest: (&'static str, f64),
    /// Rows and bytes the lists return in one round.
    rows: usize,
    bytes: usize,
}

/// A fresh database with `n` sessions, a server on it, the web app's lists and what each took.
struct Rig {
    engine: &'static str,
    n: usize,
    /// The database, dropped at the end when it is PostgreSQL's.
    url: String,
    /// Kept for the server's life: its configuration and SQLite file.
    _dir: tempfile::TempDir,
    server: ServerProcess,
    alice: Reader,
    bob: Reader,
    ids: Vec<Uuid>,
    each: Vec<Vec<Duration>>,
    gets: Vec<Duration>,
    /// Gets of an id that is not stored.
    missing: Vec<Duration>,
    pick: u64,
}

/// Gets a round: enough samples that the p99 is not the one slowest request.
const GETS: usize = 5;

/// Whose list, by name: the reader and the path.
type List = (&'static str, bool, &'static str);

/// The lists of `frontend/src`, with the page sizes they ask for; `true` when alice asks
/// (her own sessions), bob otherwise (sre: sees and approves everything).
const LISTS: [List; 12] = [
    // The approval queue: the title's count, the home page's strip, an environment's card.
    (
        "queue",
        false,
        "/sessions?state=PendingApproval&awaiting_me=true&limit=200",
    ),
    (
        "queue-environment",
        false,
        "/sessions?environment=flight&state=PendingApproval&limit=200",
    ),
    // In progress: the ops wall (every environment) and an environment's card.
    ("in-progress", false, "/sessions?in_progress=true&limit=200"),
    (
        "in-progress-environment",
        false,
        "/sessions?environment=ground&in_progress=true&limit=200",
    ),
    (
        "reviews-due",
        false,
        "/sessions?environment=flight&review_due=true&limit=200",
    ),
    // The home page's own cards.
    ("my-decisions", false, "/sessions?approver=bob&limit=10"),
    ("my-sessions", true, "/sessions?requester=alice&limit=10"),
    // An environment's history: its first page, filtered by a common state, by a rare one
    // (few rows or none) and by requester.
    ("history", false, "/sessions?environment=ground&limit=20"),
    (
        "history-state",
        false,
        "/sessions?environment=flight&state=Denied&limit=20",
    ),
    (
        "history-rare-state",
        false,
        "/sessions?environment=ground&state=Failed&limit=20",
    ),
    (
        "history-requester",
        false,
        "/sessions?environment=ground&requester=person7&limit=20",
    ),
    // The pod page looks for the user's unfinished session among their newest there.
    (
        "pod-mine",
        true,
        "/sessions?environment=flight&requester=alice&limit=50",
    ),
];

impl Rig {
    async fn new(engine: &'static str, n: usize) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let url = match engine {
            "sqlite" => format!("sqlite://{}/bench.db", dir.path().display()),
            _ => breakglass_e2e::postgres::fresh_database().await.unwrap(),
        };
        let ids = seed(&url, n).await;
        let cfg = dir.path().join("server.toml");
        std::fs::write(&cfg, CONFIG).unwrap();
        let server = ServerProcess::start(
            &cfg,
            &dir.path().join("data"),
            // The sessions in progress wait in `Approved` rather than fail for want of a
            // cluster.
            &[
                ("BREAKGLASS_DATABASE_URL", &url),
                ("BREAKGLASS_NO_CLUSTERS", "true"),
            ],
        )
        .await
        .unwrap();
        let alice = Reader::new(&server, "alice").await;
        let bob = Reader::new(&server, "bob").await;
        let rig = Rig {
            engine,
            n,
            url: url.clone(),
            _dir: dir,
            server,
            alice,
            bob,
            ids,
            each: vec![Vec::new(); LISTS.len()],
            gets: Vec::new(),
            missing: Vec::new(),
            pick: 0x9e37_79b9_7f4a_7c15,
        };
        // One round unmeasured: connections opened, the database's caches warm.
        for (_, mine, path) in LISTS {
            rig.reader(mine).fetch(path, 200).await;
        }
        rig
    }

    fn reader(&self, alice: bool) -> &Reader {
        if alice {
            &self.alice
        } else {
            &self.bob
        }
    }

    /// Every list once, in turn, and one get.
    async fn round(&mut self) {
        for (i, (_, mine, path)) in LISTS.iter().enumerate() {
            let took = self.reader(*mine).fetch(path, 200).await;
            self.each[i].push(took);
        }
        // The empty store's baseline asks for ids that are not there (a 404 takes the same
        // lookup); the others for stored ones, picked across the whole table, and for one that
        // is not there, the baseline's request, to tell the lookup from the answer's work.
        for _ in 0..GETS {
            self.pick = self
                .pick
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let (path, want) = match self
                .ids
                .get((self.pick >> 33) as usize % self.ids.len().max(1))
            {
                Some(id) => (format!("/sessions/{id}"), 200),
                None => (format!("/sessions/{}", Uuid::now_v7()), 404),
            };
            let took = self.bob.fetch(&path, want).await;
            self.gets.push(took);
        }
        let missing = format!("/sessions/{}", Uuid::now_v7());
        let took = self.bob.fetch(&missing, 404).await;
        self.missing.push(took);
    }

    /// The distributions, each list's printed; the rows and bytes of one more round, decoded
    /// outside any measurement; the server stopped.
    async fn finish(self) -> Measured {
        let (engine, n) = (self.engine, self.n);
        let per_list: Vec<(&str, Dist)> = LISTS
            .iter()
            .zip(&self.each)
            .map(|((name, _, _), d)| (*name, Dist::from_durations(d)))
            .collect();
        println!(
            "  {engine} {n}, each list p50/p99 ms: {}",
            per_list
                .iter()
                .map(|(name, d)| format!("{name} {:.2}/{:.2}", d.p(0.5), d.p(0.99)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let slowest = per_list
            .iter()
            .map(|(name, d)| (*name, d.p(0.99)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap();
        let mut rows = 0;
        let mut bytes = 0;
        for (_, mine, path) in LISTS {
            let (page, size) = self.reader(mine).page(path).await;
            rows += page.items.len();
            bytes += size;
        }
        let all: Vec<Duration> = self.each.iter().flatten().copied().collect();
        drop(self.server);
        if self.url.starts_with("postgres") {
            breakglass_e2e::postgres::drop_database(&self.url)
                .await
                .unwrap();
        }
        Measured {
            list: Dist::from_durations(&all),
            get: Dist::from_durations(&self.gets),
            missing: Dist::from_durations(&self.missing),
            slowest,
            rows,
            bytes,
        }
    }
}

/// A signed-in reader that takes each answer's bytes as they arrive and decodes nothing: the
/// time is the server's, up to the last byte, not this process's JSON parsing.
struct Reader {
    http: reqwest::Client,
    base: String,
    cookie: String,
}

impl Reader {
    async fn new(server: &ServerProcess, user: &str) -> Reader {
        let api = server.login(user).await.unwrap();
        Reader {
            http: reqwest::Client::new(),
            base: server.url.clone(),
            cookie: api.cookie_header(),
        }
    }

    /// GETs a list and decodes it (outside any measurement): the page and its size in bytes.
    async fn page(&self, path: &str) -> (SessionPage, usize) {
        let body = self
            .http
            .get(format!("{}/api/breakglass{path}", self.base))
            .header("cookie", &self.cookie)
            .send()
            .await
            .unwrap()
            .error_for_status()
            .unwrap()
            .bytes()
            .await
            .unwrap();
        (serde_json::from_slice(&body).unwrap(), body.len())
    }

    /// GETs an API path, expecting status `want`; how long until its last byte.
    async fn fetch(&self, path: &str, want: u16) -> Duration {
        let t = Instant::now();
        let r = self
            .http
            .get(format!("{}/api/breakglass{path}", self.base))
            .header("cookie", &self.cookie)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let body = r.bytes().await.unwrap();
        let took = t.elapsed();
        assert_eq!(status, want, "{path}: {}", String::from_utf8_lossy(&body));
        took
    }
}
