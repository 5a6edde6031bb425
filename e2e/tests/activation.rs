//! Activation and cleanup against the real test control plane, with the rendered guardrails
//! (RBAC + admission policies) installed, so the server works inside its rails: the real server
//! binary, real grants, ephemeral containers, copy pods, recycle rule, pod-gone, unreachable
//! clusters, crash injection at every step, and two replicas.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use breakglass_e2e::access::pod_writes_allowed;
use breakglass_e2e::server::ApiClient;
use breakglass_e2e::{wait_until, ControlPlane, Identity};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, ResourceExt};
use serde_json::json;

mod rig;
use rig::Rig;

const ACTIVE: Duration = Duration::from_secs(60);

async fn pod_exists(pods: &Api<Pod>, name: &str) -> bool {
    pods.get_opt(name)
        .await
        .unwrap()
        .is_some_and(|p| p.metadata.deletion_timestamp.is_none())
}

async fn attach_echo(cp: &ControlPlane, ns: &str, pod: &str, container: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let pods: Api<Pod> = Api::namespaced(cp.client(Identity::BreakglassSa).await.unwrap(), ns);
    let ap = kube::api::AttachParams::interactive_tty().container(container);
    let mut att = pods.attach(pod, &ap).await.unwrap();
    let mut stdin = att.stdin().unwrap();
    let mut stdout = att.stdout().unwrap();
    stdin.write_all(b"echo hi-$((40+2))\n").await.unwrap();
    let mut seen = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buf = [0u8; 1024];
        while !seen.contains("hi-42") {
            let n = stdout.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    })
    .await;
    att.abort();
    seen
}

#[tokio::test]
async fn ground_live_session_end_to_end_recycles_a_replaceable_pod() {
    let rig = Rig::new("bg-ground-live", "ground", &[]).await;
    let pods_before = rig.deployment("web", 2).await;
    // At rest, the server's own identity can touch no pod: every right to a pod comes with a
    // session's grant, and goes with it.
    let own = rig.cp.client(Identity::BreakglassSa).await.unwrap();
    let at_rest = pod_writes_allowed(&own, &rig.ns).await.unwrap();
    assert!(at_rest.is_empty(), "before any grant: {at_rest:?}");
    let server = rig.start(&[]).await;
    let alice = server.login("alice").await.unwrap();
    let target = &pods_before[0];
    let id = alice
        .create(rig.request("ground", target, "live"))
        .await
        .unwrap();
    let d = alice
        .wait_state(&id, &["Active"], ACTIVE)
        .await
        .unwrap_or_else(|e| panic!("{e}\nserver log:\n{}", server.log_text()));
    let s = &d["session"];
    let grant = s["grant_name"].as_str().unwrap();
    let container = s["debug_container"].as_str().unwrap();
    assert!(
        grant.starts_with("breakglass-") && container.starts_with("debug-"),
        "{s}"
    );
    let rb = rig.grants().await.get(grant).await.unwrap();
    assert_eq!(rb.labels()["hangar.io/breakglass-session"], id);
    assert_eq!(rb.annotations()["hangar.io/breakglass-requester"], "alice");
    // The server reaches the debug container through attach, inside its rails.
    let out = attach_echo(rig.cp, &rig.ns, target, container).await;
    assert!(out.contains("hi-42"), "attach output: {out:?}");
    // With the grant: what the live role gives, and never exec.
    let granted = pod_writes_allowed(&own, &rig.ns).await.unwrap();
    assert_eq!(
        granted,
        [
            "patch pods/",
            "delete pods/",
            "patch pods/ephemeralcontainers",
            "update pods/ephemeralcontainers",
            "create pods/attach"
        ],
        "with the grant"
    );
    let kinds: Vec<&str> = d["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"begin_activation") && kinds.contains(&"activated"),
        "{kinds:?}"
    );

    let (st, _) = alice
        .post(&format!("/sessions/{id}/end"), json!({}))
        .await
        .unwrap();
    assert_eq!(st, 200);
    let d = alice.wait_state(&id, &["Ended"], ACTIVE).await.unwrap();
    assert_eq!(d["session"]["end_reason"]["kind"], "UserEnded");
    rig.assert_clean().await;
    // The grant is gone, and every right with it (RBAC answers from its cache: wait for it).
    wait_until(
        "rights gone with the grant",
        Duration::from_secs(20),
        || async {
            Ok(pod_writes_allowed(&own, &rig.ns)
                .await?
                .is_empty()
                .then_some(()))
        },
    )
    .await
    .unwrap();
    // Not the last ready pod: recycled, and the Deployment replaced it.
    let pods = rig.admin_pods().await;
    wait_until("debugged pod deleted", Duration::from_secs(20), || async {
        Ok((!pod_exists(&pods, target).await).then_some(()))
    })
    .await
    .unwrap();
    rig.ready_pods_of("web", 2).await;
}

