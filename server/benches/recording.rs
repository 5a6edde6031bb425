//! Two measurements, both against a baseline measured in the same run:
//!
//! 1. Storage (`storage.rs`): 1, 10 and 60 minutes of steady output and a 500 MB burst,
//!    recorded in segments; prints the bytes kept in the store over the final cast's, and the
//!    writer's peak heap, for the segment layout and for the single-object layout it replaced
//!    (every flush the whole cast so far), replayed over the same flushes.
//! 2. Throughput of the hot path: 100 MB of terminal output in 4 KiB chunks through
//!    `CastWriter::output`, against only copying the same chunks into a `Vec`.
//!
//! Prints ratios; asserts nothing about time.
//!
//! Run: `cargo bench -p breakglass-server --bench recording`
//! (`BENCH_MB=20` for a shorter throughput run, `BENCH_BURST_MB=100` for a smaller burst,
//! `BENCH_ONLY=storage` or `BENCH_ONLY=throughput` for one of them).

#[path = "recording/storage.rs"]
mod storage;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use breakglass_server::recording::{
    recording_key, CastWriter, LocalStore, RecordingStore, SessionInfo, WriterConfig,
};

#[global_allocator]
static HEAP: storage::Counting = storage::Counting;

const CHUNK: usize = 4096;

/// Chunks that look like a busy terminal: colored `ls -l`/log lines, CR LF, some UTF-8
/// (split across chunk boundaries on purpose).
fn terminal_chunks() -> Vec<Vec<u8>> {
    let mut text = Vec::new();
    let mut i = 0u64;
    while text.len() < 64 * CHUNK {
        let line = format!(
            "\x1b[0;34m2024-05-01T12:{:02}:{:02}Z\x1b[0m \x1b[1mINFO\x1b[0m request id={i:08x} path=\"/api/v1/items/{i}\" status=200 bytes={} durée=3.{}ms ✓\r\n",
            (i / 60) % 60,
            i % 60,
            i * 37 % 10_000,
            i % 10
        );
        text.extend_from_slice(line.as_bytes());
        i += 1;
    }
    text.chunks(CHUNK)
        .filter(|c| c.len() == CHUNK)
        .map(<[u8]>::to_vec)
        .collect()
}

/// Plain ASCII text without anything to escape (the cheapest case for the writer).
fn plain_chunks() -> Vec<Vec<u8>> {
    let line = b"the quick brown fox jumps over the lazy dog 0123456789 ";
    let text: Vec<u8> = line.iter().copied().cycle().take(16 * CHUNK).collect();
    text.chunks(CHUNK).map(<[u8]>::to_vec).collect()
}

fn baseline(chunks: &[Vec<u8>], n: usize) -> Duration {
    let start = Instant::now();
    let mut sink: Vec<u8> = Vec::with_capacity(64 * 1024);
    for i in 0..n {
        sink.extend_from_slice(black_box(&chunks[i % chunks.len()]));
    }
    black_box(&sink);
    let t = start.elapsed();
    drop(sink);
    t
}

/// Returns (time of the `output` calls, time of `finish` = final upload to a local store).
async fn writer(chunks: &[Vec<u8>], n: usize) -> (Duration, Duration) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store: Arc<dyn RecordingStore> = Arc::new(LocalStore::new(dir.path()));
    let config = WriterConfig {
        max_bytes: 1 << 30,
        spool_limit: 1 << 30,
        ..WriterConfig::default()
    };
    let info = SessionInfo {
        width: 200,
        height: 50,
        title: None,
        timestamp: None,
    };
    let w = CastWriter::start(
        store,
        recording_key(uuid::Uuid::now_v7()),
        info,
        config,
        |_| {},
    )
    .await
    .expect("start");
    let start = Instant::now();
    for i in 0..n {
        if w.output(black_box(&chunks[i % chunks.len()])).is_err() {
            eprintln!("writer refused output");
            break;
        }
    }
    let hot = start.elapsed();
    let start = Instant::now();
    let _ = w.finish("UserEnded").await;
    (hot, start.elapsed())
}

fn mbps(bytes: usize, t: Duration) -> f64 {
    bytes as f64 / 1e6 / t.as_secs_f64()
}

fn main() {
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    if only != "throughput" {
        storage::run();
    }
    if only == "storage" {
        return;
    }
    let mb: usize = std::env::var("BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let n = mb * 1_000_000 / CHUNK;
    let bytes = n * CHUNK;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!("recording bench: {mb} MB of output in {CHUNK}-byte chunks ({n} calls), best of 3");
    for (name, chunks) in [
        ("terminal output", terminal_chunks()),
        ("plain ASCII", plain_chunks()),
    ] {
        let mut base = Duration::MAX;
        let mut hot = Duration::MAX;
        let mut fin = Duration::MAX;
        for _ in 0..3 {
            base = base.min(baseline(&chunks, n));
            let (h, f) = rt.block_on(writer(&chunks, n));
            hot = hot.min(h);
            fin = fin.min(f);
        }
        println!(
            "{name:<16} baseline Vec copy {:>8.0} MB/s | CastWriter::output {:>7.0} MB/s ({:>5.0} ns/chunk) | ratio output/baseline {:.3} (baseline is {:.1}x faster) | finish (final version to a local store) {:.0} ms",
            mbps(bytes, base),
            mbps(bytes, hot),
            hot.as_nanos() as f64 / n as f64,
            base.as_secs_f64() / hot.as_secs_f64(),
            hot.as_secs_f64() / base.as_secs_f64(),
            fin.as_secs_f64() * 1000.0,
        );
    }
}
