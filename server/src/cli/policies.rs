//! `breakglass-server policies render`: the RBAC and admission policies of one environment's
//! cluster, as YAML for `kubectl apply -f -`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::config::{Config, ServeArgs};
use crate::guardrails::render::{manifest_yaml, to_yaml, with_name_suffix};
use crate::guardrails::{render, Manifest, RenderInput};

/// `breakglass-server policies ...`
#[derive(Debug, clap::Subcommand)]
pub enum PoliciesCommand {
    /// Print every guardrail object (RBAC, ValidatingAdmissionPolicies and bindings, the debug
    /// image parameter) for one environment as multi-document YAML, from the configuration:
    /// its tier, the server's identity there, the pinned debug image, the protected
    /// namespaces, the server's namespace and the tier's longest session. Apply with
    /// `... | kubectl apply -f -`.
    Render(RenderArgs),
}

/// Flags of `policies render`.
#[derive(Debug, Clone, clap::Args)]
pub struct RenderArgs {
    /// The environment (a configured `environments[].name`).
    #[arg(long)]
    pub cluster: String,
    /// The server's username on that cluster (overrides the environment's `identity`), e.g.
    /// `system:serviceaccount:breakglass:breakglass-server` or `hangar:home:tower-actor`.
    /// `breakglass-server doctor` prints it.
    #[arg(long)]
    pub identity: Option<String>,
    /// Suffix the names of the objects that name the identity (e.g. `-actor`), to install a
    /// second server identity's guardrails on the same cluster; the shared objects (namespace,
    /// debug ClusterRoles, debug image parameter) keep their names. `doctor` checks the
    /// unsuffixed set.
    #[arg(long, allow_hyphen_values = true)]
    pub name_suffix: Option<String>,
    /// Write one file per object into this directory (numbered in apply order, so
    /// `kubectl apply -f DIR` works) instead of printing.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Server configuration flags (`--config FILE`, `--dev`, ...).
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// What `policies render` needs resolved from the configuration and flags.
pub fn render_input(config: &Config, args: &RenderArgs) -> Result<RenderInput, String> {
    let env = config.environment(&args.cluster).ok_or_else(|| {
        let known: Vec<&str> = config
            .environments
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        format!(
            "no environment `{}` in the configuration (configured: {})",
            args.cluster,
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )
    })?;
    let identity = args
        .identity
        .as_deref()
        .or(env.identity.as_deref())
        .ok_or_else(|| {
            format!(
                "the server's username on `{}` is unknown: pass --identity USER, or set `identity` for the environment in the configuration (`breakglass-server doctor --cluster {}` prints it)",
                env.name, env.name
            )
        })?;
    Ok(RenderInput::new(config, env, identity))
}

/// Renders for `args` with `config`: the input and the objects.
pub fn render_for(
    config: &Config,
    args: &RenderArgs,
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

/// Runs `policies ...`; exit code 2 for a configuration problem, 1 for a write failure.
pub fn main(cmd: PoliciesCommand) -> ExitCode {
    match cmd {
        PoliciesCommand::Render(args) => {
            let config = match Config::load(&args.serve) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            let (input, manifests) = match render_for(&config, &args) {
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

    fn args(cluster: &str, identity: Option<&str>) -> RenderArgs {
        RenderArgs {
            cluster: cluster.into(),
            identity: identity.map(str::to_string),
            name_suffix: None,
            out: None,
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
