//! Segmented recordings: the hash chain across segments, old layouts continued, the final cast rebuilt after a failed end.

use super::*;

// ------------------------------------------------------------------------- segments

/// Records a small session (several segments) and returns its final reference.
async fn segmented_recording(store: Arc<dyn RecordingStore>, key: &str) -> RecordingRef {
    let versions = Versions::default();
    let w = CastWriter::start(store.clone(), key, info(), fast_config(), versions.sink())
        .await
        .unwrap();
    play_session(&w).await;
    let last = w.finish("UserEnded").await.unwrap();
    check_versions(store.as_ref(), &versions.all(), &last).await;
    let report = verify(store.as_ref(), None, &last, None).await;
    assert!(report.ok(), "{report}");
    assert!(matches!(
        report.outcome(checks::SEGMENTS),
        Some(CheckOutcome::Pass(t)) if t.contains("segments")
    ));
    last
}

/// Changes a store behind the server's back, the way someone with access to it could.
#[async_trait::async_trait]
trait Tamper {
    /// Replaces `key`'s (latest) body and metadata.
    async fn rewrite(&self, key: &str, body: Vec<u8>, meta: HashMap<String, String>);
    /// Removes `key`.
    async fn remove(&self, key: &str);
}

#[async_trait::async_trait]
impl Tamper for LocalStore {
    async fn rewrite(&self, key: &str, body: Vec<u8>, meta: HashMap<String, String>) {
        use std::os::unix::fs::PermissionsExt;
        let latest = self.latest_version(key).await.unwrap();
        let path = self.version_path(key, &latest).unwrap();
        let meta_path = path.with_extension("meta");
        for p in [&path, &meta_path].into_iter().filter(|p| p.exists()) {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        std::fs::write(&path, body).unwrap();
        if !meta.is_empty() {
            std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();
        }
    }
    async fn remove(&self, key: &str) {
        std::fs::remove_dir_all(self.versions_dir(key).unwrap()).unwrap();
    }
}

/// The root key of a versitygw: a new version for a rewrite, every version deleted with the
/// governance bypass for a removal.
struct RootTamper(S3Store);

#[async_trait::async_trait]
impl Tamper for RootTamper {
    async fn rewrite(&self, key: &str, body: Vec<u8>, meta: HashMap<String, String>) {
        self.0
            .client()
            .put_object()
            .bucket(&self.0.config().bucket)
            .key(key)
            .set_metadata(Some(meta))
            .body(ByteStream::from(body))
            .send()
            .await
            .unwrap();
    }
    async fn remove(&self, key: &str) {
        while let Ok(v) = self.0.latest_version(key).await {
            self.0
                .client()
                .delete_object()
                .bucket(&self.0.config().bucket)
                .key(key)
                .version_id(v)
                .bypass_governance_retention(true)
                .send()
                .await
                .unwrap();
        }
    }
}

/// Tampering with a segment, removing one, reordering two and truncating the final cast are
/// each caught, the first bad segment named.
async fn chain_tampering_is_caught(store: Arc<dyn RecordingStore>, tamper: &dyn Tamper) {
    let seg = |key: &str, n| segment_key(key, n);
    let read = |key: String| {
        let store = store.clone();
        async move {
            let (b, m, _) = store.get_with_meta(&key, None).await.unwrap();
            (b, m.into_iter().collect::<HashMap<_, _>>())
        }
    };
    let failed_chain =
        |r: &breakglass_server::recording::VerifyReport| match r.outcome(checks::SEGMENTS) {
            Some(CheckOutcome::Fail(t)) => t.clone(),
            other => panic!("segment chain not failed: {other:?}\n{r}"),
        };

    // A segment's bytes changed (its own links left as they were).
    let key = recording_key(Uuid::now_v7());
    let row = segmented_recording(store.clone(), &key).await;
    let (body, meta) = read(seg(&key, 2)).await;
    let changed = String::from_utf8(body).unwrap().replace("world", "WORLD");
    tamper
        .rewrite(&seg(&key, 2), changed.into_bytes(), meta)
        .await;
    let r = verify(store.as_ref(), None, &row, None).await;
    assert!(failed_chain(&r).starts_with("segment 2:"), "{r}");

    // A segment removed.
    let key = recording_key(Uuid::now_v7());
    let row = segmented_recording(store.clone(), &key).await;
    tamper.remove(&seg(&key, 2)).await;
    let r = verify(store.as_ref(), None, &row, None).await;
    assert!(failed_chain(&r).starts_with("segment 2 is missing"), "{r}");
    assert_eq!(r.failed(), [checks::SEGMENTS], "{r}");

    // Two segments swapped, links and all.
    let key = recording_key(Uuid::now_v7());
    let row = segmented_recording(store.clone(), &key).await;
    let (b2, m2) = read(seg(&key, 2)).await;
    let (b3, m3) = read(seg(&key, 3)).await;
    tamper.rewrite(&seg(&key, 2), b3, m3).await;
    tamper.rewrite(&seg(&key, 3), b2, m2).await;
    let r = verify(store.as_ref(), None, &row, None).await;
    let why = failed_chain(&r);
    assert!(
        why.starts_with("segment 2:") && why.contains("holds segment 3"),
        "{r}"
    );

    // The final cast truncated.
    let key = recording_key(Uuid::now_v7());
    let row = segmented_recording(store.clone(), &key).await;
    let whole = store.get(&key, None).await.unwrap();
    tamper
        .rewrite(&key, whole[..whole.len() - 10].to_vec(), HashMap::new())
        .await;
    let r = verify(store.as_ref(), None, &row, None).await;
    assert!(!r.ok(), "{r}");
    assert!(
        r.failed().contains(&checks::HASH_ON_RECORD)
            || r.failed().contains(&checks::LATEST_VERSION),
        "{r}"
    );
    // A row naming the truncated version (the row edited too) fails on the hash and on the
    // segments, which still hold the whole cast.
    let latest = store.latest_version(&key).await.unwrap();
    let edited = RecordingRef {
        version: latest,
        bytes: whole.len() as u64 - 10,
        sha256: sha256_hex(&whole[..whole.len() - 10]),
        ..row.clone()
    };
    let r = verify(store.as_ref(), None, &edited, None).await;
    assert!(r.failed().contains(&checks::SEGMENTS), "{r}");
}

#[tokio::test]
async fn local_segment_chain_tampering_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let local = LocalStore::new(dir.path());
    chain_tampering_is_caught(Arc::new(local.clone()), &local).await;
}

