//! Anchoring recording hashes in a real Rekor transparency log (Rekor v1 on Trillian,
//! started by `scripts/rekor.sh`; `scripts/test.sh` exports `BREAKGLASS_TEST_REKOR_URL`).
//! These tests fail, never skip, when the log is not running.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use breakglass_server::recording::{
    checks, recording_key, sha256_hex, verify, CastWriter, CheckOutcome, LocalStore, LogError,
    RecordingStore, SessionInfo, TransparencyLog, WriterConfig,
};
use breakglass_shared::session::RekorEntry;
use p256::ecdsa::SigningKey;
use uuid::Uuid;

fn rekor_url() -> String {
    std::env::var("BREAKGLASS_TEST_REKOR_URL").expect(
        "BREAKGLASS_TEST_REKOR_URL is not set: start the transparency log with \
         `scripts/rekor.sh start DIR PORT` (scripts/test.sh does)",
    )
}

fn log_with_new_key(url: &str) -> TransparencyLog {
    let key = SigningKey::random(&mut rand::rngs::OsRng);
    TransparencyLog::with_key(url, key, Duration::from_secs(10)).unwrap()
}

/// A fresh random "final hash" (each test anchors its own, so runs never collide).
fn random_hash() -> String {
    sha256_hex(Uuid::new_v4().as_bytes())
}

#[tokio::test]
async fn anchored_hash_checks_out_and_anchoring_again_finds_the_same_entry() {
    let log = log_with_new_key(&rekor_url());
    let sha = random_hash();
    let entry = log.anchor(&sha).await.unwrap();
    assert!(entry.uuid.len() >= 64, "{entry:?}");
    assert!(entry.log_index >= 0);
    let seen = log.check(&entry, &sha).await.unwrap();
    assert!(seen.contains("inclusion"), "{seen}");
    // A re-driven end after a crash submits the same entry: the log answers 409 and the
    // existing entry is returned, not a second one.
    let again = log.anchor(&sha).await.unwrap();
    assert_eq!(again.log_index, entry.log_index);
    assert!(
        again.uuid.ends_with(&entry.uuid) || entry.uuid.ends_with(&again.uuid),
        "{again:?} vs {entry:?}"
    );
}

#[tokio::test]
async fn each_lie_is_named() {
    let url = rekor_url();
    let log = log_with_new_key(&url);
    let sha = random_hash();
    let entry = log.anchor(&sha).await.unwrap();

    // The row's hash was changed after anchoring.
    let other = random_hash();
    let e = log.check(&entry, &other).await.unwrap_err();
    assert!(
        e.contains(&format!("records sha256 {sha}, the row says {other}")),
        "{e}"
    );
    // The entry was made by somebody else's key (a forger anchoring their own hash).
    let forger = log_with_new_key(&url);
    let e = forger.check(&entry, &sha).await.unwrap_err();
    assert!(e.contains("signed by another key"), "{e}");
    // The row points at another index, or at an entry that does not exist.
    let moved = RekorEntry {
        log_index: entry.log_index + 1000,
        ..entry.clone()
    };
    let e = log.check(&moved, &sha).await.unwrap_err();
    assert!(e.contains("the row says"), "{e}");
    let missing = RekorEntry {
        uuid: "ab".repeat(32),
        log_index: 0,
    };
    let e = log.check(&missing, &sha).await.unwrap_err();
    assert!(e.contains("does not exist"), "{e}");
}

#[tokio::test]
async fn unreachable_log_is_reported_as_unavailable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = log_with_new_key(&format!("http://127.0.0.1:{port}"));
    match log.anchor(&random_hash()).await {
        Err(LogError::Unavailable(m)) => assert!(m.contains("127.0.0.1"), "{m}"),
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test]
async fn verify_checks_the_row_against_the_log() {
    let log = log_with_new_key(&rekor_url());
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn RecordingStore> = Arc::new(LocalStore::new(dir.path()));
    let key = recording_key(Uuid::now_v7());
    let info = SessionInfo {
        width: 80,
        height: 24,
        title: None,
        timestamp: None,
    };
    let w = CastWriter::start(store.clone(), &key, info, WriterConfig::default(), |_| {})
        .await
        .unwrap();
    w.output(b"kubectl get pods\r\n").unwrap();
    let rec = w.finish("UserEnded").await.unwrap();
    let entry = log.anchor(&rec.sha256).await.unwrap();

    let report = verify(store.as_ref(), Some(&log), &rec, Some(&entry)).await;
    assert!(report.ok(), "{report}");
    assert!(matches!(
        report.outcome(checks::TRANSPARENCY_LOG),
        Some(CheckOutcome::Pass(_))
    ));
    // A log is configured but the row names no entry: never anchored.
    let report = verify(store.as_ref(), Some(&log), &rec, None).await;
    assert_eq!(report.failed(), vec![checks::TRANSPARENCY_LOG], "{report}");
    assert!(report.to_string().contains("never anchored"), "{report}");
    // The row names an entry but nothing here can check it.
    let report = verify(store.as_ref(), None, &rec, Some(&entry)).await;
    assert_eq!(report.failed(), vec![checks::TRANSPARENCY_LOG], "{report}");
    // No log and no entry: the check is skipped, not failed.
    let report = verify(store.as_ref(), None, &rec, None).await;
    assert!(report.ok(), "{report}");
    assert!(matches!(
        report.outcome(checks::TRANSPARENCY_LOG),
        Some(CheckOutcome::Skipped(_))
    ));
}

#[tokio::test]
async fn a_pinned_log_key_is_what_entry_timestamps_are_checked_against() {
    let url = rekor_url();
    let key = SigningKey::random(&mut rand::rngs::OsRng);
    let served = reqwest::get(format!("{url}/api/v1/log/publicKey"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let pinned = TransparencyLog::with_key(&url, key.clone(), Duration::from_secs(10))
        .unwrap()
        .with_log_key(&served)
        .unwrap();
    let sha = random_hash();
    let entry = pinned.anchor(&sha).await.unwrap();
    let seen = pinned.check(&entry, &sha).await.unwrap();
    assert!(seen.contains("pinned log key"), "{seen}");
    // Another log key (a swapped or impostor log): the signed entry timestamp fails.
    let other = SigningKey::random(&mut rand::rngs::OsRng);
    let other_pem = {
        use p256::pkcs8::EncodePublicKey;
        other
            .verifying_key()
            .to_public_key_pem(p256::pkcs8::LineEnding::LF)
            .unwrap()
    };
    let wrong = TransparencyLog::with_key(&url, key, Duration::from_secs(10))
        .unwrap()
        .with_log_key(&other_pem)
        .unwrap();
    let e = wrong.check(&entry, &sha).await.unwrap_err();
    assert!(e.contains("signed entry timestamp does not verify"), "{e}");
    assert!(log_with_new_key(&url).with_log_key("nope").is_err());
}
