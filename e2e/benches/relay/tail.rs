//! A profile of a figure's tail: what the whole machine ran while the slowest samples were in
//! flight. A call-graph profile of the server (`idle::profile`) shows where its time goes on
//! average; a p99 is three samples in three hundred, and their few milliseconds vanish in it.
//! With `BENCH_PERF=DIR`, [`Tail::start`] samples every CPU (`perf record -a`, stamped with
//! `CLOCK_REALTIME`, the clock `SystemTime` reads) and [`Tail::finish`] writes the slowest
//! samples' windows next to it; `scripts/perf-windows.py DIR/NAME` then counts, per window and
//! over all of them against the whole profile, which processes and functions were on the CPUs.

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

/// A running whole-machine profile.
pub struct Tail {
    perf: std::process::Child,
    base: String,
}

impl Tail {
    /// Starts `perf record -a` into `BENCH_PERF/NAME.perf.data`; nothing without `BENCH_PERF`.
    pub fn start(name: &str) -> Option<Tail> {
        let dir = std::env::var("BENCH_PERF").ok()?;
        std::fs::create_dir_all(&dir).ok()?;
        let base = std::path::Path::new(&dir)
            .join(name)
            .to_string_lossy()
            .into_owned();
        let (ctl, ack) = (format!("{base}.ctl"), format!("{base}.ack"));
        for fifo in [&ctl, &ack] {
            let _ = std::fs::remove_file(fifo);
            let made = std::process::Command::new("mkfifo").arg(fifo).status();
            if !made.is_ok_and(|s| s.success()) {
                eprintln!("cannot make the fifo {fifo}");
                return None;
            }
        }
        let mut perf = std::process::Command::new("perf")
            // Leaf functions only: enough to name what ran, and light on all CPUs at once.
            .args(["record", "-a", "-F", "1999", "-k", "CLOCK_REALTIME"])
            // Disabled until enabled below, through the control fifo.
            .args(["-D", "-1", "--control"])
            .arg(format!("fifo:{ctl},{ack}"))
            .arg("-o")
            .arg(format!("{base}.perf.data"))
            // A bound for a run that failed; finish stops it sooner.
            .args(["--", "sleep", "900"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| eprintln!("perf could not start: {e}"))
            .ok()?;
        // perf first reads every running process's maps (seconds with thousands of shells on
        // the node: the first version of this profile began a second before the window's end)
        // and only then answers the control fifo; the samples start after its answer.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let answer = (|| -> std::io::Result<String> {
                let mut control = std::fs::OpenOptions::new().write(true).open(&ctl)?;
                control.write_all(b"enable\n")?;
                let mut line = String::new();
                std::io::BufReader::new(std::fs::File::open(&ack)?).read_line(&mut line)?;
                Ok(line)
            })();
            let _ = tx.send(answer);
        });
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(Ok(line)) if line.starts_with("ack") => Some(Tail { perf, base }),
            other => {
                eprintln!("perf did not start sampling: {other:?}");
                let _ = perf.kill();
                let _ = perf.wait();
                None
            }
        }
    }

    /// Stops the profile and writes, for each named set of samples, `NAME.SET.windows`: one
    /// line per sample at or above `quantile`'s duration (start and end, `CLOCK_REALTIME`
    /// seconds, and the duration in ms), slowest first.
    pub fn finish(mut self, sets: &[(&str, &[(Instant, Duration)])], quantile: f64) {
        super::idle::stop_profile(&mut self.perf);
        for fifo in ["ctl", "ack"] {
            let _ = std::fs::remove_file(format!("{}.{fifo}", self.base));
        }
        // Instants are opaque: one reading of both clocks at once maps the one onto the other.
        let (now, wall) = (Instant::now(), std::time::SystemTime::now());
        let wall = wall
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        for (set, samples) in sets {
            let mut sorted = samples.to_vec();
            sorted.sort_by_key(|&(_, took)| std::cmp::Reverse(took));
            let keep = ((1.0 - quantile) * samples.len() as f64).ceil().max(1.0) as usize;
            let lines: Vec<String> = sorted
                .iter()
                .take(keep)
                .map(|&(at, took)| {
                    let start = wall - now.duration_since(at).as_secs_f64();
                    format!(
                        "{start:.6} {:.6} {:.3}",
                        start + took.as_secs_f64(),
                        took.as_secs_f64() * 1e3
                    )
                })
                .collect();
            let path = format!("{}.{set}.windows", self.base);
            if let Err(e) = std::fs::write(&path, lines.join("\n") + "\n") {
                eprintln!("cannot write {path}: {e}");
            }
        }
    }
}
