//! A killed server and an unreachable store: the recording resumed and anchored, activation refused with a clear message.

use super::*;

/// SIGKILL mid-session keeps everything up to the last flush; after a restart the terminal
/// reconnects to the same session and the same recording continues (one header, a `resumed`
/// marker, one clock); at End the final hash is anchored in the transparency log, and a
/// recording rewritten together with its database row still fails verification at the log.
#[tokio::test]
async fn killed_server_keeps_the_last_flush_resumes_the_recording_and_anchors_it() {
    let rekor = std::env::var("BREAKGLASS_TEST_REKOR_URL").expect(
        "BREAKGLASS_TEST_REKOR_URL is not set: start the transparency log with \
         `scripts/rekor.sh start DIR PORT` (scripts/test.sh does)",
    );
    let extra = format!(
        "[recording]\nflush_interval_seconds = 1\n{LOCAL_STORE}\n[recording.transparency_log]\nurl = \"{rekor}\"\n\n"
    );
    let (dir, cfg, ns) = prepare(&extra).await;
    let data = dir.path().join("data");
    let mut server = ServerProcess::start(&cfg, &data, &[]).await.unwrap();
    // SQLite serves one replica: a second server on the same file refuses to start, saying
    // why and what to use instead. (On PostgreSQL, replicas are the point.)
    if breakglass_e2e::server::database_url_of(&data).starts_with("sqlite") {
        let second = ServerProcess::start(&cfg, &data, &[]).await;
        assert!(
            second.is_err(),
            "a second server started on one SQLite file"
        );
        let log = server.log_text();
        assert!(log.contains("SQLite serves one replica only"), "{log}");
        assert!(log.contains("PostgreSQL"), "{log}");
    }
    let (alice, id) = request(&server, &ns).await;
    alice
        .wait_state(&id, &["Active"], T)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.log_text()));
    let mut ws = connect(&server, &alice, &id).await;
    type_and_see(&server, &mut ws, b"echo before-$((2*21))\r", "before-42").await;
    // Wait for a flush that holds the output, then kill the server without warning.
    wait_stored(&alice, &id, "before-42").await;
    server.kill().await.unwrap();
    drop(ws);
    let latest = stored_segments(&data, &id);
    let (_, events) = breakglass_shared::recording::parse(&latest).unwrap();
    assert!(output_of(&events).contains("before-42"), "{latest}");

    // Restart on the same data (the killed server's lock is gone with its process): the
    // session is still Active and its terminal comes back.
    let server = ServerProcess::start(&cfg, &data, &[]).await.unwrap();
    let alice = server.login("alice").await.unwrap();
    let d = alice.session(&id).await.unwrap();
    assert_eq!(d["session"]["state"], "Active", "{d}");
    // The killed process's lease on the recording runs out first (one writer per recording).
    let mut ws = open_when_free(&server, &alice, &id).await;
    type_and_see(&server, &mut ws, b"echo after-$((3*3))\r", "after-9").await;
    let d = end_and_wait(&alice, &id).await;

    // One cast: the old part, the resume marker, the new part, the end; time never goes back.
    let cast = alice
        .get_text(&format!("/sessions/{id}/recording"))
        .await
        .unwrap();
    assert!(
        cast.starts_with(&latest),
        "the final cast does not continue the killed server's last version"
    );
    let (_, events) = breakglass_shared::recording::parse(&cast).unwrap();
    let out = output_of(&events);
    assert!(
        out.contains("before-42") && out.contains("after-9"),
        "{out:?}"
    );
    let markers = markers_of(&events);
    assert!(
        markers.contains(&"resumed: server restarted"),
        "{markers:?}"
    );
    assert!(markers.last().unwrap().starts_with("ended"), "{markers:?}");
    assert!(
        events.windows(2).all(|w| w[0].time <= w[1].time),
        "clock went back"
    );

    // Anchored: the row names the log entry and every check passes, the log's included.
    let rekor_entry = &d["session"]["rekor"];
    assert!(
        rekor_entry["uuid"].as_str().is_some_and(|u| u.len() >= 64),
        "{d}"
    );
    let v = verified(&alice, &id).await;
    let log_check = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "transparency log")
        .unwrap();
    assert_eq!(log_check["outcome"], "pass", "{v}");
    drop(server);
    let (ok, text) = verify_cli(&data, &cfg, &id, &[]);
    assert!(ok, "{text}");
    assert!(text.contains("PASS transparency log"), "{text}");

    // Someone with write access to both the files and the database rewrites the recording
    // and its row consistently: every local check passes, the log still says no.
    let rec = &d["session"]["recording"];
    let file = data
        .join("recordings")
        .join(format!("sessions/{id}.cast.v"))
        .join(rec["version"].as_str().unwrap());
    let mut perms = std::fs::metadata(&file).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&file, perms).unwrap();
    let forged = cast.replace("after-9", "after-8");
    std::fs::write(&file, &forged).unwrap();
    let sha = breakglass_server::recording::sha256_hex(forged.as_bytes());
    let url = breakglass_e2e::server::database_url_of(&data);
    let uuid = uuid::Uuid::parse_str(&id).unwrap();
    // One statement for both engines (SQLite numbers `$N` parameters in order too).
    macro_rules! forge {
        ($pool:expr) => {{
            let db = $pool.await.unwrap();
            let n = sqlx::query(
                "UPDATE breakglass_sessions SET recording_sha256 = $1, recording_bytes = $2 WHERE id = $3",
            )
            .bind(&sha)
            .bind(forged.len() as i64)
            .bind(uuid)
            .execute(&db)
            .await
            .unwrap()
            .rows_affected();
            db.close().await;
            n
        }};
    }
    let changed = if url.starts_with("postgres") {
        forge!(sqlx::PgPool::connect(&url))
    } else {
        forge!(sqlx::SqlitePool::connect(&url))
    };
    assert_eq!(changed, 1);
    let (ok, text) = verify_cli(&data, &cfg, &id, &[]);
    assert!(!ok, "{text}");
    assert!(text.contains("PASS hash on record"), "{text}");
    assert!(text.contains("FAIL transparency log"), "{text}");
    assert!(text.contains(&format!("the row says {sha}")), "{text}");
}

