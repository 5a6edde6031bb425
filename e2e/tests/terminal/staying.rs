//! A person who means to stay. In a debug container on the test node, which keeps a container
//! runtime's process rules (a PID namespace of the container's own or its target's, a cgroup
//! killed when the main process exits), they start what would outlive a shell (a job in the
//! background, `setsid nohup`, a double fork, a loop deaf to SIGTERM) and send the container's
//! PID 1 what would stop it. In live mode with and without process access and in copy mode, on
//! Ground and on Flight, the session then ends by End, by its deadline, by `logins revoke
//! --end-sessions` and by a lock: within 10 s no process of the session is left, and the pod's
//! status shows the debug container terminated (or the copy pod is gone). A person who kills
//! every process they can see ends their own container, and nothing of it is left either. What
//! the rules leave possible (stopping the supervisor where it is not PID 1, with process
//! access) is what the session's cleanup says it left.

use breakglass_e2e::procs::{self, Proc};
use kube::ResourceExt;

use super::rig::Rig;
use super::*;

/// How long after its end a session may still have a process.
const GONE_WITHIN: Duration = Duration::from_secs(10);

/// One way to run a debug container.
#[derive(Clone, Copy, Debug)]
struct Setup {
    mode: &'static str,
    /// Process access to the pod's `app` container (its PID namespace).
    target: bool,
}

const SETUPS: [Setup; 3] = [
    Setup {
        mode: "live",
        target: false,
    },
    Setup {
        mode: "live",
        target: true,
    },
    Setup {
        mode: "copy",
        target: false,
    },
];

/// How the session ends.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ending {
    End,
    Deadline,
    Revoke,
    Lock,
}

/// A running session with its terminal open and what its person started.
struct Stay {
    id: String,
    setup: Setup,
    pod: String,
    ws: Ws,
    /// What the person started.
    started: Vec<Proc>,
    /// The debug container's PID namespace and its PID 1, when it is its own (live mode
    /// without process access): nothing may be left in it. (A namespace's number is given
    /// again once it is gone, so it is this one only while its PID 1 runs.)
    own_ns: Option<(String, Proc)>,
}

/// The person's keys: what stays, then what would stop PID 1 (which the kernel drops when
/// sent from inside its namespace) and the supervisor (which catches and ignores it), then
/// what they started, with the namespace they are in.
const STAY_KEYS: &[u8] = b"sleep 600 & a=$!; setsid nohup sleep 601 >/dev/null 2>&1 & \
(sh -c 'sleep 602 & echo $! > \"$HOME/bg-stay\"' &); \
setsid -w sh -c \"trap '' TERM HUP INT; while :; do sleep 1; done\" >/dev/null 2>&1 & t=$!; \
kill -9 1; kill -STOP 1; for s in INT HUP QUIT TSTP TTIN USR1; do \
kill -$s $(pgrep -x breakglass-supe); done; sleep 0.3; \
echo \"stay $(readlink /proc/self/ns/pid) $$ $a $t $(cat \"$HOME/bg-stay\") end$((6*7))\"\r";

/// The server's command line on the rig's data (its configuration is the data directory's
/// `server.toml`, as in the other terminal tests), asserted to succeed; its stdout.
fn cli(rig: &Rig, args: &[&str]) -> String {
    super::revocation::cli(&rig.dir, args)
}

