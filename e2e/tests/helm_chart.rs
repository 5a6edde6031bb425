//! The Helm chart (`deploy/helm/breakglass`) with the pinned Helm (`scripts/helm.sh`): `helm
//! lint` with both example value files; their `helm template` output applied with a
//! server-side dry run to a real kube-apiserver; the chart's refusals (an Ingress without TLS,
//! two replicas on SQLite, keys the chart owns); what it fences (`fences.rs`: the binder role
//! only beside the grant policy, the NetworkPolicy); and its standing RBAC compared, object by
//! object, with what `breakglass-server policies render` gives for the same configuration and
//! identity.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{bail, Context as _};
use breakglass_e2e::apply::dry_run_yaml;
use breakglass_e2e::server::server_binary;
use breakglass_e2e::{in_namespace, ControlPlane, Identity};
use serde_json::Value;

/// The two example installs, as (file under `examples/`, environment running in this cluster).
const EXAMPLES: [(&str, &str); 2] = [("ground.yaml", "dev"), ("flight.yaml", "prod")];

/// The kinds of the standing RBAC.
const RBAC_KINDS: [&str; 4] = ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"];

fn repo() -> PathBuf {
    breakglass_e2e::workspace_root()
}

fn chart() -> PathBuf {
    repo().join("deploy/helm/breakglass")
}

fn example(file: &str) -> PathBuf {
    chart().join("examples").join(file)
}

/// The pinned helm that `scripts/helm.sh install` built; an error naming that command when it
/// is missing (scripts/test.sh installs it before the tests).
fn helm_binary() -> anyhow::Result<PathBuf> {
    let out = Command::new("bash")
        .arg(repo().join("scripts/helm.sh"))
        .arg("bin")
        .output()
        .context("running scripts/helm.sh bin")?;
    if !out.status.success() {
        bail!(
            "helm is missing: run `scripts/helm.sh install` first ({})",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

fn helm(args: &[&str]) -> anyhow::Result<Output> {
    let bin = helm_binary()?;
    Command::new(&bin)
        .args(args)
        .current_dir(repo())
        .output()
        .with_context(|| format!("running {} {}", bin.display(), args.join(" ")))
}

/// `helm template` of the chart in `namespace` with `values` and `--set` pairs: the output,
/// or Helm's error text. The admission policies count as applied separately unless `set` says
/// otherwise: `helm template` cannot look into a cluster for them.
fn template(
    namespace: &str,
    values: &Path,
    set: &[&str],
) -> anyhow::Result<Result<String, String>> {
    template_with(namespace, &[values], set, &[])
}

/// [`template`] with several values files and extra arguments (such as `--dry-run=server`).
fn template_with(
    namespace: &str,
    values: &[&Path],
    set: &[&str],
    extra: &[&str],
) -> anyhow::Result<Result<String, String>> {
    let chart = chart();
    let mut args = vec![
        "template",
        "breakglass",
        chart.to_str().context("chart path")?,
        "--namespace",
        namespace,
    ];
    for v in values {
        args.extend(["-f", v.to_str().context("values path")?]);
    }
    for s in std::iter::once(&ACKNOWLEDGED).chain(set) {
        args.extend(["--set", s]);
    }
    args.extend(extra);
    let out = helm(&args)?;
    Ok(if out.status.success() {
        Ok(String::from_utf8(out.stdout)?)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    })
}

/// The value that says the admission policies are applied by other means.
const ACKNOWLEDGED: &str = "rbac.admissionPoliciesAppliedSeparately=true";

fn rendered(namespace: &str, values: &Path, set: &[&str]) -> anyhow::Result<String> {
    template(namespace, values, set)?
        .map_err(|e| anyhow::anyhow!("helm template {} failed: {e}", values.display()))
}

fn docs(yaml: &str) -> anyhow::Result<Vec<Value>> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).context("parsing YAML")?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

fn kind(v: &Value) -> &str {
    v["kind"].as_str().unwrap_or_default()
}

fn name(v: &Value) -> &str {
    v["metadata"]["name"].as_str().unwrap_or_default()
}

fn find<'a>(docs: &'a [Value], k: &str) -> anyhow::Result<&'a Value> {
    docs.iter()
        .find(|d| kind(d) == k)
        .with_context(|| format!("no {k} rendered"))
}

