//! The S3 store against versitygw with versioning and enforced Object Lock: complete, locked versions asciinema reads, tampering named, outages retried, the bucket's setup.

use super::*;

// ------------------------------------------------------------------------------------ S3

#[tokio::test]
async fn s3_versions_are_complete_casts_locked_and_readable_by_asciinema() {
    let s3 = S3Server::start();
    s3.create_bucket();
    s3.add_limited_user().await;
    let store: Arc<dyn RecordingStore> = Arc::new(s3.user_store());
    store.check().await.unwrap();

    let key = recording_key(Uuid::now_v7());
    let versions = Versions::default();
    let w = CastWriter::start(store.clone(), &key, info(), fast_config(), versions.sink())
        .await
        .unwrap();
    play_session(&w).await;
    // Until the final cast is stored, each segment is under a legal hold besides its 30-day
    // lock: it outlives any lock while it is the only copy of its bytes.
    let root = s3.root_store();
    let hold_of = |n: u64| {
        let root = &root;
        let key = &key;
        async move {
            root.client()
                .head_object()
                .bucket(&root.config().bucket)
                .key(segment_key(key, n))
                .send()
                .await
                .unwrap()
                .object_lock_legal_hold_status()
                .cloned()
        }
    };
    assert_eq!(hold_of(1).await, Some(ObjectLockLegalHoldStatus::On));
    let last = w.finish("UserEnded").await.unwrap();
    assert_eq!(w.state(), WriterState::Healthy);
    assert_eq!(
        w.finish("again").await.unwrap(),
        last,
        "finish is idempotent"
    );
    check_versions(store.as_ref(), &versions.all(), &last).await;
    // Once the final cast is stored, the segments keep only their shorter lock.
    let segments = versions.all().iter().filter(|v| v.key != key).count() as u64;
    assert!(segments >= 2, "{segments}");
    for n in 1..=segments {
        assert_ne!(
            hold_of(n).await,
            Some(ObjectLockLegalHoldStatus::On),
            "segment {n}"
        );
    }

    // The final version's hash is the SHA-256 of the whole cast.
    let bytes = store.get(&key, Some(&last.version)).await.unwrap();
    assert_eq!(last.sha256, sha256_hex(&bytes));
    assert_eq!(last.bytes, bytes.len() as u64);

    // Stored with our content type and a GOVERNANCE lock of about a year (HEAD of the current
    // version; versitygw's GetObjectRetention XML cannot be parsed by the SDK).
    let head = root
        .client()
        .head_object()
        .bucket(&root.config().bucket)
        .key(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(head.content_type(), Some("application/x-asciicast"));
    assert_eq!(head.object_lock_mode(), Some(&ObjectLockMode::Governance));
    let until = head.object_lock_retain_until_date().unwrap().secs();
    let in_a_year = time::OffsetDateTime::now_utc().unix_timestamp() + 365 * 86_400;
    assert!((until - in_a_year).abs() < 600, "retain until {until}");
    // Each segment is locked too, for the segments' shorter retention (30 days by default).
    let head = root
        .client()
        .head_object()
        .bucket(&root.config().bucket)
        .key(segment_key(&key, 1))
        .send()
        .await
        .unwrap();
    assert_eq!(head.object_lock_mode(), Some(&ObjectLockMode::Governance));
    let until = head.object_lock_retain_until_date().unwrap().secs();
    let in_a_month = time::OffsetDateTime::now_utc().unix_timestamp() + 30 * 86_400;
    assert!(
        (until - in_a_month).abs() < 600,
        "segment retain until {until}"
    );

    // The stock asciinema CLI plays it.
    let played = asciinema_cat(&bytes);
    assert!(played.contains("h\u{e9}llo \"world\"\r\n"), "{played:?}");
    assert!(played.contains("\x1b[1mbold\x1b[0m \u{20ac}"), "{played:?}");
    assert!(played.ends_with("$ exit\r\n"), "{played:?}");

    let report = verify(store.as_ref(), None, &last, None).await;
    assert!(report.ok(), "{report}");
    assert!(matches!(
        report.outcome(checks::TRANSPARENCY_LOG),
        Some(CheckOutcome::Skipped(t)) if t.contains("not configured")
    ));
}

#[tokio::test]
async fn s3_locked_versions_cannot_be_deleted() {
    let s3 = S3Server::start();
    s3.create_bucket();
    s3.add_limited_user().await;
    let user = s3.user_store();
    let key = recording_key(Uuid::now_v7());
    let v1 = user
        .put_version(
            &key,
            b"{\"version\":2,\"width\":80,\"height\":24}\n"
                .to_vec()
                .into(),
        )
        .await
        .unwrap();
    let bucket = user.config().bucket.clone();

    // The server's key: no delete of a version, with or without the bypass header, and no
    // delete marker either.
    let err = user
        .client()
        .delete_object()
        .bucket(&bucket)
        .key(&key)
        .version_id(&v1.version_id)
        .send()
        .await
        .expect_err("a locked version cannot be deleted with the server's key");
    assert!(format!("{err:?}").contains("AccessDenied"), "{err:?}");
    let err = user
        .client()
        .delete_object()
        .bucket(&bucket)
        .key(&key)
        .version_id(&v1.version_id)
        .bypass_governance_retention(true)
        .send()
        .await
        .expect_err("the server's key cannot bypass governance");
    assert!(format!("{err:?}").contains("AccessDenied"), "{err:?}");
    user.client()
        .delete_object()
        .bucket(&bucket)
        .key(&key)
        .send()
        .await
        .expect_err("no delete marker either");

    // Even the root key cannot delete it without the bypass header: the lock is enforced.
    let root = s3.root_store();
    let err = root
        .client()
        .delete_object()
        .bucket(&bucket)
        .key(&key)
        .version_id(&v1.version_id)
        .send()
        .await
        .expect_err("object lock is enforced");
    assert!(format!("{err:?}").contains("AccessDenied"), "{err:?}");

    // The server checks the SHA-256 we send with every put: bytes that differ from the hash
    // that goes on the session row are refused.
    use base64::Engine as _;
    let wrong = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
    let err = user
        .client()
        .put_object()
        .bucket(&bucket)
        .key(&key)
        .checksum_sha256(wrong)
        .body(ByteStream::from(b"not what was hashed".to_vec()))
        .send()
        .await
        .expect_err("a body that does not match its SHA-256 is refused");
    assert!(format!("{err:?}").contains("BadDigest"), "{err:?}");

    assert_eq!(user.latest_version(&key).await.unwrap(), v1.version_id);
    let r = v1.to_ref(&key);
    assert!(verify(&user, None, &r, None).await.ok());
}

#[tokio::test]
async fn s3_tampering_fails_verification_naming_the_check() {
    let s3 = S3Server::start();
    s3.create_bucket();
    s3.add_limited_user().await;
    let user = s3.user_store();
    let key = recording_key(Uuid::now_v7());
    let w = CastWriter::start(
        Arc::new(s3.user_store()),
        &key,
        info(),
        fast_config(),
        |_| {},
    )
    .await
    .unwrap();
    w.output(b"secret work\r\n").unwrap();
    let good = w.finish("UserEnded").await.unwrap();
    assert!(verify(&user, None, &good, None).await.ok());

    // A row that does not match the stored bytes (nor, so, the segments).
    let r = verify(
        &user,
        None,
        &RecordingRef {
            sha256: "00".repeat(32),
            ..good.clone()
        },
        None,
    )
    .await;
    assert_eq!(
        r.failed(),
        [checks::HASH_ON_RECORD, checks::SEGMENTS],
        "{r}"
    );
    let r = verify(
        &user,
        None,
        &RecordingRef {
            bytes: good.bytes + 1,
            ..good.clone()
        },
        None,
    )
    .await;
    assert_eq!(r.failed(), [checks::BYTE_COUNT, checks::SEGMENTS], "{r}");
    let r = verify(
        &user,
        None,
        &RecordingRef {
            version: "01M8MJQQ5V8V2HARQDGR97ZRAQ".into(),
            ..good.clone()
        },
        None,
    )
    .await;
    assert!(r.failed().contains(&checks::VERSION_PRESENT), "{r}");
    assert!(r.to_string().contains("version missing"), "{r}");

    // The root key writes a doctored recording as a new version of the same key.
    let root = s3.root_store();
    let doctored =
        b"{\"version\":2,\"width\":100,\"height\":30}\n[0.1, \"o\", \"nothing to see\"]\n";
    root.client()
        .put_object()
        .bucket(&root.config().bucket)
        .key(&key)
        .body(ByteStream::from(doctored.to_vec()))
        .send()
        .await
        .unwrap();
    let r = verify(&user, None, &good, None).await;
    assert_eq!(r.failed(), [checks::LATEST_VERSION], "{r}");
    // A row pointing at the doctored version (someone edited the row too) fails on the hash.
    let latest = user.latest_version(&key).await.unwrap();
    let r = verify(
        &user,
        None,
        &RecordingRef {
            version: latest,
            ..good.clone()
        },
        None,
    )
    .await;
    assert!(r.failed().contains(&checks::HASH_ON_RECORD), "{r}");

    // Root removes the recorded version with the governance bypass: "version missing".
    root.client()
        .delete_object()
        .bucket(&root.config().bucket)
        .key(&key)
        .version_id(&good.version)
        .bypass_governance_retention(true)
        .send()
        .await
        .unwrap();
    let r = verify(&user, None, &good, None).await;
    assert!(r.failed().contains(&checks::VERSION_PRESENT), "{r}");
}

#[tokio::test]
async fn s3_outage_retries_recovers_and_fails_past_the_spool_limit() {
    let mut s3 = S3Server::start();
    s3.create_bucket();
    s3.add_limited_user().await;
    let store: Arc<dyn RecordingStore> = Arc::new(s3.user_store());
    let key = recording_key(Uuid::now_v7());
    let versions = Versions::default();
    let config = WriterConfig {
        spool_limit: 64 * 1024,
        ..fast_config()
    };
    let w = CastWriter::start(store.clone(), &key, info(), config, versions.sink())
        .await
        .unwrap();
    let states = w.watch_state();

    // Outage below the spool limit: Retrying, then Healthy again once the store is back.
    s3.down();
    w.output(&[b'a'; 10_000]).unwrap();
    wait_for(
        "Retrying",
        30,
        || matches!(w.state(), WriterState::Retrying { attempts, .. } if attempts >= 2),
    )
    .await;
    assert!(states.has_changed().unwrap());
    w.output(&[b'b'; 10_000]).unwrap();
    let before = versions.all().len();
    s3.up();
    wait_for("Healthy", 30, || w.state() == WriterState::Healthy).await;
    wait_for("a new version", 10, || versions.all().len() > before).await;
    let stored = read_recording(store.as_ref(), versions.all().last().unwrap(), false)
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&stored).contains(&"b".repeat(10_000)));

    // Outage past the spool limit: Failed, and output is refused so the session ends.
    s3.down();
    w.output(&[b'c'; 1000]).unwrap();
    wait_for("Retrying", 30, || {
        matches!(w.state(), WriterState::Retrying { .. })
    })
    .await;
    let err = (0..100)
        .find_map(|_| w.output(&[b'd'; 4096]).err())
        .expect("output refused past the spool limit");
    assert!(err.reason.contains("spool limit"), "{err}");
    assert!(matches!(w.state(), WriterState::Failed(r) if r.contains("spool limit")));
    assert!(w.output(b"more").is_err());

    // The store comes back: what was kept is still stored, but the recording stays failed.
    s3.up();
    let err = w
        .finish("RecordingFailed")
        .await
        .expect_err("finish reports the failure");
    assert!(err.reason.contains("spool limit"), "{err}");
    let last = w.last_stored().unwrap();
    let bytes = store.get(&key, Some(&last.version)).await.unwrap();
    assert_eq!(sha256_hex(&bytes), last.sha256);
    assert!(String::from_utf8_lossy(&bytes).contains("ended: RecordingFailed"));
    assert!(verify(store.as_ref(), None, &last, None).await.ok());
}

