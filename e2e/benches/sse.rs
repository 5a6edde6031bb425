//! One session change delivered to 1 / 10 / 100 / 1,000 open live streams (`GET /events`),
//! against one stream (DESIGN.md section 13: p99 at most 50 ms with 1,000 streams).
//!
//! A change is a new Flight request (it waits for approval, so nothing else follows it). The
//! time of one delivery runs from the session's `created_at` (the server's clock, taken before
//! the row is written: the change includes its commit) to the moment the event's bytes reached
//! that stream's reader (the same machine's clock). The streams belong to many demo users, a
//! hundred at most each, as `[limits] live_streams_per_user` allows.
#![allow(clippy::unwrap_used)]

#[path = "common/sse.rs"]
mod sse;

use breakglass_e2e::bench::{self, Dist, Figure, Target};
use breakglass_e2e::server::{ApiClient, ServerProcess};
use serde_json::json;

/// Users holding the streams; each holds at most [`PER_USER`].
const VIEWERS: usize = 20;
const PER_USER: usize = 100;

#[tokio::main]
async fn main() {
    let sizes = bench::sizes(&[1, 10, 100, 1_000], &[1, 10, 100]);
    let changes = if bench::short() { 5 } else { 30 };
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("server.toml");
    std::fs::write(&cfg, config()).unwrap();
    let server = ServerProcess::start(&cfg, &dir.path().join("data"), &[])
        .await
        .unwrap();
    let alice = server.login("alice").await.unwrap();
    let mut viewers = Vec::new();
    for v in 0..VIEWERS {
        viewers.push(server.login(&format!("viewer{v}")).await.unwrap());
    }
    let largest = *sizes.iter().max().unwrap();
    let mut one = None;
    for &n in &sizes {
        let d = fan_out(&server.url, &alice, &viewers, n, changes).await;
        println!(
            "  streams={n}: p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms",
            d.p(0.5),
            d.p(0.99),
            d.p(1.0)
        );
        let base = one.get_or_insert_with(|| d.p(0.99));
        let mut fig = Figure::new("sse-fanout", "p99", "ms", *base, d.p(0.99))
            .size(format!("streams={n}"))
            .baseline_is("one open stream");
        if n == largest {
            fig = fig.target(Target::AtMost(50.0));
        }
        bench::report(&fig);
    }
}

/// Opens `n` streams, makes `changes` changes one after another, and returns how long each
/// took to reach each stream.
async fn fan_out(
    base: &str,
    alice: &ApiClient,
    viewers: &[ApiClient],
    n: usize,
    changes: usize,
) -> Dist {
    assert!(
        n <= viewers.len() * PER_USER,
        "{n} streams need more viewers"
    );
    let mut streams = sse::Streams::open((0..n).map(|i| (base, &viewers[i % viewers.len()]))).await;
    let mut took = Vec::new();
    // Change 0 is not measured: the streams' first write, the database's first insert.
    for c in 0..=changes {
        let id = alice
            .create(json!({"environment": "flight", "namespace": "payments", "pod": format!("worker-{c}"),
                           "mode": "live", "reason": "measuring live updates", "duration_minutes": 30}))
            .await
            .unwrap();
        let delays = streams.delays_of(&id).await;
        if c > 0 {
            took.extend(delays);
        }
    }
    Dist::from_durations(&took)
}

/// An environment without a cluster (a Flight request just waits), alice to make the changes,
/// the viewers to watch them.
fn config() -> String {
    let mut s = format!(
        "sweep_interval_seconds = 5\napproval_expiry_minutes = 60\n\n[limits]\nlive_streams_per_user = {PER_USER}\n\n\
         [dev_login]\nenabled = true\n\n[[dev_login.users]]\nname = \"alice\"\ngroups = [\"engineers\"]\n"
    );
    for v in 0..VIEWERS {
        s.push_str(&format!(
            "\n[[dev_login.users]]\nname = \"viewer{v}\"\ngroups = [\"engineers\"]\n"
        ));
    }
    s.push_str(
        "\n[[environments]]\nname = \"flight\"\ntier = \"flight\"\n[environments.permissions]\n\
         \"tower.breakglass.request\" = { groups = [\"engineers\"] }\n",
    );
    s
}
