//! What an open but idle terminal costs the server: its resident memory and its CPU time, read
//! from `/proc/<pid>` of the server process.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use breakglass_e2e::server::ApiClient;
use futures::StreamExt;

/// The process's resident set, in KB (`VmRSS` of `/proc/<pid>/status`).
pub fn rss_kb(pid: u32) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .context("no VmRSS line")?;
    let kb: f64 = line
        .split_whitespace()
        .nth(1)
        .context("no VmRSS value")?
        .parse()?;
    Ok(kb)
}

/// User plus system CPU time the process used so far, in clock ticks (`/proc/<pid>/stat`
/// fields 14 and 15).
fn cpu_ticks(pid: u32) -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) may hold spaces; the fields after its ")" do not.
    let rest = stat.rsplit_once(')').context("no command name")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state), so field n is at index n - 3.
    let utime: u64 = fields.get(11).context("no utime")?.parse()?;
    let stime: u64 = fields.get(12).context("no stime")?.parse()?;
    Ok(utime + stime)
}

fn ticks_per_second() -> anyhow::Result<f64> {
    let out = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()?;
    Ok(String::from_utf8(out.stdout)?.trim().parse()?)
}

/// CPU time the process used so far, in seconds.
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    Ok(cpu_ticks(pid)? as f64 / ticks_per_second()?)
}

/// Nanoseconds each of the process's threads has run so far, by thread id (the first field of
/// `/proc/<pid>/task/<tid>/schedstat`). Unlike `/proc/<pid>/stat`, whose times are whole clock
/// ticks (10 ms), this sees the few milliseconds an idle server uses in a window: the full
/// run's 10 s held one tick of it, a short run's window often none, and a baseline of 0 makes
/// every ratio to it infinite.
fn thread_cpu_ns(pid: u32) -> anyhow::Result<std::collections::HashMap<u32, u64>> {
    let mut threads = std::collections::HashMap::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let entry = entry?;
        let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        // A thread that ended since the directory was read has no file any more.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("schedstat")) else {
            continue;
        };
        let ns = stat
            .split_whitespace()
            .next()
            .context("empty schedstat")?
            .parse()?;
        threads.insert(tid, ns);
    }
    Ok(threads)
}

/// Percent of one core the process used over `window`, to the nanosecond: the run time its
/// threads gained, those started in the window counted whole. A thread that ends within the
/// window takes its share with it (the server's threads are its runtime's workers and its
/// database connections, which live as long as it does; tokio's blocking threads linger 10 s
/// idle before they end).
pub async fn cpu_percent(pid: u32, window: Duration) -> anyhow::Result<f64> {
    let before = thread_cpu_ns(pid)?;
    let start = Instant::now();
    tokio::time::sleep(window).await;
    let after = thread_cpu_ns(pid)?;
    let elapsed = start.elapsed().as_secs_f64();
    let used: u64 = after
        .iter()
        .map(|(tid, ns)| ns.saturating_sub(before.get(tid).copied().unwrap_or(0)))
        .sum();
    Ok(100.0 * used as f64 / 1e9 / elapsed)
}

/// With `BENCH_PERF=DIR`, records a call-graph profile of `pid` for `window` into
/// `DIR/NAME.perf.data` (`perf report -i` reads it); nothing otherwise. The profiles behind
/// the fixes in BENCHMARKS.md were taken this way.
pub fn profile(pid: u32, name: &str, window: Duration) -> Option<std::process::Child> {
    let dir = std::env::var("BENCH_PERF").ok()?;
    std::fs::create_dir_all(&dir).ok()?;
    let out = std::path::Path::new(&dir).join(format!("{name}.perf.data"));
    std::process::Command::new("perf")
        // DWARF call graphs: the release build keeps no frame pointers, so `-g` would give
        // each sample's function but not who called it.
        .args(["record", "-F", "999", "--call-graph", "dwarf,32768"])
        .args(["-p", &pid.to_string(), "-o"])
        .arg(out)
        .args(["--", "sleep", &window.as_secs().to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| eprintln!("perf could not start: {e}"))
        .ok()
}

/// Ends a profile started by [`profile`] before its window is over (`perf` writes its file
/// on `SIGINT`) and waits for it.
pub fn stop_profile(perf: &mut std::process::Child) {
    let _ = std::process::Command::new("kill")
        .args(["-INT", &perf.id().to_string()])
        .status();
    let _ = perf.wait();
}

/// The recorder's default flush interval, which the bench's servers keep.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(5);

/// Waits until the terminals just opened are idle: their opening output (each shell's prompt)
/// stored, so the window measures what open terminals cost and not the first segment of each.
/// Idle is a quiet interval: no session's stored recording changed for a whole flush interval
/// and a second (in the first run without this wait, storing those segments was a quarter of
/// the window's samples: `fsync` and the local store's `publish`).
pub async fn settle(alice: &ApiClient, ids: &[String]) {
    let stored = || {
        futures::stream::iter(ids)
            .map(|id| async move {
                let d = alice.session(id).await.unwrap();
                d["session"]["recording"].clone()
            })
            .buffered(16)
            .collect::<Vec<_>>()
    };
    let mut before = stored().await;
    for _ in 0..30 {
        tokio::time::sleep(FLUSH_INTERVAL + Duration::from_secs(1)).await;
        let now = stored().await;
        if now == before {
            return;
        }
        before = now;
    }
    panic!(
        "the recordings of {} open terminals never stopped changing",
        ids.len()
    );
}