#[tokio::test]
async fn flight_copy_session_needs_approval_and_leaves_nothing() {
    let rig = Rig::new("bg-flight-copy", "flight", &[]).await;
    rig.bare_pod("solo").await;
    let server = rig.start(&[]).await;
    let alice = server.login("alice").await.unwrap();
    let bob = server.login("bob").await.unwrap();
    let carol = server.login("carol").await.unwrap();
    let id = alice
        .create(rig.request("flight", "solo", "copy"))
        .await
        .unwrap();
    let d = alice.session(&id).await.unwrap();
    assert_eq!(d["session"]["state"], "PendingApproval");
    assert!(
        rig.grants()
            .await
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "nothing before approval"
    );
    let (st, v) = bob
        .post(&format!("/sessions/{id}/approve"), json!({}))
        .await
        .unwrap();
    assert_eq!(st, 200, "{v}");
    let d = alice.wait_state(&id, &["Active"], ACTIVE).await.unwrap();
    let copy = d["session"]["copy_pod"].as_str().unwrap().to_string();
    let pods = rig.admin_pods().await;
    let c = pods.get(&copy).await.unwrap();
    assert_eq!(c.labels()["hangar.io/breakglass-copy"], id);
    assert!(
        !c.labels().contains_key("app"),
        "labels stripped so no Service selects it"
    );
    let spec = c.spec.clone().unwrap();
    assert_eq!(spec.automount_service_account_token, Some(false));
    assert_eq!(spec.share_process_namespace, Some(true));
    let rb = rig
        .grants()
        .await
        .get(d["session"]["grant_name"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(rb.annotations()["hangar.io/breakglass-approver"], "bob");
    assert_eq!(rb.role_ref.name, "tower-breakglass-debug-copy");

    let (st, _) = carol
        .post(&format!("/sessions/{id}/terminate"), json!({}))
        .await
        .unwrap();
    assert_eq!(st, 200);
    let d = alice.wait_state(&id, &["Ended"], ACTIVE).await.unwrap();
    assert_eq!(
        d["session"]["end_reason"],
        json!({"kind": "Terminated", "by": "carol"})
    );
    rig.assert_clean().await;
    assert!(
        pod_exists(&pods, "solo").await,
        "the original pod is untouched"
    );
}

#[tokio::test]
async fn process_access_annotates_the_pod_and_cleans_it_up() {
    let rig = Rig::new("bg-process", "ground", &[]).await;
    rig.bare_pod("worker").await;
    let server = rig.start(&[]).await;
    let alice = server.login("alice").await.unwrap();
    let mut req = rig.request("ground", "worker", "live");
    req["target_container"] = json!("app");
    let id = alice.create(req).await.unwrap();
    let d = alice.wait_state(&id, &["Active"], ACTIVE).await.unwrap();
    assert_eq!(d["session"]["process_access_annotated"], true);
    let pods = rig.admin_pods().await;
    let p = pods.get("worker").await.unwrap();
    assert_eq!(p.annotations()["hangar.io/breakglass-process-access"], id);
    let ec = &p.spec.unwrap().ephemeral_containers.unwrap()[0];
    assert_eq!(ec.target_container_name.as_deref(), Some("app"));
    alice
        .post(&format!("/sessions/{id}/end"), json!({}))
        .await
        .unwrap();
    alice.wait_state(&id, &["Ended"], ACTIVE).await.unwrap();
    rig.assert_clean().await;
    assert!(
        pod_exists(&pods, "worker").await,
        "a pod with no owner is never deleted"
    );
}

/// The recycle rule, cell by cell: (owner, other ready pods, tier, asked) → deleted?
async fn recycle_cases(tier: &str, cases: &[(&str, i32, bool, bool)]) {
    let rig = Rig::new(&format!("bg-recycle-{tier}"), tier, &[]).await;
    let server = rig.start(&[]).await;
    let alice = server.login("alice").await.unwrap();
    let bob = server.login("bob").await.unwrap();
    let pods = rig.admin_pods().await;
    for &(name, replicas, asked, expect_deleted) in cases {
        let target = if replicas == 0 {
            rig.bare_pod(name).await;
            name.to_string()
        } else {
            rig.deployment(name, replicas).await[0].clone()
        };
        let mut req = rig.request(tier, &target, "live");
        req["recycle"] = json!(asked);
        let id = alice.create(req).await.unwrap();
        if tier == "flight" {
            let (st, v) = bob
                .post(&format!("/sessions/{id}/approve"), json!({}))
                .await
                .unwrap();
            assert_eq!(st, 200, "{v}");
        }
        alice
            .wait_state(&id, &["Active"], ACTIVE)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", server.log_text()));
        alice
            .post(&format!("/sessions/{id}/end"), json!({}))
            .await
            .unwrap();
        let d = alice.wait_state(&id, &["Ended"], ACTIVE).await.unwrap();
        let events = d["events"].as_array().unwrap();
        let recycled = events.iter().any(|e| {
            e["detail"]
                .as_str()
                .is_some_and(|t| t.contains("recycled pod"))
        });
        assert_eq!(recycled, expect_deleted, "case {name}: {events:?}");
        if expect_deleted {
            wait_until(
                &format!("{name}: pod deleted"),
                Duration::from_secs(20),
                || async { Ok((!pod_exists(&pods, &target).await).then_some(())) },
            )
            .await
            .unwrap();
        } else {
            assert!(pod_exists(&pods, &target).await, "case {name}: pod kept");
        }
    }
    rig.assert_clean().await;
}

#[tokio::test]
async fn recycle_matrix_ground() {
    // (case, replicas (0: no owner), recycle asked, expect deleted)
    recycle_cases(
        "ground",
        &[
            ("last-asked", 1, true, true),
            ("last-not-asked", 1, false, false),
            ("notlast-asked", 2, true, true),
            ("notlast-not-asked", 2, false, true),
            ("noowner-asked", 0, true, false),
            ("noowner-not-asked", 0, false, false),
        ],
    )
    .await;
}

#[tokio::test]
async fn recycle_matrix_flight() {
    // Flight never takes the recycle flag (the API refuses it), so "asked" cells do not exist.
    recycle_cases(
        "flight",
        &[
            ("last", 1, false, false),
            ("notlast", 2, false, true),
            ("noowner", 0, false, false),
        ],
    )
    .await;
}

#[tokio::test]
async fn a_pod_deleted_mid_session_ends_it_as_pod_gone() {
    let rig = Rig::new("bg-podgone", "ground", &[]).await;
    rig.bare_pod("doomed").await;
    let server = rig.start(&[]).await;
    let alice = server.login("alice").await.unwrap();
    let id = alice
        .create(rig.request("ground", "doomed", "live"))
        .await
        .unwrap();
    alice.wait_state(&id, &["Active"], ACTIVE).await.unwrap();
    rig.admin_pods()
        .await
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    let d = alice.wait_state(&id, &["Ended"], ACTIVE).await.unwrap();
    assert_eq!(d["session"]["end_reason"]["kind"], "PodGone");
    rig.assert_clean().await;
}

/// Several sessions in one namespace: the sweep reads the namespace's pods once (a list)
/// rather than each session's pod, and still ends exactly the sessions whose pod went.
#[tokio::test]
async fn pods_deleted_among_many_in_one_namespace_end_only_their_sessions() {
    let rig = Rig::new("bg-podsgone", "ground", &[]).await;
    let pods = ["keep-a", "gone-b", "keep-c", "gone-d"];
    for pod in pods {
        rig.bare_pod(pod).await;
    }
    let server = rig.start(&[]).await;
    let alice = server.login("alice").await.unwrap();
    let mut ids = Vec::new();
    for pod in pods {
        let id = alice
            .create(rig.request("ground", pod, "live"))
            .await
            .unwrap();
        alice.wait_state(&id, &["Active"], ACTIVE).await.unwrap();
        ids.push(id);
    }
    for pod in ["gone-b", "gone-d"] {
        rig.admin_pods()
            .await
            .delete(pod, &DeleteParams::default())
            .await
            .unwrap();
    }
    for i in [1, 3] {
        let d = alice.wait_state(&ids[i], &["Ended"], ACTIVE).await.unwrap();
        assert_eq!(d["session"]["end_reason"]["kind"], "PodGone", "{}", pods[i]);
    }
    // The pass that ended the second one judged the other two as well.
    for i in [0, 2] {
        let d = alice.session(&ids[i]).await.unwrap();
        assert_eq!(
            d["session"]["state"], "Active",
            "{}: {}",
            pods[i], d["session"]
        );
    }
}

/// A cluster that cannot be reached refuses the request at create (the server cannot tell
/// whether the pod exists, and could not activate it either) with a 503 whose detail, naming
/// the cluster, is in the log; nothing is written.
#[tokio::test]
async fn an_unreachable_cluster_is_refused_clearly_at_create_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("down.kubeconfig");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: down\n  cluster:\n    server: https://127.0.0.1:9\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: nope\ncontexts:\n- name: down\n  context:\n    cluster: down\n    user: u\ncurrent-context: down\n",
    )
    .unwrap();
    let rig = Rig::new("bg-down", "ground", &[("down", "ground", bad.as_path())]).await;
    let server = rig.start(&[]).await;
    let alice = server.login("alice").await.unwrap();
    let (status, v) = alice
        .post("/sessions", rig.request("down", "anything", "live"))
        .await
        .unwrap();
    // A 5xx body stays generic; the log names the cluster and the step.
    assert_eq!((status, &v["code"]), (503, &json!("unavailable")), "{v}");
    assert_no_sessions(&alice).await;
    let log = server.log_text();
    assert!(log.contains("cluster `down`"), "{log}");
}

