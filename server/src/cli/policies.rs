//! `breakglass-server policies render`: the RBAC and admission policies of one environment's
//! cluster, as YAML for `kubectl apply -f -`; `policies apply`: the same objects applied
//! (server-side apply) with an administrator's credentials, then checked by the doctor.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use kube::api::{Patch, PatchParams};

use crate::cli::doctor::{format_report, kube_client};
use crate::cluster::Clusters;
use crate::config::{Config, Environment, ServeArgs};
use crate::guardrails::doctor::api_for;
use crate::guardrails::render::{manifest_yaml, to_yaml, with_name_suffix};
use crate::guardrails::{doctor, render, GuardrailReport, Manifest, RenderInput};

/// Field manager of `policies apply` (what `kubectl get -o yaml --show-managed-fields` names).
const FIELD_MANAGER: &str = "breakglass-server";

/// How long `policies apply` lets the doctor see the new RBAC before calling anything missing:
/// the API server's authorizer learns new bindings from a watch, a moment after the write.
const SETTLE: Duration = Duration::from_secs(10);

/// `breakglass-server policies ...`
#[derive(Debug, clap::Subcommand)]
pub enum PoliciesCommand {
    /// Print every guardrail object (RBAC, ValidatingAdmissionPolicies and bindings, the debug
    /// image parameter) for one environment as multi-document YAML, from the configuration:
    /// its tier, the server's identity there, the pinned debug image, the protected
    /// namespaces, the server's namespace and the tier's longest session. Apply with
    /// `... | kubectl apply -f -`.
    Render(RenderArgs),
    /// Render the same objects and apply them to the environment's cluster (server-side apply,
    /// with the credentials of `--kubeconfig`: an administrator's, who may create ClusterRoles
    /// and admission policies), then check them with the doctor through the server's own
    /// credentials. The operator path without kubectl; running it again repairs drift.
    Apply(ApplyArgs),
}

/// Flags of `policies apply`.
#[derive(Debug, Clone, clap::Args)]
pub struct ApplyArgs {
    /// The objects (with a name suffix, the doctor check afterwards is skipped: it checks the
    /// unsuffixed set).
    #[command(flatten)]
    pub selection: Selection,
    /// Kubeconfig of an administrator of that cluster (default: `$KUBECONFIG`,
    /// `~/.kube/config`, or the in-cluster service account).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Context in that kubeconfig (default: its current context).
    #[arg(long)]
    pub context: Option<String>,
}

/// Why `policies apply` stopped.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The configuration or the flags do not say what to render.
    #[error("{0}")]
    Config(String),
    /// The cluster could not be reached or refused an object.
    #[error("{0}")]
    Cluster(String),
}

impl ApplyError {
    /// The exit code: 2 for a configuration problem (as `render`), 1 for the cluster.
    fn exit_code(&self) -> ExitCode {
        match self {
            ApplyError::Config(_) => ExitCode::from(2),
            ApplyError::Cluster(_) => ExitCode::FAILURE,
        }
    }
}

/// What `policies apply` did.
#[derive(Debug)]
pub struct Applied {
    /// The environment.
    pub environment: String,
    /// The identity the objects name.
    pub identity: String,
    /// `Kind name` of each applied object, in apply order.
    pub objects: Vec<String>,
    /// The doctor's report afterwards, when it could run (the environment has cluster
    /// credentials and no name suffix was asked for).
    pub report: Option<GuardrailReport>,
}

/// Renders the guardrails for `args`, applies them and runs the doctor.
pub async fn apply(args: &ApplyArgs) -> Result<Applied, ApplyError> {
    let mut selection = args.selection.clone();
    let config = Config::load(&selection.serve).map_err(|e| ApplyError::Config(e.to_string()))?;
    let env = find_environment(&config, &selection.cluster).map_err(ApplyError::Config)?;
    let server = Clusters::from_config(&config).filter(|c| c.has(&env.name));
    if selection.identity.is_none() && env.identity.is_none() {
        // Nobody said who the server is there: ask the cluster, as the server itself.
        let Some(clusters) = &server else {
            return Err(ApplyError::Config(format!(
                "{}; or configure the environment's `cluster`, so it can be learned from there",
                unknown_identity(env)
            )));
        };
        let client = clusters
            .client(&env.name)
            .await
            .map_err(|e| ApplyError::Cluster(e.to_string()))?;
        let identity = clusters
            .identity(&env.name, &client)
            .await
            .map_err(|e| ApplyError::Cluster(e.to_string()))?;
        selection.identity = Some(identity);
    }
    let (input, manifests) = render_for(&config, &selection).map_err(ApplyError::Config)?;
    let admin = kube_client(args.kubeconfig.as_deref(), args.context.as_deref())
        .await
        .map_err(ApplyError::Cluster)?;
    let mut objects = Vec::with_capacity(manifests.len());
    for m in &manifests {
        apply_one(&admin, m).await?;
        objects.push(m.display_name());
    }
    let report = match (&server, &selection.name_suffix) {
        (Some(clusters), None) => {
            let client = clusters
                .client(&env.name)
                .await
                .map_err(|e| ApplyError::Cluster(e.to_string()))?;
            Some(settled_report(&client, &config, env).await?)
        }
        _ => None,
    };
    Ok(Applied {
        environment: input.environment,
        identity: input.identity,
        objects,
        report,
    })
}

