//! What a watcher costs: one session's terminal relayed with nobody watching it, another's
//! with one watcher reading its watch socket as fast as it can, taking turns on one server.
//! The server's CPU time per MB relayed (`watch-cpu`: the watcher's screen emulator and its
//! queue) and the requester's rate (`watch-rate`: a watcher never slows the requester).

use breakglass_shared::terminal::Frame;
use futures::StreamExt;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

use super::*;

/// Opens bob's watch socket on session `id` and reads it until it closes, in a task; the
/// task's answer is how often it was told it fell behind. Returns once the first screen came.
async fn watcher(server: &ServerProcess, id: &str) -> tokio::task::JoinHandle<usize> {
    let bob = server.login("bob").await.unwrap();
    let url = format!(
        "{}/api/breakglass/sessions/{id}/watch",
        server.url.replace("http://", "ws://")
    );
    let mut req = url.into_client_request().unwrap();
    req.headers_mut()
        .insert("cookie", bob.cookie_header().parse().unwrap());
    req.headers_mut()
        .insert("origin", server.url.parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    // The first screen starts with its size.
    loop {
        match ws.next().await {
            Some(Ok(Message::Binary(b)))
                if matches!(Frame::decode(&b), Ok(Frame::Resize { .. })) =>
            {
                break
            }
            Some(Ok(_)) => {}
            other => panic!("the watch socket closed before its first screen: {other:?}"),
        }
    }
    tokio::spawn(async move {
        let mut behind = 0;
        while let Some(Ok(msg)) = ws.next().await {
            if let Message::Binary(b) = msg {
                if let Ok(Frame::Status(s)) = Frame::decode(&b) {
                    behind += usize::from(s.message.contains("fell behind"));
                }
            }
        }
        behind
    })
}

/// `watch-cpu` and `watch-rate`.
pub async fn watch_figures(b: &Bench) {
    let server = ServerProcess::start(&b.config, &b.dir.path().join("watch"), &[])
        .await
        .unwrap();
    let pid = server.pid().unwrap();
    let (alice, alone) = one_session(&server, &b.ns, "watch-alone").await;
    let mut unwatched = Relayed(term::open(&server, &alice, &alone).await.unwrap());
    let (alice, watched_id) = one_session(&server, &b.ns, "watch-watched").await;
    let mut watched = Relayed(term::open(&server, &alice, &watched_id).await.unwrap());
    let watching = watcher(&server, &watched_id).await;
    let reps = if bench::short() { 1 } else { BULK_RUNS };
    let sizes = bench::sizes(&[10u64, 30, 100], &[1, 2, 4]);
    for &mb in &sizes {
        let last = mb == *sizes.last().unwrap();
        let (mut rates, mut cpus) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
        for _ in 0..reps {
            for (term, rate_of, cpu_of) in [
                (&mut unwatched, &mut rates.0, &mut cpus.0),
                (&mut watched, &mut rates.1, &mut cpus.1),
            ] {
                let before = idle::cpu_seconds(pid).unwrap();
                rate_of.push(rate(term, mb).await);
                cpu_of.push(1000.0 * (idle::cpu_seconds(pid).unwrap() - before) / mb as f64);
            }
        }
        println!(
            "watch output={mb}MB runs (unwatched | watched): MB/s {:.1?} | {:.1?}; server CPU per MB {:.1?} | {:.1?} ms",
            rates.0, rates.1, cpus.0, cpus.1
        );
        let size = format!("output={mb}MB,runs={reps}");
        let cpu = Figure::new(
            "watch-cpu",
            "median",
            "ms/MB",
            median(cpus.0),
            median(cpus.1),
        )
        .size(size.clone())
        .baseline_is("the same relay with nobody watching");
        let rate = Figure::new(
            "watch-rate",
            "median",
            "MB/s",
            median(rates.0),
            median(rates.1),
        )
        .size(size)
        .baseline_is("the same relay with nobody watching");
        if last {
            bench::report(&cpu.target(Target::RatioAtMost(1.05)));
            bench::report(&rate.target(Target::RatioAtLeast(0.95)));
        } else {
            bench::report(&cpu);
            bench::report(&rate);
        }
    }
    drop(watched);
    drop(unwatched);
    drop(server);
    let behind = watching.await.unwrap_or(0);
    println!("watch: the watcher was told it fell behind {behind} times");
}
