//! The sweep's pass over a store of 100,000 and 1,000,000 sessions (the same history the
//! store bench seeds: the newest few live, nothing due) against the same pass over 10,000,
//! passes interleaved, on SQLite and on PostgreSQL (`BENCH_ONLY=sqlite` or `postgres` for
//! one). A pass reads what is due through the indexes and the live sessions' versions, never
//! the history, so its time stays flat in the history's size (target: at most 1.25x at the
//! largest, issue 36). The pass over the live sessions alone, with no history, is printed
//! beside: an empty store is no baseline, it has no live session to read.
#![allow(clippy::unwrap_used)]

#[path = "common/context.rs"]
mod context;
#[path = "common/history.rs"]
mod history;
#[path = "common/request.rs"]
mod request;

use std::sync::Arc;
use std::time::{Duration, Instant};

use breakglass_e2e::bench::{self, Dist, Figure, Target};
use breakglass_server::state::Context;
use context::context;
use history::{seed, CONFIG, LIVE};

/// One pass at the moment; how long it took. Nothing is due, so nothing changes.
async fn pass(ctx: &Arc<Context>) -> Duration {
    let t = Instant::now();
    let report = breakglass_server::sweep::sweep_once(ctx, time::OffsetDateTime::now_utc())
        .await
        .unwrap();
    let took = t.elapsed();
    assert_eq!(
        report.expired + report.ttl_ended + report.driven,
        0,
        "{report:?}"
    );
    took
}

async fn database(engine: &str, dir: &std::path::Path) -> String {
    match engine {
        "sqlite" => format!("sqlite://{}/sweep.db", dir.display()),
        _ => breakglass_e2e::postgres::fresh_database().await.unwrap(),
    }
}

/// A store seeded with `n` sessions and a context on it (the directory kept for its life).
struct Rig {
    ctx: Arc<Context>,
    url: String,
    _dir: tempfile::TempDir,
}

impl Rig {
    async fn new(engine: &str, n: usize) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let url = database(engine, dir.path()).await;
        seed(&url, n).await;
        Rig {
            ctx: context(&url, dir.path(), toml::from_str(CONFIG).unwrap()).await,
            url,
            _dir: dir,
        }
    }

    /// Drops its PostgreSQL database (a SQLite file goes with the directory).
    async fn remove(self) {
        if self.url.starts_with("postgres") {
            drop(self.ctx);
            breakglass_e2e::postgres::drop_database(&self.url)
                .await
                .unwrap();
        }
    }
}

#[tokio::main]
async fn main() {
    let sizes = bench::sizes(&[10_000, 100_000, 1_000_000], &[200, 2_000]);
    let passes = if bench::short() { 20 } else { 200 };
    let largest = *sizes.iter().max().unwrap();
    for engine in ["sqlite", "postgres"] {
        if !bench::part(engine) {
            continue;
        }
        // The smallest history is the baseline the larger ones are held to; the live sessions
        // alone (no history) are measured beside them, to say what any history adds.
        let live = Rig::new(engine, LIVE).await;
        let small = Rig::new(engine, sizes[0]).await;
        for &n in &sizes[1..] {
            let full = Rig::new(engine, n).await;
            let rigs = [&live, &small, &full];
            for _ in 0..5 {
                for r in rigs {
                    pass(&r.ctx).await;
                }
            }
            let mut took: [Vec<Duration>; 3] = Default::default();
            for i in 0..passes {
                // Each rig first in turn, so a busy moment of the machine lands on all three.
                for k in 0..3 {
                    let k = (i + k) % 3;
                    took[k].push(pass(&rigs[k].ctx).await);
                }
            }
            let [live_d, base, value] = took.map(|d| Dist::from_durations(&d));
            let mut fig = Figure::new(
                &format!("sweep-pass-{engine}"),
                "p50",
                "ms",
                base.p(0.5),
                value.p(0.5),
            )
            .size(format!("sessions={n}"))
            .baseline_is(format!(
                "the same pass over {} sessions, passes interleaved",
                sizes[0]
            ));
            if n == largest {
                fig = fig.target(Target::RatioAtMost(1.25));
            }
            bench::report(&fig);
            println!(
                "  {engine} {n}: a pass p50/p99 {:.2}/{:.2} ms ({} sessions {:.2}/{:.2}; the {LIVE} \
                 live sessions alone {:.2}/{:.2})",
                value.p(0.5),
                value.p(0.99),
                sizes[0],
                base.p(0.5),
                base.p(0.99),
                live_d.p(0.5),
                live_d.p(0.99)
            );
            full.remove().await;
        }
        live.remove().await;
        small.remove().await;
    }
}
