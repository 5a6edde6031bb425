//! The local store and the cast writer on it: the store's contract, versions and hashes, tampering, outages, bounds, resuming and handing a writer over.

use super::*;

// ------------------------------------------------------------------------------ LocalStore

#[cfg(unix)]
fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn local_store_contract() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path().join("recordings"));
    store.check().await.unwrap();
    let key = recording_key(Uuid::now_v7());
    assert!(matches!(
        store.get(&key, None).await,
        Err(RecordingStoreError::NotFound { version: None, .. })
    ));
    assert!(matches!(
        store.latest_version(&key).await,
        Err(RecordingStoreError::NotFound { .. })
    ));

    let a = store
        .put_version(&key, b"first".to_vec().into())
        .await
        .unwrap();
    let b = store
        .put_version(&key, b"second!".to_vec().into())
        .await
        .unwrap();
    assert_eq!((a.version_id.as_str(), b.version_id.as_str()), ("1", "2"));
    assert_eq!((b.bytes, b.sha256.clone()), (7, sha256_hex(b"second!")));
    assert_eq!(store.get(&key, Some("1")).await.unwrap(), b"first");
    assert_eq!(store.get(&key, None).await.unwrap(), b"second!");
    assert_eq!(store.latest_version(&key).await.unwrap(), "2");
    for missing in ["3", "0", "abc", "01M8MJQQ5V8V2HARQDGR97ZRAQ"] {
        assert!(
            matches!(
                store.get(&key, Some(missing)).await,
                Err(RecordingStoreError::NotFound { .. })
            ),
            "{missing}"
        );
    }
    for bad in ["../escape.cast", "/abs.cast", "sessions/../x"] {
        assert!(matches!(
            store.put_version(bad, b"x".to_vec().into()).await,
            Err(RecordingStoreError::InvalidKey(_))
        ));
    }
    let path = store.version_path(&key, "1").unwrap();
    assert_eq!(
        path,
        dir.path()
            .join("recordings")
            .join(format!("{key}.v"))
            .join("1")
    );
    #[cfg(unix)]
    assert_eq!(mode(&path), 0o444, "versions are read-only");
    // No temporary files left behind.
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");

    // Concurrent puts of one key never share a number.
    let store = Arc::new(store);
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let (s, k) = (store.clone(), key.clone());
            tokio::spawn(async move { s.put_version(&k, vec![i; 10].into()).await.unwrap() })
        })
        .collect();
    let mut ids = Vec::new();
    for t in tasks {
        ids.push(t.await.unwrap().version_id);
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 8);
    assert_eq!(store.latest_version(&key).await.unwrap(), "10");

    // A directory that cannot be created fails the check.
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, b"").unwrap();
    assert!(matches!(
        LocalStore::new(blocker.join("sub")).check().await,
        Err(RecordingStoreError::Misconfigured(_))
    ));
}

#[tokio::test]
async fn local_writer_versions_hash_and_asciinema() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn RecordingStore> = Arc::new(LocalStore::new(dir.path()));
    let key = recording_key(Uuid::now_v7());
    let versions = Versions::default();
    let w = CastWriter::start(store.clone(), &key, info(), fast_config(), versions.sink())
        .await
        .unwrap();
    play_session(&w).await;
    let last = w.finish("UserEnded").await.unwrap();
    check_versions(store.as_ref(), &versions.all(), &last).await;
    let path = LocalStore::new(dir.path())
        .version_path(&key, &last.version)
        .unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(
        last.sha256,
        sha256_hex(&bytes),
        "final hash = sha256 of the full cast"
    );
    assert_eq!(w.len(), bytes.len() as u64);
    let played = asciinema_cat(&bytes);
    assert!(played.contains("\x1b[1mbold\x1b[0m \u{20ac}"), "{played:?}");
    assert!(verify(store.as_ref(), None, &last, None).await.ok());
}

