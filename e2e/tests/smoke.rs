//! Smoke tests of the test control plane itself: the real API server with
//! RBAC and TokenRequest, the controllers, and the simulated node with its
//! kubelet attach/exec endpoints backed by real shells.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use anyhow::{bail, Context as _};
use breakglass_e2e::{
    in_namespace, pod_running, wait_for_container_running, wait_for_pod_running, wait_until,
    ControlPlane, Identity, StartOptions,
};
use futures::SinkExt as _;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, ServiceAccount};
use kube::api::{
    AttachParams, DeleteParams, ListParams, Patch, PatchParams, PostParams, TerminalSize,
};
use kube::{Api, Client};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};

const WAIT: Duration = Duration::from_secs(30);

fn shell_pod(name: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "labels": { "app": name } },
        "spec": {
            "containers": [{ "name": "main", "image": "registry.example/app:1", "stdin": true, "tty": true }],
            "terminationGracePeriodSeconds": 5
        }
    }))?)
}

async fn create_running_pod(pods: &Api<Pod>, name: &str) -> anyhow::Result<Pod> {
    pods.create(&PostParams::default(), &shell_pod(name)?)
        .await
        .context("creating pod")?;
    wait_for_pod_running(pods, name, WAIT).await
}

async fn add_debug_container(pods: &Api<Pod>, pod: &str, container: &str) -> anyhow::Result<Pod> {
    let patch = json!({
        "spec": { "ephemeralContainers": [{
            "name": container,
            "image": "registry.example/debug@sha256:0000000000000000000000000000000000000000000000000000000000000000",
            "stdin": true,
            "tty": true,
            "targetContainerName": "main"
        }]}
    });
    pods.patch_ephemeral_containers(pod, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .context("adding ephemeral container")?;
    wait_for_container_running(pods, pod, container, WAIT).await
}

/// True when the terminal output has a line that is exactly `line`, alone or after a prompt
/// (the echo of the typed command does not count). A prompt's marks (OSC 133, the debug
/// image's profile) are dropped first, as a terminal draws nothing for them.
fn has_line(seen: &str, line: &str) -> bool {
    seen.split('\n')
        .map(|l| l.trim_end_matches('\r'))
        .map(|l| {
            l.replace("\x1b]133;A\x07", "")
                .replace("\x1b]133;B\x07", "")
        })
        .any(|l| breakglass_e2e::flows::row_reads(&l, line))
}

/// Reads from `out` into `seen` until it has the output line `needle` (or
/// the deadline passes: `Ok(false)`).
async fn read_until(
    out: &mut (impl AsyncRead + Unpin),
    seen: &mut String,
    needle: &str,
    timeout: Duration,
) -> anyhow::Result<bool> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut buf = [0u8; 4096];
    while !has_line(seen, needle) {
        let n = match tokio::time::timeout_at(deadline, out.read(&mut buf)).await {
            Err(_) => return Ok(false),
            Ok(r) => r.context("reading attach output")?,
        };
        if n == 0 {
            bail!("attach output ended before {needle:?}; got {seen:?}");
        }
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    Ok(true)
}

#[tokio::test]
async fn pod_becomes_running_with_kubelet_like_status() -> anyhow::Result<()> {
    let cp = ControlPlane::shared().await?;
    let client = cp.client(Identity::Admin).await?;
    in_namespace(cp, "pod-running", |ns| async move {
        let pods: Api<Pod> = Api::namespaced(client, &ns);
        let pod = create_running_pod(&pods, "web").await?;
        let spec = pod.spec.as_ref().context("pod spec")?;
        assert_eq!(
            spec.node_name.as_deref(),
            Some(cp.info().node_name.as_str())
        );
        let status = pod.status.as_ref().context("pod status")?;
        assert!(
            status.pod_ip.as_deref().is_some_and(|ip| !ip.is_empty()),
            "podIP set"
        );
        assert_eq!(status.host_ip.as_deref(), Some("127.0.0.1"));
        for condition in ["Ready", "ContainersReady", "Initialized", "PodScheduled"] {
            let found = status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == condition);
            assert_eq!(
                found.map(|c| c.status.as_str()),
                Some("True"),
                "condition {condition}"
            );
        }
        let cs = status
            .container_statuses
            .iter()
            .flatten()
            .find(|c| c.name == "main")
            .context("main status")?;
        assert!(cs.ready);
        assert!(cs.state.as_ref().and_then(|s| s.running.as_ref()).is_some());
        Ok(())
    })
    .await
}

