//! breakglass-grant: the grant RoleBinding's shape, an approver or broken glass on Flight, none needed on Ground.

use super::*;

// ---------------------------------------------------------------------------------------------
// breakglass-grant

#[tokio::test]
async fn grant_rule_flight_needs_an_approver_or_a_broken_glass() -> anyhow::Result<()> {
    let cp = guardrails().await?;
    let server = server(cp, Identity::BreakglassSa).await?;
    let ns = cp.namespace("grant-flight").await?;
    let n = ns.name().to_string();
    let grants: Api<RoleBinding> = Api::namespaced(server.client.clone(), &n);
    let session = Uuid::new_v4();
    let good = grant(&n, &session, LIVE_ROLE, &server.subject);
    let rb = |v: &Value| -> RoleBinding { serde_json::from_value(v.clone()).unwrap() };

    let unapproved = with(good.clone(), |g| {
        g["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove("hangar.io/breakglass-approver");
    });
    let (dp, unapproved_rb) = (dry(), rb(&unapproved));
    refused(
        "Flight grant without approver",
        "breakglass-grant: on a Flight cluster",
        || grants.create(&dp, &unapproved_rb),
    )
    .await?;
    let self_approved = with(good.clone(), |g| {
        g["metadata"]["annotations"]["hangar.io/breakglass-approver"] = json!("alice");
    });
    refused_now(
        "approved by the requester",
        "breakglass-grant: on a Flight cluster",
        grants.create(&dry(), &rb(&self_approved)),
    )
    .await?;
    let glass_broken = with(unapproved.clone(), |g| {
        g["metadata"]["annotations"]["hangar.io/breakglass-glass-broken"] = json!("true");
    });
    grants
        .create(&dry(), &rb(&glass_broken))
        .await
        .context("glass broken is admitted")?;
    let not_really_broken = with(unapproved.clone(), |g| {
        g["metadata"]["annotations"]["hangar.io/breakglass-glass-broken"] = json!("yes");
    });
    refused_now(
        "glass-broken not \"true\"",
        "breakglass-grant: on a Flight cluster",
        grants.create(&dry(), &rb(&not_really_broken)),
    )
    .await?;
    // Approved by a second person: admitted, for real; the server may delete its own grant.
    grants
        .create(&PostParams::default(), &rb(&good))
        .await
        .context("an approved grant is admitted")?;
    grants
        .delete(
            good["metadata"]["name"].as_str().unwrap(),
            &DeleteParams::default(),
        )
        .await
        .context("deleting its own grant")?;
    ns.delete().await
}

#[tokio::test]
async fn grant_rule_shape() -> anyhow::Result<()> {
    let cp = guardrails().await?;
    let server = server(cp, Identity::BreakglassSa).await?;
    let admin = cp.client(Identity::Admin).await?;
    let ns = cp.namespace("grant-shape").await?;
    let n = ns.name().to_string();
    let grants: Api<RoleBinding> = Api::namespaced(server.client.clone(), &n);
    let session = Uuid::new_v4();
    let good = grant(&n, &session, COPY_ROLE, &server.subject);
    let rb = |v: &Value| -> RoleBinding { serde_json::from_value(v.clone()).unwrap() };
    let msg = "breakglass-grant:";

    let too_long = with(good.clone(), |g| {
        g["metadata"]["annotations"]["hangar.io/breakglass-ttl"] = json!("90m");
        g["metadata"]["labels"]["cleanup.kyverno.io/ttl"] = json!("90m");
    });
    let (dp, too_long_rb) = (dry(), rb(&too_long));
    refused(
        "TTL above the tier's longest session",
        "at most 60m",
        || grants.create(&dp, &too_long_rb),
    )
    .await?;
    grants
        .create(&dry(), &rb(&good))
        .await
        .context("a well-formed grant is admitted")?;
    let at_max = with(good.clone(), |g| {
        g["metadata"]["annotations"]["hangar.io/breakglass-ttl"] = json!("60m");
        g["metadata"]["labels"]["cleanup.kyverno.io/ttl"] = json!("60m");
    });
    grants
        .create(&dry(), &rb(&at_max))
        .await
        .context("TTL at the bound is admitted")?;
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "TTL label differs from the annotation",
            with(good.clone(), |g| {
                g["metadata"]["labels"]["cleanup.kyverno.io/ttl"] = json!("20m");
            }),
            "hangar.io/breakglass-ttl and label cleanup.kyverno.io/ttl",
        ),
        (
            "TTL not in minutes",
            with(good.clone(), |g| {
                g["metadata"]["annotations"]["hangar.io/breakglass-ttl"] = json!("1h");
                g["metadata"]["labels"]["cleanup.kyverno.io/ttl"] = json!("1h");
            }),
            "as <minutes>m",
        ),
        (
            "no requester",
            with(good.clone(), |g| {
                g["metadata"]["annotations"]
                    .as_object_mut()
                    .unwrap()
                    .remove("hangar.io/breakglass-requester");
            }),
            "hangar.io/breakglass-requester",
        ),
        (
            "no managed-by label",
            with(good.clone(), |g| {
                g["metadata"]["labels"]
                    .as_object_mut()
                    .unwrap()
                    .remove("app.kubernetes.io/managed-by");
            }),
            "app.kubernetes.io/managed-by=tower-breakglass",
        ),
        (
            "session not a uuid",
            with(good.clone(), |g| {
                g["metadata"]["labels"]["hangar.io/breakglass-session"] = json!("abc");
            }),
            "hangar.io/breakglass-session=<session id>",
        ),
        (
            "name not from the session",
            with(good.clone(), |g| {
                g["metadata"]["name"] = json!("breakglass-00000000");
            }),
            "named breakglass-<last 8 hex digits",
        ),
        (
            "another subject",
            with(good.clone(), |g| {
                g["subjects"] =
                    json!([{"kind": "ServiceAccount", "name": "default", "namespace": n}]);
            }),
            "the only subject of a grant is the server itself",
        ),
        (
            "a second subject",
            with(good.clone(), |g| {
                g["subjects"].as_array_mut().unwrap().push(json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}));
            }),
            "the only subject",
        ),
    ];
    for (what, value, expected) in cases {
        refused_rule_now(what, msg, expected, grants.create(&dry(), &rb(&value))).await?;
    }
    // A role other than the two debug ClusterRoles: an empty Role passes RBAC's escalation
    // check (it grants nothing), so the refusal is the policy's.
    let roles: Api<Role> = Api::namespaced(admin.clone(), &n);
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "empty"}, "rules": []}))?,
        )
        .await?;
    let other_role = with(good.clone(), |g| {
        g["roleRef"] =
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "empty"});
    });
    refused_now("a Role instead of a debug ClusterRole", "breakglass-grant: a grant binds ClusterRole tower-breakglass-debug-live or tower-breakglass-debug-copy", grants.create(&dry(), &rb(&other_role))).await?;
    // RBAC itself (before admission) lets the server bind nothing but the two debug roles.
    let view = with(good.clone(), |g| g["roleRef"]["name"] = json!("view"));
    match grants.create(&dry(), &rb(&view)).await {
        Err(kube::Error::Api(e))
            if e.code == 403
                && e.message
                    .contains("attempting to grant RBAC permissions not currently held") => {}
        other => bail!("binding ClusterRole view: expected RBAC's refusal, got {other:?}"),
    }
    // Protected namespaces: the standard ones and the server's own.
    for protected in ["kube-system", "breakglass"] {
        let there: Api<RoleBinding> = Api::namespaced(server.client.clone(), protected);
        let g = with(good.clone(), |g| {
            g["metadata"]["namespace"] = json!(protected);
        });
        refused_now(
            &format!("grant in {protected}"),
            &format!("breakglass-grant: namespace {protected} is protected"),
            there.create(&dry(), &rb(&g)),
        )
        .await?;
    }
    // The server deletes only its own grants.
    let admin_rbs: Api<RoleBinding> = Api::namespaced(admin, &n);
    admin_rbs.create(&PostParams::default(), &serde_json::from_value(json!({
        "metadata": {"name": "someone-elses"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "empty"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}]
    }))?).await?;
    refused_now(
        "deleting a RoleBinding that is no grant",
        "breakglass-grant: the server may delete only its own grants",
        grants.delete(
            "someone-elses",
            &DeleteParams {
                dry_run: true,
                ..DeleteParams::default()
            },
        ),
    )
    .await?;
    ns.delete().await
}

