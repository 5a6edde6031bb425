//! Bounded waiting.

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::bail;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::Api;

/// Polls `check` until it returns `Ok(Some(value))` and returns that value,
/// or fails after `timeout` with a message naming `what` (and the last error
/// `check` returned, if any). `Ok(None)` and `Err(_)` both mean "not yet".
/// Polls quickly at first (20 ms), backing off to 500 ms.
pub async fn wait_until<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let start = Instant::now();
    let mut delay = Duration::from_millis(20);
    let mut last_error: Option<anyhow::Error> = None;
    loop {
        match check().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(e) => last_error = Some(e),
        }
        let elapsed = start.elapsed();
        if elapsed >= timeout {
            match last_error {
                Some(e) => {
                    bail!("timed out after {timeout:?} waiting for {what} (last error: {e:#})")
                }
                None => bail!("timed out after {timeout:?} waiting for {what}"),
            }
        }
        tokio::time::sleep(delay.min(timeout - elapsed)).await;
        delay = (delay * 2).min(Duration::from_millis(500));
    }
}

/// True when the pod is `Running` and `Ready`.
pub fn pod_running(pod: &Pod) -> bool {
    let Some(status) = &pod.status else {
        return false;
    };
    status.phase.as_deref() == Some("Running")
        && status
            .conditions
            .as_ref()
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// True when the named container (regular, init or ephemeral) of the pod
/// reports `state.running`.
pub fn container_running(pod: &Pod, container: &str) -> bool {
    let Some(status) = &pod.status else {
        return false;
    };
    let running = |list: &Option<Vec<ContainerStatus>>| {
        list.as_ref().is_some_and(|l| {
            l.iter().any(|c| {
                c.name == container && c.state.as_ref().is_some_and(|s| s.running.is_some())
            })
        })
    };
    running(&status.container_statuses)
        || running(&status.ephemeral_container_statuses)
        || running(&status.init_container_statuses)
}

/// Waits until the pod is Running and Ready; returns it.
pub async fn wait_for_pod_running(
    pods: &Api<Pod>,
    name: &str,
    timeout: Duration,
) -> anyhow::Result<Pod> {
    wait_until(
        &format!("pod {name} Running and Ready"),
        timeout,
        || async { Ok(pods.get_opt(name).await?.filter(pod_running)) },
    )
    .await
}

/// Waits until a container of the pod (ephemeral ones included) is running;
/// returns the pod.
pub async fn wait_for_container_running(
    pods: &Api<Pod>,
    name: &str,
    container: &str,
    timeout: Duration,
) -> anyhow::Result<Pod> {
    wait_until(
        &format!("container {container} of pod {name} running"),
        timeout,
        || async {
            Ok(pods
                .get_opt(name)
                .await?
                .filter(|p| container_running(p, container)))
        },
    )
    .await
}
