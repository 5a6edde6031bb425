//! `breakglass-server`: parse the command line and run.

use std::process::ExitCode;

use breakglass_server::config::{Config, ServeArgs};
use clap::{Parser, Subcommand};

/// mimalloc rather than the C library's allocator: the SQLite driver copies each value of a
/// row on its connection's thread and the request's task frees it on another, and glibc's
/// arenas serialise those frees (`perf record` of the store bench's 200-row lists: 26 % of the
/// samples in `malloc`/`free` and the arena lock, BENCHMARKS.md, store fix 8).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Break-glass for Kubernetes: time-boxed, recorded debug access to pods.
#[derive(Debug, Parser)]
#[command(name = "breakglass-server", version)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server (the default).
    Serve(ServeArgs),
    /// Check the configuration and exit.
    CheckConfig(ServeArgs),
    /// Recordings bucket administration.
    #[command(subcommand)]
    Recordings(breakglass_server::cli::recordings::RecordingsCommand),
    /// Verify a session's stored recording against its session row.
    VerifyRecording(breakglass_server::cli::recordings::VerifyRecordingArgs),
    /// Cluster guardrails: render or apply the RBAC and admission policies of an environment.
    #[command(subcommand)]
    Policies(breakglass_server::cli::policies::PoliciesCommand),
    /// Check an environment's cluster against its guardrails; exit 1 when anything is
    /// missing or drifted (each printed with its fix).
    Doctor(breakglass_server::cli::doctor::DoctorArgs),
    /// Who is signed in: list live logins, or end them at once (a user's, or one by id).
    #[command(subcommand)]
    Logins(breakglass_server::cli::logins::LoginsCommand),
    /// Lock an environment (or a person, with --user): what runs there ends, nothing new starts.
    Lock(breakglass_server::cli::locks::LockArgs),
    /// Unlock it (on Flight, a second admin's unlock confirms the first's).
    Unlock(breakglass_server::cli::locks::LockArgs),
    /// The locks in force, and with --history every lock and unlock recorded.
    Locks(breakglass_server::cli::locks::LocksArgs),
    /// Sessions: `sessions list` prints the live ones; `sessions end ID --reason --by` ends a
    /// running one as an administrator, cleanup included.
    #[command(subcommand)]
    Sessions(breakglass_server::cli::sessions::SessionsCommand),
    /// Notifications: `notify test RECEIVER` sends a test message and prints the answer.
    #[command(subcommand)]
    Notify(breakglass_server::cli::notify::NotifyCommand),
    /// The audit export: every session requested between --since and --until, as JSON lines,
    /// CSV or OCSF events, written as it is read.
    Export(breakglass_server::cli::export::ExportArgs),
    /// The evidence bundle of sessions: one tar with each row, its events, the approved spec,
    /// the recording and its transparency-log entry, and a VERIFY.md an auditor follows offline.
    Evidence(breakglass_server::cli::evidence::EvidenceArgs),
    /// Checks an evidence bundle offline (the checks of its VERIFY.md) and names the first that
    /// fails.
    VerifyEvidence(breakglass_server::cli::evidence::VerifyEvidenceArgs),
}

fn main() -> ExitCode {
    // Logs go to stderr: stdout carries only what a person or a script reads (the URL line,
    // rendered manifests, reports).
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,sqlx=warn,tower_http=info".into()),
        )
        .init();
    let cli = Cli::parse();
    let (args, check_only) = match cli.command {
        Some(Command::Serve(a)) => (a, false),
        Some(Command::CheckConfig(a)) => (a, true),
        Some(Command::Recordings(cmd)) => return breakglass_server::cli::recordings::main(cmd),
        Some(Command::VerifyRecording(a)) => {
            return breakglass_server::cli::recordings::verify_main(a)
        }
        Some(Command::Policies(cmd)) => return breakglass_server::cli::policies::main(cmd),
        Some(Command::Doctor(a)) => return breakglass_server::cli::doctor::main(a),
        Some(Command::Logins(cmd)) => return breakglass_server::cli::logins::main(cmd),
        Some(Command::Lock(a)) => return breakglass_server::cli::locks::lock_main(a),
        Some(Command::Unlock(a)) => return breakglass_server::cli::locks::unlock_main(a),
        Some(Command::Locks(a)) => return breakglass_server::cli::locks::list_main(a),
        Some(Command::Sessions(cmd)) => return breakglass_server::cli::sessions::main(cmd),
        Some(Command::Notify(cmd)) => return breakglass_server::cli::notify::main(cmd),
        Some(Command::Export(a)) => return breakglass_server::cli::export::main(a),
        Some(Command::Evidence(a)) => return breakglass_server::cli::evidence::main(a),
        Some(Command::VerifyEvidence(a)) => {
            return breakglass_server::cli::evidence::verify_main(a)
        }
        None => (cli.serve, false),
    };
    let config = match Config::load(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if check_only {
        println!(
            "configuration is valid: {} environment(s)",
            config.environments.len()
        );
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(breakglass_server::run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
