//! breakglass-delete, breakglass-attach and breakglass-exec, and identities the guardrails leave alone.

use super::*;

// ---------------------------------------------------------------------------------------------
// breakglass-delete, breakglass-attach, breakglass-exec

#[tokio::test]
async fn delete_rule_only_debugged_pods() -> anyhow::Result<()> {
    let cp = guardrails().await?;
    let server = server(cp, Identity::BreakglassSa).await?;
    let ns = cp.namespace("delete").await?;
    let n = ns.name().to_string();
    app_pod(cp, &n, "plain").await?;
    app_pod(cp, &n, "debugged").await?;
    let session = Uuid::new_v4();
    granted(&server, &n, &session, LIVE_ROLE).await?;
    let pods: Api<Pod> = Api::namespaced(server.client.clone(), &n);
    let dry_delete = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    refused(
        "deleting a pod without a debug container",
        "breakglass-delete: the server may delete only a pod carrying a debug-* container",
        || pods.delete("plain", &dry_delete),
    )
    .await?;
    debugged(&pods, "debugged", &session).await?;
    pods.delete("debugged", &DeleteParams::default())
        .await
        .context("recycling the debugged pod is admitted")?;
    ns.delete().await
}

async fn attach_and_exec(cp: &ControlPlane, id: Identity, prefix: &str) -> anyhow::Result<()> {
    let server = server(cp, id).await?;
    let admin = cp.client(Identity::Admin).await?;
    let ns = cp.namespace(prefix).await?;
    let n = ns.name().to_string();
    app_pod(cp, &n, "web").await?;
    let session = Uuid::new_v4();
    granted(&server, &n, &session, LIVE_ROLE).await?;
    let pods: Api<Pod> = Api::namespaced(server.client.clone(), &n);
    let debug = debugged(&pods, "web", &session).await?;

    // Attach: refused to the application container, admitted to the debug container.
    refused(
        "attach to the application container",
        "breakglass-attach: the server attaches only to a debug-* container",
        || async {
            pods.attach("web", &AttachParams::interactive_tty().container("main"))
                .await
                .map(|a| a.abort())
        },
    )
    .await?;
    attach_echo(&pods, "web", &debug).await?;

    // Exec: even with an RBAC binding that allows it, the policy refuses it.
    let roles: Api<Role> = Api::namespaced(admin.clone(), &n);
    roles.create(&PostParams::default(), &serde_json::from_value(json!({
        "metadata": {"name": "exec"},
        "rules": [{"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]}]
    }))?).await?;
    let bindings: Api<RoleBinding> = Api::namespaced(admin, &n);
    bindings.create(&PostParams::default(), &serde_json::from_value(json!({
        "metadata": {"name": "exec"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "exec"},
        "subjects": [server.subject]
    }))?).await?;
    wait_allowed(&server.client, &n, "create", "pods", "exec").await?;
    refused(
        "exec as the server",
        "breakglass-exec: exec is never allowed to the break-glass server",
        || exec_echo(&pods, "web"),
    )
    .await?;
    ns.delete().await
}

#[tokio::test]
async fn attach_and_exec_rules_service_account_flight() -> anyhow::Result<()> {
    let cp = guardrails().await?;
    attach_and_exec(cp, Identity::BreakglassSa, "attach-exec-sa").await
}

#[tokio::test]
async fn attach_and_exec_rules_user_ground() -> anyhow::Result<()> {
    let cp = guardrails().await?;
    attach_and_exec(cp, Identity::BreakglassUser, "attach-exec-user").await
}

// ---------------------------------------------------------------------------------------------
// Other identities are not affected.

#[tokio::test]
async fn other_identities_are_not_affected() -> anyhow::Result<()> {
    let cp = guardrails().await?;
    let admin = cp.client(Identity::Admin).await?;
    let server = server(cp, Identity::BreakglassSa).await?;
    let ns = cp.namespace("others").await?;
    let n = ns.name().to_string();
    app_pod(cp, &n, "web").await?;

    // The guardrails are in effect here: the server's malformed grant is refused ...
    let grants: Api<RoleBinding> = Api::namespaced(server.client.clone(), &n);
    let bad: RoleBinding = serde_json::from_value(with(
        grant(&n, &Uuid::new_v4(), LIVE_ROLE, &server.subject),
        |g| {
            g["metadata"]["annotations"]
                .as_object_mut()
                .unwrap()
                .remove("hangar.io/breakglass-requester");
        },
    ))?;
    let dp = dry();
    refused("the server's malformed grant", "breakglass-grant:", || {
        grants.create(&dp, &bad)
    })
    .await?;

    // ... while the cluster admin binds anything, to anyone, and execs.
    let admin_rbs: Api<RoleBinding> = Api::namespaced(admin.clone(), &n);
    admin_rbs.create(&PostParams::default(), &serde_json::from_value(json!({
        "metadata": {"name": "alice-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}]
    }))?).await.context("the admin binds ClusterRole admin to alice")?;
    // ClusterRole admin has no pods/ephemeralcontainers: a debugger Role adds it, as an
    // admin would for a person.
    let roles: Api<Role> = Api::namespaced(admin.clone(), &n);
    roles.create(&PostParams::default(), &serde_json::from_value(json!({
        "metadata": {"name": "debugger"},
        "rules": [{"apiGroups": [""], "resources": ["pods/ephemeralcontainers"], "verbs": ["get", "patch", "update"]}]
    }))?).await?;
    admin_rbs.create(&PostParams::default(), &serde_json::from_value(json!({
        "metadata": {"name": "alice-debugger"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "debugger"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}]
    }))?).await?;
    let admin_pods: Api<Pod> = Api::namespaced(admin.clone(), &n);
    assert_eq!(
        exec_echo(&admin_pods, "web")
            .await
            .context("the admin execs")?,
        "exec-ok\n"
    );

    // Alice, admin of this namespace, does what the server may not, on her own pods.
    let alice = cp.client(Identity::Alice).await?;
    wait_allowed(&alice, &n, "patch", "pods", "ephemeralcontainers").await?;
    let pods: Api<Pod> = Api::namespaced(alice.clone(), &n);
    pods.create(&PostParams::default(), &shell_pod("alices")?)
        .await
        .context("alice creates a pod that is no copy")?;
    wait_for_pod_running(&pods, "alices", WAIT).await?;
    let shell = json!({"name": "shell", "image": "registry.example/toolbox:latest", "stdin": true, "tty": true, "targetContainerName": "main",
                       "securityContext": {"capabilities": {"add": ["SYS_ADMIN", "SYS_PTRACE"]}}});
    pods.patch_ephemeral_containers("alices", &PatchParams::default(), &ephemeral_patch(&shell))
        .await
        .context("alice adds any ephemeral container")?;
    wait_for_container_running(&pods, "alices", "shell", WAIT).await?;
    pods.patch(
        "alices",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}}})),
    )
    .await
    .context("alice relabels her pod")?;
    attach_echo(&pods, "alices", "main")
        .await
        .context("alice attaches to an application container")?;
    assert_eq!(
        exec_echo(&pods, "alices").await.context("alice execs")?,
        "exec-ok\n"
    );
    let alice_rbs: Api<RoleBinding> = Api::namespaced(alice, &n);
    alice_rbs.create(&PostParams::default(), &serde_json::from_value(json!({
        "metadata": {"name": "bob-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bob"}]
    }))?).await.context("alice binds view to bob without any grant label")?;
    alice_rbs
        .delete("bob-view", &DeleteParams::default())
        .await
        .context("alice deletes a RoleBinding that is no grant")?;
    pods.delete("web", &DeleteParams::default())
        .await
        .context("alice deletes a pod without debug container")?;
    ns.delete().await
}
