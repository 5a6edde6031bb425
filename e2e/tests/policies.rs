//! The cluster guardrails (`policies/`) on a real kube-apiserver: the RBAC and the
//! ValidatingAdmissionPolicies rendered by the server's own code for the server's identities,
//! every rule proven both ways (a request admitted, one refused with the rule's message) as the
//! server's identity, other identities untouched, `doctor` against the live cluster, and the
//! optional Kyverno manifests validated against Kyverno's published CRD schema.
//!
//! The guardrails are cluster-wide, so they are installed once per test binary: for
//! `BreakglassSa` (the in-cluster case) as a Flight cluster, and for `BreakglassUser` (the
//! token case) as a Ground cluster, its objects suffixed `-user` (`policies render
//! --name-suffix`) so both sets coexist. Each test works in its own namespace. Policies take effect asynchronously: the first refusal of each
//! test is probed until it happens, never waited for by a fixed sleep.
#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use breakglass_e2e::access::can;
use breakglass_e2e::{
    wait_for_container_running, wait_for_pod_running, wait_until, ControlPlane, Identity,
};
use breakglass_server::config::{Config, FileConfig, ServeArgs, DEFAULT_DEBUG_IMAGE};
use breakglass_server::guardrails::render::with_name_suffix;
use breakglass_server::guardrails::{
    doctor, render, ItemStatus, Manifest, RenderInput, COPY_ROLE, LIVE_ROLE,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{
    AttachParams, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
    ValidationDirective,
};
use kube::{Api, Client};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::OnceCell;
use uuid::Uuid;

const WAIT: Duration = Duration::from_secs(30);
const SA_ENV: &str = "flight-sa";
const USER_ENV: &str = "ground-user";
/// Suffix of the `BreakglassUser` set's object names.
const USER_SUFFIX: &str = "-user";

// ---------------------------------------------------------------------------------------------
// Installing the guardrails once per test binary.

static INSTALLED: OnceCell<Result<(), String>> = OnceCell::const_new();

fn config(cp: &ControlPlane) -> anyhow::Result<Config> {
    let text = format!(
        r#"
[[environments]]
name = "{SA_ENV}"
tier = "flight"
identity = "{sa}"

[[environments]]
name = "{USER_ENV}"
tier = "ground"
identity = "{user}"
"#,
        sa = cp.username(Identity::BreakglassSa)?,
        user = cp.username(Identity::BreakglassUser)?,
    );
    let file: FileConfig = toml::from_str(&text)?;
    Ok(Config::resolve(&ServeArgs::default(), file)?)
}

fn rendered(cp: &ControlPlane, env: &str) -> anyhow::Result<Vec<Manifest>> {
    let config = config(cp)?;
    let env = config.environment(env).context("environment")?;
    let identity = env.identity.clone().context("identity")?;
    Ok(render(&RenderInput::new(&config, env, &identity))?)
}

/// Server-side apply of one object as `client` (strict field validation: an unknown field is
/// an error, not silently dropped).
async fn apply(client: &Client, value: &Value, dry_run: bool) -> anyhow::Result<DynamicObject> {
    let api_version = value["apiVersion"].as_str().context("apiVersion")?;
    let kind = value["kind"].as_str().context("kind")?;
    let name = value["metadata"]["name"].as_str().context("name")?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, _caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .with_context(|| format!("discovering {api_version} {kind}"))?;
    let api: Api<DynamicObject> = match value["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let params = PatchParams {
        field_manager: Some("breakglass-e2e".into()),
        force: true,
        dry_run,
        field_validation: Some(ValidationDirective::Strict),
    };
    api.patch(name, &params, &Patch::Apply(value))
        .await
        .with_context(|| format!("applying {kind} {name}"))
}

/// Waits until `client` may `verb` `resource[/sub]` in `namespace` (RBAC takes effect a
/// moment after a binding is created).
async fn wait_allowed(
    client: &Client,
    namespace: &str,
    verb: &str,
    resource: &str,
    sub: &str,
) -> anyhow::Result<()> {
    wait_until(
        &format!("{verb} {resource}/{sub} allowed in {namespace}"),
        WAIT,
        || async {
            Ok(can(client, namespace, verb, resource, sub)
                .await?
                .then_some(()))
        },
    )
    .await
}

async fn install(cp: &ControlPlane) -> anyhow::Result<()> {
    let admin = cp.client(Identity::Admin).await?;
    let sa_set = rendered(cp, SA_ENV)?;
    let user_set = with_name_suffix(rendered(cp, USER_ENV)?, USER_SUFFIX)?;
    for m in sa_set.iter().chain(&user_set) {
        apply(&admin, &m.value, false).await?;
    }
    // The binder right is in effect for both identities.
    for id in [Identity::BreakglassSa, Identity::BreakglassUser] {
        let client = cp.client(id).await?;
        wait_allowed(&client, "default", "create", "rolebindings", "").await?;
    }
    Ok(())
}

/// The shared control plane with the guardrails installed.
async fn guardrails() -> anyhow::Result<&'static ControlPlane> {
    let cp = ControlPlane::shared().await?;
    INSTALLED
        .get_or_init(|| async { install(cp).await.map_err(|e| format!("{e:#}")) })
        .await
        .clone()
        .map_err(|e| anyhow!("installing the guardrails: {e}"))?;
    Ok(cp)
}