/// A request names only what the cluster lists: a pod it does not list, or a container the
/// pod does not have, is refused at create with a 400 naming the field, and nothing is
/// written (no row, nothing for an approver); a pod being deleted counts as gone.
#[tokio::test]
async fn a_request_for_a_pod_or_container_the_cluster_does_not_list_is_refused() {
    let rig = Rig::new("bg-no-such-pod", "flight", &[]).await;
    rig.bare_pod("solo").await;
    let server = rig.start(&[]).await;
    let alice = server.login("alice").await.unwrap();
    let (status, v) = alice
        .post("/sessions", rig.request("flight", "no-such-pod", "live"))
        .await
        .unwrap();
    assert_eq!((status, &v["field"]), (400, &json!("pod")), "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap_or_default()
            .contains("no-such-pod"),
        "{v}"
    );
    let mut wrong_container = rig.request("flight", "solo", "live");
    wrong_container["target_container"] = json!("sidecar");
    let (status, v) = alice.post("/sessions", wrong_container).await.unwrap();
    assert_eq!(
        (status, &v["field"]),
        (400, &json!("target_container")),
        "{v}"
    );
    assert!(
        v["message"]
            .as_str()
            .unwrap_or_default()
            .contains("sidecar"),
        "{v}"
    );
    assert_no_sessions(&alice).await;
    // The pod and a container it has: accepted.
    let mut right = rig.request("flight", "solo", "live");
    right["target_container"] = json!("app");
    alice.create(right).await.unwrap();
}