/// The RBAC objects of `docs`, by (kind, name).
fn rbac(docs: &[Value]) -> BTreeMap<(String, String), Value> {
    docs.iter()
        .filter(|d| RBAC_KINDS.contains(&kind(d)))
        .map(|d| ((kind(d).to_string(), name(d).to_string()), d.clone()))
        .collect()
}

/// `breakglass policies render` for one cluster of `config_file`, as the server `identity`
/// (its environment's configuration only: `BREAKGLASS_CONFIG` of the caller is not read).
fn policies_render(server: &Path, config_file: &Path, cluster: &str, identity: &str) -> Output {
    Command::new(server)
        .args([
            "policies",
            "render",
            "--cluster",
            cluster,
            "--identity",
            identity,
        ])
        .arg("--config")
        .arg(config_file)
        .env_remove("BREAKGLASS_CONFIG")
        .output()
        .unwrap()
}

#[test]
fn lint_passes_with_both_example_values() {
    for (file, _) in EXAMPLES {
        let values = example(file);
        let chart = chart();
        let out = helm(&[
            "lint",
            "--strict",
            chart.to_str().unwrap(),
            "-f",
            values.to_str().unwrap(),
            "--set",
            ACKNOWLEDGED,
        ])
        .unwrap();
        assert!(
            out.status.success(),
            "helm lint -f {file}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[tokio::test]
async fn both_installs_pass_a_server_side_dry_run() {
    let cp = ControlPlane::shared().await.unwrap();
    let admin = cp.client(Identity::Admin).await.unwrap();
    in_namespace(cp, "helm", |ns| async move {
        let oidc = ["oidc.clientSecret.existingSecret=breakglass-oidc"];
        let cases: [(&str, &[&str]); 3] = [
            ("ground.yaml", &[]),
            ("flight.yaml", &[]),
            ("flight.yaml", &oidc),
        ];
        for (file, set) in cases {
            let yaml = rendered(&ns, &example(file), set)?;
            let stored = dry_run_yaml(&admin, &yaml)
                .await
                .with_context(|| format!("dry run of {file} {set:?}"))?;
            let kinds: Vec<String> = stored
                .iter()
                .filter_map(|o| o.types.as_ref().map(|t| t.kind.clone()))
                .collect();
            for k in [
                "ServiceAccount",
                "ConfigMap",
                "Service",
                "Deployment",
                "NetworkPolicy",
            ] {
                assert!(kinds.iter().any(|x| x == k), "{file}: no {k} in {kinds:?}");
            }
            let objects = docs(&yaml)?;
            let pod = &find(&objects, "Deployment")?["spec"]["template"]["spec"];
            let server = &pod["containers"][0];
            assert_eq!(server["readinessProbe"]["httpGet"]["path"], "/readyz");
            assert_eq!(server["livenessProbe"]["httpGet"]["path"], "/healthz");
            assert_eq!(server["securityContext"]["readOnlyRootFilesystem"], true);
            assert_eq!(server["securityContext"]["capabilities"]["drop"][0], "ALL");
            assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
            assert_eq!(
                pod["securityContext"]["seccompProfile"]["type"],
                "RuntimeDefault"
            );
            let env_names: Vec<&str> = server["env"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|e| e["name"].as_str())
                .collect();
            let mounts = server["volumeMounts"].as_array().unwrap();
            let oidc_mounted = mounts
                .iter()
                .any(|m| m["mountPath"] == "/etc/breakglass/oidc");
            assert_eq!(oidc_mounted, !set.is_empty(), "{file} {set:?}: {mounts:?}");
            if file == "flight.yaml" {
                assert_eq!(find(&objects, "Deployment")?["spec"]["replicas"], 2);
                for var in [
                    "BREAKGLASS_DATABASE_URL",
                    "TOWER_BREAKGLASS_MINIO_ENDPOINT",
                    "TOWER_BREAKGLASS_MINIO_ACCESS_KEY",
                    "TOWER_BREAKGLASS_MINIO_SECRET_KEY",
                ] {
                    assert!(
                        env_names.contains(&var),
                        "{file}: no {var} in {env_names:?}"
                    );
                }
                assert!(kinds.iter().any(|k| k == "Ingress"), "{kinds:?}");
                assert!(
                    kinds.iter().any(|k| k == "PodDisruptionBudget"),
                    "{kinds:?}"
                );
                assert!(
                    !kinds.iter().any(|k| k == "PersistentVolumeClaim"),
                    "{kinds:?}"
                );
            } else {
                assert!(
                    !env_names.contains(&"BREAKGLASS_DATABASE_URL"),
                    "{env_names:?}"
                );
                assert!(
                    kinds.iter().any(|k| k == "PersistentVolumeClaim"),
                    "{kinds:?}"
                );
                assert_eq!(
                    find(&objects, "Deployment")?["spec"]["strategy"]["type"],
                    "Recreate"
                );
            }
        }
        Ok(())
    })
    .await
    .unwrap();
}

#[test]
fn two_replicas_need_postgres_and_chart_owned_keys_are_refused() {
    let ground = example("ground.yaml");
    let flight = example("flight.yaml");
    let refusals: [(&Path, &[&str], &[&str]); 5] = [
        (
            &ground,
            &["replicaCount=2"],
            &["replicaCount", "database.engine=postgres"],
        ),
        (
            &flight,
            &["database.engine=sqlite", "persistence.enabled=true"],
            &["replicaCount: 2 replicas need database.engine=postgres"],
        ),
        (
            &flight,
            &["cookieKey.existingSecret="],
            &["cookieKey.existingSecret"],
        ),
        (
            &ground,
            &["config=database_url = \"sqlite:///x.db\""],
            &["config: `database_url` is set by the chart"],
        ),
        (
            &flight,
            &["ingress.tlsSecretName="],
            &[
                "ingress.tlsSecretName",
                "plain http",
                "ingress.allowPlainHttp",
            ],
        ),
    ];
    for (values, set, expected) in refusals {
        let outcome = template("breakglass", values, set).unwrap();
        let Err(message) = outcome else {
            panic!("{} with {set:?} rendered", values.display());
        };
        for e in expected {
            assert!(message.contains(e), "{set:?}: {message}");
        }
    }
    // The same values with what they lacked render.
    for (values, set) in [
        (&ground, &["replicaCount=1"][..]),
        (&flight, &["replicaCount=2"][..]),
        (
            &flight,
            &["ingress.tlsSecretName=", "ingress.allowPlainHttp=true"][..],
        ),
    ] {
        let outcome = template("breakglass", values, set).unwrap();
        assert!(outcome.is_ok(), "{set:?}: {outcome:?}");
    }
}

/// The chart's RBAC and `policies render`'s, for the configuration the chart writes and the
/// identity of the service account it creates: the same objects, field for field.
#[test]
fn the_chart_rbac_equals_policies_render() {
    let server = server_binary().unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (file, environment) in EXAMPLES {
        let namespace = "bg-system";
        let objects = docs(&rendered(namespace, &example(file), &[]).unwrap()).unwrap();
        let config = find(&objects, "ConfigMap").unwrap()["data"]["server.toml"]
            .as_str()
            .unwrap()
            .to_string();
        let config_file = dir.path().join(format!("{file}.toml"));
        std::fs::write(&config_file, &config).unwrap();
        let sa = find(&objects, "ServiceAccount").unwrap();
        let identity = format!(
            "system:serviceaccount:{}:{}",
            sa["metadata"]["namespace"].as_str().unwrap(),
            name(sa)
        );
        let out = policies_render(&server, &config_file, environment, &identity);
        assert!(
            out.status.success(),
            "policies render for {file}'s configuration:\n{}\n{config}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rendered = rbac(&docs(&String::from_utf8(out.stdout).unwrap()).unwrap());
        let chart = rbac(&objects);
        assert!(!chart.is_empty(), "{file}: the chart rendered no RBAC");
        assert_eq!(
            chart.keys().collect::<Vec<_>>(),
            rendered.keys().collect::<Vec<_>>(),
            "{file}: different RBAC objects"
        );
        for (key, object) in &chart {
            assert_eq!(object, &rendered[key], "{file}: {key:?} differs");
        }
        // The chart writes the release namespace as the server's, so the namespaced RBAC
        // lands where the server runs.
        assert!(
            config.contains(&format!("server_namespace = \"{namespace}\"")),
            "{config}"
        );
        assert_eq!(
            chart[&("Role".to_string(), "tower-breakglass-server".to_string())]["metadata"]
                ["namespace"],
            namespace
        );
    }
}

#[path = "helm_chart/fences.rs"]
mod fences;
