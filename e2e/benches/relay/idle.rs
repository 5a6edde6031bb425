//! What an open but idle terminal costs the server: its resident memory and its CPU time, read
//! from `/proc/<pid>` of the server process.

use std::time::{Duration, Instant};

use anyhow::Context as _;

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

/// Percent of one core the process used over `window`, measured by its own CPU clock.
pub async fn cpu_percent(pid: u32, window: Duration) -> anyhow::Result<f64> {
    let hz = ticks_per_second()?;
    let before = cpu_ticks(pid)?;
    let start = Instant::now();
    tokio::time::sleep(window).await;
    let used = (cpu_ticks(pid)? - before) as f64 / hz;
    Ok(100.0 * used / start.elapsed().as_secs_f64())
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