/// `who` sees no session at all.
async fn assert_no_sessions(who: &ApiClient) {
    let (status, page) = who.get("/sessions").await.unwrap();
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["items"], json!([]), "nothing written: {page}");
}

/// Kills the real server right after each activation and end step, restarts it, and shows the
/// sweep converges: the session reaches a final state and nothing is left in the cluster.
#[tokio::test]
async fn crash_after_any_step_converges() {
    let rig = Rig::new("bg-crash", "ground", &[]).await;
    let activation_steps = ["activating", "grant", "annotate", "container", "running"];
    let end_steps = [
        "ending",
        "pod-kept",
        "debug-stopped",
        "annotation-removed",
        "grant-deleted",
    ];
    let mut n = 0;
    for step in activation_steps {
        n += 1;
        let pod = format!("crash-a{n}");
        rig.bare_pod(&pod).await;
        let mut s = rig.start(&[("BREAKGLASS_FAILPOINT", step)]).await;
        let alice = s.login("alice").await.unwrap();
        let mut req = rig.request("ground", &pod, "live");
        req["target_container"] = json!("app");
        let id = alice.create(req).await.unwrap();
        assert_eq!(
            s.wait_exit(ACTIVE).await.unwrap(),
            Some(breakglass_server_exit_code()),
            "died at {step}"
        );
        let s2 = rig.start(&[]).await;
        let alice = s2.login("alice").await.unwrap();
        alice
            .wait_state(&id, &["Active"], ACTIVE)
            .await
            .unwrap_or_else(|e| panic!("after crash at {step}: {e}\n{}", s2.log_text()));
        alice
            .post(&format!("/sessions/{id}/end"), json!({}))
            .await
            .unwrap();
        alice.wait_state(&id, &["Ended"], ACTIVE).await.unwrap();
        rig.assert_clean().await;
    }
    for step in end_steps {
        n += 1;
        let pod = format!("crash-e{n}");
        rig.bare_pod(&pod).await;
        let mut s = rig.start(&[("BREAKGLASS_FAILPOINT", step)]).await;
        let alice = s.login("alice").await.unwrap();
        let mut req = rig.request("ground", &pod, "live");
        req["target_container"] = json!("app");
        let id = alice.create(req).await.unwrap();
        alice.wait_state(&id, &["Active"], ACTIVE).await.unwrap();
        alice
            .post(&format!("/sessions/{id}/end"), json!({}))
            .await
            .unwrap();
        assert_eq!(
            s.wait_exit(ACTIVE).await.unwrap(),
            Some(breakglass_server_exit_code()),
            "died at {step}"
        );
        let s2 = rig.start(&[]).await;
        let alice = s2.login("alice").await.unwrap();
        alice
            .wait_state(&id, &["Ended"], ACTIVE)
            .await
            .unwrap_or_else(|e| panic!("after crash at {step}: {e}\n{}", s2.log_text()));
        rig.assert_clean().await;
    }
}

