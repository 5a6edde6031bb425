//! Recording: the cast writer, the local store and the S3 store against a real S3-protocol
//! server with versioning and enforced Object Lock (Versity S3 Gateway, `scripts/s3.sh`), and
//! the stock asciinema CLI reading what we stored (`scripts/asciinema.sh`).
//!
//! These tests fail (never skip) when versitygw is not installed: run `scripts/s3.sh install`.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{ObjectLockLegalHoldStatus, ObjectLockMode};
use breakglass_server::recording::segment::{
    parse_segment_key, read_chain, read_recording, segment_key,
};
use breakglass_server::recording::{
    checks, read_back, recording_key, sha256_hex, verify, CastWriter, CheckOutcome,
    InitBucketOutcome, LocalStore, RecordingStore, Resumable, S3Config, S3Store, SessionInfo,
    StoreError, WriterConfig, WriterState,
};
use breakglass_shared::recording::{parse, Code};
use breakglass_shared::session::RecordingRef;
use uuid::Uuid;

const USER: &str = "recorder";
const USER_SECRET: &str = "recorder-secret-123";

/// Found at run time: a test binary another clone built into the shared target directory must
/// run this checkout's scripts, and that clone may be gone.
fn repo_root() -> PathBuf {
    let package = std::env::var("CARGO_MANIFEST_DIR").unwrap_or(env!("CARGO_MANIFEST_DIR").into());
    Path::new(&package).parent().unwrap().to_path_buf()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A versitygw started with `scripts/s3.sh` in a temporary directory; stopped on drop.
struct S3Server {
    dir: tempfile::TempDir,
    port: u16,
    env: HashMap<String, String>,
}

impl S3Server {
    fn script(args: &[&str]) -> std::process::Output {
        Command::new(repo_root().join("scripts/s3.sh"))
            .args(args)
            // The script's defaults: root key, region and bucket are the documented ones.
            .env_remove("TOWER_BREAKGLASS_MINIO_ACCESS_KEY")
            .env_remove("TOWER_BREAKGLASS_MINIO_SECRET_KEY")
            .env_remove("TOWER_BREAKGLASS_MINIO_REGION")
            .env_remove("TOWER_BREAKGLASS_MINIO_BUCKET")
            .output()
            .unwrap_or_else(|e| panic!("cannot run scripts/s3.sh: {e}"))
    }

    fn run(args: &[&str]) -> String {
        let out = S3Server::script(args);
        assert!(
            out.status.success(),
            "scripts/s3.sh {} failed: {}\n{}\n(if versitygw is missing, run `scripts/s3.sh install`)",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout),
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts a server; panics with the install hint when it cannot.
    fn start() -> S3Server {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut s = S3Server {
            dir,
            port,
            env: HashMap::new(),
        };
        s.up();
        s
    }

    fn dir(&self) -> &str {
        self.dir.path().to_str().unwrap()
    }

    fn up(&mut self) {
        let stdout = S3Server::run(&["start", self.dir(), &self.port.to_string()]);
        self.env = stdout
            .lines()
            .filter_map(|l| l.strip_prefix("export "))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert!(
            self.env.contains_key("TOWER_BREAKGLASS_MINIO_ENDPOINT"),
            "scripts/s3.sh start printed no endpoint: {stdout}"
        );
    }

    fn down(&self) {
        S3Server::run(&["stop", self.dir()]);
    }

    fn create_bucket(&self) {
        S3Server::run(&["create-bucket", self.dir()]);
    }

    /// Adds the put/get-only account, then replaces the script's bucket policy with the one
    /// `init-bucket` prints for it (which also lets it read the two bucket settings).
    async fn add_limited_user(&self) {
        S3Server::run(&["add-user", self.dir(), USER, USER_SECRET]);
        let root = self.root_store();
        let policy =
            breakglass_server::recording::least_privilege_policy(&root.config().bucket, Some(USER));
        root.client()
            .put_bucket_policy()
            .bucket(&root.config().bucket)
            .policy(policy.to_string())
            .send()
            .await
            .unwrap();
    }

    fn config(&self, access: &str, secret: &str) -> S3Config {
        let vars = self.env.clone();
        let mut c = S3Config::from_vars(|k| vars.get(k).cloned())
            .unwrap()
            .unwrap();
        c.access_key = access.into();
        c.secret_key = secret.into();
        c.sdk_max_attempts = 1;
        c.operation_timeout = Duration::from_secs(10);
        c
    }

    fn root_config(&self) -> S3Config {
        let vars = self.env.clone();
        let mut c = S3Config::from_vars(|k| vars.get(k).cloned())
            .unwrap()
            .unwrap();
        c.sdk_max_attempts = 1;
        c
    }

    fn root_store(&self) -> S3Store {
        S3Store::new(self.root_config()).unwrap()
    }

    fn user_store(&self) -> S3Store {
        S3Store::new(self.config(USER, USER_SECRET)).unwrap()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = S3Server::script(&["stop", self.dir()]);
    }
}

/// Collects every stored version the writer reports.
#[derive(Clone, Default)]
struct Versions(Arc<Mutex<Vec<RecordingRef>>>);

impl Versions {
    fn sink(&self) -> impl Fn(RecordingRef) + Send + Sync + 'static {
        let v = self.0.clone();
        move |r| v.lock().unwrap().push(r)
    }
    fn all(&self) -> Vec<RecordingRef> {
        self.0.lock().unwrap().clone()
    }
}

fn info() -> SessionInfo {
    SessionInfo {
        width: 100,
        height: 30,
        title: Some("breakglass test".into()),
        timestamp: None,
    }
}

fn fast_config() -> WriterConfig {
    WriterConfig {
        flush_interval: Duration::from_millis(150),
        retry_initial: Duration::from_millis(50),
        retry_max: Duration::from_millis(200),
        finish_timeout: Duration::from_secs(20),
        ..WriterConfig::default()
    }
}

async fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {secs}s waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `asciinema cat` (the stock CLI) on `cast` and returns what it printed.
fn asciinema_cat(cast: &[u8]) -> String {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), cast).unwrap();
    let out = Command::new(repo_root().join("scripts/asciinema.sh"))
        .arg("cat")
        .arg(file.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "asciinema cat failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Writes a small session: markers, output with UTF-8 split across chunks, a resize.
async fn play_session(w: &CastWriter) {
    w.marker("approved").unwrap();
    w.marker("active").unwrap();
    w.output(b"$ echo h\xc3").unwrap();
    w.output(b"\xa9llo \"world\"\r\n").unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    w.resize(120, 40).unwrap();
    w.output("h\u{e9}llo \"world\"\r\n\x1b[1mbold\x1b[0m \u{20ac}".as_bytes())
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    w.output(b"\r\n$ exit\r\n").unwrap();
}

/// Every reported version but the last names a segment: the segments through it are a
/// complete cast (parses, ends with a newline) hashing to what the row would say, and a prefix
/// of the next; each segment holds only bytes no earlier one holds (their sizes add up to the
/// final cast); the last is the final cast, stored once, the segments concatenated.
async fn check_versions(
    store: &dyn RecordingStore,
    versions: &[RecordingRef],
    last: &RecordingRef,
) {
    assert!(
        versions.len() >= 3,
        "expected several versions, got {versions:?}"
    );
    assert_eq!(versions.last(), Some(last));
    assert!(parse_segment_key(&last.key).is_none(), "{last:?}");
    let segments = &versions[..versions.len() - 1];
    let mut prev: Vec<u8> = Vec::new();
    let mut segment_bytes = 0;
    for (i, v) in segments.iter().enumerate() {
        let (final_key, n) = parse_segment_key(&v.key).unwrap();
        assert_eq!((final_key.as_str(), n), (last.key.as_str(), i as u64 + 1));
        let (body, _, _) = store.get_with_meta(&v.key, Some(&v.version)).await.unwrap();
        segment_bytes += body.len() as u64;
        let bytes = read_chain(store, &final_key, Some(n)).await.unwrap();
        assert_eq!(bytes.len() as u64, v.bytes);
        assert_eq!(sha256_hex(&bytes), v.sha256);
        assert!(bytes.ends_with(b"\n"));
        let text = std::str::from_utf8(&bytes).unwrap();
        parse(text).unwrap_or_else(|e| panic!("segments through {n} are not a valid cast: {e}"));
        assert!(
            bytes.starts_with(&prev),
            "each version extends the previous"
        );
        prev = bytes;
    }
    let whole = store.get(&last.key, Some(&last.version)).await.unwrap();
    assert_eq!(whole, prev, "the final cast is the segments concatenated");
    assert_eq!(segment_bytes, last.bytes, "segments store each byte once");
    assert_eq!(
        (last.bytes, last.sha256.clone()),
        (whole.len() as u64, sha256_hex(&whole))
    );
    let (header, events) = parse(std::str::from_utf8(&prev).unwrap()).unwrap();
    assert_eq!((header.version, header.width, header.height), (2, 100, 30));
    let markers: Vec<_> = events
        .iter()
        .filter(|e| e.code == Code::Marker)
        .map(|e| e.data.as_str())
        .collect();
    assert_eq!(markers, ["approved", "active", "ended: UserEnded"]);
    assert!(events
        .iter()
        .any(|e| e.code == Code::Resize && e.data == "120x40"));
    let output: String = events
        .iter()
        .filter(|e| e.code == Code::Output)
        .map(|e| e.data.as_str())
        .collect();
    assert_eq!(
        output,
        "$ echo h\u{e9}llo \"world\"\r\nh\u{e9}llo \"world\"\r\n\x1b[1mbold\x1b[0m \u{20ac}\r\n$ exit\r\n"
    );
    assert!(events.windows(2).all(|w| w[0].time <= w[1].time));
    assert_eq!(
        store.get(&last.key, None).await.unwrap(),
        prev,
        "latest = final"
    );
}

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
        Err(StoreError::Misconfigured(m)) => assert!(m.contains("init-bucket"), "{m}"),
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
    root.client()
        .create_bucket()
        .bucket("plain")
        .send()
        .await
        .unwrap();
    let plain = S3Store::new(S3Config {
        bucket: "plain".into(),
        ..s3.root_config()
    })
    .unwrap();
    assert!(matches!(
        plain.check().await,
        Err(StoreError::Misconfigured(_))
    ));

    // The limited key with the printed policy passes the check, and cannot write elsewhere.
    s3.add_limited_user().await;
    let user = s3.user_store();
    user.check().await.unwrap();
    assert!(matches!(
        user.put_version("elsewhere/x.cast", b"x".to_vec().into())
            .await,
        Err(StoreError::Refused(_))
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
        Err(StoreError::NotFound { version: None, .. })
    ));
    assert!(matches!(
        store.latest_version(&key).await,
        Err(StoreError::NotFound { .. })
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
                Err(StoreError::NotFound { .. })
            ),
            "{missing}"
        );
    }
    for bad in ["../escape.cast", "/abs.cast", "sessions/../x"] {
        assert!(matches!(
            store.put_version(bad, b"x".to_vec().into()).await,
            Err(StoreError::InvalidKey(_))
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
        Err(StoreError::Misconfigured(_))
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
struct NoFinal {
    inner: LocalStore,
    refuse: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl RecordingStore for NoFinal {
    async fn put_version(
        &self,
        key: &str,
        body: breakglass_server::recording::CastBody,
    ) -> Result<breakglass_server::recording::StoredVersion, StoreError> {
        self.inner.put_version(key, body).await
    }
    async fn put_segment(
        &self,
        key: &str,
        body: breakglass_server::recording::CastBody,
    ) -> Result<breakglass_server::recording::StoredVersion, StoreError> {
        self.inner.put_segment(key, body).await
    }
    async fn put_chunks(
        &self,
        key: &str,
        chunks: &mut dyn breakglass_server::recording::Chunks,
        sha256: [u8; 32],
        bytes: u64,
    ) -> Result<breakglass_server::recording::StoredVersion, StoreError> {
        if self.refuse.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError::Unavailable("refused for the test".into()));
        }
        self.inner.put_chunks(key, chunks, sha256, bytes).await
    }
    async fn get(&self, key: &str, version: Option<&str>) -> Result<Vec<u8>, StoreError> {
        self.inner.get(key, version).await
    }
    async fn get_with_meta(
        &self,
        key: &str,
        version: Option<&str>,
    ) -> Result<(Vec<u8>, breakglass_server::recording::Meta, String), StoreError> {
        self.inner.get_with_meta(key, version).await
    }
    async fn latest_version(&self, key: &str) -> Result<String, StoreError> {
        self.inner.latest_version(key).await
    }
    async fn latest_size(&self, key: &str) -> Result<(String, u64), StoreError> {
        self.inner.latest_size(key).await
    }
    async fn check(&self) -> Result<(), StoreError> {
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
        Err(StoreError::Corrupt(why)) => assert!(why.contains("segment 1"), "{why}"),
        other => panic!("a broken chain builds nothing: {other:?}"),
    }
    assert!(matches!(
        store.get(&final_key, None).await,
        Err(StoreError::NotFound { .. })
    ));
}

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
        Err(StoreError::Corrupt(why)) => assert!(why.contains("longer"), "{why}"),
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

/// A final cast larger than one upload part goes up in parts, locked like any final cast.
#[tokio::test]
async fn s3_large_final_cast_is_stored_in_parts_and_verifies() {
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
    // Quiet for many intervals: nothing new to store, so nothing is stored.
    let quiet = versions.all().len();
    tokio::time::sleep(config.flush_interval * 6).await;
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
    tokio::time::sleep(config.flush_interval * 3).await;
    assert_eq!(versions.all().len(), quiet);
    let last = tokio::time::timeout(Duration::from_secs(10), w.finish("UserEnded"))
        .await
        .expect("finishing an idle writer hung")
        .unwrap();
    let cast = store.get(&key, None).await.unwrap();
    assert_eq!(cast.len() as u64, last.bytes);
    assert!(String::from_utf8_lossy(&cast).contains("ended: UserEnded"));
}
