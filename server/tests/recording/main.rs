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
    checks, read_back, recording_key, sha256_hex, verify, BucketFinding, CastWriter, CheckOutcome,
    FindingStatus, InitBucketOutcome, LocalStore, RecordingStore, RecordingStoreError, Resumable,
    S3Config, S3Store, SessionInfo, WriterConfig, WriterState,
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

mod large;
mod local;
mod s3;
mod segments;
use segments::NoFinal;