// ---------------------------------------------------------------------------------------------
// The server's requests.

/// A server identity and what its grants name as subject.
struct Server {
    client: Client,
    subject: Value,
}

async fn server(cp: &ControlPlane, id: Identity) -> anyhow::Result<Server> {
    let username = cp.username(id)?.to_string();
    let subject = match username
        .strip_prefix("system:serviceaccount:")
        .and_then(|r| r.split_once(':'))
    {
        Some((ns, name)) => json!({"kind": "ServiceAccount", "name": name, "namespace": ns}),
        None => json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": username}),
    };
    Ok(Server {
        client: cp.client(id).await?,
        subject,
    })
}

fn short(session: &Uuid) -> String {
    let s = session.simple().to_string();
    s[s.len() - 8..].to_string()
}

/// A well-formed grant of `role` for `session` (Flight: approved by bob).
fn grant(ns: &str, session: &Uuid, role: &str, subject: &Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": format!("breakglass-{}", short(session)),
            "namespace": ns,
            "labels": {
                "app.kubernetes.io/managed-by": "tower-breakglass",
                "hangar.io/breakglass-session": session.to_string(),
                "cleanup.kyverno.io/ttl": "30m"
            },
            "annotations": {
                "hangar.io/breakglass-requester": "alice",
                "hangar.io/breakglass-ttl": "30m",
                "hangar.io/breakglass-approver": "bob"
            }
        },
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [subject]
    })
}

fn with(mut v: Value, f: impl FnOnce(&mut Value)) -> Value {
    f(&mut v);
    v
}

fn dry() -> PostParams {
    PostParams {
        dry_run: true,
        ..PostParams::default()
    }
}

/// Probes `request` until it is refused with a message containing `message` (the rule's
/// message). Anything else (admitted, refused for another reason such as RBAC not yet in
/// effect) is "not yet"; the last one is reported on timeout.
async fn refused<T, F, Fut>(what: &str, message: &str, mut request: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    wait_until(&format!("{what}: refused with `{message}`"), WAIT, || {
        let fut = request();
        async move {
            match fut.await {
                Err(kube::Error::Api(e)) if e.message.contains(message) => Ok(Some(())),
                Err(kube::Error::Api(e)) => {
                    Err(anyhow!("refused otherwise ({}): {}", e.code, e.message))
                }
                Err(e) => Err(anyhow!("failed: {e}")),
                Ok(_) => Err(anyhow!("admitted")),
            }
        }
    })
    .await
}

