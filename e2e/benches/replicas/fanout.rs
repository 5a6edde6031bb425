//! `replicas-sse`: one change made through the first replica (a new Flight request: it waits
//! for approval, so nothing else follows it) to S live streams spread evenly over the three
//! replicas, the other two hearing of it through PostgreSQL's `NOTIFY`. One sample is one
//! change's time to its *last* stream: from the session's `created_at` (the first replica's
//! clock, taken before the row is written) to the moment the event's bytes reached the slowest
//! stream's reader (the same machine's clock). The baseline is the same with one stream, on the
//! second replica.

use breakglass_e2e::bench::{self, Dist, Figure, Target};
use breakglass_e2e::server::ApiClient;
use serde_json::json;

use super::{sse, Rig, PER_USER, REPLICAS, VIEWERS};

fn stream_sizes() -> Vec<usize> {
    bench::sizes(&[300, 1000, 3000], &[3, 6, 9])
}

pub async fn sse_figures(rig: &Rig) {
    let changes = if bench::short() { 5 } else { 30 };
    // Each viewer signed in on each replica (the streams of one user spread over all three).
    let mut viewers: Vec<Vec<ApiClient>> = Vec::new();
    for server in &rig.replicas {
        let mut on = Vec::new();
        for v in 0..VIEWERS {
            on.push(server.login(&format!("viewer{v}")).await.unwrap());
        }
        viewers.push(on);
    }
    let one = fan_out(rig, &viewers, &[1], changes).await;
    println!(
        "  one stream on replica 1: p50 {:.2} ms  p99 {:.2} ms",
        one.p(0.5),
        one.p(0.99)
    );
    let sizes = stream_sizes();
    for &n in &sizes {
        let placement: Vec<usize> = (0..n).map(|i| i % REPLICAS).collect();
        let d = fan_out(rig, &viewers, &placement, changes).await;
        println!(
            "  streams={n}: to the last stream p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms",
            d.p(0.5),
            d.p(0.99),
            d.p(1.0)
        );
        let fig = Figure::new("replicas-sse", "p99", "ms", one.p(0.99), d.p(0.99))
            .size(format!("streams={n},replicas={REPLICAS},changes={changes}"))
            .baseline_is("one stream on another replica");
        bench::report(&if n == *sizes.last().unwrap() {
            fig.target(Target::AtMost(100.0))
        } else {
            fig
        });
    }
}

/// Opens one stream on replica `placement[i]` for each i, makes `changes` changes through
/// the first replica one after another, and returns each change's time to its last stream.
async fn fan_out(
    rig: &Rig,
    viewers: &[Vec<ApiClient>],
    placement: &[usize],
    changes: usize,
) -> Dist {
    let n = placement.len();
    assert!(n <= VIEWERS * PER_USER, "{n} streams need more viewers");
    let mut streams = sse::Streams::open(
        placement
            .iter()
            .enumerate()
            .map(|(i, &r)| (rig.replicas[r].url.as_str(), &viewers[r][i % VIEWERS])),
    )
    .await;
    let alice = &rig.alices[0];
    let mut took = Vec::new();
    // Change 0 is not measured: the streams' first write, the database's first insert.
    for c in 0..=changes {
        let id = alice
            .create(json!({"environment": "flight", "namespace": "payments", "pod": format!("worker-{c}"),
                           "mode": "live", "reason": "measuring live updates on three replicas",
                           "duration_minutes": 30}))
            .await
            .unwrap();
        let last = streams.delays_of(&id).await.into_iter().max();
        if c > 0 {
            took.push(last.expect("a change reached at least one stream"));
        }
    }
    Dist::from_durations(&took)
}