#[tokio::test]
async fn ephemeral_container_attach_is_interactive_and_resizes() -> anyhow::Result<()> {
    let cp = ControlPlane::shared().await?;
    let client = cp.client(Identity::Admin).await?;
    in_namespace(cp, "attach", |ns| async move {
        let pods: Api<Pod> = Api::namespaced(client, &ns);
        create_running_pod(&pods, "target").await?;
        let pod = add_debug_container(&pods, "target", "debug-abc").await?;
        let status = pod.status.as_ref().context("status")?;
        let ec = status
            .ephemeral_container_statuses
            .iter()
            .flatten()
            .find(|c| c.name == "debug-abc")
            .context("ephemeral container status")?;
        assert!(ec.state.as_ref().and_then(|s| s.running.as_ref()).is_some());

        let mut attached = pods
            .attach(
                "target",
                &AttachParams::interactive_tty().container("debug-abc"),
            )
            .await
            .context("attach through the API server")?;
        let mut stdin = attached.stdin().context("stdin")?;
        let mut stdout = attached.stdout().context("stdout")?;
        let mut seen = String::new();

        stdin.write_all(b"echo hi\n").await?;
        if !read_until(&mut stdout, &mut seen, "hi", Duration::from_secs(10)).await? {
            bail!("no `hi` line from the shell; got {seen:?}");
        }

        // The resize travels on its own stream; retry the probe until the
        // PTY reports the new size.
        let mut sizes = attached.terminal_size().context("terminal size sender")?;
        sizes
            .send(TerminalSize {
                width: 123,
                height: 45,
            })
            .await?;
        let mut resized = false;
        for _ in 0..10 {
            stdin.write_all(b"stty size\n").await?;
            if read_until(&mut stdout, &mut seen, "45 123", Duration::from_secs(1)).await? {
                resized = true;
                break;
            }
        }
        assert!(resized, "stty size never printed `45 123`; got {seen:?}");

        stdin.write_all(b"exit\n").await?;
        drop(stdin);
        let _ = tokio::time::timeout(Duration::from_secs(10), attached.join()).await;

        // The shell exited: the ephemeral container is reported terminated.
        wait_until("ephemeral container debug-abc terminated", WAIT, || async {
            let pod = pods.get("target").await?;
            let terminated = pod
                .status
                .and_then(|s| s.ephemeral_container_statuses)
                .into_iter()
                .flatten()
                .any(|c| c.name == "debug-abc" && c.state.and_then(|s| s.terminated).is_some());
            Ok(terminated.then_some(()))
        })
        .await?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn exec_as_admin_reaches_the_node() -> anyhow::Result<()> {
    let cp = ControlPlane::shared().await?;
    let client = cp.client(Identity::Admin).await?;
    in_namespace(cp, "exec", |ns| async move {
        let pods: Api<Pod> = Api::namespaced(client, &ns);
        create_running_pod(&pods, "target").await?;
        let mut attached = pods
            .exec(
                "target",
                ["echo", "x"],
                &AttachParams::default().container("main").stderr(false),
            )
            .await
            .context("exec through the API server")?;
        let mut stdout = attached.stdout().context("stdout")?;
        let status = attached.take_status().context("status")?;
        let mut out = String::new();
        tokio::time::timeout(Duration::from_secs(10), stdout.read_to_string(&mut out)).await??;
        assert_eq!(out, "x\n");
        let status = tokio::time::timeout(Duration::from_secs(10), status)
            .await?
            .context("exec status")?;
        assert_eq!(status.status.as_deref(), Some("Success"), "{status:?}");

        // A failing command reports its exit code.
        let mut attached = pods
            .exec(
                "target",
                ["sh", "-c", "exit 3"],
                &AttachParams::default().container("main").stderr(false),
            )
            .await?;
        let status = attached.take_status().context("status")?;
        let status = tokio::time::timeout(Duration::from_secs(10), status)
            .await?
            .context("exec status")?;
        assert_eq!(
            status.reason.as_deref(),
            Some("NonZeroExitCode"),
            "{status:?}"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn self_subject_review_reports_each_identity() -> anyhow::Result<()> {
    let cp = ControlPlane::shared().await?;
    for id in Identity::ALL {
        let reviews: Api<SelfSubjectReview> = Api::all(cp.client(id).await?);
        let review = reviews
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await?;
        let user = review
            .status
            .and_then(|s| s.user_info)
            .and_then(|u| u.username);
        assert_eq!(user.as_deref(), Some(cp.username(id)?), "identity {id:?}");
    }
    assert_eq!(
        cp.username(Identity::BreakglassSa)?,
        "system:serviceaccount:breakglass:breakglass-server"
    );
    assert_eq!(
        cp.username(Identity::BreakglassUser)?,
        "breakglass-server-user"
    );
    Ok(())
}

#[tokio::test]
async fn token_request_token_authenticates_as_the_service_account() -> anyhow::Result<()> {
    let cp = ControlPlane::shared().await?;
    let client = cp.client(Identity::Admin).await?;
    in_namespace(cp, "token", |ns| async move {
        let sas: Api<ServiceAccount> = Api::namespaced(client, &ns);
        sas.create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": "robot" } }))?,
        )
        .await?;
        let token = cp.service_account_token(&ns, "robot", &[], 600).await?;
        let reviews: Api<SelfSubjectReview> = Api::all(cp.token_client(&token).await?);
        let review = reviews
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await?;
        let user = review
            .status
            .and_then(|s| s.user_info)
            .and_then(|u| u.username);
        assert_eq!(user, Some(format!("system:serviceaccount:{ns}:robot")));
        Ok(())
    })
    .await
}

#[tokio::test]
async fn rbac_refuses_users_without_rights() -> anyhow::Result<()> {
    let cp = ControlPlane::shared().await?;
    in_namespace(cp, "rbac", |ns| async move {
        for id in [
            Identity::Alice,
            Identity::Bob,
            Identity::BreakglassUser,
            Identity::BreakglassSa,
        ] {
            let pods: Api<Pod> = Api::namespaced(cp.client(id).await?, &ns);
            match pods.list(&ListParams::default()).await {
                Err(kube::Error::Api(e)) if e.code == 403 => {}
                other => bail!("{id:?} listing pods: expected 403 Forbidden, got {other:?}"),
            }
        }
        Ok(())
    })
    .await
}

#[tokio::test]
async fn deployment_replaces_a_deleted_pod_and_gc_cleans_up() -> anyhow::Result<()> {
    let cp = ControlPlane::shared().await?;
    let client = cp.client(Identity::Admin).await?;
    in_namespace(cp, "deploy", |ns| async move {
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let replicasets: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns);
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": { "name": "app" },
            "spec": {
                "replicas": 1,
                "selector": { "matchLabels": { "app": "app" } },
                "template": {
                    "metadata": { "labels": { "app": "app" } },
                    "spec": { "containers": [{ "name": "main", "image": "registry.example/app:1" }] }
                }
            }
        }))?;
        deployments.create(&PostParams::default(), &deployment).await?;
        let by_label = ListParams::default().labels("app=app");
        let running = |exclude: Option<String>| {
            let pods = pods.clone();
            let by_label = by_label.clone();
            async move {
                let list = pods.list(&by_label).await?;
                Ok(list.items.into_iter().find(|p| {
                    pod_running(p) && p.metadata.deletion_timestamp.is_none() && p.metadata.uid != exclude
                }))
            }
        };
        let first = wait_until("deployment pod running", WAIT, || running(None)).await?;
        let first_name = first.metadata.name.clone().context("pod name")?;
        pods.delete(&first_name, &DeleteParams::default()).await?;
        let second = wait_until("replacement pod running", WAIT, || running(first.metadata.uid.clone())).await?;
        assert_ne!(second.metadata.name, first.metadata.name);
        wait_until("deleted pod gone", WAIT, || async {
            Ok(pods.get_opt(&first_name).await?.is_none().then_some(()))
        })
        .await?;

        // Deleting the Deployment takes its ReplicaSet and pods with it
        // (garbage collector).
        deployments.delete("app", &DeleteParams::background()).await?;
        wait_until("ReplicaSets and pods garbage-collected", Duration::from_secs(60), || async {
            let rs = replicasets.list(&ListParams::default()).await?;
            let ps = pods.list(&ListParams::default()).await?;
            Ok((rs.items.is_empty() && ps.items.is_empty()).then_some(()))
        })
        .await?;
        Ok(())
    })
    .await
}

#[tokio::test]
async fn namespace_deletion_completes() -> anyhow::Result<()> {
    let cp = ControlPlane::shared().await?;
    let client: Client = cp.client(Identity::Admin).await?;
    let ns = cp.namespace("ns-delete").await?;
    let name = ns.name().to_owned();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &name);
    create_running_pod(&pods, "p").await?;
    ns.delete().await?;
    let namespaces: Api<Namespace> = Api::all(client);
    wait_until(
        &format!("namespace {name} gone"),
        Duration::from_secs(60),
        || async { Ok(namespaces.get_opt(&name).await?.is_none().then_some(())) },
    )
    .await
}

#[tokio::test]
async fn second_instance_trusts_the_first_issuer() -> anyhow::Result<()> {
    let home = ControlPlane::shared().await?;
    let remote = ControlPlane::start(StartOptions {
        cluster_name: Some("remote".to_owned()),
        trust_issuer_dir: Some(home.kubeconfig_dir().to_owned()),
    })
    .await?;
    let trusted = remote
        .info()
        .trusted_issuer
        .clone()
        .context("remote reports its trusted issuer")?;
    assert_eq!(trusted.issuer, home.info().issuer);

    let token = home
        .service_account_token("breakglass", "tower-actor", &["remote"], 600)
        .await?;
    let reviews: Api<SelfSubjectReview> = Api::all(remote.token_client(&token).await?);
    let review = reviews
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await?;
    let user = review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username);
    assert_eq!(
        user,
        Some(format!("hangar:{}:tower-actor", home.cluster_name()))
    );

    // The same token is no credential at home (wrong audience) ...
    let home_reviews: Api<SelfSubjectReview> = Api::all(home.token_client(&token).await?);
    match home_reviews
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
    {
        Err(kube::Error::Api(e)) if e.code == 401 => {}
        other => bail!("home accepted a token for audience `remote`: {other:?}"),
    }
    // ... and a home token with the default audience is none at the remote.
    let home_token = home
        .service_account_token("breakglass", "tower-actor", &[], 600)
        .await?;
    let reviews: Api<SelfSubjectReview> = Api::all(remote.token_client(&home_token).await?);
    match reviews
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
    {
        Err(kube::Error::Api(e)) if e.code == 401 => {}
        other => bail!("remote accepted a token without its audience: {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn validating_admission_policy_is_enforced() -> anyhow::Result<()> {
    let cp = ControlPlane::shared().await?;
    let client = cp.client(Identity::Admin).await?;
    in_namespace(cp, "vap", |ns| async move {
        let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
        let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
        let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let name = format!("smoke-{ns}");
        let policy = json!({
            "metadata": { "name": name },
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": { "resourceRules": [{
                    "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]
                }]},
                "validations": [{
                    "expression": "object.metadata.name != 'forbidden'",
                    "message": "smoke policy: no configmap named forbidden"
                }]
            }
        });
        policies.create(&PostParams::default(), &serde_json::from_value(policy)?).await?;
        let binding = json!({
            "metadata": { "name": name },
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": { "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": ns } } }
            }
        });
        bindings.create(&PostParams::default(), &serde_json::from_value(binding)?).await?;
        let configmap = |name: &str| -> anyhow::Result<ConfigMap> {
            Ok(serde_json::from_value(json!({ "metadata": { "name": name } }))?)
        };

        // Policies take effect a moment after creation: probe (dry run)
        // until the known-bad request is refused.
        let dry_run = PostParams { dry_run: true, ..PostParams::default() };
        let bad = configmap("forbidden")?;
        wait_until("policy refuses configmap `forbidden`", WAIT, || async {
            match configmaps.create(&dry_run, &bad).await {
                Err(kube::Error::Api(e)) if e.message.contains("no configmap named forbidden") => Ok(Some(())),
                Ok(_) => Ok(None),
                Err(e) => Err(e.into()),
            }
        })
        .await?;
        configmaps.create(&PostParams::default(), &configmap("fine")?).await.context("allowed configmap")?;

        bindings.delete(&name, &DeleteParams::default()).await?;
        policies.delete(&name, &DeleteParams::default()).await?;
        Ok(())
    })
    .await
}
