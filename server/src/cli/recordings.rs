//! `breakglass-server recordings init-bucket` and `breakglass-server verify-recording`.
//!
//! Both read the bucket settings from `TOWER_BREAKGLASS_MINIO_*` (see
//! [`S3Config::from_env`]); `init-bucket` needs an administrator key there, while
//! `verify-recording` works with the server's own put/get key.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use breakglass_shared::session::{RecordingRef, RekorEntry};
use uuid::Uuid;

use crate::recording::{
    least_privilege_policy, recording_key, verify, InitBucketOutcome, InitBucketReport,
    RecordingConfig, RecordingStore, S3Config, S3Store, TransparencyLog,
};

/// `breakglass-server recordings ...`
#[derive(Debug, clap::Subcommand)]
pub enum RecordingsCommand {
    /// Create the recordings bucket with Object Lock and versioning, set the default
    /// retention (GOVERNANCE, 365 days), try the 365-day lifecycle rule, and print the
    /// least-privilege policy for the server's key. Uses the TOWER_BREAKGLASS_MINIO_*
    /// settings with an administrator key. Idempotent.
    InitBucket(InitBucketArgs),
}

/// Flags of `recordings init-bucket`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct InitBucketArgs {
    /// Access key (or ARN) of the server's own account: also print the policy as a bucket
    /// policy naming it (for servers that use bucket policies, such as versitygw or AWS).
    #[arg(long)]
    pub server_access_key: Option<String>,
}

/// Flags of `verify-recording`.
#[derive(Debug, Clone, clap::Args)]
pub struct VerifyRecordingArgs {
    /// The session whose recording to verify.
    pub session_id: Uuid,
    /// Object key (default `sessions/<SESSION_ID>.cast`).
    #[arg(long)]
    pub key: Option<String>,
    /// Version id on the session row.
    #[arg(long)]
    pub version: Option<String>,
    /// SHA-256 (hex) on the session row.
    #[arg(long)]
    pub sha256: Option<String>,
    /// Byte count on the session row.
    #[arg(long)]
    pub bytes: Option<u64>,
    /// Data directory whose `recordings/` holds the local store (used when no
    /// TOWER_BREAKGLASS_MINIO_ENDPOINT is set).
    #[arg(long, env = "BREAKGLASS_DATA_DIR", default_value = ".breakglass")]
    pub data_dir: PathBuf,
    /// Database holding the session row (default: the SQLite file in the data directory).
    #[arg(long, env = "BREAKGLASS_DATABASE_URL")]
    pub database_url: Option<String>,
    /// The server's TOML configuration: its `[recording]` section names the local store's
    /// directory and the transparency log (with the signing key whose entries to accept).
    #[arg(long, env = "BREAKGLASS_CONFIG")]
    pub config: Option<PathBuf>,
}

fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("error: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        })
}

