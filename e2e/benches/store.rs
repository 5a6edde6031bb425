//! List and get through the HTTP API of a running server with 1,000 / 10,000 / 100,000
//! sessions stored, against the same server on an empty store (DESIGN.md section 13: p99 at
//! most 10 ms and 2x at 100,000), on SQLite and on PostgreSQL.
//!
//! The lists are the ones the web app asks for (`frontend/src/components`): the home page's
//! unfiltered page, an environment's card, the approval queue (`awaiting_me`), the history
//! filtered by a common state, by a rare one and by requester, and the pod page's "mine here". Each round asks every
//! one once, in turn; the figure is the p99 over all of them, and the slowest list's own p99
//! is printed beside it, so a missing index shows by name.
//!
//! The rows are seeded with the store's own bulk insert (`Store::insert_many`: the column
//! binders, checks and triggers of every insert, in one transaction), from sessions driven to
//! their states by the shared state machine, before the server starts on the database.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use breakglass_e2e::bench::{self, Dist, Figure, Target};
use breakglass_e2e::server::ServerProcess;
use breakglass_server::store::EventDraft;
use breakglass_shared::session::NewSession;
use breakglass_shared::{Actor, Mode, PermissionSet, Session, SessionEvent, SessionState, Tier};
use time::OffsetDateTime;
use uuid::Uuid;

/// Requesters besides alice, so a requester filter selects a small share of the rows.
const PEOPLE: usize = 50;

#[tokio::main]
async fn main() {
    let sizes = bench::sizes(&[1_000, 10_000, 100_000], &[200, 2_000]);
    let rounds = if bench::short() { 30 } else { 100 };
    let largest = *sizes.iter().max().unwrap();
    for engine in ["sqlite", "postgres"] {
        let empty = measure(engine, 0, rounds).await;
        for &n in &sizes {
            let m = measure(engine, n, rounds).await;
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
                .baseline_is("the same server on an empty store");
                if n == largest {
                    fig = fig.target(Target::AtMostAndRatio {
                        abs: 10.0,
                        ratio: 2.0,
                    });
                }
                bench::report(&fig);
            }
            println!(
                "  {engine} {n}: list p50 {:.2} ms, slowest list {} p99 {:.2} ms; get p50 {:.2} ms",
                m.list.p(0.5),
                m.slowest.0,
                m.slowest.1,
                m.get.p(0.5)
            );
        }
    }
}

