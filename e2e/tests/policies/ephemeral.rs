//! breakglass-ephemeral and breakglass-pod-patch: well-formed debug containers only, and only the process-access annotation.

use super::*;

// ---------------------------------------------------------------------------------------------
// breakglass-ephemeral

#[tokio::test]
async fn ephemeral_rule_admits_only_well_formed_debug_containers() -> anyhow::Result<()> {
    let cp = guardrails().await?;
    let server = server(cp, Identity::BreakglassSa).await?;
    let ns = cp.namespace("ephemeral").await?;
    let n = ns.name().to_string();
    app_pod(cp, &n, "web").await?;
    let session = Uuid::new_v4();
    granted(&server, &n, &session, LIVE_ROLE).await?;
    let pods: Api<Pod> = Api::namespaced(server.client.clone(), &n);
    let good = debug_container(&session);
    let m = "breakglass-ephemeral:";

    let wrong_image = with(good.clone(), |c| {
        c["image"] = json!("registry.example/toolbox:latest");
    });
    refused(
        "another image",
        &format!("{m} a debug container runs the pinned debug image {DEFAULT_DEBUG_IMAGE}"),
        || add_debug(&pods, "web", &wrong_image, true),
    )
    .await?;
    let other = Uuid::new_v4();
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "not named debug-*",
            with(good.clone(), |c| c["name"] = json!("shell")),
            "is named debug-<last 8 hex digits",
        ),
        (
            "name not from its session",
            with(good.clone(), |c| {
                c["env"][0]["value"] = json!(other.to_string());
            }),
            "carries env BREAKGLASS_SESSION=<session id>",
        ),
        (
            "no session env",
            with(good.clone(), |c| {
                c.as_object_mut().unwrap().remove("env");
            }),
            "carries env BREAKGLASS_SESSION",
        ),
        (
            "no tty",
            with(good.clone(), |c| c["tty"] = json!(false)),
            "has stdin and tty",
        ),
        (
            "privileged",
            with(good.clone(), |c| {
                c["securityContext"] = json!({"privileged": true});
            }),
            "is not privileged and sets allowPrivilegeEscalation: false",
        ),
        (
            "privilege escalation allowed",
            with(good.clone(), |c| c["securityContext"] = json!({})),
            "allowPrivilegeEscalation: false",
        ),
        (
            "a capability not on the list",
            with(good.clone(), |c| {
                c["securityContext"]["capabilities"] = json!({"add": ["SYS_ADMIN"]});
            }),
            "adds only capabilities NET_RAW, SYS_PTRACE",
        ),
        (
            "SYS_PTRACE without process access",
            with(good.clone(), |c| {
                c["securityContext"]["capabilities"] = json!({"add": ["SYS_PTRACE"]});
            }),
            "SYS_PTRACE only with process access",
        ),
        (
            "targetContainerName without the pod annotation",
            with(good.clone(), |c| c["targetContainerName"] = json!("main")),
            "process access (targetContainerName) needs the pod annotation",
        ),
    ];
    for (what, c, expected) in cases {
        refused_rule_now(what, m, expected, add_debug(&pods, "web", &c, true)).await?;
    }
    let net_raw = with(good.clone(), |c| {
        c["securityContext"]["capabilities"] = json!({"add": ["NET_RAW"], "drop": ["ALL"]});
    });
    add_debug(&pods, "web", &net_raw, true)
        .await
        .context("NET_RAW is admitted")?;
    let name = debugged(&pods, "web", &session).await?;

    // Existing ephemeral containers cannot be changed: the API server's own validation refuses
    // it before admission (the policy's rule is defense in depth).
    let changed = with(good.clone(), |c| {
        c["image"] = json!(format!(
            "{}@sha256:{}",
            "registry.example/x",
            "1".repeat(64)
        ));
    });
    match add_debug(&pods, "web", &changed, true).await {
        Err(kube::Error::Api(e)) if e.code == 422 && e.message.contains("may not be changed") => {}
        other => bail!("changing {name}: expected the API server's refusal, got {other:?}"),
    }

    // Process access: the pod annotation names the session; then targetContainerName and
    // SYS_PTRACE are admitted for that session's container, and only for it.
    let second = Uuid::new_v4();
    let third = Uuid::new_v4();
    let merge = |v: Value| {
        Patch::Merge(
            json!({"metadata": {"annotations": {"hangar.io/breakglass-process-access": v}}}),
        )
    };
    pods.patch(
        "web",
        &PatchParams::default(),
        &merge(json!(second.to_string())),
    )
    .await
    .context("setting the process-access annotation")?;
    let for_third = with(debug_container(&third), |c| {
        c["targetContainerName"] = json!("main");
        c["securityContext"]["capabilities"] = json!({"add": ["SYS_PTRACE"]});
    });
    refused_now(
        "process access for another session",
        &format!("{m} process access (targetContainerName) needs the pod annotation"),
        add_debug(&pods, "web", &for_third, true),
    )
    .await?;
    let with_access = with(debug_container(&second), |c| {
        c["targetContainerName"] = json!("main");
        c["securityContext"]["capabilities"] = json!({"add": ["SYS_PTRACE"]});
    });
    add_debug(&pods, "web", &with_access, false)
        .await
        .context("process access with the annotation is admitted")?;
    wait_for_container_running(&pods, "web", with_access["name"].as_str().unwrap(), WAIT).await?;
    pods.patch("web", &PatchParams::default(), &merge(Value::Null))
        .await
        .context("removing the process-access annotation")?;
    ns.delete().await
}

