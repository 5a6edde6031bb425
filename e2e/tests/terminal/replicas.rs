//! Two replicas on one database and store: one terminal, one recording, ended through either;
//! a forged notice between them hands nothing over.

use super::*;

/// Opens the terminal on `server`: the socket once it says "attached", or the close frame.
pub(crate) async fn open_terminal(
    server: &ServerProcess,
    who: &ApiClient,
    id: &str,
) -> Result<Ws, (u16, String)> {
    let mut ws = connect(server, who, id).await;
    // A replica taking the recording over from a dead one waits for its lease (10 s) first.
    let first = tokio::time::timeout(Duration::from_secs(30), ws.next())
        .await
        .map_err(|_| (0, "no answer in 30 s".to_string()))?;
    match first {
        Some(Ok(Message::Binary(b))) => match Frame::decode(&b) {
            Ok(Frame::Status(st)) if st.message == "attached" => Ok(ws),
            other => Err((0, format!("unexpected first frame {other:?}"))),
        },
        Some(Ok(Message::Close(Some(c)))) => Err((u16::from(c.code), c.reason.to_string())),
        other => Err((0, format!("unexpected {other:?}"))),
    }
}

/// Opens the terminal, retrying while another (dead) process's lease on the recording has not
/// run out yet; every refusal must say so.
pub(crate) async fn open_when_free(server: &ServerProcess, who: &ApiClient, id: &str) -> Ws {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    loop {
        match open_terminal(server, who, id).await {
            Ok(ws) => return ws,
            Err((code, reason)) => {
                assert_eq!(code, close::RELAY_ERROR, "{reason}");
                assert!(reason.contains("another server replica"), "{reason}");
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the recording was never taken over\n{}",
                    server.log_text()
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Two replicas with their own URLs and data directories, sharing what replicas share: one
/// PostgreSQL database and one recording store (a directory here, a bucket in production).
/// What two replicas share besides the cluster: the database and the recording store, as the
/// environment a replica is started with; the bucket (under S3) runs while this is kept.
pub(crate) struct SharedStore {
    env: Vec<(String, String)>,
    _bucket: Option<std::sync::Arc<breakglass_e2e::s3::Bucket>>,
}

impl SharedStore {
    fn env(&self) -> Vec<(&str, &str)> {
        self.env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }
}

pub(crate) async fn two_replicas(
    ns_extra: &str,
) -> (
    ServerProcess,
    ServerProcess,
    tempfile::TempDir,
    std::path::PathBuf,
    String,
    SharedStore,
) {
    let db = breakglass_e2e::postgres::fresh_database().await.unwrap();
    let shared = tempfile::tempdir().unwrap();
    // The replicas share one store: a bucket when the run records to S3, else a directory.
    let bucket = breakglass_e2e::s3::wanted()
        .unwrap()
        .then(|| breakglass_e2e::s3::bucket_for(shared.path()).unwrap());
    let store = match &bucket {
        Some(_) => String::new(),
        None => format!(
            "local_dir = \"{}\"\n",
            shared.path().join("recordings").display()
        ),
    };
    let extra = format!("[recording]\nflush_interval_seconds = 1\n{store}\n{ns_extra}");
    let (dir, cfg, ns) = prepare(&extra).await;
    // Replicas share the cookie key, as a deployment's do (it also signs what one replica
    // vouches to another).
    let text = std::fs::read_to_string(&cfg).unwrap();
    let secret = "replicas-share-this-key-".repeat(4);
    std::fs::write(&cfg, format!("session_secret = \"{secret}\"\n{text}")).unwrap();
    let mut env = vec![("BREAKGLASS_DATABASE_URL".to_string(), db)];
    if let Some(b) = &bucket {
        env.extend(b.env.iter().cloned());
    }
    let shared_store = SharedStore {
        env,
        _bucket: bucket,
    };
    let env = shared_store.env();
    let a = ServerProcess::start(&cfg, &dir.path().join("a"), &env)
        .await
        .unwrap();
    let b = ServerProcess::start(&cfg, &dir.path().join("b"), &env)
        .await
        .unwrap();
    drop(env);
    std::mem::forget(shared);
    (a, b, dir, cfg, ns, shared_store)
}

/// How often `needle` occurs in `haystack`.
fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// Two replicas on PostgreSQL behind nothing but two URLs. The terminal works through either:
/// the writer of the recording follows the terminal (the replica holding it hands it over,
/// even with its own terminal open), and when the replica serving the terminal is killed the
/// other serves it once the dead one's lease ran out. Through all of it the recording is one
/// cast: each command's output is in it exactly once, every handover and resume is marked, it
/// ends once and verifies, on the server and with `verify-recording`.
#[tokio::test]
async fn two_replicas_serve_one_terminal_and_one_recording() {
    let (mut a, mut b, dir, cfg, ns, shared) = two_replicas("").await;
    let (alice_a, id) = request(&a, &ns).await;
    alice_a
        .wait_state(&id, &["Active"], T)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", a.log_text()));

    // Activated (and recorded) on A; the terminal opened on B works.
    let alice_b = b.login("alice").await.unwrap();
    let mut ws_b = open_terminal(&b, &alice_b, &id)
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}\n{}", a.log_text(), b.log_text()));
    type_and_see(&b, &mut ws_b, b"echo one-$((5*5))\r", "one-25").await;

    // Back to A while B's terminal is open: B closes it, and what B recorded stays.
    let mut ws_a = open_terminal(&a, &alice_a, &id)
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}\n{}", a.log_text(), b.log_text()));
    let (code, reason) = closed_with(&mut ws_b).await;
    assert_eq!(code, close::TAKEN_OVER, "{reason}");
    assert!(reason.contains("another server replica"), "{reason}");
    type_and_see(&a, &mut ws_a, b"echo two-$((6*6))\r", "two-36").await;

    // A, writing and serving the terminal, is killed: B serves it and continues the cast.
    wait_stored(&alice_b, &id, "two-36").await;
    a.kill().await.unwrap();
    drop(ws_a);
    let mut ws_b = open_terminal(&b, &alice_b, &id)
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", b.log_text()));
    type_and_see(&b, &mut ws_b, b"echo three-$((7*7))\r", "three-49").await;

    // A comes back; now B is killed, and A serves the terminal.
    let env = shared.env();
    let a = ServerProcess::start(&cfg, &dir.path().join("a"), &env)
        .await
        .unwrap();
    let alice_a = a.login("alice").await.unwrap();
    wait_stored(&alice_a, &id, "three-49").await;
    b.kill().await.unwrap();
    drop(ws_b);
    let mut ws_a = open_terminal(&a, &alice_a, &id)
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", a.log_text()));
    type_and_see(&a, &mut ws_a, b"echo four-$((8*8))\r", "four-64").await;
    end_and_wait(&alice_a, &id).await;

    let (cast, events) = recording_of(&alice_a, &id).await;
    assert_eq!(count(&cast, "\"version\":2"), 1, "one header:\n{cast}");
    let out = output_of(&events);
    for needle in ["one-25", "two-36", "three-49", "four-64"] {
        assert_eq!(
            count(&out, needle),
            1,
            "{needle} once in the cast:\n{out:?}"
        );
    }
    let markers = markers_of(&events);
    let n = |prefix: &str| markers.iter().filter(|m| m.starts_with(prefix)).count();
    assert_eq!(n("handed over: "), 2, "A→B, then B→A: {markers:?}");
    assert_eq!(
        n("resumed: handed over by another server replica"),
        2,
        "{markers:?}"
    );
    assert_eq!(
        n("resumed: server restarted"),
        2,
        "one per kill: {markers:?}"
    );
    assert_eq!(n("ended"), 1, "{markers:?}");
    assert!(markers.last().unwrap().starts_with("ended"), "{markers:?}");
    assert!(
        events.windows(2).all(|w| w[0].time <= w[1].time),
        "clock went back"
    );
    verified(&alice_a, &id).await;
    drop(a);
    let (ok, text) = verify_cli(&dir.path().join("a"), &cfg, &id, &env);
    assert!(ok, "{text}");
}

/// Ending a session through the replica that does not hold its terminal closes the terminal
/// on the other one at once (the change reaches it through the database) and the recording is
/// finished once.
#[tokio::test]
async fn ending_through_the_other_replica_closes_the_terminal_and_finishes_once() {
    let (a, b, _dir, _cfg, ns, _shared) = two_replicas("").await;
    let (alice, id) = request(&a, &ns).await;
    alice.wait_state(&id, &["Active"], T).await.unwrap();
    let mut ws = open_terminal(&a, &alice, &id).await.unwrap();
    type_and_see(&a, &mut ws, b"echo one-$((5*5))\r", "one-25").await;
    let via_b = b.login("alice").await.unwrap();
    let (st, body) = via_b
        .post(&format!("/sessions/{id}/end"), json!({}))
        .await
        .unwrap();
    assert_eq!(st, 200, "{body}");
    let (code, reason) = closed_with(&mut ws).await;
    assert_eq!(code, close::SESSION_ENDED, "{reason}");
    via_b.wait_state(&id, &["Ended"], T).await.unwrap();
    let (_, events) = recording_of(&via_b, &id).await;
    assert_eq!(count(&output_of(&events), "one-25"), 1);
    let ended = markers_of(&events)
        .iter()
        .filter(|m| m.starts_with("ended"))
        .count();
    assert_eq!(ended, 1, "{:?}", markers_of(&events));
    verified(&via_b, &id).await;
}

/// What replicas tell each other is a hint, never a command: a handover notice sent straight
/// to the database with `pg_notify`, as if from another replica, makes the replica writing the
/// recording look for the request in the database, find none, and keep its terminal and its
/// writer; the cast has no handover in it.
#[tokio::test]
async fn a_forged_handover_notice_hands_nothing_over() {
    let (a, _b, _dir, _cfg, ns, shared) = two_replicas("").await;
    let (alice, id) = request(&a, &ns).await;
    alice.wait_state(&id, &["Active"], T).await.unwrap();
    let mut ws = open_terminal(&a, &alice, &id).await.unwrap();
    type_and_see(&a, &mut ws, b"echo one-$((5*5))\r", "one-25").await;

    let url = shared
        .env()
        .into_iter()
        .find(|(k, _)| *k == "BREAKGLASS_DATABASE_URL")
        .map(|(_, v)| v.to_string())
        .unwrap();
    let db = sqlx::PgPool::connect(&url).await.unwrap();
    let forged = json!({ "origin": uuid::Uuid::now_v7(), "t": "handover", "id": id }).to_string();
    sqlx::query("SELECT pg_notify('breakglass', $1)")
        .bind(&forged)
        .execute(&db)
        .await
        .unwrap();
    db.close().await;
    breakglass_e2e::wait_until("A read the forged notice and ignored it", T, || async {
        Ok(a.log_text()
            .contains("no replica's request in the database stands behind")
            .then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", a.log_text()));

    // The terminal on A still works, and nothing was handed over.
    type_and_see(&a, &mut ws, b"echo two-$((6*6))\r", "two-36").await;
    end_and_wait(&alice, &id).await;
    let (_, events) = recording_of(&alice, &id).await;
    let out = output_of(&events);
    assert_eq!(count(&out, "two-36"), 1, "{out:?}");
    let markers = markers_of(&events);
    assert!(
        !markers.iter().any(|m| m.contains("handed over")),
        "{markers:?}"
    );
}