/// Server-side applies one rendered object, taking over fields other managers set (the
/// rendered object is the desired state).
async fn apply_one(client: &kube::Client, m: &Manifest) -> Result<(), ApplyError> {
    let api = api_for(client, m).ok_or_else(|| {
        ApplyError::Config(format!("cannot apply {}: unknown kind", m.display_name()))
    })?;
    api.patch(
        m.name(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&m.value),
    )
    .await
    .map_err(|e| ApplyError::Cluster(format!("applying {}: {e}", m.display_name())))?;
    Ok(())
}

/// The doctor's report once it is clean, or the last one after [`SETTLE`].
async fn settled_report(
    client: &kube::Client,
    config: &Config,
    env: &Environment,
) -> Result<GuardrailReport, ApplyError> {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let report = doctor(client, config, env)
            .await
            .map_err(|e| ApplyError::Cluster(e.to_string()))?;
        if report.ok || tokio::time::Instant::now() >= deadline {
            return Ok(report);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Which guardrails: flags shared by `policies render` and `policies apply`.
#[derive(Debug, Clone, clap::Args)]
pub struct Selection {
    /// The environment (a configured `environments[].name`).
    #[arg(long)]
    pub cluster: String,
    /// The server's username on that cluster (overrides the environment's `identity`), e.g.
    /// `system:serviceaccount:breakglass:breakglass-server` or `hangar:home:tower-actor`.
    /// `breakglass-server doctor` prints it. Without either, `render` stops and `apply` asks
    /// the cluster through the environment's configured credentials.
    #[arg(long)]
    pub identity: Option<String>,
    /// Suffix the names of the objects that name the identity (e.g. `-actor`), to install a
    /// second server identity's guardrails on the same cluster; the shared objects (namespace,
    /// debug ClusterRoles, debug image parameter) keep their names. `doctor` checks the
    /// unsuffixed set.
    #[arg(long, allow_hyphen_values = true)]
    pub name_suffix: Option<String>,
    /// Server configuration flags (`--config FILE`, `--dev`, ...).
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// Flags of `policies render`.
#[derive(Debug, Clone, clap::Args)]
pub struct RenderArgs {
    /// The objects.
    #[command(flatten)]
    pub selection: Selection,
    /// Write one file per object into this directory (numbered in apply order, so
    /// `kubectl apply -f DIR` works) instead of printing.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// What `policies render` needs resolved from the configuration and flags.
pub fn render_input(config: &Config, args: &Selection) -> Result<RenderInput, String> {
    let env = find_environment(config, &args.cluster)?;
    let identity = args
        .identity
        .as_deref()
        .or(env.identity.as_deref())
        .ok_or_else(|| unknown_identity(env))?;
    Ok(RenderInput::new(config, env, identity))
}

/// The configured environment `name`, or an error listing the configured ones.
fn find_environment<'c>(config: &'c Config, name: &str) -> Result<&'c Environment, String> {
    config.environment(name).ok_or_else(|| {
        let known: Vec<&str> = config
            .environments
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        format!(
            "no environment `{name}` in the configuration (configured: {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )
    })
}

fn unknown_identity(env: &Environment) -> String {
    format!(
        "the server's username on `{}` is unknown: pass --identity USER, or set `identity` for the environment in the configuration (`breakglass-server doctor --cluster {}` prints it)",
        env.name, env.name
    )
}

/// Renders for `args` with `config`: the input and the objects.
pub fn render_for(
    config: &Config,
    args: &Selection,
) -> Result<(RenderInput, Vec<Manifest>), String> {
    let input = render_input(config, args)?;
    let mut manifests = render(&input).map_err(|e| e.to_string())?;
    if let Some(suffix) = &args.name_suffix {
        manifests = with_name_suffix(manifests, suffix).map_err(|e| e.to_string())?;
    }
    Ok((input, manifests))
}

/// Writes one file per object into `dir`: `NN-kind-name.yaml`, in apply order.
pub fn write_dir(dir: &Path, manifests: &[Manifest]) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut written = Vec::with_capacity(manifests.len());
    for (i, m) in manifests.iter().enumerate() {
        let file = dir.join(format!(
            "{:02}-{}-{}.yaml",
            i + 1,
            m.kind().to_ascii_lowercase(),
            m.name()
        ));
        let text = manifest_yaml(m).map_err(|e| e.to_string())?;
        std::fs::write(&file, text).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        written.push(file);
    }
    Ok(written)
}

/// Runs `policies apply`: one line per applied object, then the doctor's report; exit 1 when
/// the cluster refused something or the doctor still finds a problem.
fn apply_main(args: &ApplyArgs) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let applied = match runtime.block_on(apply(args)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return e.exit_code();
        }
    };
    let mut out = format!(
        "applied {} objects for `{}` (server identity {}):\n",
        applied.objects.len(),
        applied.environment,
        applied.identity
    );
    for o in &applied.objects {
        out.push_str(&format!("  {o}\n"));
    }
    if let Some(report) = &applied.report {
        out.push_str(&format_report(report));
    }
    // A closed pipe (`| head`) is not an error worth a panic.
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    match &applied.report {
        Some(report) if !report.ok => ExitCode::FAILURE,
        _ => ExitCode::SUCCESS,
    }
}