/// Like [`refused`], for a request that must be refused at once (its policy is known to be in
/// effect in this test already).
async fn refused_now<T>(
    what: &str,
    message: &str,
    request: impl Future<Output = Result<T, kube::Error>>,
) -> anyhow::Result<()> {
    match request.await {
        Err(kube::Error::Api(e)) if e.message.contains(message) => Ok(()),
        Err(e) => bail!("{what}: expected a refusal with `{message}`, got: {e}"),
        Ok(_) => bail!("{what}: admitted, expected a refusal with `{message}`"),
    }
}

/// [`refused_now`] where the message must name the rule and contain `detail` somewhere after.
async fn refused_rule_now<T>(
    what: &str,
    rule: &str,
    detail: &str,
    request: impl Future<Output = Result<T, kube::Error>>,
) -> anyhow::Result<()> {
    match request.await {
        Err(kube::Error::Api(e)) if e.message.contains(rule) && e.message.contains(detail) => {
            Ok(())
        }
        Err(e) => bail!("{what}: expected a refusal by {rule} with `{detail}`, got: {e}"),
        Ok(_) => bail!("{what}: admitted, expected a refusal by {rule} with `{detail}`"),
    }
}

async fn create_grant(server: &Server, ns: &str, value: &Value) -> anyhow::Result<RoleBinding> {
    let grants: Api<RoleBinding> = Api::namespaced(server.client.clone(), ns);
    let rb: RoleBinding = serde_json::from_value(value.clone())?;
    grants
        .create(&PostParams::default(), &rb)
        .await
        .context("creating the grant as the server")
}

/// The grant of `role` for `session`, made by the server itself (the real flow), and its
/// rights in effect.
async fn granted(server: &Server, ns: &str, session: &Uuid, role: &str) -> anyhow::Result<()> {
    create_grant(server, ns, &grant(ns, session, role, &server.subject)).await?;
    let (verb, sub) = if role == LIVE_ROLE {
        ("patch", "ephemeralcontainers")
    } else {
        ("create", "")
    };
    wait_allowed(&server.client, ns, verb, "pods", sub).await?;
    wait_allowed(&server.client, ns, "create", "pods", "attach").await
}

fn shell_pod(name: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "app": name } },
        "spec": {
            "containers": [{ "name": "main", "image": "registry.example/app:1", "stdin": true, "tty": true }],
            "terminationGracePeriodSeconds": 0
        }
    }))?)
}

/// An application pod, created by the admin, running.
async fn app_pod(cp: &ControlPlane, ns: &str, name: &str) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(cp.client(Identity::Admin).await?, ns);
    pods.create(&PostParams::default(), &shell_pod(name)?)
        .await?;
    wait_for_pod_running(&pods, name, WAIT).await?;
    Ok(())
}

/// A well-formed debug container of `session`.
fn debug_container(session: &Uuid) -> Value {
    json!({
        "name": format!("debug-{}", short(session)),
        "image": DEFAULT_DEBUG_IMAGE,
        "stdin": true,
        "tty": true,
        "env": [{"name": "BREAKGLASS_SESSION", "value": session.to_string()}],
        "securityContext": {"privileged": false, "allowPrivilegeEscalation": false}
    })
}

fn ephemeral_patch(container: &Value) -> Patch<Value> {
    Patch::Strategic(json!({"spec": {"ephemeralContainers": [container]}}))
}

async fn add_debug(
    pods: &Api<Pod>,
    pod: &str,
    container: &Value,
    dry_run: bool,
) -> Result<Pod, kube::Error> {
    let params = if dry_run {
        PatchParams::default().dry_run()
    } else {
        PatchParams::default()
    };
    pods.patch_ephemeral_containers(pod, &params, &ephemeral_patch(container))
        .await
}

/// A live session's debug container, added by the server and running.
async fn debugged(pods: &Api<Pod>, pod: &str, session: &Uuid) -> anyhow::Result<String> {
    let c = debug_container(session);
    add_debug(pods, pod, &c, false)
        .await
        .context("adding the debug container as the server")?;
    let name = c["name"].as_str().context("name")?.to_string();
    wait_for_container_running(pods, pod, &name, WAIT).await?;
    Ok(name)
}

