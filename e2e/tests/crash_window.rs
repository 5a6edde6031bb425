//! The real crash window of activation: the server killed right after a cluster write returned
//! and before the step is on the session row (the `*-written` failpoints), in live and copy
//! mode, against the real API server with the guardrails installed. The object then exists
//! while the row does not name it; the restarted server adopts it (activation is idempotent),
//! and when the session ends another way with the object still there, the sweep's orphan
//! reconciliation removes it.
//!
//! The failpoints exist only in a server built with the `failpoints` cargo feature
//! (scripts/test-env.sh builds it so); `ServerProcess::start` refuses, naming the feature, a
//! binary that ignores `BREAKGLASS_FAILPOINT`, so these tests fail at once instead of waiting
//! for a crash that never comes.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use breakglass_e2e::wait_until;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use serde_json::{json, Value};

mod rig;
use rig::Rig;

const WAIT: Duration = Duration::from_secs(60);

/// Exit code of a server stopped by a failpoint (`failpoint::EXIT_CODE`, a module the e2e
/// crate cannot name: its dependency on the server is built without the feature).
const FAILPOINT_EXIT: i32 = 86;

/// The orphan age the tests run with: a second, so the sweep judges leftovers at once.
const ORPHAN_AGE: (&str, &str) = ("orphan_min_age_seconds", "1");

/// A server's sweep reconciles every namespace of its clusters against its own database, and
/// each test here has a database of its own and judges orphans after a second: two tests at
/// once would remove each other's objects. They take turns.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One crash window: the failpoint, the mode, and the row field that does not name the
/// object yet.
struct Window {
    failpoint: &'static str,
    mode: &'static str,
    row_field: &'static str,
}

const LIVE_AND_COPY: [Window; 5] = [
    Window {
        failpoint: "grant-written",
        mode: "live",
        row_field: "grant_name",
    },
    Window {
        failpoint: "annotate-written",
        mode: "live",
        row_field: "process_access_annotated",
    },
    Window {
        failpoint: "container-written",
        mode: "live",
        row_field: "debug_container",
    },
    Window {
        failpoint: "grant-written",
        mode: "copy",
        row_field: "grant_name",
    },
    Window {
        failpoint: "copy-written",
        mode: "copy",
        row_field: "copy_pod",
    },
];

/// What of session `id` is in the namespace: its grants, whether the pod carries its
/// annotation, its ephemeral debug containers, its copy pods.
#[derive(Debug, Default, PartialEq, Eq)]
struct InCluster {
    grants: usize,
    annotated: bool,
    debug_containers: usize,
    copies: usize,
}

async fn in_cluster(rig: &Rig, id: &str, pod: &str) -> InCluster {
    let (grants, copies) = rig.grants_and_copies_of(id).await;
    let p: Pod = rig.admin_pods().await.get(pod).await.unwrap();
    let annotated = p
        .annotations()
        .get("hangar.io/breakglass-process-access")
        .is_some_and(|v| v == id);
    let debug_containers = p
        .spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_ref())
        .map_or(0, |ecs| {
            ecs.iter().filter(|c| c.name.starts_with("debug-")).count()
        });
    InCluster {
        grants,
        annotated,
        debug_containers,
        copies,
    }
}

/// Starts a server that dies at `w`, asks for a session on a fresh pod and waits for the death;
/// checks the object is in the cluster and not on the row. Returns the session id and pod.
async fn crash_in(rig: &Rig, w: &Window, n: usize) -> (String, String) {
    let pod = format!("window-{n}");
    rig.bare_pod(&pod).await;
    let config = rig.config_with("orphan-age.toml", &[ORPHAN_AGE]);
    let mut s = rig
        .start_with(&config, &[("BREAKGLASS_FAILPOINT", w.failpoint)])
        .await;
    let alice = s.login("alice").await.unwrap();
    let mut req = rig.request("ground", &pod, w.mode);
    if w.mode == "live" {
        req["target_container"] = json!("app");
    }
    let id = alice.create(req).await.unwrap();
    assert_eq!(
        s.wait_exit(WAIT).await.unwrap(),
        Some(FAILPOINT_EXIT),
        "died at {} ({})",
        w.failpoint,
        w.mode
    );
    let now = in_cluster(rig, &id, &pod).await;
    let written = match w.failpoint {
        "grant-written" => now.grants == 1,
        "annotate-written" => now.grants == 1 && now.annotated,
        "container-written" => now.grants == 1 && now.annotated && now.debug_containers == 1,
        "copy-written" => now.grants == 1 && now.copies == 1,
        other => panic!("no expectation for {other}"),
    };
    assert!(written, "{} ({}): {now:?}", w.failpoint, w.mode);
    (id, pod)
}

