//! What a recording costs in the store and in the writer's memory, for the segment layout and
//! for the single-object layout it replaced, measured in one run.
//!
//! Each scenario is recorded once through the real [`CastWriter`] into a [`LocalStore`]. The
//! steady ones run 100 times faster than the wall clock, flush interval included (50 ms for
//! 5 s), so an hour takes 36 s with its 720 flushes; the burst runs at the real clock and the
//! default settings (its rate included). The new layout's figures are
//! measured: the store's files on disk, and the heap's peak (a counting allocator) while the
//! writer ran, its final cast included. The old layout is then replayed over the same run: at
//! every flush interval the whole cast so far is copied and "stored" (counted), as the old
//! flusher did with its copy of the cast, so its peak heap is measured the same way.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakglass_server::recording::segment::{parse_segment_key, segment_key};
use breakglass_server::recording::{
    recording_key, CastWriter, LocalStore, RecordingStore, SessionInfo, WriterConfig,
};
use breakglass_shared::session::RecordingRef;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting the bytes in use and their peak.
pub struct Counting;

// The only unsafe code of the workspace, and bench-only: a global allocator is how the peak
// heap is measured rather than estimated.
// SAFETY: every call is forwarded to `System` unchanged; only counters are added.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = NOW.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        NOW.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Starts a peak measurement; returns the heap in use now.
fn peak_reset() -> usize {
    let now = NOW.load(Ordering::Relaxed);
    PEAK.store(now, Ordering::Relaxed);
    now
}

fn peak_since(base: usize) -> usize {
    PEAK.load(Ordering::Relaxed).saturating_sub(base)
}

/// One scenario: `chunks` of `chunk` bytes, one every `every` (zero: as fast as the writer
/// lets the relay go), flushed every `flush`.
struct Scenario {
    name: String,
    chunk: usize,
    chunks: usize,
    every: Duration,
    flush: Duration,
}

/// How much faster than the wall clock the steady scenarios run.
const SCALE: u32 = 100;

/// What a run stored: (tokio time since start, cast bytes stored by then) per stored segment.
type Timeline = Arc<Mutex<Vec<(Duration, u64)>>>;

