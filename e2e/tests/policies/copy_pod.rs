//! breakglass-copy-pod: hardened, labelled copies only.

use super::*;

// ---------------------------------------------------------------------------------------------
// breakglass-copy-pod (and breakglass-delete for copies)

fn copy_pod(session: &Uuid) -> Value {
    let mut debug = debug_container(session);
    debug["securityContext"]["capabilities"] = json!({"drop": ["ALL"]});
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("web-bg-{}", short(session)),
            "labels": {
                "hangar.io/breakglass-copy": session.to_string(),
                "app.kubernetes.io/managed-by": "tower-breakglass",
                "cleanup.kyverno.io/ttl": "30m"
            }
        },
        "spec": {
            "automountServiceAccountToken": false,
            "shareProcessNamespace": true,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "main", "image": "registry.example/app:1", "stdin": true, "tty": true,
                 "securityContext": {"privileged": false, "allowPrivilegeEscalation": false},
                 "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
                debug
            ],
            "volumes": [{"name": "data", "emptyDir": {}}]
        }
    })
}

#[tokio::test]
async fn copy_pod_rule_admits_only_hardened_labelled_copies() -> anyhow::Result<()> {
    let cp = guardrails().await?;
    let server = server(cp, Identity::BreakglassSa).await?;
    let ns = cp.namespace("copy-pod").await?;
    let n = ns.name().to_string();
    app_pod(cp, &n, "web").await?;
    let session = Uuid::new_v4();
    granted(&server, &n, &session, COPY_ROLE).await?;
    let pods: Api<Pod> = Api::namespaced(server.client.clone(), &n);
    let good = copy_pod(&session);
    let pod = |v: &Value| -> Pod { serde_json::from_value(v.clone()).unwrap() };
    let m = "breakglass-copy-pod:";

    let unlabelled = with(good.clone(), |p| {
        p["metadata"]["labels"] = json!({"app": "web"});
    });
    let (dp, unlabelled_pod) = (dry(), pod(&unlabelled));
    refused(
        "a pod that is no copy",
        &format!("{m} a pod created by the server is a copy pod"),
        || pods.create(&dp, &unlabelled_pod),
    )
    .await?;
    fn debug(p: &mut Value) -> &mut Value {
        &mut p["spec"]["containers"][1]
    }
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "a label a Service could select",
            with(good.clone(), |p| {
                p["metadata"]["labels"]["app"] = json!("web");
            }),
            "carries no label but",
        ),
        (
            "name not from the session",
            with(good.clone(), |p| p["metadata"]["name"] = json!("web-copy")),
            "is named <pod>-bg-<last 8 hex digits",
        ),
        (
            "an owner",
            with(
                good.clone(),
                |p| p["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "6b1d7c3e-0000-4000-8000-000000000000"}]),
            ),
            "has no owner references",
        ),
        (
            "a service-account token",
            with(good.clone(), |p| {
                p["spec"]["automountServiceAccountToken"] = json!(true);
            }),
            "has no service-account token",
        ),
        (
            "a projected token volume",
            with(good.clone(), |p| {
                p["spec"]["volumes"].as_array_mut().unwrap().push(json!({"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}));
            }),
            "has no service-account token",
        ),
        (
            "host network",
            with(good.clone(), |p| p["spec"]["hostNetwork"] = json!(true)),
            "uses no host namespace",
        ),
        (
            "host IPC",
            with(good.clone(), |p| p["spec"]["hostIPC"] = json!(true)),
            "uses no host namespace",
        ),
        (
            "a hostPath volume",
            with(good.clone(), |p| {
                p["spec"]["volumes"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"name": "root", "hostPath": {"path": "/"}}));
            }),
            "mounts no hostPath volume",
        ),
        (
            "a privileged container",
            with(good.clone(), |p| {
                p["spec"]["containers"][0]["securityContext"] = json!({"privileged": true});
            }),
            "no container of a copy pod is privileged",
        ),
        (
            "no debug container",
            with(good.clone(), |p| {
                p["spec"]["containers"].as_array_mut().unwrap().pop();
            }),
            "has exactly one debug container",
        ),
        (
            "debug container of another session",
            with(good.clone(), |p| debug(p)["name"] = json!("debug-00000000")),
            "the debug container is named debug-<last 8 hex digits of the session id>",
        ),
        (
            "another image",
            with(good.clone(), |p| {
                debug(p)["image"] = json!("registry.example/toolbox:latest");
            }),
            "the debug container runs the pinned debug image",
        ),
        (
            "no stdin",
            with(good.clone(), |p| debug(p)["stdin"] = json!(false)),
            "the debug container has stdin and tty",
        ),
        (
            "privilege escalation allowed",
            with(good.clone(), |p| {
                debug(p)["securityContext"]
                    .as_object_mut()
                    .unwrap()
                    .remove("allowPrivilegeEscalation");
            }),
            "sets allowPrivilegeEscalation: false",
        ),
        (
            "SYS_PTRACE without process access",
            with(good.clone(), |p| {
                debug(p)["securityContext"]["capabilities"] = json!({"add": ["SYS_PTRACE"]});
            }),
            "SYS_PTRACE only with process access",
        ),
    ];
    for (what, value, expected) in cases {
        refused_rule_now(what, m, expected, pods.create(&dry(), &pod(&value))).await?;
    }
    let ptrace = with(good.clone(), |p| {
        p["metadata"]["annotations"] =
            json!({"hangar.io/breakglass-process-access": session.to_string()});
        debug(p)["securityContext"]["capabilities"] = json!({"add": ["SYS_PTRACE"]});
    });
    pods.create(&dry(), &pod(&ptrace))
        .await
        .context("SYS_PTRACE with the copy's process-access annotation is admitted")?;

    // The hardened copy: admitted, running, attachable; then deleted (breakglass-delete admits
    // copies), while the original may not be deleted by the server.
    let name = good["metadata"]["name"].as_str().unwrap().to_string();
    pods.create(&PostParams::default(), &pod(&good))
        .await
        .context("the copy pod is admitted")?;
    let debug_name = format!("debug-{}", short(&session));
    wait_for_container_running(&pods, &name, &debug_name, WAIT).await?;
    attach_echo(&pods, &name, &debug_name).await?;
    // Nothing earlier in this test waited for breakglass-delete to be in effect: wait here.
    let dry_delete = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    refused(
        "deleting the original pod",
        "breakglass-delete: the server may delete only a pod carrying a debug-* container or a copy pod",
        || pods.delete("web", &dry_delete),
    )
    .await?;
    pods.delete(&name, &DeleteParams::default())
        .await
        .context("deleting the copy pod")?;
    ns.delete().await
}