struct Measured {
    list: Dist,
    get: Dist,
    /// The list whose own p99 is the highest, and that p99.
    slowest: (&'static str, f64),
}

/// A fresh database with `n` sessions, a server on it, `rounds` of every list and get.
async fn measure(engine: &str, n: usize, rounds: usize) -> Measured {
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
        &[("BREAKGLASS_DATABASE_URL", &url)],
    )
    .await
    .unwrap();
    let alice = Reader::new(&server, "alice").await;
    let bob = Reader::new(&server, "bob").await;
    let lists: [(&str, &Reader, String); 7] = [
        ("home", &bob, "/sessions?limit=200".into()),
        (
            "environment",
            &bob,
            "/sessions?environment=ground&limit=200".into(),
        ),
        (
            "queue",
            &bob,
            "/sessions?state=PendingApproval&awaiting_me=true&limit=200".into(),
        ),
        (
            "history-state",
            &bob,
            "/sessions?environment=flight&state=Denied&limit=20".into(),
        ),
        // A state the environment rarely holds: the filter that finds few rows or none.
        (
            "history-rare-state",
            &bob,
            "/sessions?environment=ground&state=Failed&limit=20".into(),
        ),
        (
            "history-requester",
            &bob,
            "/sessions?environment=ground&requester=person7&limit=20".into(),
        ),
        (
            "pod-mine",
            &alice,
            "/sessions?environment=flight&requester=alice&limit=50".into(),
        ),
    ];
    // One round unmeasured: connections opened, the database's caches warm.
    for (_, who, path) in &lists {
        who.fetch(path, 200).await;
    }
    let mut all = Vec::new();
    let mut each: Vec<Vec<Duration>> = vec![Vec::new(); lists.len()];
    let mut gets = Vec::new();
    let mut pick = 0x9e37_79b9_7f4a_7c15_u64;
    for _ in 0..rounds {
        for (i, (_, who, path)) in lists.iter().enumerate() {
            let took = who.fetch(path, 200).await;
            all.push(took);
            each[i].push(took);
        }
        // The empty store's baseline asks for an id that is not there (a 404 takes the same
        // lookup); the others for a stored one, picked across the whole table.
        pick = pick
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let (path, want) = match ids.get((pick >> 33) as usize % ids.len().max(1)) {
            Some(id) => (format!("/sessions/{id}"), 200),
            None => (format!("/sessions/{}", Uuid::now_v7()), 404),
        };
        gets.push(bob.fetch(&path, want).await);
    }
    let per_list: Vec<(&str, Dist)> = lists
        .iter()
        .zip(&each)
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
    Measured {
        list: Dist::from_durations(&all),
        get: Dist::from_durations(&gets),
        slowest,
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

/// Stores `n` sessions through the store's bulk insert; their ids.
async fn seed(url: &str, n: usize) -> Vec<Uuid> {
    let t = Instant::now();
    let store = breakglass_server::store::connect(url).await.unwrap();
    let now = OffsetDateTime::now_utc();
    let batch: Vec<Vec<(Session, EventDraft)>> = (0..n).map(|i| history(i, n, now)).collect();
    store.insert_many(&batch).await.unwrap();
    let (rows, events) = store.counts().await.unwrap();
    assert_eq!(rows as usize, n);
    assert_eq!(events as usize, batch.iter().map(Vec::len).sum::<usize>());
    if n > 0 {
        println!(
            "  seeded {n} sessions in {:.1} s",
            t.elapsed().as_secs_f64()
        );
    }
    batch
        .iter()
        .filter_map(|h| h.first())
        .map(|(s, _)| s.id)
        .collect()
}

/// The history of session `i` of `n`: requested over the past months by one of many people, in both tiers,
/// ended in the ways sessions end (withdrawn, denied, expired); a few still wait for approval,
/// made a moment ago so the sweep does not expire them while the bench runs.
fn history(i: usize, n: usize, now: OffsetDateTime) -> Vec<(Session, EventDraft)> {
    let flight = !i.is_multiple_of(3);
    let requester = if i.is_multiple_of(10) {
        "alice".to_string()
    } else {
        format!("person{}", i % PEOPLE)
    };
    let pending = flight && i % 500 == 1;
    let created = if pending {
        now
    } else {
        now - time::Duration::minutes((n - i) as i64 + 120)
    };
    let new = NewSession {
        environment: if flight { "flight" } else { "ground" }.into(),
        tier: if flight { Tier::Flight } else { Tier::Ground },
        namespace: "payments".into(),
        pod: format!("worker-{}", i % 97),
        target_container: None,
        mode: Mode::Live,
        reason: "investigating stuck payment worker".into(),
        ticket: None,
        duration_minutes: 30,
        recycle: false,
        requester: requester.clone(),
    };
    let s = Session::new_request(Uuid::now_v7(), new, created);
    let person = |name: &str| Actor::User {
        name: name.into(),
        permissions: PermissionSet {
            request: true,
            approve: true,
            terminate: true,
            self_approve: false,
        },
    };
    let end = match (flight, i % 4) {
        _ if pending => None,
        (true, 0) => Some(SessionEvent::Expire),
        (true, _) => Some(SessionEvent::Deny {
            by: person("bob"),
            reason: "use the runbook first".into(),
        }),
        (false, _) => Some(SessionEvent::End {
            by: person(&requester),
        }),
    };
    let created_ev = EventDraft {
        actor: requester,
        kind: "create".into(),
        detail: None,
        at: created,
    };
    let mut h = vec![(s, created_ev)];
    if let Some(e) = end {
        let at = created + time::Duration::minutes(5);
        let next = h[0].0.apply(&e, at).unwrap();
        let ev = EventDraft {
            actor: e.actor().name().into(),
            kind: e.kind().into(),
            detail: e.detail(),
            at,
        };
        h.push((next, ev));
    }
    let last = &h[h.len() - 1].0;
    assert!(
        pending == (last.state == SessionState::PendingApproval),
        "{:?}",
        last.state
    );
    h
}

/// Two environments without clusters (nothing here activates), the demo users; the sweep runs
/// but finds nothing due.
const CONFIG: &str = r#"
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