#[tokio::test]
async fn s3_init_bucket_check_and_cli() {
    let s3 = S3Server::start();
    let root = s3.root_store();
    match root.check().await {
        Err(RecordingStoreError::Misconfigured(m)) => assert!(m.contains("init-bucket"), "{m}"),
        other => panic!("no bucket yet: {other:?}"),
    }

    let report = root.init_bucket().await.unwrap();
    let steps: HashMap<_, _> = report.steps.iter().cloned().collect();
    assert!(
        matches!(steps["bucket"], InitBucketOutcome::Done(_)),
        "{report}"
    );
    assert!(
        matches!(steps["object lock"], InitBucketOutcome::Done(_)),
        "{report}"
    );
    // versitygw 1.8 does not implement lifecycle: reported, not failed.
    assert!(
        matches!(&steps["lifecycle"], InitBucketOutcome::NotSupported(t) if t.contains("501")),
        "{report}"
    );
    root.check().await.unwrap();
    let again = root.init_bucket().await.unwrap();
    assert!(
        again.steps[..3]
            .iter()
            .all(|(_, o)| matches!(o, InitBucketOutcome::AlreadyDone(_))),
        "{again}"
    );

    // A bucket without Object Lock is refused by the pre-session check.
    let plain = plain_bucket(&s3).await;
    assert!(matches!(
        plain.check().await,
        Err(RecordingStoreError::Misconfigured(_))
    ));

    // The limited key with the printed policy passes the check, and cannot write elsewhere.
    s3.add_limited_user().await;
    let user = s3.user_store();
    user.check().await.unwrap();
    assert!(matches!(
        user.put_version("elsewhere/x.cast", b"x".to_vec().into())
            .await,
        Err(RecordingStoreError::Refused(_))
    ));

    // The real binary: init-bucket (idempotent) and verify-recording.
    let bin = env!("CARGO_BIN_EXE_breakglass-server");
    let out = Command::new(bin)
        .args(["recordings", "init-bucket", "--server-access-key", USER])
        .envs(&s3.env)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("NOT SUPPORTED"), "{stdout}");
    assert!(
        stdout.contains("arn:aws:s3:::tower-breakglass-v2/sessions/*"),
        "{stdout}"
    );
    assert!(stdout.contains("\"recorder\""), "{stdout}");

    let id = Uuid::now_v7();
    let key = recording_key(id);
    let v = user
        .put_version(
            &key,
            b"{\"version\":2,\"width\":80,\"height\":24}\n"
                .to_vec()
                .into(),
        )
        .await
        .unwrap();
    let mut user_env = s3.env.clone();
    user_env.insert("TOWER_BREAKGLASS_MINIO_ACCESS_KEY".into(), USER.into());
    user_env.insert(
        "TOWER_BREAKGLASS_MINIO_SECRET_KEY".into(),
        USER_SECRET.into(),
    );
    let run_verify = |sha: &str| {
        Command::new(bin)
            .args([
                "verify-recording",
                &id.to_string(),
                "--version",
                &v.version_id,
            ])
            .args(["--sha256", sha, "--bytes", &v.bytes.to_string()])
            .envs(&user_env)
            .output()
            .unwrap()
    };
    let ok = run_verify(&v.sha256);
    let text = String::from_utf8_lossy(&ok.stdout);
    assert!(
        ok.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(text.contains("verified"), "{text}");
    let bad = run_verify(&"ab".repeat(32));
    let text = String::from_utf8_lossy(&bad.stdout);
    assert_eq!(bad.status.code(), Some(1), "{text}");
    assert!(text.contains("FAIL hash on record"), "{text}");
}