#[tokio::test]
async fn s3_segment_chain_tampering_is_caught() {
    let s3 = S3Server::start();
    s3.create_bucket();
    s3.add_limited_user().await;
    chain_tampering_is_caught(Arc::new(s3.user_store()), &RootTamper(s3.root_store())).await;
}

/// A recording of the single-object layout (every flush a complete version) still plays,
/// verifies, and is continued into segments.
#[tokio::test]
async fn old_layout_recording_plays_verifies_and_continues() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn RecordingStore> = Arc::new(LocalStore::new(dir.path()));
    let key = recording_key(Uuid::now_v7());
    let header = "{\"version\":2,\"width\":100,\"height\":30,\"timestamp\":1717000000}\n";
    let full = format!(
        "{header}[0.5, \"o\", \"old layout \\u00e9\\r\\n\"]\n[1.0, \"m\", \"ended: UserEnded\"]\n"
    );
    store
        .put_version(&key, header.as_bytes().to_vec().into())
        .await
        .unwrap();
    let row = store
        .put_version(&key, full.as_bytes().to_vec().into())
        .await
        .unwrap()
        .to_ref(&key);
    let r = verify(store.as_ref(), None, &row, None).await;
    assert!(r.ok(), "{r}");
    assert!(
        matches!(r.outcome(checks::SEGMENTS), Some(CheckOutcome::Skipped(t)) if t.contains("single-object")),
        "{r}"
    );
    let played = read_recording(store.as_ref(), &row, false).await.unwrap();
    assert_eq!(played, full.as_bytes());
    assert!(asciinema_cat(&played).contains("old layout \u{e9}"));

    // A live one (no end marker yet) is carried over whole as the first segment.
    let key = recording_key(Uuid::now_v7());
    let live = format!("{header}[0.5, \"o\", \"before the upgrade\\r\\n\"]\n");
    store
        .put_version(&key, live.as_bytes().to_vec().into())
        .await
        .unwrap();
    let from = read_back(store.as_ref(), &key).await.unwrap();
    assert!(matches!(&from, Resumable::Single(b) if b == live.as_bytes()));
    let w = CastWriter::resume(
        store.clone(),
        &key,
        from,
        "server restarted",
        fast_config(),
        |_| {},
    )
    .await
    .unwrap();
    w.output(b"after the upgrade\r\n").unwrap();
    let last = w.finish("UserEnded").await.unwrap();
    let cast = store.get(&key, Some(&last.version)).await.unwrap();
    assert!(cast.starts_with(live.as_bytes()));
    let r = verify(store.as_ref(), None, &last, None).await;
    assert!(r.ok(), "{r}");
    assert!(
        matches!(r.outcome(checks::SEGMENTS), Some(CheckOutcome::Pass(_))),
        "{r}"
    );
    assert!(asciinema_cat(&cast).contains("after the upgrade"));
}

