//! `replicas-keystroke`: a keystroke's echo through each replica in turn while P other
//! terminals print steady output, against kube-rs `attach` straight to the API server, both
//! under the same load, halves alternated so a busy minute of the machine falls on both.
//!
//! Each printing terminal runs one small program that prints a line every
//! [`STEADY_PERIOD`] on its own timer (a shell loop would fork a `sleep` per line, a thousand
//! forks a second that would measure the machine and not the relay). Its output is read to the
//! end by this process, as a browser would, and counted: a load that printed nothing measured
//! nothing, and the run fails then.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use breakglass_e2e::bench::{self, Figure, Target};
use breakglass_shared::terminal::Frame;
use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

use super::term::{self, Relayed};
use super::{idle, tail};
use super::{Open, Rig, REPLICAS};

/// How often each printing terminal prints a line: a log followed with `tail -f`. At four
/// lines a second each, a thousand printers were more than this machine's control plane
/// carries (its API server and node share the two cores): every keystroke's echo, direct or
/// relayed, took a second or more (BENCHMARKS.md, "Three replicas").
const STEADY_PERIOD: Duration = Duration::from_secs(1);

/// How often a keystroke is typed (20 a second). Back to back, the 1,200 round trips of the
/// largest size took 1.5 s, less than one beat of the machine's periodic work (each debug
/// container's watcher looks every 5 s, each replica sweeps every 5 s, each recording is
/// flushed every 5 s), and its p99 depended on where the beats fell (BENCHMARKS.md, "Three
/// replicas").
const TYPED_EVERY: Duration = Duration::from_millis(50);

/// Bytes of one printed line, at least (a line and the terminal's CRLF).
const LINE: usize = 40;

/// The printing terminals at each size (the largest the issue's 1,000).
pub fn printing_sizes() -> Vec<usize> {
    bench::sizes(&[100, 300, 1000], &[1, 2, 3])
}

/// The shell command each printing terminal runs.
fn steady_command() -> String {
    format!(
        "perl -e '$|=1; for($i=0;;$i++){{ print \"steady output line $i of a terminal printing\\n\"; select(undef,undef,undef,{}) }}'\r",
        STEADY_PERIOD.as_secs_f64()
    )
}

/// A terminal that printed: its socket's sending half, the receiving half read to the end by
/// its own task, as a browser would.
pub struct Printer {
    sink: futures::stream::SplitSink<term::Ws, Message>,
    reader: tokio::task::JoinHandle<()>,
}

impl Printer {
    /// Starts the steady output in terminal `ws`; every byte it prints is added to `received`.
    async fn start(ws: term::Ws, received: Arc<AtomicU64>) -> Printer {
        let (mut sink, mut stream) = ws.split();
        send(&mut sink, steady_command().as_bytes()).await;
        let reader = tokio::spawn(async move {
            while let Some(Ok(m)) = stream.next().await {
                if let Message::Binary(b) = m {
                    if let Ok(Frame::Data(d)) = Frame::decode(&b) {
                        received.fetch_add(d.len() as u64, Ordering::Relaxed);
                    }
                }
            }
        });
        Printer { sink, reader }
    }

    /// Interrupts the program (Ctrl-C): the terminal is back at an idle prompt.
    async fn stop(&mut self) {
        send(&mut self.sink, b"\x03").await;
    }
}

