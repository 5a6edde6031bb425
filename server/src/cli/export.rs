//! `breakglass-server export`: the audit export (`crate::export`) from a shell, straight from the
//! database, for an audit request answered by whoever runs the server; the same records as
//! `GET /api/breakglass/export`, written as they are read.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use futures::TryStreamExt as _;

use crate::config::ServeArgs;

/// `breakglass-server export ...`
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The earliest request time included, RFC 3339 (e.g. 2026-01-01T00:00:00Z).
    #[arg(long)]
    since: String,
    /// The latest request time included, RFC 3339; default now.
    #[arg(long)]
    until: Option<String>,
    /// Only this environment (default: all).
    #[arg(long)]
    environment: Option<String>,
    /// jsonl, csv, or ocsf (OCSF 1.5.0 events for a SIEM, one per line).
    #[arg(long, default_value = "jsonl")]
    format: String,
    /// Where to write it (default: standard output).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// The server's configuration (database, environments).
    #[command(flatten)]
    serve: ServeArgs,
}

/// Runs the export (exit 0 on success, 1 on failure, 2 on bad settings); the count of bytes written
/// goes to standard error.
pub fn main(args: ExportArgs) -> ExitCode {
    let serve = args.serve.clone();
    super::with_store(&serve, |config, store| async move {
        let (range, format) = crate::export::parse(
            &args.since,
            args.until.as_deref(),
            Some(&args.format),
            time::OffsetDateTime::now_utc(),
        )
        .map_err(|e| anyhow::anyhow!("--{}: {}", e.field, e.message))?;
        let environments: Vec<String> = match &args.environment {
            Some(env) if config.environment(env).is_none() => {
                anyhow::bail!("--environment: no environment `{env}` in the configuration")
            }
            Some(env) => vec![env.clone()],
            None => config.environments.iter().map(|e| e.name.clone()).collect(),
        };
        let range = crate::export::ExportRange {
            environments,
            ..range
        };
        let mut out: Box<dyn std::io::Write + Send> = match &args.output {
            Some(path) => Box::new(std::io::BufWriter::new(
                std::fs::File::create(path)
                    .map_err(|e| anyhow::anyhow!("--output {}: {e}", path.display()))?,
            )),
            None => Box::new(std::io::BufWriter::new(std::io::stdout())),
        };
        let mut chunks = std::pin::pin!(crate::export::stream(store, range, format));
        let mut bytes = 0usize;
        while let Some(chunk) = chunks.try_next().await? {
            bytes += chunk.len();
            out.write_all(&chunk)?;
        }
        out.flush()?;
        eprintln!("exported {bytes} bytes");
        Ok(String::new())
    })
}