#[tokio::test]
async fn local_tampering_fails_verification() {
    let dir = tempfile::tempdir().unwrap();
    let local = LocalStore::new(dir.path());
    let store: Arc<dyn RecordingStore> = Arc::new(local.clone());
    let key = recording_key(Uuid::now_v7());
    let w = CastWriter::start(store.clone(), &key, info(), fast_config(), |_| {})
        .await
        .unwrap();
    w.output(b"rm -rf /tmp/evidence\r\n").unwrap();
    let good = w.finish("UserEnded").await.unwrap();
    assert!(verify(store.as_ref(), None, &good, None).await.ok());

    // Corrupt the recorded version in place (same length, so only the hash can tell).
    let path = local.version_path(&key, &good.version).unwrap();
    let original = std::fs::read(&path).unwrap();
    let doctored = String::from_utf8(original.clone())
        .unwrap()
        .replace("evidence", "nothing!");
    assert_eq!(doctored.len(), original.len());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    std::fs::write(&path, doctored).unwrap();
    let r = verify(store.as_ref(), None, &good, None).await;
    assert_eq!(r.failed(), [checks::HASH_ON_RECORD], "{r}");
    assert!(r.to_string().contains("FAIL hash on record"), "{r}");

    // Truncated: byte count and hash.
    std::fs::write(&path, &original[..original.len() - 5]).unwrap();
    let r = verify(store.as_ref(), None, &good, None).await;
    assert_eq!(
        r.failed(),
        [
            checks::BYTE_COUNT,
            checks::HASH_ON_RECORD,
            checks::ASCIICAST
        ],
        "{r}"
    );

    // A later version appended behind the row's back.
    std::fs::write(&path, &original).unwrap();
    store
        .put_version(
            &key,
            b"{\"version\":2,\"width\":1,\"height\":1}\n"
                .to_vec()
                .into(),
        )
        .await
        .unwrap();
    let r = verify(store.as_ref(), None, &good, None).await;
    assert_eq!(r.failed(), [checks::LATEST_VERSION], "{r}");

    // Removed: version missing (and the later version is still reported).
    std::fs::remove_file(&path).unwrap();
    let r = verify(store.as_ref(), None, &good, None).await;
    assert_eq!(
        r.failed(),
        [checks::VERSION_PRESENT, checks::LATEST_VERSION],
        "{r}"
    );
    assert!(r.to_string().contains("version missing"), "{r}");
}

/// Blocks writes of the segments of `key` in a local store even for root: their directory
/// is replaced by a plain file. Returns the moved-away directory to restore.
fn block_local(local: &LocalStore, key: &str) -> PathBuf {
    let dir = local.dir().join(key.strip_suffix(".cast").unwrap());
    let aside = dir.with_extension("aside");
    std::fs::rename(&dir, &aside).unwrap();
    std::fs::write(&dir, b"blocked").unwrap();
    aside
}

fn unblock_local(local: &LocalStore, key: &str, aside: &Path) {
    let dir = local.dir().join(key.strip_suffix(".cast").unwrap());
    std::fs::remove_file(&dir).unwrap();
    std::fs::rename(aside, &dir).unwrap();
}

#[tokio::test]
async fn local_outage_retries_recovers_and_fails_past_the_spool_limit() {
    let dir = tempfile::tempdir().unwrap();
    let local = LocalStore::new(dir.path());
    let store: Arc<dyn RecordingStore> = Arc::new(local.clone());
    let key = recording_key(Uuid::now_v7());
    let config = WriterConfig {
        spool_limit: 32 * 1024,
        ..fast_config()
    };
    let w = CastWriter::start(store.clone(), &key, info(), config, |_| {})
        .await
        .unwrap();

    let aside = block_local(&local, &key);
    w.output(&[b'x'; 8000]).unwrap();
    wait_for(
        "Retrying",
        10,
        || matches!(w.state(), WriterState::Retrying { attempts, .. } if attempts >= 2),
    )
    .await;
    w.output(&[b'y'; 8000]).unwrap();
    unblock_local(&local, &key, &aside);
    wait_for("Healthy", 10, || w.state() == WriterState::Healthy).await;
    let latest = read_chain(store.as_ref(), &key, None).await.unwrap();
    assert!(String::from_utf8_lossy(&latest).contains(&"y".repeat(8000)));

    let aside = block_local(&local, &key);
    w.output(b"z").unwrap();
    wait_for("Retrying", 10, || {
        matches!(w.state(), WriterState::Retrying { .. })
    })
    .await;
    let err = (0..100)
        .find_map(|_| w.output(&[b'w'; 4096]).err())
        .expect("refused past the spool limit");
    assert!(err.reason.contains("spool limit"), "{err}");
    assert!(matches!(w.state(), WriterState::Failed(_)));
    unblock_local(&local, &key, &aside);
    assert!(w.finish("RecordingFailed").await.is_err());
    let last = w.last_stored().unwrap();
    assert!(verify(store.as_ref(), None, &last, None).await.ok());
}

