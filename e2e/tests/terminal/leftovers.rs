//! Nothing outlives its session: the end of a session stops its debug container (which stays in
//! the pod's spec, terminated) and every process started in it, whether the session was ended
//! or its time ran out.

use super::*;

/// Starts two background processes in the session's shell, one of them deaf to hangups, and
/// returns their process ids as this machine numbers them (the test node runs each container
/// in a PID namespace of its own: the shell says which, and the numbers it has there).
pub(crate) async fn start_background(server: &ServerProcess, ws: &mut Ws) -> Vec<u32> {
    let keys = b"sleep 600 & a=$!; nohup sleep 601 >/dev/null 2>&1 & echo \"pids $(readlink /proc/self/ns/pid) $a $! end$((6*7))\"\r";
    ws.send(Message::Binary(Frame::Data(keys).encode().into()))
        .await
        .unwrap();
    let (seen, closed) = read_until(ws, "end42").await;
    assert!(
        closed.is_none(),
        "{closed:?} {seen:?}\n{}",
        server.log_text()
    );
    // The echo of the command line says `pids $(readlink ...) $a $!`; the output has the
    // namespace and the numbers. The shell may print its prompt first on the same line.
    let line = seen
        .split(['\r', '\n'])
        .filter_map(|l| l.rsplit_once("pids pid:").map(|(_, rest)| rest))
        .find(|rest| rest.ends_with("end42"))
        .unwrap_or_else(|| panic!("no pids in {seen:?}"));
    let pids = host_pids(line);
    assert_eq!(pids.len(), 2, "{line:?}");
    pids
}

/// `NS PID... end42` as the shell printed it (NS without its `pid:`): the processes' numbers
/// on this machine, each checked to run.
fn host_pids(line: &str) -> Vec<u32> {
    let mut words = line.split_whitespace();
    let ns = format!("pid:{}", words.next().unwrap_or_default());
    let pids: Vec<u32> = words
        .filter_map(|w| w.parse().ok())
        .map(|pid| {
            breakglass_e2e::procs::host_pid(&ns, pid)
                .unwrap_or_else(|| panic!("no process {pid} runs in {ns} ({line:?})"))
        })
        .collect();
    assert!(!pids.is_empty(), "{line:?}");
    pids
}

/// Waits until the pod's status says session `id`'s debug container terminated, then checks
/// that none of `pids` is left and that the audit trail says the container was stopped.
pub(crate) async fn assert_debug_container_stopped(
    server: &ServerProcess,
    who: &ApiClient,
    ns: &str,
    id: &str,
    pids: &[u32],
) {
    let container = format!("debug-{}", &id[id.len() - 8..]);
    let cp = ControlPlane::shared().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cp.client(Identity::Admin).await.unwrap(), ns);
    let stopped = breakglass_e2e::wait_until(
        &format!("{container} terminated in the pod's status"),
        Duration::from_secs(30),
        || {
            let (pods, container) = (pods.clone(), container.clone());
            async move {
                let pod = pods.get("shell").await?;
                let terminated = pod
                    .status
                    .and_then(|s| s.ephemeral_container_statuses)
                    .unwrap_or_default()
                    .into_iter()
                    .find(|c| c.name == container)
                    .and_then(|c| c.state)
                    .is_some_and(|s| s.terminated.is_some());
                Ok(terminated.then_some(()))
            }
        },
    )
    .await;
    if let Err(e) = stopped {
        let statuses = pods
            .get("shell")
            .await
            .ok()
            .and_then(|p| p.status)
            .and_then(|s| s.ephemeral_container_statuses);
        let session = who.session(id).await.map(|d| d.to_string());
        panic!(
            "{e}\nephemeral containers: {statuses:?}\nsession: {session:?}\nserver log:\n{}",
            server.log_text()
        );
    }
    for pid in pids {
        assert!(
            !breakglass_e2e::procs::alive(*pid),
            "process {pid}, started in the session, outlived it"
        );
    }
    let d = who.session(id).await.unwrap();
    assert!(
        d.to_string()
            .contains(&format!("stopped debug container {container}")),
        "the audit trail says the container was stopped: {d}"
    );
}

/// End stops the debug container and what was started in it, even in the background.
#[tokio::test]
async fn ending_a_session_stops_its_debug_container_and_its_background_processes() {
    let (server, alice, id, _dir, ns) = setup().await;
    let mut ws = connect(&server, &alice, &id).await;
    let pids = start_background(&server, &mut ws).await;
    end_and_wait(&alice, &id).await;
    assert_debug_container_stopped(&server, &alice, &ns, &id, &pids).await;
}

/// End stops the debug container while a command holds the terminal's foreground: the resize
/// that asks the container to end then reaches that command, not the supervisor, which finds
/// the size on its own next look.
#[tokio::test]
async fn ending_a_session_stops_its_debug_container_with_a_command_in_the_foreground() {
    let (server, alice, id, _dir, ns) = setup().await;
    let mut ws = connect(&server, &alice, &id).await;
    // The command prints its own process id, then becomes a long sleep in the foreground.
    let keys =
        b"sh -c 'echo \"pid $(readlink /proc/self/ns/pid) $$ end$((6*7))\"; exec sleep 602'\r";
    ws.send(Message::Binary(Frame::Data(keys).encode().into()))
        .await
        .unwrap();
    let (seen, closed) = read_until(&mut ws, "end42").await;
    assert!(closed.is_none(), "{closed:?} {seen:?}");
    let line = seen
        .split(['\r', '\n'])
        .filter_map(|l| l.rsplit_once("pid pid:").map(|(_, rest)| rest))
        .find(|rest| rest.ends_with("end42"))
        .unwrap_or_else(|| panic!("no pid in {seen:?}"));
    let pid = host_pids(line)[0];
    end_and_wait(&alice, &id).await;
    assert_debug_container_stopped(&server, &alice, &ns, &id, &[pid]).await;
}
