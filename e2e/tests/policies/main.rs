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

mod copy_pod;
mod doctor_and_kyverno;
mod ephemeral;
mod grant;
mod other_rules;
