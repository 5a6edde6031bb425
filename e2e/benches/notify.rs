//! Notifications, on both engines, in one process each:
//!
//! - `notify-change`: what the outbox adds to a session change. A Flight request made and
//!   approved (two changes) through the lifecycle, on a server whose environment routes every
//!   event to 1, 3 or 10 webhook receivers (two notices staged in those two transactions, each
//!   moved by the worker into a delivery per receiver and sent meanwhile to a local receiver)
//!   against the same server with no receiver; rounds interleaved. Target at three receivers:
//!   at most 1.1x (DESIGN.md section 13); the others are growth rows.
//! - `notify-throughput`: deliveries per second of one worker (claim, sign, POST, record),
//!   against the same POSTs sent straight from one client at the worker's concurrency.
#![allow(clippy::unwrap_used)]

#[path = "common/context.rs"]
mod context;
#[path = "common/request.rs"]
mod request;

use std::sync::Arc;
use std::time::{Duration, Instant};

use breakglass_e2e::bench::{self, Dist, Figure, Target};
use breakglass_server::config::{demo_environments, FileConfig};
use breakglass_server::notify::{Sender, Worker};
use breakglass_server::state::Context;
use breakglass_shared::notify::NoticeKind;
use breakglass_shared::{Actor, PermissionSet, SessionEvent, Tier};
use futures::StreamExt;
use request::request;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A receiver that takes everything: the other side of every delivery measured.
async fn receiver() -> u16 {
    let app = axum::Router::new().route("/hook", axum::routing::post(|| async { "ok" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    port
}

/// A server whose environments each route every event to `receivers` webhooks at `port`.
async fn server(url: &str, dir: &std::path::Path, port: u16, receivers: usize) -> Arc<Context> {
    let mut file = FileConfig {
        environments: demo_environments(),
        ..FileConfig::default()
    };
    if receivers > 0 {
        let names: Vec<String> = (0..receivers).map(|i| format!("r{i}")).collect();
        let mut text = String::new();
        for n in &names {
            text.push_str(&format!(
                "[[webhooks]]\nname = \"{n}\"\nurl = \"http://127.0.0.1:{port}/hook\"\nsecret = \"{SECRET}\"\n"
            ));
        }
        file.notifications = toml::from_str(&text).unwrap();
        for e in &mut file.environments {
            e.notify = names.clone();
        }
    }
    context::context(url, dir, file).await
}

/// One round: a Flight request made and approved; how long the two changes took.
async fn change(ctx: &Context, i: usize) -> Duration {
    let now = time::OffsetDateTime::now_utc();
    let t = Instant::now();
    let s = ctx
        .lifecycle
        .create(request(i, "prod", Tier::Flight, "alice".into()), now)
        .await
        .unwrap();
    let bob = Actor::User {
        name: "bob".into(),
        permissions: PermissionSet::ALL,
    };
    ctx.lifecycle
        .act(
            s.id,
            SessionEvent::Approve {
                by: bob,
                groups: vec!["sre".into()],
            },
        )
        .await
        .unwrap();
    t.elapsed()
}

async fn database(engine: &str, dir: &std::path::Path, name: &str) -> String {
    match engine {
        "sqlite" => format!("sqlite://{}/{name}.db", dir.display()),
        _ => breakglass_e2e::postgres::fresh_database().await.unwrap(),
    }
}

#[tokio::main]
async fn main() {
    let rounds = if bench::short() { 20 } else { 1_000 };
    let messages = if bench::short() { 50 } else { 1_000 };
    let port = receiver().await;
    for engine in ["sqlite", "postgres"] {
        let dir = tempfile::tempdir().unwrap();
        let plain_dir = dir.path().join("plain");
        std::fs::create_dir_all(&plain_dir).unwrap();
        let plain = server(
            &database(engine, &plain_dir, "plain").await,
            &plain_dir,
            port,
            0,
        )
        .await;
        let mut told = None;
        // The design's size first, with nothing else alive beside the two servers: a server's
        // worker and sweep go on after its rounds, so the growth rows after it share the
        // machine with the servers measured before them.
        for receivers in [3, 1, 10] {
            let d = dir.path().join(format!("told-{receivers}"));
            std::fs::create_dir_all(&d).unwrap();
            let server = server(&database(engine, &d, "told").await, &d, port, receivers).await;
            for i in 0..10 {
                change(&plain, i).await;
                change(&server, i).await;
            }
            let (mut base, mut value) = (Vec::new(), Vec::new());
            for i in 0..rounds {
                base.push(change(&plain, i).await);
                value.push(change(&server, i).await);
            }
            let (base, value) = (Dist::from_durations(&base), Dist::from_durations(&value));
            let fig = Figure::new(
                &format!("notify-change-{engine}"),
                "median",
                "ms",
                base.p(0.5),
                value.p(0.5),
            )
            .size(format!("receivers={receivers},changes={}", rounds * 2))
            .baseline_is("the same changes with no receiver configured, rounds interleaved");
            println!(
                "  {engine}, {receivers} receivers: change median {:.2} ms (no receiver {:.2})",
                value.p(0.5),
                base.p(0.5)
            );
            bench::report(&if receivers == 3 {
                fig.target(Target::RatioAtMost(1.1))
            } else {
                fig
            });
            if receivers == 3 {
                told = Some(server);
            }
        }
        let told = told.unwrap();

        // Throughput: rows written straight into the outbox, then one worker drains them.
        let session = told
            .lifecycle
            .create(
                request(0, "dev", Tier::Ground, "alice".into()),
                time::OffsetDateTime::now_utc(),
            )
            .await
            .unwrap();
        let mut drafts = Vec::new();
        for i in 0..messages {
            let mut d = told.outbox.drafts_of(
                NoticeKind::Reminder,
                &session,
                "system",
                time::OffsetDateTime::now_utc(),
            );
            for r in &mut d {
                r.event_key = format!("bench/{i}");
            }
            drafts.extend(d);
        }
        let total = drafts.len();
        // Let the context's own worker finish what the rounds wrote first.
        while told.store.outbox_stats().await.unwrap().pending > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let worker = Worker {
            store: told.store.clone(),
            config: told.config.clone(),
            outbox: told.outbox.clone(),
            metrics: told.metrics.clone(),
            holder: "bench".into(),
        };
        let sender = Sender::new(told.config.clone()).unwrap();
        told.store.enqueue(&drafts).await.unwrap();
        let t = Instant::now();
        while told.store.outbox_stats().await.unwrap().pending > 0 {
            worker.round(&sender).await;
        }
        let worker_rate = total as f64 / t.elapsed().as_secs_f64();
        let client = reqwest::Client::new();
        let url = format!("http://127.0.0.1:{port}/hook");
        let t = Instant::now();
        futures::stream::iter(0..total)
            .for_each_concurrent(8, |_| {
                let (client, url) = (client.clone(), url.clone());
                async move {
                    client.post(url).body("{}").send().await.unwrap();
                }
            })
            .await;
        let raw_rate = total as f64 / t.elapsed().as_secs_f64();
        bench::report(
            &Figure::new(
                &format!("notify-throughput-{engine}"),
                "mean",
                "msg/s",
                raw_rate,
                worker_rate,
            )
            .size(format!("messages={total}"))
            .baseline_is("the same POSTs from one client, 8 at a time, no outbox"),
        );
        println!("  {engine}: one worker {worker_rate:.0} msg/s (plain POSTs {raw_rate:.0}/s)");
    }
}