impl Drop for Printer {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

async fn send(sink: &mut futures::stream::SplitSink<term::Ws, Message>, bytes: &[u8]) {
    sink.send(Message::Binary(Frame::Data(bytes).encode().into()))
        .await
        .expect("the relay took no input");
}

/// The keystroke figures; leaves its printing terminals open in `open`, stopped.
pub async fn keystroke_figures(rig: &Rig, open: &mut Open) {
    // One session per replica to type into, none of them printing.
    let mut keys = Vec::new();
    for r in 0..REPLICAS {
        keys.push(rig.session(r, "keys").await);
    }
    let received = Arc::new(AtomicU64::new(0));
    let samples = if bench::short() { 30 } else { 600 };
    let sizes = printing_sizes();
    for &p in &sizes {
        open.grow(rig, p).await;
        // The terminals opened since are the next printers.
        for ws in std::mem::take(&mut open.sockets) {
            open.printers
                .push(Printer::start(ws, received.clone()).await);
        }
        assert_eq!(open.printers.len(), p, "every open terminal prints");
        println!("  printing={p}: every printer started");
        // Both sides' terminals are opened for each size, right before they are measured:
        // neither waits unread through the minutes the printers take to open.
        let mut direct = term::attach(&rig.pods, "direct", "app").await.unwrap();
        let mut typed = Vec::new();
        for (r, id) in keys.iter().enumerate() {
            typed.push(Relayed(rig.terminal(r, id).await));
        }
        // Output flows from every printer (a line or more each) before anything is measured.
        let start = received.load(Ordering::Relaxed);
        breakglass_e2e::wait_until("the printers' output", Duration::from_secs(120), || {
            let got = received.load(Ordering::Relaxed) - start;
            async move {
                if got >= (p * LINE) as u64 {
                    Ok(Some(()))
                } else {
                    Err(anyhow::anyhow!("{got} bytes printed"))
                }
            }
        })
        .await
        .unwrap();
        println!("  printing={p}: output flows; measuring");
        let before = received.load(Ordering::Relaxed);
        let last = p == *sizes.last().unwrap();
        // With `BENCH_PERF`, the whole machine is profiled over the largest size's keystrokes,
        // and the slowest of each side's are looked at (`relay/tail.rs`).
        let tail = last.then(|| tail::Tail::start("replicas-keys")).flatten();
        // And one replica's call graphs for half a minute of it: what its share is spent on.
        let replica = last
            .then(|| idle::profile(rig.pids()[0], "replicas-keys-r0", Duration::from_secs(30)))
            .flatten();
        let (mut base, mut ours) = (Vec::new(), Vec::new());
        let mut per_replica = vec![Vec::new(); REPLICAS];
        // Each half's p99 per replica too: a tail from one part of the window (the printers'
        // first minute, a sweep) shows in one half only.
        let mut per_half = Vec::new();
        let each = samples / 2 / REPLICAS;
        for _half in 0..2 {
            let mut this_half = Vec::new();
            for (r, t) in typed.iter_mut().enumerate() {
                base.extend(term::keystrokes_paced(&mut direct, 1, each, TYPED_EVERY).await);
                let mine = term::keystrokes_paced(t, 1, each, TYPED_EVERY).await;
                this_half.push(format!("{:.3}", term::dist(&mine).p(0.99)));
                per_replica[r].extend(mine.iter().copied());
                ours.extend(mine);
            }
            per_half.push(this_half.join(" / "));
        }
        if let Some(mut replica) = replica {
            let _ = replica.wait();
        }
        if let Some(tail) = tail {
            let names = ["through-0", "through-1", "through-2"];
            let mut sets = vec![("direct", base.as_slice())];
            sets.extend(
                names
                    .iter()
                    .zip(&per_replica)
                    .map(|(n, s)| (*n, s.as_slice())),
            );
            tail.finish(&sets, 0.99);
        }
        // The printers still print (a short run's keystrokes can take less than a line's
        // period): a load that stopped measured nothing.
        breakglass_e2e::wait_until("the printers still printing", STEADY_PERIOD * 10, || {
            let got = received.load(Ordering::Relaxed) - before;
            async move {
                if got > 0 {
                    Ok(Some(()))
                } else {
                    Err(anyhow::anyhow!(
                        "nothing printed since the keystrokes began"
                    ))
                }
            }
        })
        .await
        .unwrap();
        let printed = received.load(Ordering::Relaxed) - before;
        let (base, ours) = (term::dist(&base), term::dist(&ours));
        let each_p99: Vec<String> = per_replica
            .iter()
            .map(|d| format!("{:.3}", term::dist(d).p(0.99)))
            .collect();
        println!(
            "replicas-keystroke printing={p}: p50 {:.3} vs {:.3} ms direct; p99 per replica {} ms (halves: {}); {:.1} KB printed meanwhile",
            ours.p(0.5),
            base.p(0.5),
            each_p99.join(" / "),
            per_half.join("; "),
            printed as f64 / 1000.0
        );
        let size = format!("printing={p},bytes=1,n={}", 2 * each * REPLICAS);
        for (stat, q) in [("p50", 0.5), ("p99", 0.99)] {
            let fig = Figure::new("replicas-keystroke", stat, "ms", base.p(q), ours.p(q))
                .size(size.clone())
                .baseline_is("kube-rs attach straight to the API server, same load");
            bench::report(&if last && stat == "p99" {
                fig.target(Target::PlusAtMost(1.0))
            } else {
                fig
            });
        }
    }
    for printer in &mut open.printers {
        printer.stop().await;
    }
}