// ---------------------------------------------------------------------------------------------
// breakglass-pod-patch

#[tokio::test]
async fn pod_patch_rule_allows_only_the_process_access_annotation() -> anyhow::Result<()> {
    let cp = guardrails().await?;
    let server = server(cp, Identity::BreakglassSa).await?;
    let ns = cp.namespace("pod-patch").await?;
    let n = ns.name().to_string();
    app_pod(cp, &n, "web").await?;
    let session = Uuid::new_v4();
    granted(&server, &n, &session, LIVE_ROLE).await?;
    let pods: Api<Pod> = Api::namespaced(server.client.clone(), &n);
    let dry = PatchParams::default().dry_run();
    let m = "breakglass-pod-patch:";

    let labels = Patch::Merge(json!({"metadata": {"labels": {"app": "hijacked"}}}));
    refused(
        "changing a label",
        &format!("{m} the server may not change a pod's labels"),
        || pods.patch("web", &dry, &labels),
    )
    .await?;
    let other = Patch::Merge(json!({"metadata": {"annotations": {"example.com/note": "x"}}}));
    refused_now(
        "another annotation",
        &format!(
            "{m} the server may change only the annotation hangar.io/breakglass-process-access"
        ),
        pods.patch("web", &dry, &other),
    )
    .await?;
    let not_a_session = Patch::Merge(
        json!({"metadata": {"annotations": {"hangar.io/breakglass-process-access": "everyone"}}}),
    );
    refused_now(
        "annotation naming no session",
        &format!("{m} hangar.io/breakglass-process-access names a session id"),
        pods.patch("web", &dry, &not_a_session),
    )
    .await?;
    let image = Patch::Strategic(
        json!({"spec": {"containers": [{"name": "main", "image": "registry.example/evil:1"}]}}),
    );
    refused_now(
        "changing a container image",
        &format!("{m} the server may not change a pod's spec"),
        pods.patch("web", &dry, &image),
    )
    .await?;
    let finalizer = Patch::Merge(json!({"metadata": {"finalizers": ["example.com/keep"]}}));
    refused_now(
        "adding a finalizer",
        &format!("{m} the server may not change a pod's finalizers"),
        pods.patch("web", &dry, &finalizer),
    )
    .await?;
    // Setting and removing the annotation are admitted.
    let set = Patch::Merge(
        json!({"metadata": {"annotations": {"hangar.io/breakglass-process-access": session.to_string()}}}),
    );
    pods.patch("web", &PatchParams::default(), &set)
        .await
        .context("setting the annotation")?;
    let unset = Patch::Merge(
        json!({"metadata": {"annotations": {"hangar.io/breakglass-process-access": null}}}),
    );
    pods.patch("web", &PatchParams::default(), &unset)
        .await
        .context("removing the annotation")?;
    ns.delete().await
}
