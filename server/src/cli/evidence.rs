//! `breakglass-server evidence` (the evidence bundle of some sessions, from the configured
//! database, recordings and transparency log) and `breakglass-server verify-evidence` (its
//! checks, offline).

use std::path::PathBuf;
use std::process::ExitCode;

use uuid::Uuid;

use crate::config::ServeArgs;
use crate::evidence::{self, Sources};
use crate::recording::RecordingConfig;

/// `breakglass-server evidence ...`
#[derive(Debug, clap::Args)]
pub struct EvidenceArgs {
    /// The sessions, in the order the bundle lists them.
    #[arg(required = true)]
    sessions: Vec<Uuid>,
    /// The tar file to write.
    #[arg(short, long)]
    output: PathBuf,
    /// The server's configuration (database, recordings, transparency log).
    #[command(flatten)]
    serve: ServeArgs,
}

/// `breakglass-server verify-evidence FILE.tar`
#[derive(Debug, clap::Args)]
pub struct VerifyEvidenceArgs {
    /// The bundle.
    bundle: PathBuf,
}

/// Writes the bundle (exit 0), or says why not (exit 1; 2 on bad settings).
pub fn main(args: EvidenceArgs) -> ExitCode {
    let serve = args.serve.clone();
    super::with_store(&serve, |config, store| async move {
        let recording = RecordingConfig::from_settings(&config.recording)?;
        let src = Sources {
            store,
            recordings: recording.open_store()?,
            log: recording.open_log()?,
        };
        let file = std::fs::File::create(&args.output)
            .map_err(|e| anyhow::anyhow!("--output {}: {e}", args.output.display()))?;
        let written = evidence::write(&src, &args.sessions, std::io::BufWriter::new(file)).await;
        let mut out = match written {
            Ok(out) => out,
            Err(e) => {
                // Half a bundle is worse than none: nobody mistakes a missing file for evidence.
                let _ = std::fs::remove_file(&args.output);
                return Err(e.into());
            }
        };
        std::io::Write::flush(&mut out)?;
        Ok(format!(
            "wrote {} ({} sessions); check it with `breakglass-server verify-evidence {}` or the commands in its VERIFY.md\n",
            args.output.display(),
            args.sessions.len(),
            args.output.display()
        ))
    })
}

/// Checks the bundle: each passed check on standard output and exit 0, or the first failure
/// and exit 1.
pub fn verify_main(args: VerifyEvidenceArgs) -> ExitCode {
    let file = match std::fs::File::open(&args.bundle) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {}: {e}", args.bundle.display());
            return ExitCode::from(2);
        }
    };
    match evidence::verify::verify(file) {
        Ok(passed) => {
            for line in passed {
                println!("ok     {line}");
            }
            println!("all checks passed");
            ExitCode::SUCCESS
        }
        Err(f) => {
            eprintln!("FAILED {f}");
            ExitCode::FAILURE
        }
    }
}
