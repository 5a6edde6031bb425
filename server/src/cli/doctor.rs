//! `breakglass-server doctor`: checks one environment's cluster against the guardrails
//! `policies render` produces, or (`--bucket`) the recordings bucket's versioning, Object Lock
//! and lifecycle rules, and prints each missing or drifted item with its fix.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::config::{Config, ServeArgs};
use crate::guardrails::{doctor, GuardrailReport, ItemStatus};

/// Flags of `doctor`.
#[derive(Debug, Clone, clap::Args)]
pub struct DoctorArgs {
    /// The environment (a configured `environments[].name`).
    #[arg(long, required_unless_present = "bucket")]
    pub cluster: Option<String>,
    /// Check the recordings bucket instead (S3 settings from the `TOWER_BREAKGLASS_MINIO_*`
    /// environment, as the server reads them): versioning, Object Lock's default retention,
    /// lifecycle rules.
    #[arg(long, conflicts_with = "cluster")]
    pub bucket: bool,
    /// Kubeconfig with the server's own credentials for that cluster (default: `$KUBECONFIG`,
    /// `~/.kube/config`, or the in-cluster service account).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Context in the kubeconfig (default: its current context).
    #[arg(long)]
    pub context: Option<String>,
    /// Print the report as JSON (the shape of the guardrails API).
    #[arg(long)]
    pub json: bool,
    /// Server configuration flags (`--config FILE`, `--dev`, ...).
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// A failure before any check could run (configuration, credentials, connection).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DoctorError(pub String);

/// Loads the configuration, connects with the kubeconfig of `args` and checks the cluster.
pub async fn run(args: &DoctorArgs) -> Result<GuardrailReport, DoctorError> {
    let config = Config::load(&args.serve).map_err(|e| DoctorError(e.to_string()))?;
    let cluster = args.cluster.as_deref().unwrap_or_default();
    let env = config
        .environment(cluster)
        .ok_or_else(|| DoctorError(format!("no environment `{cluster}` in the configuration")))?;
    let client = kube_client(args.kubeconfig.as_deref(), args.context.as_deref())
        .await
        .map_err(DoctorError)?;
    doctor(&client, &config, env)
        .await
        .map_err(|e| DoctorError(e.to_string()))
}

/// A client from `kubeconfig` (and `context`), else from `$KUBECONFIG`, `~/.kube/config` or
/// the in-cluster service account, as kubectl would pick.
pub async fn kube_client(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<kube::Client, String> {
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..KubeConfigOptions::default()
    };
    let kube_config = match kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .map_err(|e| format!("reading {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|e| format!("loading {}: {e}", path.display()))?
        }
        None if context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| format!("loading the kubeconfig: {e}"))?,
        None => kube::Config::infer()
            .await
            .map_err(|e| format!("no cluster credentials: {e}"))?,
    };
    kube::Client::try_from(kube_config).map_err(|e| format!("building the cluster client: {e}"))
}

/// The report for people: one line per item, the detail and fix under each problem.
pub fn format_report(report: &GuardrailReport) -> String {
    let mut out = format!(
        "guardrails of `{}` ({} tier), server identity {}\n",
        report.environment,
        report.tier.as_str(),
        report.identity.as_deref().unwrap_or("unknown")
    );
    for item in &report.items {
        let mark = match item.status {
            ItemStatus::Ok => "ok     ",
            ItemStatus::Missing => "MISSING",
            ItemStatus::Drifted => "DRIFTED",
        };
        out.push_str(&format!("  {mark} {}\n", item.name));
        if item.status != ItemStatus::Ok {
            out.push_str(&format!("          {}\n", item.detail));
            if let Some(fix) = &item.fix {
                out.push_str(&format!("          fix: {fix}\n"));
            }
        }
    }
    let bad = report
        .items
        .iter()
        .filter(|i| i.status != ItemStatus::Ok)
        .count();
    if bad == 0 {
        out.push_str("all guardrails in place\n");
    } else {
        out.push_str(&format!(
            "{bad} item(s) missing or drifted; to install or repair everything:\n  {}\n",
            report.fix
        ));
    }
    out
}

/// Runs `doctor`: exit 0 when everything is in place, 1 when anything is missing or drifted,
/// 2 when the check could not run.
pub fn main(args: DoctorArgs) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    if args.bucket {
        return bucket_main(&runtime);
    }
    let report = match runtime.block_on(run(&args)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let text = if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => text + "\n",
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        format_report(&report)
    };
    // A closed pipe (`| head`) is not an error worth a panic.
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `doctor --bucket`: exit 0 when nothing is wrong (a setting the S3 server cannot report is
/// not wrong), 1 when something is, 2 when the bucket could not be read.
fn bucket_main(runtime: &tokio::runtime::Runtime) -> ExitCode {
    use crate::recording::{FindingStatus, S3Config, S3Store};
    let findings = runtime.block_on(async {
        let config = S3Config::from_env()
            .map_err(|e| e.to_string())?
            .ok_or_else(|| {
                "no S3 bucket is configured (TOWER_BREAKGLASS_MINIO_ENDPOINT is not set): the \
                 recordings are in the local directory"
                    .to_string()
            })?;
        let store = S3Store::new(config.clone()).map_err(|e| e.to_string())?;
        store
            .bucket_findings()
            .await
            .map(|f| (config.bucket, f))
            .map_err(|e| e.to_string())
    });
    let (bucket, findings) = match findings {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let problems = findings
        .iter()
        .filter(|f| f.status == FindingStatus::Problem)
        .count();
    let mut text = format!("bucket {bucket}\n");
    for f in &findings {
        text.push_str(&format!("{f}\n"));
    }
    text.push_str(&if problems == 0 {
        "the bucket keeps recordings as it should\n".to_string()
    } else {
        format!("{problems} problem(s)\n")
    });
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    if problems == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guardrails::GuardrailItem;
    use breakglass_shared::Tier;

    #[test]
    fn problems_show_their_fix() {
        let report = GuardrailReport {
            ok: false,
            environment: "prod".into(),
            tier: Tier::Flight,
            identity: Some("system:serviceaccount:breakglass:breakglass-server".into()),
            fix: "breakglass-server policies render --cluster prod | kubectl apply -f -".into(),
            items: vec![
                GuardrailItem {
                    name: "ClusterRole tower-breakglass-debug-live".into(),
                    status: ItemStatus::Ok,
                    detail: "present, as rendered".into(),
                    fix: None,
                },
                GuardrailItem {
                    name: "ValidatingAdmissionPolicy tower-breakglass-no-exec".into(),
                    status: ItemStatus::Missing,
                    detail: "not found".into(),
                    fix: Some(
                        "breakglass-server policies render --cluster prod | kubectl apply -f -"
                            .into(),
                    ),
                },
            ],
        };
        let text = format_report(&report);
        assert!(text.contains("MISSING ValidatingAdmissionPolicy tower-breakglass-no-exec"));
        assert!(text.contains(
            "fix: breakglass-server policies render --cluster prod | kubectl apply -f -"
        ));
        assert!(text.contains("1 item(s) missing or drifted"));
        assert!(!text.contains("fix: \n"));
    }
}
