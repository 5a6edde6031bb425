//! `replicas-sse`: one change made through the first replica (a new Flight request: it waits
//! for approval, so nothing else follows it) to S live streams spread evenly over the three
//! replicas, the other two hearing of it through PostgreSQL's `NOTIFY`. One sample is one
//! change's time to its *last* stream: from the session's `created_at` (the first replica's
//! clock, taken before the row is written) to the moment the event's bytes reached the slowest
//! stream's reader (the same machine's clock). The baseline is the same with one stream, on the
//! second replica.

use std::time::{Duration, SystemTime};

use breakglass_e2e::bench::{self, Dist, Figure, Target};
use breakglass_e2e::server::ApiClient;
use serde_json::json;
use tokio::sync::mpsc;

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
    let http = reqwest::Client::new();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut readers = Vec::new();
    for (i, &r) in placement.iter().enumerate() {
        let response = sse::open(&http, &rig.replicas[r].url, &viewers[r][i % VIEWERS])
            .await
            .unwrap();
        let tx = tx.clone();
        readers.push(tokio::spawn(async move {
            sse::forward(response, tx).await.unwrap();
        }));
    }
    drop(tx);
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
        let (mut got, mut last, mut created) = (0, SystemTime::UNIX_EPOCH, None);
        let wait = async {
            while got < n {
                let a = rx
                    .recv()
                    .await
                    .expect("every reader ended before the change arrived");
                if !a.is_of(&id) {
                    continue;
                }
                got += 1;
                // Parsed once per change, from its first arrival.
                created.get_or_insert_with(|| a.created_at());
                last = last.max(a.at);
            }
        };
        tokio::time::timeout(Duration::from_secs(60), wait)
            .await
            .unwrap_or_else(|_| panic!("change {c} reached {got} of {n} streams within 60 s"));
        if c > 0 {
            let created = created.expect("a change that arrived has its creation time");
            took.push(last.duration_since(created).unwrap_or_default());
        }
    }
    for r in readers {
        r.abort();
    }
    Dist::from_durations(&took)
}