#[tokio::test]
async fn writer_bounds_size_records_input_only_when_asked_and_closes_on_drop() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn RecordingStore> = Arc::new(LocalStore::new(dir.path()));

    // Size bound.
    let key = recording_key(Uuid::now_v7());
    let config = WriterConfig {
        max_bytes: 16 * 1024,
        ..fast_config()
    };
    let w = CastWriter::start(store.clone(), &key, info(), config, |_| {})
        .await
        .unwrap();
    let err = (0..10)
        .find_map(|_| w.output(&[b'q'; 4096]).err())
        .expect("refused past max_bytes");
    assert!(err.reason.contains("maximum size"), "{err}");
    assert!(w.len() <= 16 * 1024);
    assert!(w.finish("RecordingFailed").await.is_err());
    let stored = store.get(&key, None).await.unwrap();
    parse(std::str::from_utf8(&stored).unwrap()).unwrap();

    // Input: only with record_input.
    for record_input in [false, true] {
        let key = recording_key(Uuid::now_v7());
        let config = WriterConfig {
            record_input,
            ..fast_config()
        };
        let w = CastWriter::start(store.clone(), &key, info(), config, |_| {})
            .await
            .unwrap();
        w.input(b"ls\r").unwrap();
        w.output(b"file\r\n").unwrap();
        let last = w.finish("UserEnded").await.unwrap();
        let bytes = store.get(&key, Some(&last.version)).await.unwrap();
        let (_, events) = parse(std::str::from_utf8(&bytes).unwrap()).unwrap();
        let inputs: Vec<_> = events.iter().filter(|e| e.code == Code::Input).collect();
        assert_eq!(inputs.len(), usize::from(record_input), "{events:?}");
    }

    // Dropping every handle without finish still closes and stores the cast.
    let key = recording_key(Uuid::now_v7());
    let w = CastWriter::start(store.clone(), &key, info(), fast_config(), |_| {})
        .await
        .unwrap();
    w.output(b"bye\r\n").unwrap();
    drop(w);
    let mut text = String::new();
    for _ in 0..100 {
        // The final cast appears once the flusher stored the closed cast.
        if let Ok(bytes) = store.get(&key, None).await {
            text = String::from_utf8(bytes).unwrap();
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(text.contains("bye"), "{text}");
    assert!(text.contains("ended: recording writer dropped"), "{text}");
}

/// A writer that continues a stored version (the server restarted) keeps the old bytes as a
/// prefix, one header, a `resumed` marker and a clock that never goes back; asciinema plays
/// the result. What cannot be continued is refused, not overwritten.
#[tokio::test]
async fn resumed_writer_continues_the_stored_cast() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn RecordingStore> = Arc::new(LocalStore::new(dir.path()));
    let key = recording_key(Uuid::now_v7());
    let versions = Versions::default();
    let first = CastWriter::start(store.clone(), &key, info(), fast_config(), versions.sink())
        .await
        .unwrap();
    first.marker("active").unwrap();
    first.output(b"before the crash\r\n").unwrap();
    wait_for("a flushed version with the output", 10, || {
        versions.all().last().is_some_and(|v| v.bytes > 150)
    })
    .await;
    // The crash: the first writer's flusher is gone with the process; what is stored stays.
    let stored = read_chain(store.as_ref(), &key, None).await.unwrap();
    assert!(String::from_utf8_lossy(&stored).contains("before the crash"));
    std::mem::forget(first);

    let again = Versions::default();
    let second = CastWriter::resume(
        store.clone(),
        &key,
        read_back(store.as_ref(), &key).await.unwrap(),
        "server restarted",
        fast_config(),
        again.sink(),
    )
    .await
    .unwrap();
    second
        .output("after the restart \u{20ac}\r\n".as_bytes())
        .unwrap();
    let last = second.finish("UserEnded").await.unwrap();
    let cast = store.get(&key, Some(&last.version)).await.unwrap();
    assert!(
        cast.starts_with(&stored),
        "the old versions' bytes are kept as they were"
    );
    assert_eq!(last.sha256, sha256_hex(&cast));
    let text = String::from_utf8(cast.clone()).unwrap();
    let (header, events) = breakglass_shared::recording::parse(&text).unwrap();
    assert_eq!((header.width, header.height), (100, 30));
    let labels: Vec<&str> = events.iter().map(|e| e.data.as_str()).collect();
    let resumed = labels
        .iter()
        .position(|l| *l == "resumed: server restarted")
        .unwrap();
    let before = labels
        .iter()
        .position(|l| *l == "before the crash\r\n")
        .unwrap();
    let after = labels
        .iter()
        .position(|l| l.starts_with("after the restart"))
        .unwrap();
    assert!(before < resumed && resumed < after, "{labels:?}");
    assert_eq!(labels.last(), Some(&"ended: UserEnded"));
    assert!(
        events.windows(2).all(|w| w[0].time <= w[1].time),
        "{events:?}"
    );
    // Every version of the continued run was reported, the first one at once.
    assert!(again.all().len() >= 2, "{:?}", again.all());
    assert!(asciinema_cat(&cast).contains("after the restart \u{20ac}"));
    assert!(verify(store.as_ref(), None, &last, None).await.ok());

    // A stored object that is not a complete cast is not continued.
    for bad in [&b"not a cast\n"[..], &stored[..stored.len() - 3]] {
        let e = CastWriter::resume(
            store.clone(),
            &key,
            Resumable::Single(bad.to_vec()),
            "x",
            fast_config(),
            |_| {},
        )
        .await
        .unwrap_err();
        assert!(e.to_string().contains("cannot be continued"), "{e}");
    }
}