/// Attaches to `container` and checks a command's output comes back.
async fn attach_echo(pods: &Api<Pod>, pod: &str, container: &str) -> anyhow::Result<()> {
    let mut attached = pods
        .attach(pod, &AttachParams::interactive_tty().container(container))
        .await
        .with_context(|| format!("attaching to {container}"))?;
    let mut stdin = attached.stdin().context("stdin")?;
    let mut stdout = attached.stdout().context("stdout")?;
    stdin.write_all(b"echo attached-$((40+2))\n").await?;
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !seen.contains("attached-42") {
        let n = tokio::time::timeout_at(deadline, stdout.read(&mut buf))
            .await
            .map_err(|_| anyhow!("no output from {container}; got {seen:?}"))??;
        if n == 0 {
            bail!("attach output ended; got {seen:?}");
        }
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    drop(stdin);
    attached.abort();
    Ok(())
}

async fn exec_echo(pods: &Api<Pod>, pod: &str) -> Result<String, kube::Error> {
    let mut attached = pods
        .exec(
            pod,
            ["echo", "exec-ok"],
            &AttachParams::default().container("main").stderr(false),
        )
        .await?;
    let mut out = String::new();
    if let Some(mut stdout) = attached.stdout() {
        let _ =
            tokio::time::timeout(Duration::from_secs(10), stdout.read_to_string(&mut out)).await;
    }
    Ok(out)
}

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
    wait_allowed(&server.client, &n, "patch", "pods", "ephemeralcontainers").await?;
    ns.delete().await
}

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
    refused_now("deleting the original pod", "breakglass-delete: the server may delete only a pod carrying a debug-* container or a copy pod", pods.delete("web", &DeleteParams { dry_run: true, ..DeleteParams::default() })).await?;
    pods.delete(&name, &DeleteParams::default())
        .await
        .context("deleting the copy pod")?;
    ns.delete().await
}

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

// ---------------------------------------------------------------------------------------------
// doctor

#[tokio::test]
async fn doctor_finds_every_guardrail_in_place() -> anyhow::Result<()> {
    let cp = guardrails().await?;
    let config = config(cp)?;
    let env = config.environment(SA_ENV).context("env")?;
    // With the server's own credentials, as the guardrails API will.
    let client = cp.client(Identity::BreakglassSa).await?;
    let report = doctor(&client, &config, env).await?;
    let bad: Vec<_> = report
        .items
        .iter()
        .filter(|i| i.status != ItemStatus::Ok)
        .collect();
    assert!(report.ok && bad.is_empty(), "{bad:#?}");
    assert_eq!(
        report.identity.as_deref(),
        Some(cp.username(Identity::BreakglassSa)?)
    );
    let names: Vec<&str> = report.items.iter().map(|i| i.name.as_str()).collect();
    for expected in [
        "server identity",
        "ClusterRole tower-breakglass-debug-live",
        "ClusterRole tower-breakglass-debug-copy",
        "ClusterRoleBinding tower-breakglass-binder",
        "ValidatingAdmissionPolicy tower-breakglass-grant",
        "ValidatingAdmissionPolicyBinding tower-breakglass-no-exec",
        "debug image pin (ConfigMap breakglass/tower-breakglass-debug-image)",
        "access: bind ClusterRole tower-breakglass-debug-live (binder right)",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} not checked: {names:?}"
        );
    }
    let rendered = rendered(cp, SA_ENV)?;
    assert_eq!(report.items.len(), 1 + rendered.len() + 5);
    // The report is what the guardrails API will serve.
    let v = serde_json::to_value(&report)?;
    assert_eq!(v["items"][0]["status"], "ok");

    // The CLI path: configuration file and kubeconfig.
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("config.toml");
    std::fs::write(
        &file,
        format!("[[environments]]\nname = \"{SA_ENV}\"\ntier = \"flight\"\n"),
    )?;
    let args = breakglass_server::cli::doctor::DoctorArgs {
        cluster: SA_ENV.into(),
        kubeconfig: Some(cp.kubeconfig_path(Identity::BreakglassSa)?.to_owned()),
        context: None,
        json: false,
        serve: ServeArgs {
            config: Some(file),
            ..ServeArgs::default()
        },
    };
    let report = breakglass_server::cli::doctor::run(&args).await?;
    assert!(
        report.ok,
        "{}",
        breakglass_server::cli::doctor::format_report(&report)
    );
    Ok(())
}