/// A store that refuses to take a final cast (its end fails) until told otherwise.
pub(crate) struct NoFinal {
    pub(crate) inner: LocalStore,
    pub(crate) refuse: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl RecordingStore for NoFinal {
    async fn put_version(
        &self,
        key: &str,
        body: breakglass_server::recording::CastBody,
    ) -> Result<breakglass_server::recording::StoredVersion, RecordingStoreError> {
        self.inner.put_version(key, body).await
    }
    async fn put_segment(
        &self,
        key: &str,
        body: breakglass_server::recording::CastBody,
    ) -> Result<breakglass_server::recording::StoredVersion, RecordingStoreError> {
        self.inner.put_segment(key, body).await
    }
    async fn put_chunks(
        &self,
        key: &str,
        chunks: &mut dyn breakglass_server::recording::Chunks,
        sha256: [u8; 32],
        bytes: u64,
    ) -> Result<breakglass_server::recording::StoredVersion, RecordingStoreError> {
        if self.refuse.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(RecordingStoreError::Unavailable(
                "refused for the test".into(),
            ));
        }
        self.inner.put_chunks(key, chunks, sha256, bytes).await
    }
    async fn get(&self, key: &str, version: Option<&str>) -> Result<Vec<u8>, RecordingStoreError> {
        self.inner.get(key, version).await
    }
    async fn get_with_meta(
        &self,
        key: &str,
        version: Option<&str>,
    ) -> Result<(Vec<u8>, breakglass_server::recording::Meta, String), RecordingStoreError> {
        self.inner.get_with_meta(key, version).await
    }
    async fn latest_version(&self, key: &str) -> Result<String, RecordingStoreError> {
        self.inner.latest_version(key).await
    }
    async fn latest_size(&self, key: &str) -> Result<(String, u64), RecordingStoreError> {
        self.inner.latest_size(key).await
    }
    async fn check(&self) -> Result<(), RecordingStoreError> {
        self.inner.check().await
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}

/// An end that cannot store the final cast leaves the last segment on the row (its hash the
/// whole cast's); the final cast is then built from the segments, the chain checked first, and
/// a broken chain builds nothing.
#[tokio::test]
async fn final_cast_is_rebuilt_from_the_segments_after_a_failed_end() {
    use breakglass_server::recording::segment::build_final;
    let dir = tempfile::tempdir().unwrap();
    let nofinal = Arc::new(NoFinal {
        inner: LocalStore::new(dir.path()),
        refuse: true.into(),
    });
    let store: Arc<dyn RecordingStore> = nofinal.clone();
    let config = WriterConfig {
        finish_timeout: Duration::from_millis(300),
        ..fast_config()
    };
    let mut rows = Vec::new();
    for _ in 0..2 {
        let key = recording_key(Uuid::now_v7());
        let w = CastWriter::start(store.clone(), &key, info(), config.clone(), |_| {})
            .await
            .unwrap();
        w.output(b"kept in segments\r\n").unwrap();
        let row = w.finish("UserEnded").await.unwrap();
        assert_eq!(
            parse_segment_key(&row.key).map(|(k, _)| k),
            Some(key.clone())
        );
        let cast = read_chain(store.as_ref(), &key, None).await.unwrap();
        assert_eq!(
            (row.bytes, row.sha256.clone()),
            (cast.len() as u64, sha256_hex(&cast))
        );
        let r = verify(store.as_ref(), None, &row, None).await;
        assert!(r.failed().contains(&checks::VERSION_PRESENT), "{r}");
        assert!(r.to_string().contains("not stored (yet)"), "{r}");
        rows.push(row);
    }
    nofinal
        .refuse
        .store(false, std::sync::atomic::Ordering::SeqCst);

    let built = build_final(store.as_ref(), &rows[0])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (built.bytes, built.sha256.clone()),
        (rows[0].bytes, rows[0].sha256.clone())
    );
    let r = verify(store.as_ref(), None, &rows[0], None).await;
    assert!(r.ok(), "{r}");
    assert!(
        build_final(store.as_ref(), &rows[0])
            .await
            .unwrap()
            .is_none(),
        "built once"
    );

    // The second one's first segment was changed: nothing is built.
    let (final_key, _) = parse_segment_key(&rows[1].key).unwrap();
    let first = segment_key(&final_key, 1);
    let (body, meta, _) = store.get_with_meta(&first, None).await.unwrap();
    let mut body = body;
    body[2] ^= 1;
    nofinal
        .inner
        .rewrite(&first, body, meta.into_iter().collect())
        .await;
    match build_final(store.as_ref(), &rows[1]).await {
        Err(RecordingStoreError::Corrupt(why)) => assert!(why.contains("segment 1"), "{why}"),
        other => panic!("a broken chain builds nothing: {other:?}"),
    }
    assert!(matches!(
        store.get(&final_key, None).await,
        Err(RecordingStoreError::NotFound { .. })
    ));
}