/// Runs a `recordings` subcommand (exit 0 on success, 1 on failure, 2 on bad settings).
pub fn main(cmd: RecordingsCommand) -> ExitCode {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    match cmd {
        RecordingsCommand::InitBucket(args) => {
            let config = match S3Config::from_env() {
                Ok(Some(c)) => c,
                Ok(None) => {
                    eprintln!(
                        "error: TOWER_BREAKGLASS_MINIO_ENDPOINT is not set; init-bucket needs the \
                         S3 endpoint, region, bucket and an administrator key in \
                         TOWER_BREAKGLASS_MINIO_*"
                    );
                    return ExitCode::from(2);
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            match rt.block_on(init_bucket(&config)) {
                Ok(report) => {
                    print!(
                        "{}",
                        init_bucket_text(&report, args.server_access_key.as_deref())
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// Creates and configures the bucket of `config` (see [`S3Store::init_bucket`]).
pub async fn init_bucket(config: &S3Config) -> anyhow::Result<InitBucketReport> {
    let store = S3Store::new(config.clone())?;
    Ok(store.init_bucket().await?)
}

/// The text `init-bucket` prints: the steps, a note when something is not supported, and the
/// least-privilege policy (as an identity policy, and as a bucket policy when the server's
/// access key is known).
pub fn init_bucket_text(report: &InitBucketReport, server_access_key: Option<&str>) -> String {
    let mut out = format!("bucket {}\n{report}", report.bucket);
    if report
        .steps
        .iter()
        .any(|(_, o)| matches!(o, InitBucketOutcome::NotSupported(_)))
    {
        out.push_str(
            "\nnote: this server does not support every setting above; the bucket is still \
             usable (every version is locked by the server's own retention headers), but \
             expiry after 365 days must be arranged on the storage side.\n",
        );
    }
    let pretty = |v: serde_json::Value| serde_json::to_string_pretty(&v).unwrap_or_default();
    out.push_str(
        "\nLeast-privilege policy for the server's key (attach to its user; MinIO / AWS IAM):\n",
    );
    out.push_str(&pretty(least_privilege_policy(&report.bucket, None)));
    out.push('\n');
    if let Some(principal) = server_access_key {
        out.push_str(&format!(
            "\nThe same as a bucket policy for principal {principal} (versitygw / AWS bucket policy):\n"
        ));
        out.push_str(&pretty(least_privilege_policy(
            &report.bucket,
            Some(principal),
        )));
        out.push('\n');
    }
    out
}

/// The server's configuration as `verify-recording` sees it (`--config`, `--data-dir`,
/// `--database-url` over the defaults the server itself uses).
fn load_config(args: &VerifyRecordingArgs) -> anyhow::Result<crate::config::Config> {
    let serve = crate::config::ServeArgs {
        config: args.config.clone(),
        data_dir: Some(args.data_dir.clone()),
        database_url: args.database_url.clone(),
        ..Default::default()
    };
    Ok(crate::config::Config::load(&serve)?)
}

/// A recording store and the transparency log, if configured.
type Verifier = (Arc<dyn RecordingStore>, Option<Arc<TransparencyLog>>);

/// The store and transparency log the server itself would use; the log's signing key must
/// already exist (a new one would recognise none of the server's entries).
fn open_verifier(config: &crate::config::Config) -> anyhow::Result<Verifier> {
    let recording = RecordingConfig::from_settings(&config.recording)?;
    if let Some(t) = &recording.transparency_log {
        if !t.signing_key.exists() {
            anyhow::bail!(
                "the signing key {} named by recording.transparency_log.signing_key does not exist; \
                 verification needs the server's key to recognise its entries",
                t.signing_key.display()
            );
        }
    }
    Ok((recording.open_store()?, recording.open_log()?))
}

/// The recording reference (and transparency-log entry) on the session row.
async fn row_of(
    config: &crate::config::Config,
    id: Uuid,
) -> anyhow::Result<(RecordingRef, Option<RekorEntry>)> {
    let url = &config.database_url;
    let store = crate::store::connect(url).await?;
    let session = store
        .get(id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no session {id} in {url}"))?;
    let recording = session.recording.ok_or_else(|| {
        anyhow::anyhow!("session {id} has no recording on its row (it never became active)")
    })?;
    Ok((recording, session.rekor))
}

/// Runs `verify-recording` (exit 0 when verified, 1 when a check failed, 2 on bad input).
///
/// The row's values come from the session row in the database, unless `--version`,
/// `--sha256` and `--bytes` are all given (for checking a copy elsewhere).
pub fn verify_main(args: VerifyRecordingArgs) -> ExitCode {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let config = match load_config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let (recording, rekor) = match (args.version.clone(), args.sha256.clone(), args.bytes) {
        (Some(version), Some(sha256), Some(bytes)) => (
            RecordingRef {
                key: args
                    .key
                    .clone()
                    .unwrap_or_else(|| recording_key(args.session_id)),
                version,
                sha256,
                bytes,
            },
            None,
        ),
        _ => match rt.block_on(row_of(&config, args.session_id)) {
            Ok(found) => found,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let (store, log) = match open_verifier(&config) {
        Ok(found) => found,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let report = rt.block_on(verify(
        store.as_ref(),
        log.as_deref(),
        &recording,
        rekor.as_ref(),
    ));
    println!("{report}");
    if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