#[tokio::test]
async fn grant_rule_ground_needs_no_approver_user_identity() -> anyhow::Result<()> {
    let cp = guardrails().await?;
    let server = server(cp, Identity::BreakglassUser).await?;
    let ns = cp.namespace("grant-ground").await?;
    let n = ns.name().to_string();
    let grants: Api<RoleBinding> = Api::namespaced(server.client.clone(), &n);
    let session = Uuid::new_v4();
    let rb = |v: &Value| -> RoleBinding { serde_json::from_value(v.clone()).unwrap() };
    let ground = with(grant(&n, &session, LIVE_ROLE, &server.subject), |g| {
        g["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove("hangar.io/breakglass-approver");
    });
    let no_session = with(ground.clone(), |g| {
        g["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove("hangar.io/breakglass-session");
    });
    let (dp, no_session_rb) = (dry(), rb(&no_session));
    refused(
        "grant without session label (user identity)",
        "breakglass-grant: a grant carries labels",
        || grants.create(&dp, &no_session_rb),
    )
    .await?;
    let sa_subject = with(
        ground.clone(),
        |g| g["subjects"] = json!([{"kind": "ServiceAccount", "name": "breakglass-server", "namespace": "breakglass"}]),
    );
    refused_now("subject is another identity", "breakglass-grant: the only subject of a grant is the server itself (breakglass-server-user)", grants.create(&dry(), &rb(&sa_subject))).await?;
    let too_long = with(ground.clone(), |g| {
        g["metadata"]["annotations"]["hangar.io/breakglass-ttl"] = json!("61m");
        g["metadata"]["labels"]["cleanup.kyverno.io/ttl"] = json!("61m");
    });
    refused_now(
        "TTL above the bound",
        "at most 60m",
        grants.create(&dry(), &rb(&too_long)),
    )
    .await?;
    // Ground: no approver needed; a kind: User subject.
    grants
        .create(&PostParams::default(), &rb(&ground))
        .await
        .context("a Ground grant without approver is admitted")?;
    // An extension rewrites the TTL of a grant; the bound holds for that too.
    let name = ground["metadata"]["name"].as_str().unwrap_or_default();
    let ttl = |t: &str| {
        json!({"metadata": {
            "labels": {"cleanup.kyverno.io/ttl": t},
            "annotations": {"hangar.io/breakglass-ttl": t},
        }})
    };
    let (merge, extended) = (kube::api::PatchParams::default(), ttl("45m"));
    grants
        .patch(name, &merge, &kube::api::Patch::Merge(&extended))
        .await
        .context("an extension within the bound is admitted")?;
    let beyond = ttl("61m");
    refused_now(
        "an extension beyond the bound",
        "at most 60m",
        grants.patch(name, &merge, &kube::api::Patch::Merge(&beyond)),
    )
    .await?;
    wait_allowed(&server.client, &n, "patch", "pods", "ephemeralcontainers").await?;
    ns.delete().await
}