fn du(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => du(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

fn line(i: usize, len: usize) -> Vec<u8> {
    let text = format!(
        "\x1b[0;34m12:{:02}:{:02}\x1b[0m INFO request id={i:08x} path=\"/api/v1/items/{i}\" status=200 ✓ ",
        (i / 60) % 60,
        i % 60
    );
    let mut out: Vec<u8> = text.bytes().cycle().take(len.saturating_sub(2)).collect();
    // Never end inside a UTF-8 character: pad with ASCII instead.
    while std::str::from_utf8(&out).is_err() {
        out.pop();
    }
    out.resize(len.saturating_sub(2), b'.');
    out.extend_from_slice(b"\r\n");
    out
}

/// Records `s` with the segment layout; returns (final reference, stored bytes, peak heap,
/// timeline).
async fn record(s: &Scenario, dir: &Path) -> (RecordingRef, u64, usize, Timeline) {
    let store: Arc<dyn RecordingStore> = Arc::new(LocalStore::new(dir));
    let key = recording_key(uuid::Uuid::now_v7());
    let timeline: Timeline = Arc::default();
    let start = tokio::time::Instant::now();
    let sink = timeline.clone();
    let on_stored = move |r: RecordingRef| {
        if parse_segment_key(&r.key).is_some() {
            if let Ok(mut t) = sink.lock() {
                t.push((start.elapsed(), r.bytes));
            }
        }
    };
    let chunk = line(s.chunk, s.chunk);
    let base = peak_reset();
    let info = SessionInfo {
        width: 200,
        height: 50,
        title: None,
        timestamp: None,
    };
    let config = WriterConfig {
        flush_interval: s.flush,
        ..WriterConfig::default()
    };
    let w = CastWriter::start(store, &key, info, config, on_stored)
        .await
        .expect("start");
    let mut tick = tokio::time::interval(s.every.max(Duration::from_millis(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    for _ in 0..s.chunks {
        if !s.every.is_zero() {
            tick.tick().await;
        }
        w.output(&chunk).expect("output recorded");
        w.ready().await.expect("writer healthy");
    }
    let last = w.finish("UserEnded").await.expect("finished");
    drop(w);
    let peak = peak_since(base);
    (last, du(dir), peak, timeline)
}

/// The old layout over the same run: at every flush interval the whole cast so far (read back
/// from the segments) is extended into the flusher's copy and copied once more to upload.
/// Returns (bytes it would have stored, peak heap).
async fn replay_old(
    dir: &Path,
    key: &str,
    interval: Duration,
    timeline: &[(Duration, u64)],
    total: u64,
) -> (u64, usize) {
    let store = LocalStore::new(dir);
    let end = timeline.last().map_or(Duration::ZERO, |(t, _)| *t);
    let mut flushes: Vec<u64> = Vec::new();
    let mut t = Duration::ZERO;
    while t <= end {
        let by = timeline
            .iter()
            .take_while(|(at, _)| *at <= t)
            .last()
            .map_or(0, |(_, b)| *b);
        if flushes.last() != Some(&by) && by > 0 {
            flushes.push(by);
        }
        t += interval;
    }
    if flushes.last() != Some(&total) {
        flushes.push(total);
    }
    let base = peak_reset();
    let (mut full, mut stored, mut next) = (Vec::new(), 0u64, 1u64);
    for upto in flushes {
        while (full.len() as u64) < upto {
            let (body, _, _) = store
                .get_with_meta(&segment_key(key, next), None)
                .await
                .expect("segment");
            full.extend_from_slice(&body);
            next += 1;
        }
        let upload = std::hint::black_box(full.clone());
        stored += upload.len() as u64;
        drop(upload);
    }
    drop(full);
    (stored, peak_since(base))
}

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

/// Runs every scenario and prints one line each.
pub fn run() {
    let burst_mb: usize = std::env::var("BENCH_BURST_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    // 100 bytes every 100 ms (1 kB/s), flushed every 5 s: on the scaled clock.
    let steady = |minutes: usize| Scenario {
        name: format!("{minutes} min steady output (1 kB/s)"),
        chunk: 100,
        chunks: minutes * 60 * 10,
        every: Duration::from_millis(100) / SCALE,
        flush: Duration::from_secs(5) / SCALE,
    };
    let scenarios = [
        steady(1),
        steady(10),
        steady(60),
        Scenario {
            name: format!("{burst_mb} MB burst (cat of a large file)"),
            chunk: 16 * 1024,
            chunks: burst_mb * 1_000_000 / (16 * 1024),
            every: Duration::ZERO,
            flush: WriterConfig::default().flush_interval,
        },
    ];
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!("recording storage: bytes kept in the store / bytes of the final cast, and the writer's peak heap");
    for s in &scenarios {
        let dir = tempfile::tempdir().expect("tempdir");
        let (last, stored, peak, timeline) = rt.block_on(record(s, dir.path()));
        let timeline = timeline.lock().map(|t| t.clone()).unwrap_or_default();
        let (old_stored, old_peak) = rt.block_on(replay_old(
            dir.path(),
            &last.key,
            s.flush,
            &timeline,
            last.bytes,
        ));
        let cast = last.bytes as f64;
        println!(
            "{:<40} final cast {:>9.1} MiB | segments: stored/final {:>5.2}, peak heap {:>7.1} MiB | \
             single object: stored/final {:>7.2}, peak heap {:>7.1} MiB | stored old/new {:>6.1}x, peak old/new {:>5.1}x",
            s.name,
            mib(last.bytes as usize),
            stored as f64 / cast,
            mib(peak),
            old_stored as f64 / cast,
            mib(old_peak),
            old_stored as f64 / stored as f64,
            old_peak as f64 / peak.max(1) as f64,
        );
    }
    println!(
        "(the single-object layout also ended a session at its 64 MiB cap; the replay shows what it would have stored)"
    );
}
