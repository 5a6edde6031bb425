//! The audit export's memory, on both engines: `breakglass-server export` (the real binary,
//! `--format csv`) over a store of 100,000 sessions against the same command over 10,000, each
//! run's peak RSS (`VmHWM` of `/proc/<pid>/status`, read until it exits); 1,000 is a growth
//! row against the same baseline.
//! The export reads a page of sessions at a time and writes it before the next, so the peak
//! should not grow with the store once the database's own caches are full (SQLite keeps up to
//! 2 MB of pages per pooled connection): target at most 1.25x. The time per 1,000 sessions is
//! printed beside it.
//!
//! The rows are seeded with the store's own bulk insert (`Store::insert_many`), sessions
//! driven to their states by the shared state machine, as in the store bench.
#![allow(clippy::unwrap_used)]

#[path = "common/request.rs"]
mod request;

use std::path::Path;
use std::time::{Duration, Instant};

use breakglass_e2e::bench::{self, Figure, Target};
use breakglass_server::store::EventDraft;
use breakglass_shared::{Actor, PermissionSet, Session, SessionEvent, Tier};
use request::request;
use time::OffsetDateTime;
use uuid::Uuid;

/// Session `i`'s history: Ground ones withdrawn by their requester, Flight ones denied by bob.
fn history(i: usize, now: OffsetDateTime) -> Vec<(Session, EventDraft)> {
    let flight = i.is_multiple_of(2);
    let requester = format!("person{}", i % 50);
    let created = now - time::Duration::seconds(i as i64);
    let new = if flight {
        request(i, "prod", Tier::Flight, requester.clone())
    } else {
        request(i, "dev", Tier::Ground, requester.clone())
    };
    let first = Session::new_request(Uuid::now_v7(), new, created);
    let by = |name: &str| Actor::User {
        name: name.into(),
        permissions: PermissionSet::ALL,
    };
    let event = if flight {
        SessionEvent::Deny {
            by: by("bob"),
            reason: "use the runbook first".into(),
        }
    } else {
        SessionEvent::End {
            by: by(&requester),
            recycle: false,
        }
    };
    let next = first.apply(&event, created).unwrap();
    let draft = |actor: &str, kind: &str, detail| EventDraft {
        actor: actor.into(),
        kind: kind.into(),
        detail,
        at: created,
        notices: Vec::new(),
    };
    let create = draft(&requester, "create", None);
    let second = draft(event.actor().name(), event.kind(), event.detail());
    vec![(first, create), (next, second)]
}

async fn seed(url: &str, n: usize) {
    let store = breakglass_server::store::connect(url).await.unwrap();
    let now = OffsetDateTime::now_utc();
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        let batch: Vec<_> = chunk.iter().map(|&i| history(i, now)).collect();
        store.insert_many(&batch).await.unwrap();
    }
    assert_eq!(store.counts().await.unwrap().0 as usize, n);
}

/// Runs the export over the store at `url`; its peak RSS in MB, the time it took and the bytes
/// it wrote.
fn export(url: &str, dir: &Path) -> (f64, Duration, u64) {
    let out = dir.join("export.csv");
    let t = Instant::now();
    let mut child = std::process::Command::new(breakglass_e2e::server::server_binary().unwrap())
        .args([
            "export",
            "--since",
            "2000-01-01T00:00:00Z",
            "--format",
            "csv",
            "-o",
        ])
        .arg(&out)
        .args(["--dev", "--database-url", url, "--data-dir"])
        .arg(dir)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut peak_kb = 0u64;
    loop {
        if let Ok(text) = std::fs::read_to_string(&status) {
            if let Some(kb) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            {
                peak_kb = kb;
            }
        }
        if let Some(exit) = child.try_wait().unwrap() {
            assert!(exit.success(), "the export failed: {exit}");
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = t.elapsed();

    let bytes = std::fs::metadata(&out).unwrap().len();
    (peak_kb as f64 / 1024.0, took, bytes)
}

#[tokio::main]
async fn main() {
    let sizes = bench::sizes(&[1_000, 10_000, 100_000], &[200, 1_000, 5_000]);
    let (base, large) = (sizes[1], sizes[2]);
    for engine in ["sqlite", "postgres"] {
        let mut runs = Vec::new();
        for &n in &sizes {
            let dir = tempfile::tempdir().unwrap();
            let url = match engine {
                "sqlite" => format!("sqlite://{}/export.db", dir.path().display()),
                _ => breakglass_e2e::postgres::fresh_database().await.unwrap(),
            };
            let t = Instant::now();
            seed(&url, n).await;
            println!(
                "  {engine}: seeded {n} sessions in {:.1} s",
                t.elapsed().as_secs_f64()
            );
            // The first run warms the page cache; the second is measured.
            export(&url, dir.path());
            let (mb, took, bytes) = export(&url, dir.path());
            println!(
                "  {engine}: {n} sessions exported in {:.2} s ({:.1} ms per 1,000, {:.1} MB of CSV), peak RSS {mb:.1} MB",
                took.as_secs_f64(),
                took.as_secs_f64() * 1e6 / n as f64,
                bytes as f64 / 1e6,
            );
            runs.push(mb);
        }
        // The smaller size is a growth row; the design's figure is the larger one's.
        for (i, &n) in sizes.iter().enumerate().filter(|(i, _)| *i != 1) {
            let fig = Figure::new(
                &format!("export-memory-{engine}"),
                "peak",
                "MB",
                runs[1],
                runs[i],
            )
            .size(format!("sessions={n}"))
            .baseline_is(format!("the same export over {base} sessions"));
            bench::report(&if n == large {
                fig.target(Target::RatioAtMost(1.25))
            } else {
                fig
            });
        }
    }
}