fn breakglass_server_exit_code() -> i32 {
    86
}

/// Two replicas on one database (PostgreSQL: SQLite serves one): exactly one holds the sweep
/// lease, round after round; when it dies, whichever it was, the other takes over.
#[tokio::test]
async fn two_replicas_one_sweeps() {
    let rig = Rig::new("bg-replicas", "ground", &[]).await;
    let db = breakglass_e2e::postgres::fresh_database().await.unwrap();
    let env = [("BREAKGLASS_DATABASE_URL", db.as_str())];
    let a = rig.start(&env).await;
    let b = rig.start(&env).await;
    let (la, lb) = wait_until("one leader", Duration::from_secs(20), || async {
        let (la, lb) = (
            sweep_metric(&a.url, "breakglass_sweep_leader").await? == 1,
            sweep_metric(&b.url, "breakglass_sweep_leader").await? == 1,
        );
        Ok((la ^ lb).then_some((la, lb)))
    })
    .await
    .unwrap();
    assert!(la ^ lb);
    // Never both, for five rounds of each replica's loop (each round asks for the lease once):
    // counted, not timed, so a slow machine cannot cut the check short.
    let start = (
        sweep_metric(&a.url, "breakglass_sweep_rounds_total")
            .await
            .unwrap(),
        sweep_metric(&b.url, "breakglass_sweep_rounds_total")
            .await
            .unwrap(),
    );
    wait_until(
        "five rounds on each replica",
        Duration::from_secs(60),
        || async {
            let both = sweep_metric(&a.url, "breakglass_sweep_leader").await? == 1
                && sweep_metric(&b.url, "breakglass_sweep_leader").await? == 1;
            assert!(!both, "both replicas lead the sweep");
            let ra = sweep_metric(&a.url, "breakglass_sweep_rounds_total").await?;
            let rb = sweep_metric(&b.url, "breakglass_sweep_rounds_total").await?;
            Ok((ra >= start.0 + 5 && rb >= start.1 + 5).then_some(()))
        },
    )
    .await
    .unwrap();
    let (mut leader, follower) = if la { (a, b) } else { (b, a) };
    leader.kill().await.unwrap();
    wait_until(
        "the other replica takes over",
        Duration::from_secs(20),
        || async {
            Ok((sweep_metric(&follower.url, "breakglass_sweep_leader").await? == 1).then_some(()))
        },
    )
    .await
    .unwrap();
    let _ = ApiClient::login(&follower.url, "alice").await.unwrap();
}

/// The value of an unlabelled metric on a replica's `/metrics`.
async fn sweep_metric(url: &str, name: &str) -> anyhow::Result<u64> {
    let text = reqwest::get(format!("{url}/metrics")).await?.text().await?;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("{url}/metrics has no {name}"))
}