/// A row field that names nothing: null, or false for the annotation flag.
fn names_nothing(v: &Value) -> bool {
    v.is_null() || v == &json!(false)
}

#[tokio::test]
async fn a_crash_between_a_cluster_write_and_its_row_write_is_adopted_on_restart() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let rig = Rig::new("bg-window", "ground", &[]).await;
    let config = rig.config_with("orphan-age.toml", &[ORPHAN_AGE]);
    for (n, w) in LIVE_AND_COPY.iter().enumerate() {
        let (id, pod) = crash_in(&rig, w, n).await;
        // The restarted server's sweep re-drives the activation; the objects it finds are its
        // own (session label), so it takes them over instead of failing on them, and the
        // reconciler, judging after a second, must not take them for orphans.
        let s = rig.start_with(&config, &[]).await;
        let alice = s.login("alice").await.unwrap();
        let d = alice
            .wait_state(&id, &["Active"], WAIT)
            .await
            .unwrap_or_else(|e| {
                panic!("after {} ({}): {e}\n{}", w.failpoint, w.mode, s.log_text())
            });
        assert!(
            !names_nothing(&d["session"][w.row_field]),
            "the row names the adopted object: {}",
            d["session"]
        );
        let expected = match w.mode {
            "live" => InCluster {
                grants: 1,
                annotated: true,
                debug_containers: 1,
                copies: 0,
            },
            _ => InCluster {
                grants: 1,
                annotated: false,
                debug_containers: 0,
                copies: 1,
            },
        };
        assert_eq!(
            in_cluster(&rig, &id, &pod).await,
            expected,
            "{}",
            w.failpoint
        );
        alice
            .post(&format!("/sessions/{id}/end"), json!({}))
            .await
            .unwrap();
        alice.wait_state(&id, &["Ended"], WAIT).await.unwrap();
        rig.assert_clean().await;
    }
}

/// The crash leaves objects the row does not name; the environment's cluster is then taken out
/// of the configuration, so the restarted server fails the session without touching the cluster
/// (it cannot reach it): the objects are orphans. With the cluster configured again, the sweep
/// finds them, judges them by their session label and removes them.
#[tokio::test]
async fn the_sweep_removes_what_a_crash_window_left_behind() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let rig = Rig::new("bg-orphans", "ground", &[]).await;
    let config = rig.config_with("orphan-age.toml", &[ORPHAN_AGE]);
    let no_cluster = rig.without_cluster(&config, "no-cluster.toml", "ground");
    let windows = [&LIVE_AND_COPY[2], &LIVE_AND_COPY[4]];
    for (n, w) in windows.into_iter().enumerate() {
        let (id, pod) = crash_in(&rig, w, 10 + n).await;
        let before = in_cluster(&rig, &id, &pod).await;

        let mut s = rig.start_with(&no_cluster, &[]).await;
        let alice = s.login("alice").await.unwrap();
        let d = alice.wait_state(&id, &["Failed"], WAIT).await.unwrap();
        assert!(
            names_nothing(&d["session"][w.row_field]),
            "the row never learnt of the object: {}",
            d["session"]
        );
        s.kill().await.unwrap();
        assert_eq!(
            in_cluster(&rig, &id, &pod).await,
            before,
            "the failed session left its objects ({})",
            w.failpoint
        );

        let s = rig.start_with(&config, &[]).await;
        rig.assert_clean().await;
        let left = in_cluster(&rig, &id, &pod).await;
        assert_eq!((left.grants, left.annotated, left.copies), (0, false, 0));
        // It was the reconciler: the sweep counts what it removed as orphans.
        let removed = wait_until("the orphans counted", WAIT, || async {
            let text = reqwest::get(format!("{}/metrics", s.url))
                .await?
                .text()
                .await?;
            Ok(text
                .lines()
                .find_map(|l| {
                    l.strip_prefix("breakglass_sweep_actions_total{action=\"remove_orphan\"} ")
                })
                .and_then(|v| v.trim().parse::<f64>().ok()))
        })
        .await
        .unwrap();
        // The grant, and the pod's annotation (live) or the copy pod (copy). An ephemeral
        // container cannot be taken off a pod: it stays, without the grant to attach to it.
        assert_eq!(removed, 2.0, "{}", s.log_text());
    }
}