/// "No recording, no session": with the recording store unreachable, activation fails with a
/// message naming the store, and nothing is created in the cluster.
#[tokio::test]
async fn unreachable_recording_store_fails_activation_with_a_clear_message() {
    let (dir, cfg, ns) = prepare("").await;
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{closed_port}");
    let server = ServerProcess::start(
        &cfg,
        &dir.path().join("data"),
        &[
            ("TOWER_BREAKGLASS_MINIO_ENDPOINT", endpoint.as_str()),
            ("TOWER_BREAKGLASS_MINIO_ACCESS_KEY", "nobody"),
            ("TOWER_BREAKGLASS_MINIO_SECRET_KEY", "nothing-at-all"),
        ],
    )
    .await
    .unwrap();
    let (alice, id) = request(&server, &ns).await;
    let d = alice
        .wait_state(&id, &["Failed"], T)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.log_text()));
    let failure = d["session"]["failure"].as_str().unwrap_or_default();
    assert!(
        failure.contains("recording store is unavailable, so no session can start"),
        "{failure}"
    );
    assert!(d["session"]["grant_name"].is_null(), "{d}");
    assert!(d["session"]["debug_container"].is_null(), "{d}");
    let cp = ControlPlane::shared().await.unwrap();
    let admin = cp.client(Identity::Admin).await.unwrap();
    let pod = Api::<Pod>::namespaced(admin.clone(), &ns)
        .get("shell")
        .await
        .unwrap();
    let ephemeral = pod
        .spec
        .and_then(|s| s.ephemeral_containers)
        .unwrap_or_default();
    assert!(ephemeral.is_empty(), "{ephemeral:?}");
    assert_no_grants(admin, &ns).await;
}