/// Runs `policies ...`; exit code 2 for a configuration problem, 1 for a write failure (or,
/// for `apply`, a cluster failure).
pub fn main(cmd: PoliciesCommand) -> ExitCode {
    match cmd {
        PoliciesCommand::Apply(args) => apply_main(&args),
        PoliciesCommand::Render(args) => {
            let config = match Config::load(&args.selection.serve) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            let (input, manifests) = match render_for(&config, &args.selection) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            match &args.out {
                Some(dir) => match write_dir(dir, &manifests) {
                    Ok(files) => {
                        eprintln!(
                            "wrote {} objects for `{}` into {} (apply with `kubectl apply -f {}`)",
                            files.len(),
                            input.environment,
                            dir.display(),
                            dir.display()
                        );
                        ExitCode::SUCCESS
                    }
                    Err(e) => {
                        eprintln!("error: {e}");
                        ExitCode::FAILURE
                    }
                },
                None => match to_yaml(&input, &manifests) {
                    Ok(text) => match std::io::stdout().lock().write_all(text.as_bytes()) {
                        Ok(()) => ExitCode::SUCCESS,
                        Err(e) => {
                            eprintln!("error: writing the manifests: {e}");
                            ExitCode::FAILURE
                        }
                    },
                    Err(e) => {
                        eprintln!("error: {e}");
                        ExitCode::FAILURE
                    }
                },
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::config::FileConfig;

    fn config(text: &str) -> Config {
        let file: FileConfig = toml::from_str(text).unwrap();
        Config::resolve(&ServeArgs::default(), file).unwrap()
    }

    fn args(cluster: &str, identity: Option<&str>) -> Selection {
        Selection {
            cluster: cluster.into(),
            identity: identity.map(str::to_string),
            name_suffix: None,
            serve: ServeArgs::default(),
        }
    }

    const CONFIG: &str = r#"
server_namespace = "bg"
[durations.flight]
min_minutes = 5
default_minutes = 15
max_minutes = 20
[[environments]]
name = "prod"
tier = "flight"
identity = "system:serviceaccount:bg:breakglass-server"
protected_namespaces = ["payments"]
[[environments]]
name = "dev"
tier = "ground"
"#;

    #[test]
    fn takes_tier_identity_namespaces_and_ttl_from_the_config() {
        let c = config(CONFIG);
        let input = render_input(&c, &args("prod", None)).unwrap();
        assert_eq!(input.identity, "system:serviceaccount:bg:breakglass-server");
        assert_eq!(input.max_ttl_minutes, 20);
        assert_eq!(input.server_namespace, "bg");
        assert!(input.protected_namespaces.contains(&"payments".to_string()));
        assert!(input.protected_namespaces.contains(&"bg".to_string()));
        assert!(input
            .protected_namespaces
            .contains(&"kube-system".to_string()));
        // The flag overrides the configured identity.
        let input = render_input(&c, &args("prod", Some("hangar:home:tower-actor"))).unwrap();
        assert_eq!(input.identity, "hangar:home:tower-actor");
    }

    #[test]
    fn names_what_is_missing() {
        let c = config(CONFIG);
        let e = render_input(&c, &args("dev", None)).unwrap_err();
        assert!(e.contains("--identity"), "{e}");
        let e = render_input(&c, &args("staging", None)).unwrap_err();
        assert!(e.contains("prod, dev"), "{e}");
    }

    fn apply_args(dir: &Path, config_text: &str, cluster: &str) -> ApplyArgs {
        let file = dir.join("server.toml");
        std::fs::write(&file, config_text).unwrap();
        ApplyArgs {
            selection: Selection {
                serve: ServeArgs {
                    config: Some(file),
                    ..ServeArgs::default()
                },
                ..args(cluster, None)
            },
            kubeconfig: Some(dir.join("admin.kubeconfig")),
            context: None,
        }
    }

    #[tokio::test]
    async fn apply_says_what_is_missing_before_touching_a_cluster() {
        let dir = tempfile::tempdir().unwrap();
        // An unknown environment: the configured ones are listed.
        let e = apply(&apply_args(dir.path(), CONFIG, "staging"))
            .await
            .unwrap_err();
        assert!(
            matches!(&e, ApplyError::Config(m) if m.contains("prod, dev")),
            "{e}"
        );
        // No identity and no cluster to learn it from.
        let e = apply(&apply_args(dir.path(), CONFIG, "dev"))
            .await
            .unwrap_err();
        assert!(
            matches!(&e, ApplyError::Config(m) if m.contains("--identity") && m.contains("`cluster`")),
            "{e}"
        );
        // The identity is known: the next thing needed is the administrator's kubeconfig.
        let e = apply(&apply_args(dir.path(), CONFIG, "prod"))
            .await
            .unwrap_err();
        assert!(
            matches!(&e, ApplyError::Cluster(m) if m.contains("admin.kubeconfig")),
            "{e}"
        );
    }

    #[tokio::test]
    async fn apply_learns_the_identity_through_the_servers_own_credentials() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("server.kubeconfig");
        let text = format!(
            "{CONFIG}[[environments]]\nname = \"qa\"\ntier = \"ground\"\ncluster = {{ kind = \"kubeconfig\", path = \"{}\" }}\n",
            missing.display()
        );
        // Asked of the environment's cluster: its (missing) kubeconfig is what fails.
        let e = apply(&apply_args(dir.path(), &text, "qa"))
            .await
            .unwrap_err();
        assert!(
            matches!(&e, ApplyError::Cluster(m) if m.contains("server.kubeconfig")),
            "{e}"
        );
    }

    #[test]
    fn both_subcommands_take_the_same_selection_flags() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(subcommand)]
            command: PoliciesCommand,
        }
        let parse = |args: &[&str]| <Cli as clap::Parser>::try_parse_from(args).unwrap().command;
        let common = [
            "--cluster",
            "prod",
            "--name-suffix",
            "-actor",
            "--config",
            "c.toml",
        ];
        let PoliciesCommand::Apply(a) = parse(
            &[
                &["x", "apply", "--kubeconfig", "admin.kubeconfig"][..],
                &common[..],
            ]
            .concat(),
        ) else {
            panic!("not apply")
        };
        assert_eq!(a.selection.cluster, "prod");
        assert_eq!(a.selection.name_suffix.as_deref(), Some("-actor"));
        assert_eq!(a.kubeconfig, Some(PathBuf::from("admin.kubeconfig")));
        let PoliciesCommand::Render(r) = parse(&[&["x", "render"][..], &common[..]].concat())
        else {
            panic!("not render")
        };
        assert_eq!(r.selection.serve.config, Some(PathBuf::from("c.toml")));
    }

    #[test]
    fn writes_one_numbered_file_per_object() {
        let c = config(CONFIG);
        let (_, manifests) = render_for(&c, &args("prod", None)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let files = write_dir(dir.path(), &manifests).unwrap();
        assert_eq!(files.len(), manifests.len());
        let first = files[0].file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(first, "01-namespace-bg.yaml");
        let text = std::fs::read_to_string(&files[files.len() - 1]).unwrap();
        assert!(text.contains("tower-breakglass-no-exec"), "{text}");
    }
}
