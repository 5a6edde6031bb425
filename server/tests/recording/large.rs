//! Large and idle recordings: bounded memory, bytes kept against the cast, back-pressure past the rate, multipart final casts, idle writers.

use super::*;

/// A row left naming an earlier segment (the report of the end was lost while the database
/// was down) never gets a final cast built from it over the whole one: readers get the latest
/// version, and it would drop everything after that segment.
#[tokio::test]
async fn a_row_behind_the_final_cast_builds_nothing_over_it() {
    use breakglass_server::recording::segment::build_final;
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn RecordingStore> = Arc::new(LocalStore::new(dir.path()));
    let key = recording_key(Uuid::now_v7());
    let seen: Arc<Mutex<Vec<RecordingRef>>> = Arc::default();
    let on_stored = {
        let seen = seen.clone();
        move |r: RecordingRef| seen.lock().unwrap().push(r)
    };
    let w = CastWriter::start(store.clone(), &key, info(), fast_config(), on_stored)
        .await
        .unwrap();
    w.output(b"before the outage\r\n").unwrap();
    wait_for("a segment stored", 20, || {
        seen.lock()
            .unwrap()
            .iter()
            .any(|r| parse_segment_key(&r.key).is_some())
    })
    .await;
    let behind = seen
        .lock()
        .unwrap()
        .iter()
        .rfind(|r| parse_segment_key(&r.key).is_some())
        .cloned()
        .unwrap();
    w.output(b"after it, and the end\r\n").unwrap();
    let done = w.finish("UserEnded").await.unwrap();
    assert!(done.bytes > behind.bytes, "{done:?} {behind:?}");
    let whole = store.get(&key, None).await.unwrap();
    assert_eq!(whole.len() as u64, done.bytes);

    match build_final(store.as_ref(), &behind).await {
        Err(RecordingStoreError::Corrupt(why)) => assert!(why.contains("longer"), "{why}"),
        other => panic!("a row behind the final cast builds nothing: {other:?}"),
    }
    assert_eq!(store.get(&key, None).await.unwrap(), whole);
}

/// Output far past the old 64 MiB cap is recorded whole without ending the session, the
/// writer holding only its unstored tail, and the bucket keeps at most 2.2x the cast.
#[tokio::test]
async fn large_output_is_recorded_whole_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn RecordingStore> = Arc::new(LocalStore::new(dir.path()));
    let key = recording_key(Uuid::now_v7());
    let config = WriterConfig {
        segment_bytes: 1024 * 1024,
        max_rate: 0,
        ..fast_config()
    };
    let w = CastWriter::start(store.clone(), &key, info(), config, |_| {})
        .await
        .unwrap();
    let chunk: Vec<u8> = b"0123456789abcdef log line of a large file\r\n"
        .iter()
        .copied()
        .cycle()
        .take(16 * 1024)
        .collect();
    let mut peak = 0;
    for _ in 0..(100 * 1024 * 1024 / chunk.len()) {
        w.output(&chunk).unwrap();
        w.ready().await.unwrap();
        peak = peak.max(w.unstored());
    }
    assert!(peak <= 2 * 1024 * 1024 + 32 * 1024, "peak unstored {peak}");
    let last = w.finish("UserEnded").await.unwrap();
    assert!(last.bytes > 100 * 1024 * 1024);
    let r = verify(store.as_ref(), None, &last, None).await;
    assert!(r.ok(), "{r}");
    let stored: u64 = walk(dir.path());
    let ratio = stored as f64 / last.bytes as f64;
    assert!(
        ratio <= 2.2,
        "stored {stored} for a {} byte cast",
        last.bytes
    );
}

fn walk(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                walk(&e.path())
            } else {
                m.len()
            }
        })
        .sum()
}