#[tokio::test]
async fn doctor_reports_missing_and_drifted_items_with_their_fix() -> anyhow::Result<()> {
    let cp = guardrails().await?;
    let sa = cp.client(Identity::BreakglassSa).await?;

    // Another server namespace and another debug image: the namespace and what lives in it
    // are missing, the pin drifted.
    let other_image = format!("registry.example/debug@sha256:{}", "a".repeat(64));
    let file: FileConfig = toml::from_str(&format!(
        "server_namespace = \"breakglass-elsewhere\"\ndebug_image = \"{other_image}\"\n[[environments]]\nname = \"{SA_ENV}\"\ntier = \"flight\"\n"
    ))?;
    let elsewhere = Config::resolve(&ServeArgs::default(), file)?;
    let env = elsewhere.environment(SA_ENV).context("env")?;
    let report = doctor(&sa, &elsewhere, env).await?;
    assert!(!report.ok);
    let item = |name: &str| {
        report
            .items
            .iter()
            .find(|i| i.name == name)
            .unwrap_or_else(|| panic!("no item {name}"))
    };
    assert_eq!(
        item("Namespace breakglass-elsewhere").status,
        ItemStatus::Missing
    );
    assert_eq!(
        item("Role breakglass-elsewhere/tower-breakglass-server").status,
        ItemStatus::Missing
    );
    let fix = format!(
        "breakglass-server policies render --cluster {SA_ENV} --identity {} | kubectl apply -f -",
        cp.username(Identity::BreakglassSa)?
    );
    assert_eq!(
        item("Namespace breakglass-elsewhere").fix.as_deref(),
        Some(fix.as_str())
    );
    assert_eq!(report.fix, fix);
    // The bindings name the parameter in the other namespace: drifted.
    let eph = item("ValidatingAdmissionPolicyBinding tower-breakglass-ephemeral");
    assert_eq!(eph.status, ItemStatus::Drifted, "{eph:?}");
    assert!(eph.detail.contains("paramRef.namespace"), "{}", eph.detail);
    // The grant policy protects the other namespace, not `breakglass`: drifted.
    assert_eq!(
        item("ValidatingAdmissionPolicy tower-breakglass-grant").status,
        ItemStatus::Drifted
    );
    assert_eq!(
        item("ClusterRole tower-breakglass-debug-live").status,
        ItemStatus::Ok
    );

    let config_pinned = Config::resolve(&ServeArgs::default(), toml::from_str(&format!(
        "debug_image = \"{other_image}\"\n[[environments]]\nname = \"{SA_ENV}\"\ntier = \"flight\"\n"
    ))?)?;
    let report = doctor(
        &sa,
        &config_pinned,
        config_pinned.environment(SA_ENV).context("env")?,
    )
    .await?;
    let pin = report
        .items
        .iter()
        .find(|i| i.name.starts_with("debug image pin"))
        .context("pin item")?;
    assert_eq!(pin.status, ItemStatus::Drifted);
    assert!(
        pin.detail.contains(DEFAULT_DEBUG_IMAGE) && pin.detail.contains(&other_image),
        "{}",
        pin.detail
    );

    // Checked with other credentials than the ones the guardrails name: the objects name the
    // service account, not the identity checking (here the admin, who can read everything):
    // drifted, and the configured identity is wrong.
    let admin = cp.client(Identity::Admin).await?;
    let wrong = Config::resolve(
        &ServeArgs::default(),
        toml::from_str(&format!(
            "[[environments]]\nname = \"{SA_ENV}\"\ntier = \"flight\"\nidentity = \"someone-else\"\n"
        ))?,
    )?;
    let report = doctor(&admin, &wrong, wrong.environment(SA_ENV).context("env")?).await?;
    let item = |name: &str| {
        report
            .items
            .iter()
            .find(|i| i.name == name)
            .unwrap_or_else(|| panic!("no item {name}"))
    };
    assert_eq!(item("server identity").status, ItemStatus::Drifted);
    assert!(item("server identity")
        .fix
        .as_deref()
        .unwrap_or_default()
        .contains("identity = \"admin\""));
    let grant = item("ValidatingAdmissionPolicy tower-breakglass-grant");
    assert_eq!(grant.status, ItemStatus::Drifted);
    assert!(
        grant.detail.contains("matchConditions[0].expression"),
        "{}",
        grant.detail
    );
    let binder = item("ClusterRoleBinding tower-breakglass-binder");
    assert_eq!(binder.status, ItemStatus::Drifted);
    assert!(
        binder.detail.starts_with("subjects[0]"),
        "{}",
        binder.detail
    );

    // The token identity's own reader (suffixed set) may not read the plain set: reported
    // missing, saying why.
    let user = cp.client(Identity::BreakglassUser).await?;
    let both = config(cp)?;
    let report = doctor(&user, &both, both.environment(USER_ENV).context("env")?).await?;
    let grant = report
        .items
        .iter()
        .find(|i| i.name == "ValidatingAdmissionPolicy tower-breakglass-grant")
        .context("grant item")?;
    assert_eq!(grant.status, ItemStatus::Missing);
    assert!(grant.detail.contains("forbidden"), "{}", grant.detail);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Kyverno (optional install): validated against Kyverno's published CRD schema.

const KYVERNO_CRD: &str =
    include_str!("../../policies/kyverno/crds/policies.kyverno.io_imagevalidatingpolicies.yaml");
const KYVERNO_IMAGE_POLICY: &str = include_str!("../../policies/kyverno/debug-image.yaml");
const KYVERNO_CLEANUP_RBAC: &str = include_str!("../../policies/kyverno/cleanup-rbac.yaml");

fn docs(text: &str) -> anyhow::Result<Vec<Value>> {
    let all: Vec<Value> = serde_saphyr::from_multiple(text)?;
    Ok(all.into_iter().filter(|d| !d.is_null()).collect())
}

#[tokio::test]
async fn kyverno_manifests_validate_against_kyverno_crd_schemas() -> anyhow::Result<()> {
    let cp = ControlPlane::shared().await?;
    let admin = cp.client(Identity::Admin).await?;
    for crd in docs(KYVERNO_CRD)? {
        apply(&admin, &crd, false).await?;
    }
    let policy = docs(KYVERNO_IMAGE_POLICY)?
        .into_iter()
        .next()
        .context("the image policy")?;
    assert_eq!(policy["metadata"]["name"], "tower-breakglass-debug-image");
    // The CRD is served a moment after creation: retry the dry run until the kind is known.
    wait_until(
        "ImageValidatingPolicy accepted (server-side dry run)",
        WAIT,
        || async { Ok(Some(apply(&admin, &policy, true).await?)) },
    )
    .await?;
    // The validation is real: a field the schema does not have, or a value its enum refuses,
    // is an error.
    let unknown = with(policy.clone(), |p| {
        p["spec"]["attestors"][0]["cosign"]["keyless"]["issuer"] = json!("x");
    });
    let e = apply(&admin, &unknown, true)
        .await
        .err()
        .context("an unknown field was accepted")?;
    let e = format!("{e:#}");
    assert!(
        e.contains("field not declared in schema") || e.contains("unknown field"),
        "{e}"
    );
    let bad_enum = with(policy.clone(), |p| {
        p["spec"]["validationActions"] = json!(["Block"]);
    });
    let e = apply(&admin, &bad_enum, true)
        .await
        .err()
        .context("a bad enum value was accepted")?;
    assert!(format!("{e:#}").contains("Unsupported value"), "{e:#}");
    for object in docs(KYVERNO_CLEANUP_RBAC)? {
        apply(&admin, &object, true).await?;
    }
    Ok(())
}