#[tokio::test]
async fn s3_doctor_names_each_bucket_problem_with_its_fix() {
    let s3 = S3Server::start();
    let root = s3.root_store();
    root.init_bucket().await.unwrap();
    let by_check = |f: &[BucketFinding]| -> HashMap<&'static str, BucketFinding> {
        f.iter().map(|f| (f.check, f.clone())).collect()
    };
    let set_up = by_check(&root.bucket_findings().await.unwrap());
    assert_eq!(set_up["versioning"].status, FindingStatus::Ok);
    assert_eq!(set_up["object lock"].status, FindingStatus::Ok);
    assert!(
        set_up["object lock"].detail.contains("GOVERNANCE 365 days"),
        "{}",
        set_up["object lock"]
    );
    // versitygw 1.8 does not implement lifecycle: unknown, not a problem.
    assert_eq!(set_up["lifecycle"].status, FindingStatus::Unknown);

    // A bucket made without Object Lock (hence without versioning): each problem, its fix.
    let plain = plain_bucket(&s3).await;
    let found = by_check(&plain.bucket_findings().await.unwrap());
    for check in ["versioning", "object lock"] {
        assert_eq!(
            found[check].status,
            FindingStatus::Problem,
            "{}",
            found[check]
        );
        assert!(
            found[check].fix.as_deref().unwrap().contains("init-bucket"),
            "{}",
            found[check]
        );
    }

    // The real binary: exit 0 on the set-up bucket, 1 on the plain one, each line printed.
    let bin = env!("CARGO_BIN_EXE_breakglass-server");
    let doctor = |bucket: &str| {
        Command::new(bin)
            .args(["doctor", "--bucket"])
            .envs(&s3.env)
            .env("TOWER_BREAKGLASS_MINIO_BUCKET", bucket)
            .output()
            .unwrap()
    };
    let ok = doctor("tower-breakglass-v2");
    let text = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success(), "{text}");
    assert!(text.contains("UNKNOWN  lifecycle"), "{text}");
    let bad = doctor("plain");
    let text = String::from_utf8_lossy(&bad.stdout);
    assert_eq!(bad.status.code(), Some(1), "{text}");
    assert!(text.contains("PROBLEM  object lock"), "{text}");
    assert!(text.contains("fix: "), "{text}");
}

/// A bucket `plain` made without Object Lock (so without versioning), and a store on it.
async fn plain_bucket(s3: &S3Server) -> S3Store {
    s3.root_store()
        .client()
        .create_bucket()
        .bucket("plain")
        .send()
        .await
        .unwrap();
    S3Store::new(S3Config {
        bucket: "plain".into(),
        ..s3.root_config()
    })
    .unwrap()
}