/// Output ahead of the rate holds the relay back rather than being refused or dropped.
#[tokio::test]
async fn output_past_the_rate_waits_instead_of_failing() {
    use futures::FutureExt as _;
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn RecordingStore> = Arc::new(LocalStore::new(dir.path()));
    for (rate, waits) in [(1024 * 1024, true), (0, false)] {
        let key = recording_key(Uuid::now_v7());
        let config = WriterConfig {
            max_rate: rate,
            ..fast_config()
        };
        let w = CastWriter::start(store.clone(), &key, info(), config, |_| {})
            .await
            .unwrap();
        // Three seconds' worth at once: accepted, recorded, and then the relay waits.
        w.output(&vec![b'r'; 3 * 1024 * 1024]).unwrap();
        assert_eq!(w.ready().now_or_never().is_none(), waits, "rate {rate}");
        let last = w.finish("UserEnded").await.unwrap();
        assert!(last.bytes > 3 * 1024 * 1024);
    }
}

/// A final cast larger than one upload part goes up in parts, locked like any final cast; the
/// bucket keeps at most 2.2x the cast, every version of the session's objects counted.
#[tokio::test]
async fn s3_large_final_cast_is_stored_in_parts_verifies_and_keeps_at_most_2_2x() {
    let s3 = S3Server::start();
    s3.create_bucket();
    s3.add_limited_user().await;
    let store: Arc<dyn RecordingStore> = Arc::new(s3.user_store());
    let key = recording_key(Uuid::now_v7());
    let config = WriterConfig {
        segment_bytes: 2 * 1024 * 1024,
        max_rate: 0,
        ..fast_config()
    };
    let w = CastWriter::start(store.clone(), &key, info(), config, |_| {})
        .await
        .unwrap();
    let chunk = vec![b'p'; 64 * 1024];
    for _ in 0..(20 * 1024 * 1024 / chunk.len()) {
        w.output(&chunk).unwrap();
        w.ready().await.unwrap();
    }
    let last = w.finish("UserEnded").await.unwrap();
    assert_eq!(last.key, key);
    let r = verify(store.as_ref(), None, &last, None).await;
    assert!(r.ok(), "{r}");
    let root = s3.root_store();
    let head = root
        .client()
        .head_object()
        .bucket(&root.config().bucket)
        .key(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(head.object_lock_mode(), Some(&ObjectLockMode::Governance));
    let until = head.object_lock_retain_until_date().unwrap().secs();
    let in_a_year = time::OffsetDateTime::now_utc().unix_timestamp() + 365 * 86_400;
    assert!((until - in_a_year).abs() < 600, "retain until {until}");
    assert_eq!(head.content_length(), Some(last.bytes as i64));

    // What the bucket keeps, every version of every object of the session (Object Lock keeps
    // them all): at most 2.2x the final cast, as on the local store.
    let prefix = key.trim_end_matches(".cast");
    let mut kept = 0u64;
    let (mut key_marker, mut version_marker) = (None::<String>, None::<String>);
    loop {
        let page = root
            .client()
            .list_object_versions()
            .bucket(&root.config().bucket)
            .prefix(prefix)
            .set_key_marker(key_marker.clone())
            .set_version_id_marker(version_marker.clone())
            .send()
            .await
            .unwrap();
        kept += page
            .versions()
            .iter()
            .map(|v| u64::try_from(v.size().unwrap_or(0)).unwrap())
            .sum::<u64>();
        if page.is_truncated() != Some(true) {
            break;
        }
        key_marker = page.next_key_marker().map(ToString::to_string);
        version_marker = page.next_version_id_marker().map(ToString::to_string);
    }
    assert!(
        kept > last.bytes,
        "the listing missed objects: {kept} for {}",
        last.bytes
    );
    let ratio = kept as f64 / last.bytes as f64;
    assert!(
        ratio <= 2.2,
        "the bucket keeps {kept} bytes for a {} byte cast",
        last.bytes
    );
}

/// An old single-object recording, continued in segments after the upgrade, whose end could
/// not store the final cast: its old versions are not mistaken for the final cast, which the
/// rebuild then stores, and it verifies.
#[tokio::test]
async fn a_continued_old_recording_whose_end_failed_is_rebuilt() {
    use breakglass_server::recording::segment::build_final;
    let dir = tempfile::tempdir().unwrap();
    let nofinal = Arc::new(NoFinal {
        inner: LocalStore::new(dir.path()),
        refuse: true.into(),
    });
    let store: Arc<dyn RecordingStore> = nofinal.clone();
    let key = recording_key(Uuid::now_v7());
    let header = "{\"version\":2,\"width\":100,\"height\":30,\"timestamp\":1717000000}\n";
    let live = format!("{header}[0.5, \"o\", \"before the upgrade\\r\\n\"]\n");
    store
        .put_version(&key, live.as_bytes().to_vec().into())
        .await
        .unwrap();
    let from = read_back(store.as_ref(), &key).await.unwrap();
    let config = WriterConfig {
        finish_timeout: Duration::from_millis(300),
        ..fast_config()
    };
    let w = CastWriter::resume(
        store.clone(),
        &key,
        from,
        "server restarted",
        config,
        |_| {},
    )
    .await
    .unwrap();
    w.output(b"after the upgrade\r\n").unwrap();
    let row = w.finish("UserEnded").await.unwrap();
    assert!(
        parse_segment_key(&row.key).is_some(),
        "the end failed: {row:?}"
    );
    nofinal
        .refuse
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let built = build_final(store.as_ref(), &row).await.unwrap();
    assert!(built.is_some(), "the old versions are not the final cast");
    let r = verify(store.as_ref(), None, &row, None).await;
    assert!(r.ok(), "{r}");
    let cast = store.get(&key, None).await.unwrap();
    assert!(cast.starts_with(live.as_bytes()));
    assert!(asciinema_cat(&cast).contains("after the upgrade"));
}

/// An idle writer stores nothing and needs no timer; the first bytes after a quiet spell are
/// stored within an interval, and a finish while idle is not held back.
#[tokio::test]
async fn an_idle_writer_waits_for_bytes_and_stores_them_within_an_interval() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn RecordingStore> = Arc::new(LocalStore::new(dir.path()));
    let key = recording_key(Uuid::now_v7());
    let versions = Versions::default();
    let config = fast_config();
    let w = CastWriter::start(store.clone(), &key, info(), config.clone(), versions.sink())
        .await
        .unwrap();
    w.output(b"first\r\n").unwrap();
    wait_for("the first output stored", 10, || versions.all().len() >= 2).await;
    // Quiet while a busy writer beside it, on the same store and settings, stores six
    // flushes: counted, so the quiet spell is six flushes long however slow the machine is.
    let quiet = versions.all().len();
    busy_flushes(&store, &config, 6).await;
    assert_eq!(
        versions.all().len(),
        quiet,
        "an idle writer stored something"
    );

    // The first bytes after the quiet spell wake it.
    w.output(b"after the pause\r\n").unwrap();
    wait_for("the output after the pause stored", 10, || {
        versions.all().len() > quiet
    })
    .await;
    let cast = read_chain(store.as_ref(), &key, None).await.unwrap();
    assert!(
        String::from_utf8_lossy(&cast).contains("after the pause"),
        "{}",
        String::from_utf8_lossy(&cast)
    );
    // Idle again, then finished: the end is stored at once, not after an interval.
    let quiet = versions.all().len();
    busy_flushes(&store, &config, 3).await;
    assert_eq!(versions.all().len(), quiet);
    let last = tokio::time::timeout(Duration::from_secs(10), w.finish("UserEnded"))
        .await
        .expect("finishing an idle writer hung")
        .unwrap();
    let cast = store.get(&key, None).await.unwrap();
    assert_eq!(cast.len() as u64, last.bytes);
    assert!(String::from_utf8_lossy(&cast).contains("ended: UserEnded"));
}

/// Waits until a writer kept busy beside the one under test has stored `n` flushes: the time
/// in which a writer with anything to store would have stored it `n` times.
async fn busy_flushes(store: &Arc<dyn RecordingStore>, config: &WriterConfig, n: usize) {
    let versions = Versions::default();
    let w = CastWriter::start(
        store.clone(),
        &recording_key(Uuid::now_v7()),
        info(),
        config.clone(),
        versions.sink(),
    )
    .await
    .unwrap();
    // The header's version counts as none of the n.
    let start = versions.all().len();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while versions.all().len() < start + n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the busy writer stored {} flushes in 60 s",
            versions.all().len() - start
        );
        w.output(b"busy\r\n").unwrap();
        w.ready().await.unwrap();
        tokio::time::sleep(config.flush_interval / 4).await;
    }
    w.finish("UserEnded").await.unwrap();
}