/// A writer handing over to another replica stores every byte it took, with a `handed over`
/// marker and no end marker, takes nothing more, and the next writer continues that cast
/// byte for byte, so the output before and after is in the cast once.
#[tokio::test]
async fn handed_off_writer_stores_everything_and_the_next_continues_it() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn RecordingStore> = Arc::new(LocalStore::new(dir.path()));
    let key = recording_key(Uuid::now_v7());
    let versions = Versions::default();
    let first = CastWriter::start(store.clone(), &key, info(), fast_config(), versions.sink())
        .await
        .unwrap();
    first.output(b"typed on A\r\n").unwrap();
    let last = first.hand_off("the terminal moved").await.unwrap();
    assert!(
        first.output(b"late").is_err(),
        "a handed-off writer takes nothing more"
    );
    let stored = read_recording(store.as_ref(), &last, false).await.unwrap();
    assert_eq!(last.sha256, sha256_hex(&stored));
    assert!(
        store.get(&key, None).await.is_err(),
        "a handover stores no final cast"
    );
    assert!(breakglass_server::recording::handed_over(&stored));
    assert_eq!(breakglass_server::recording::ended_reason(&stored), None);

    let second = CastWriter::resume(
        store.clone(),
        &key,
        read_back(store.as_ref(), &key).await.unwrap(),
        "handed over by another server replica",
        fast_config(),
        Versions::default().sink(),
    )
    .await
    .unwrap();
    second.output(b"typed on B\r\n").unwrap();
    let end = second.finish("UserEnded").await.unwrap();
    let cast = store.get(&key, Some(&end.version)).await.unwrap();
    assert!(cast.starts_with(&stored));
    let (_, events) = parse(std::str::from_utf8(&cast).unwrap()).unwrap();
    let data: Vec<&str> = events.iter().map(|e| e.data.as_str()).collect();
    for line in ["typed on A\r\n", "typed on B\r\n"] {
        assert_eq!(data.iter().filter(|d| **d == line).count(), 1, "{data:?}");
    }
    assert!(!data.iter().any(|d| d.contains("late")), "{data:?}");
    let handed = data
        .iter()
        .position(|d| d.starts_with("handed over: "))
        .unwrap();
    let resumed = data
        .iter()
        .position(|d| *d == "resumed: handed over by another server replica")
        .unwrap();
    assert_eq!(resumed, handed + 1, "{data:?}");
    assert_eq!(data.last(), Some(&"ended: UserEnded"));
}
