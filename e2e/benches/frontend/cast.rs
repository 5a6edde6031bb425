//! A synthetic recording that looks like a busy shell for as long as asked: coloured log
//! lines at about 20 MB an hour, every event ending on a line that names it, so a benchmark
//! can tell from the screen alone which moment xterm shows.

use std::fmt::Write as _;

/// Terminal size of the recording.
pub const COLS: u16 = 120;
pub const ROWS: u16 = 40;
/// Recording seconds between two output events.
pub const STEP: f64 = 0.25;
/// Output bytes an hour, as the design's one-hour cast.
const BYTES_PER_HOUR: usize = 20 * 1024 * 1024;

/// A generated asciicast v2 and what its events show.
pub struct Cast {
    /// The whole file.
    pub text: String,
    /// Recording time of each output event, in order.
    pub times: Vec<f64>,
    /// Output bytes in it.
    pub output_bytes: usize,
}

impl Cast {
    /// The last line event `i` leaves on the screen (what a seek into it must paint).
    pub fn stamp(i: usize) -> String {
        format!("@@ event {i:07} @@")
    }

    /// The event shown at recording time `t`: the last one at or before it.
    pub fn event_at(&self, t: f64) -> usize {
        self.times.partition_point(|&e| e <= t).saturating_sub(1)
    }

    /// The output of events `range`, concatenated.
    pub fn output_of(&self, range: std::ops::Range<usize>) -> String {
        self.text
            .lines()
            .skip(2 + range.start)
            .take(range.len())
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|e| e.get(2).and_then(|d| d.as_str()).map(String::from))
            .collect()
    }

    /// A recording of `minutes` minutes.
    pub fn generate(minutes: u32) -> Cast {
        let events = (f64::from(minutes) * 60.0 / STEP) as usize;
        let per_event = BYTES_PER_HOUR / (3600.0 / STEP) as usize;
        let mut text = format!(
            "{{\"version\":2,\"width\":{COLS},\"height\":{ROWS},\"timestamp\":1764590400,\"env\":{{\"TERM\":\"xterm-256color\",\"SHELL\":\"/bin/sh\"}}}}\n"
        );
        text.push_str("[0.0,\"m\",\"active\"]\n");
        let mut times = Vec::with_capacity(events);
        let mut output_bytes = 0;
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for i in 0..events {
            let t = STEP * (i + 1) as f64;
            let data = event_output(i, per_event, &mut seed);
            output_bytes += data.len();
            // JSON-escaped: only ESC, CR, LF and the quote-free text below occur.
            let escaped = data
                .replace('\x1b', "\\u001b")
                .replace('\r', "\\r")
                .replace('\n', "\\n");
            let _ = writeln!(text, "[{t:.3},\"o\",\"{escaped}\"]");
            times.push(t);
        }
        let end = STEP * (events + 1) as f64;
        let _ = writeln!(text, "[{end:.3},\"m\",\"ended\"]");
        Cast {
            text,
            times,
            output_bytes,
        }
    }
}

fn next(seed: &mut u64) -> u64 {
    // xorshift64*: reproducible without a dependency.
    *seed ^= *seed >> 12;
    *seed ^= *seed << 25;
    *seed ^= *seed >> 27;
    seed.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// About `bytes` of coloured log lines, now and then a screen clear or a progress bar
/// rewritten in place, ending on [`Cast::stamp`] without a newline.
fn event_output(i: usize, bytes: usize, seed: &mut u64) -> String {
    const LEVELS: [&str; 4] = [
        "\x1b[32mINFO\x1b[0m",
        "\x1b[33mWARN\x1b[0m",
        "\x1b[36mDEBUG\x1b[0m",
        "\x1b[1;31mERROR\x1b[0m",
    ];
    const PATHS: [&str; 5] = [
        "/api/orders",
        "/api/payments/capture",
        "/healthz",
        "/api/users/me",
        "/metrics",
    ];
    let mut out = String::with_capacity(bytes + 64);
    if i % 400 == 399 {
        out.push_str("\x1b[2J\x1b[H");
    }
    while out.len() < bytes {
        let r = next(seed);
        let level = LEVELS[(r % 4) as usize];
        let path = PATHS[((r >> 8) % 5) as usize];
        if r.is_multiple_of(17) {
            let done = (r >> 16) % 40;
            let _ = write!(
                out,
                "\r\n\x1b[7m[{}{}]\x1b[0m {done:>2}/40\r",
                "#".repeat(done as usize),
                " ".repeat(40 - done as usize)
            );
        }
        let _ = write!(
            out,
            "\r\n\x1b[90m2026-12-01T10:{:02}:{:02}.{:03}Z\x1b[0m {level} req={:016x} {path} status={} took={}ms worker={}",
            (i / 240) % 60,
            (i / 4) % 60,
            (r >> 20) % 1000,
            r,
            [200, 201, 404, 500][((r >> 24) % 4) as usize],
            (r >> 32) % 900,
            (r >> 40) % 16,
        );
    }
    let _ = write!(out, "\r\n\x1b[1m{}\x1b[0m", Cast::stamp(i));
    out
}

/// Panics unless `cast` parses with the server's own parser and its events end on their
/// stamps: a benchmark over a malformed cast would time an error screen.
pub fn check(cast: &Cast) {
    let (header, events) = breakglass_shared::recording::parse(&cast.text).unwrap();
    assert_eq!((header.width, header.height), (COLS, ROWS));
    let outputs: Vec<_> = events
        .iter()
        .filter(|e| e.code == breakglass_shared::recording::Code::Output)
        .collect();
    assert_eq!(outputs.len(), cast.times.len());
    for (i, e) in outputs.iter().enumerate().step_by(97) {
        assert!(
            e.data.ends_with(&format!("{}\x1b[0m", Cast::stamp(i))),
            "event {i}"
        );
    }
    assert_eq!(cast.event_at(STEP * 4.0 + STEP / 2.0), 3);
}