/// The rig's configuration with sessions of one minute allowed (for the deadline).
fn one_minute_config(rig: &Rig) -> std::path::PathBuf {
    let mut text = std::fs::read_to_string(&rig.config).unwrap();
    for env in ["ground", "flight"] {
        text.push_str(&format!(
            "\n[durations.{env}]\nmin_minutes = 1\nmax_minutes = 5\ndefault_minutes = 1\n"
        ));
    }
    let path = rig.dir.path().join("one-minute.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Starts a session of `setup` on a fresh bare pod, approved by bob on Flight, opens its
/// terminal and has the person try to stay.
async fn stay(
    rig: &Rig,
    server: &ServerProcess,
    tier: &str,
    setup: Setup,
    n: usize,
    minutes: u32,
) -> Stay {
    let pod = format!("stay-{n}");
    rig.bare_pod(&pod).await;
    let alice = server.login("alice").await.unwrap();
    let mut req = rig.request(tier, &pod, setup.mode);
    req["duration_minutes"] = json!(minutes);
    if setup.target {
        req["target_container"] = json!("app");
    }
    let id = alice.create(req).await.unwrap();
    if tier == "flight" {
        server
            .login("bob")
            .await
            .unwrap()
            .approve(&id)
            .await
            .unwrap();
    }
    alice
        .wait_state(&id, &["Active"], T)
        .await
        .unwrap_or_else(|e| panic!("{setup:?} on {tier}: {e}\n{}", server.log_text()));
    let mut ws = connect(server, &alice, &id).await;
    ws.send(Message::Binary(Frame::Data(STAY_KEYS).encode().into()))
        .await
        .unwrap();
    let (seen, closed) = read_until(&mut ws, "end42").await;
    assert!(closed.is_none(), "{setup:?} on {tier}: {closed:?} {seen:?}");
    let line = seen
        .split(['\r', '\n'])
        .filter_map(|l| l.rsplit_once("stay pid:").map(|(_, rest)| rest))
        .find(|rest| rest.ends_with("end42"))
        .unwrap_or_else(|| panic!("{setup:?} on {tier}: nothing said in {seen:?}"));
    let mut words = line.split_whitespace();
    let ns = format!("pid:{}", words.next().unwrap());
    let in_ns = |pid: u32| {
        procs::host_pid(&ns, pid)
            .and_then(Proc::of)
            .unwrap_or_else(|| {
                panic!("{setup:?} on {tier}: process {pid} of {ns} does not run ({line:?})")
            })
    };
    let started: Vec<Proc> = words.filter_map(|w| w.parse().ok()).map(in_ns).collect();
    // The shell, the job, the loop's setsid and the double fork's sleep outlived the person's
    // signals to PID 1.
    assert_eq!(started.len(), 4, "{setup:?} on {tier}: {line:?}");
    let marked = procs::with_env("BREAKGLASS_SESSION", &id);
    for p in &started {
        assert!(
            marked.contains(&p.pid),
            "{setup:?} on {tier}: process {p:?} does not carry the session ({marked:?})"
        );
    }
    let own_ns = (setup.mode == "live" && !setup.target).then(|| (ns.clone(), in_ns(1)));
    Stay {
        id,
        setup,
        pod,
        ws,
        started,
        own_ns,
    }
}

/// Every process of session `s` still running: what the person started, what carries the
/// session in its environment, and (in a namespace of the container's own) what is in it.
fn left_of(s: &Stay) -> Vec<(u32, String)> {
    let mut left: Vec<u32> = s
        .started
        .iter()
        .filter(|p| p.alive())
        .map(|p| p.pid)
        .collect();
    left.extend(procs::with_env("BREAKGLASS_SESSION", &s.id));
    if let Some((ns, init)) = &s.own_ns {
        if init.alive() {
            left.extend(procs::in_pid_namespace(ns));
        }
    }
    left.sort_unstable();
    left.dedup();
    left.into_iter()
        .map(|p| (p, procs::command_line(p)))
        .collect()
}

/// Waits until nothing of session `s` runs (within [`GONE_WITHIN`] of `since`) and the
/// cluster shows its debug container ended: terminated in the pod's status (live), or the copy
/// pod gone.
async fn assert_gone(rig: &Rig, server: &ServerProcess, s: &Stay, since: tokio::time::Instant) {
    let what = format!("{:?} of {}", s.setup, s.id);
    let left = breakglass_e2e::wait_until(
        &format!("no process of {what}"),
        GONE_WITHIN.saturating_sub(since.elapsed()),
        || async {
            let left = left_of(s);
            Ok(left.is_empty().then_some(()))
        },
    )
    .await;
    let pods = rig.admin_pods().await;
    if let Err(e) = left {
        let pod = pods.get(&s.pod).await.ok();
        let spec = pod
            .as_ref()
            .and_then(|p| p.spec.as_ref())
            .map(|sp| serde_json::to_string(&sp.ephemeral_containers).unwrap_or_default());
        let status = pod
            .as_ref()
            .and_then(|p| p.status.as_ref())
            .map(|st| serde_json::to_string(&st.ephemeral_container_statuses).unwrap_or_default());
        panic!(
            "{e}: {:?}\npod {}: {spec:?}\n{status:?}\n{}",
            left_of(s),
            s.pod,
            server.log_text()
        );
    }
    let container = format!("debug-{}", &s.id[s.id.len() - 8..]);
    breakglass_e2e::wait_until(
        &format!("the debug container of {what} ended in the cluster"),
        Duration::from_secs(30),
        || async {
            if s.setup.mode == "copy" {
                // The copy pod is deleted, or its debug container terminated (it is never
                // restarted).
                let copies = pods
                    .list(
                        &kube::api::ListParams::default()
                            .labels(&format!("hangar.io/breakglass-copy={}", s.id)),
                    )
                    .await?;
                let ended = copies.items.iter().all(|p| {
                    p.metadata.deletion_timestamp.is_some()
                        || p.status
                            .as_ref()
                            .and_then(|st| st.container_statuses.as_ref())
                            .and_then(|cs| cs.iter().find(|c| c.name == container))
                            .and_then(|c| c.state.as_ref())
                            .is_some_and(|st| st.terminated.is_some())
                });
                return Ok(ended.then_some(()));
            }
            let pod = pods.get(&s.pod).await?;
            let ended = pod
                .status
                .and_then(|st| st.ephemeral_container_statuses)
                .unwrap_or_default()
                .into_iter()
                .find(|c| c.name == container)
                .and_then(|c| c.state)
                .is_some_and(|st| st.terminated.is_some());
            Ok(ended.then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", server.log_text()));
}

/// On one tier: a session of each setup, each person trying to stay, then `ending`.
async fn stay_then(tier: &'static str, ending: Ending) {
    let rig = Rig::new(&format!("bg-stay-{tier}"), tier, &[]).await;
    let (config, minutes) = match ending {
        Ending::Deadline => (one_minute_config(&rig), 1),
        _ => (rig.config.clone(), 30),
    };
    let server = rig.start_with(&config, &[]).await;
    let mut stays = Vec::new();
    for (n, setup) in SETUPS.into_iter().enumerate() {
        stays.push(stay(&rig, &server, tier, setup, n, minutes).await);
    }
    let alice = server.login("alice").await.unwrap();
    let since = tokio::time::Instant::now();
    let since = match ending {
        Ending::End => {
            for s in &stays {
                let (st, body) = alice
                    .post(&format!("/sessions/{}/end", s.id), json!({}))
                    .await
                    .unwrap();
                assert_eq!(st, 200, "{body}");
            }
            since
        }
        Ending::Deadline => {
            // Nobody ends them: the sweep does, at the end of their minute.
            for s in &stays {
                alice
                    .wait_state(&s.id, &["Ending", "Ended"], Duration::from_secs(150))
                    .await
                    .unwrap();
            }
            tokio::time::Instant::now()
        }
        Ending::Revoke => {
            let said = cli(
                &rig,
                &[
                    "logins",
                    "revoke",
                    "--user",
                    "alice",
                    "--by",
                    "security",
                    "--end-sessions",
                    "--reason",
                    "INC-12 account taken over",
                ],
            );
            for s in &stays {
                assert!(said.contains(&s.id), "{said}");
            }
            since
        }
        Ending::Lock => {
            cli(
                &rig,
                &[
                    "lock",
                    tier,
                    "--reason",
                    "INC-13 suspicious shells",
                    "--by",
                    "security",
                ],
            );
            since
        }
    };
    for s in &stays {
        assert_gone(&rig, &server, s, since).await;
    }
    // A revoked person's cookie no longer reads anything: they sign in again.
    let alice = server.login("alice").await.unwrap();
    for s in &stays {
        let d = alice
            .wait_state(&s.id, &["Ended", "Locked"], T)
            .await
            .unwrap();
        // The page's sentences come from these steps. Nothing is left, but with process
        // access the page says what may be: what the app container was made to start.
        let left = left_steps(&d);
        if s.setup.target {
            assert!(
                left.len() == 1 && left[0].contains("container app was made to start"),
                "{:?}: {left:?}",
                s.setup
            );
        } else {
            assert!(
                left.is_empty(),
                "{:?}: steps left something: {left:?}",
                s.setup
            );
        }
    }
}

/// [`stay_then`] on Ground and on Flight at once.
async fn on_both_tiers(ending: Ending) {
    tokio::join!(stay_then("ground", ending), stay_then("flight", ending));
}

#[tokio::test]
async fn a_person_who_means_to_stay_is_gone_after_end() {
    on_both_tiers(Ending::End).await;
}

#[tokio::test]
async fn a_person_who_means_to_stay_is_gone_after_the_deadline() {
    on_both_tiers(Ending::Deadline).await;
}

#[tokio::test]
async fn a_person_who_means_to_stay_is_gone_after_their_logins_are_revoked() {
    on_both_tiers(Ending::Revoke).await;
}

#[tokio::test]
async fn a_person_who_means_to_stay_is_gone_after_a_lock() {
    on_both_tiers(Ending::Lock).await;
}

/// Killing every process one can see ends one's own debug container: as PID 1 the supervisor
/// takes SIGTERM as the runtime's stop; where it is not PID 1 (process access, a copy pod's
/// shared namespace) SIGKILL ends it, and the runtime the rest. Nothing is left, the pod's
/// status says the container ended, and the terminal closes.
#[tokio::test]
async fn killing_every_process_one_sees_ends_ones_own_container() {
    let rig = Rig::new("bg-stay-kill", "ground", &[]).await;
    let server = rig.start(&[]).await;
    for (n, setup) in SETUPS.into_iter().enumerate() {
        let mut s = stay(&rig, &server, "ground", setup, n, 30).await;
        let keys =
            b"for p in $(ls /proc | grep '^[0-9]'); do [ $p = $$ ] || kill $p; done 2>/dev/null; \
for p in $(ls /proc | grep '^[0-9]'); do [ $p = $$ ] || kill -9 $p; done 2>/dev/null; \
sleep 5; echo still-here-$((6*7))\r";
        s.ws.send(Message::Binary(Frame::Data(keys).encode().into()))
            .await
            .unwrap();
        let since = tokio::time::Instant::now();
        let (seen, closed) = read_until(&mut s.ws, "still-here-42").await;
        assert!(
            closed.is_some(),
            "{setup:?}: the shell outlived its container's main process: {seen:?}"
        );
        // In a shared namespace the person may also have killed the app's processes: what
        // counts is that nothing of the session is left.
        s.started.retain(|p| p.alive());
        assert_gone(&rig, &server, &s, since).await;
    }
}

/// Process access shares the app container's PID namespace, where the supervisor is not PID 1
/// and the person can stop it (SIGSTOP). Then the session's end cannot reach it: the cleanup
/// waits, bounded, and says the debug container was left running (the session page's "Left in
/// the cluster"), never that the cluster is clean.
#[tokio::test]
async fn a_stopped_supervisor_with_process_access_is_said_to_be_left() {
    let rig = Rig::new("bg-stay-stop", "ground", &[]).await;
    let server = rig.start(&[]).await;
    let setup = Setup {
        mode: "live",
        target: true,
    };
    let mut s = stay(&rig, &server, "ground", setup, 0, 30).await;
    let keys = b"kill -STOP $(pgrep -x breakglass-supe) && echo stopped-$((6*7))\r";
    s.ws.send(Message::Binary(Frame::Data(keys).encode().into()))
        .await
        .unwrap();
    let (seen, closed) = read_until(&mut s.ws, "stopped-42").await;
    assert!(closed.is_none(), "{closed:?} {seen:?}");
    let alice = server.login("alice").await.unwrap();
    let (st, body) = alice
        .post(&format!("/sessions/{}/end", s.id), json!({}))
        .await
        .unwrap();
    assert_eq!(st, 200, "{body}");
    let d = alice
        .wait_state(&s.id, &["Ended"], Duration::from_secs(90))
        .await
        .unwrap();
    let container = format!("debug-{}", &s.id[s.id.len() - 8..]);
    let left = left_steps(&d);
    assert!(
        left.iter()
            .any(|l| l.contains(&container) && l.contains("still runs")),
        "the cleanup says the debug container was left: {left:?}\n{d}"
    );
    // What is left is the person's own container, whose processes still run: the pod is the
    // cluster's to recycle (a bare pod here is never deleted).
    assert!(s.started.iter().any(|p| p.alive()));
    let pods = rig.admin_pods().await;
    assert!(pods.get(&s.pod).await.unwrap().name_any() == s.pod);
    // Deleting the pod ends it all.
    pods.delete(&s.pod, &Default::default()).await.unwrap();
    assert_gone_after_delete(&s).await;
}

/// The cleanup steps of session document `d` that left something in the cluster (what the
/// session page lists under "Left in the cluster"), each as its detail.
fn left_steps(d: &serde_json::Value) -> Vec<String> {
    let events = d["events"].as_array().cloned().unwrap_or_default();
    let progress = events
        .iter()
        .filter(|e| e["kind"] == "progress")
        .filter_map(|e| serde_json::from_str::<serde_json::Value>(e["detail"].as_str()?).ok());
    let cleanup: Vec<serde_json::Value> = progress.filter(|p| p["kind"] == "CleanupStep").collect();
    assert!(!cleanup.is_empty(), "no cleanup step in {d}");
    cleanup
        .into_iter()
        .filter(|p| p["left"] == true)
        .map(|p| p["detail"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Waits until nothing of session `s` runs once its pod was deleted.
async fn assert_gone_after_delete(s: &Stay) {
    breakglass_e2e::wait_until(
        "no process of the session once its pod was deleted",
        Duration::from_secs(30),
        || async { Ok(left_of(s).is_empty().then_some(())) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", left_of(s)));
}

/// End offers the recycle the tier allows: on Ground, ending a session with process access
/// and `recycle` replaces the pod (its owner's last ready one, which the rule otherwise keeps),
/// so nothing it was made to start is left, and the page says the cluster is clean. On Flight the same ask is refused,
/// naming the field, and the session runs on until ended without it.
#[tokio::test]
async fn ending_with_recycle_replaces_the_pod_where_the_tier_allows() {
    let ground = Rig::new("bg-stay-recycle", "ground", &[]).await;
    let server = ground.start(&[]).await;
    let alice = server.login("alice").await.unwrap();
    let pods = ground.deployment("worker", 1).await;
    let mut req = ground.request("ground", &pods[0], "live");
    req["target_container"] = json!("app");
    let id = alice.create(req).await.unwrap();
    alice.wait_state(&id, &["Active"], T).await.unwrap();
    let (st, body) = alice
        .post(&format!("/sessions/{id}/end"), json!({"recycle": true}))
        .await
        .unwrap();
    assert_eq!(st, 200, "{body}");
    let d = alice.wait_state(&id, &["Ended"], T).await.unwrap();
    assert_eq!(d["session"]["recycle"], true, "{d}");
    assert!(left_steps(&d).is_empty(), "{d}");
    assert!(
        d.to_string().contains(&format!("recycled pod {}", pods[0])),
        "{d}"
    );
    let admin_pods = ground.admin_pods().await;
    breakglass_e2e::wait_until("the recycled pod gone", T, || async {
        Ok(admin_pods.get_opt(&pods[0]).await?.is_none().then_some(()))
    })
    .await
    .unwrap();

    let flight = Rig::new("bg-stay-recycle", "flight", &[]).await;
    let server = flight.start(&[]).await;
    let alice = server.login("alice").await.unwrap();
    let pod = flight.bare_pod("solo").await;
    let mut req = flight.request("flight", &pod.name_any(), "live");
    req["target_container"] = json!("app");
    let id = alice.create(req).await.unwrap();
    server
        .login("bob")
        .await
        .unwrap()
        .approve(&id)
        .await
        .unwrap();
    alice.wait_state(&id, &["Active"], T).await.unwrap();
    let (st, body) = alice
        .post(&format!("/sessions/{id}/end"), json!({"recycle": true}))
        .await
        .unwrap();
    assert_eq!(st, 400, "{body}");
    assert_eq!(body["field"], "recycle", "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("Flight"),
        "{body}"
    );
    assert_eq!(
        alice.session(&id).await.unwrap()["session"]["state"],
        "Active"
    );
    // A body with an unknown field is refused too, naming it; no body ends without recycling.
    let (st, body) = alice
        .post(&format!("/sessions/{id}/end"), json!({"recycled": true}))
        .await
        .unwrap();
    assert_eq!(st, 400, "{body}");
    let d = end_and_wait(&alice, &id).await;
    assert_eq!(d["session"]["recycle"], false);
}
