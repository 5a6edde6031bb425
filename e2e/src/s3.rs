//! The recording bucket of the end-to-end servers under `BREAKGLASS_E2E_STORE=s3`: the same
//! tests, each server recording into a versitygw bucket with Object Lock (started with
//! `scripts/s3.sh` for its data directory) instead of its local directory. `scripts/test.sh`
//! runs the terminal tests this way.
//!
//! One versitygw serves one data directory, shared by every [`crate::server::ServerProcess`]
//! started on it (a restarted server finds its recordings again) and stopped when the last of
//! them is gone.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use anyhow::{bail, Context as _};

/// The variable choosing the recording store of the end-to-end servers: unset or `local`
/// (each server's own directory), or `s3`.
pub const STORE_ENV: &str = "BREAKGLASS_E2E_STORE";

/// A running versitygw for one data directory; stopped on drop of the last handle.
#[derive(Debug)]
pub struct Bucket {
    dir: PathBuf,
    /// The `TOWER_BREAKGLASS_MINIO_*` variables that point a server at it.
    pub env: Vec<(String, String)>,
}

impl Drop for Bucket {
    fn drop(&mut self) {
        let _ = script().arg("stop").arg(&self.dir).output();
    }
}

fn running() -> &'static Mutex<HashMap<PathBuf, Weak<Bucket>>> {
    static RUNNING: std::sync::OnceLock<Mutex<HashMap<PathBuf, Weak<Bucket>>>> =
        std::sync::OnceLock::new();
    RUNNING.get_or_init(Default::default)
}

fn script() -> std::process::Command {
    let mut cmd = std::process::Command::new(crate::workspace_root().join("scripts/s3.sh"));
    // The script's documented defaults (root key, region, bucket), whatever the shell has.
    for k in [
        "TOWER_BREAKGLASS_MINIO_ENDPOINT",
        "TOWER_BREAKGLASS_MINIO_ACCESS_KEY",
        "TOWER_BREAKGLASS_MINIO_SECRET_KEY",
        "TOWER_BREAKGLASS_MINIO_REGION",
        "TOWER_BREAKGLASS_MINIO_BUCKET",
    ] {
        cmd.env_remove(k);
    }
    cmd
}

fn run(args: &[&str]) -> anyhow::Result<String> {
    let out = script()
        .args(args)
        .output()
        .context("cannot run scripts/s3.sh")?;
    if !out.status.success() {
        bail!(
            "scripts/s3.sh {} failed (run `scripts/s3.sh install` if versitygw is missing): {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn exports(stdout: &str) -> Vec<(String, String)> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("export "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('\'').to_string()))
        .collect()
}

/// Whether the end-to-end servers record to S3 in this run.
pub fn wanted() -> anyhow::Result<bool> {
    match std::env::var(STORE_ENV).as_deref() {
        Ok("s3") => Ok(true),
        Ok("local") | Err(_) => Ok(false),
        Ok(other) => bail!("{STORE_ENV}={other}: use local or s3"),
    }
}

/// The bucket of the server in `data_dir`: its versitygw started (with the bucket made as an
/// operator does, `recordings init-bucket`) on the first call for the directory, the running
/// one after that.
pub fn bucket_for(data_dir: &Path) -> anyhow::Result<Arc<Bucket>> {
    let dir = data_dir.join("e2e-s3");
    let mut running = running()
        .lock()
        .map_err(|_| anyhow::anyhow!("S3 registry poisoned"))?;
    if let Some(b) = running.get(&dir).and_then(Weak::upgrade) {
        return Ok(b);
    }
    std::fs::create_dir_all(&dir)?;
    let dir_s = dir.to_string_lossy().into_owned();
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let env = exports(&run(&["start", &dir_s, &port.to_string()])?);
    if !env
        .iter()
        .any(|(k, _)| k == "TOWER_BREAKGLASS_MINIO_ENDPOINT")
    {
        bail!("scripts/s3.sh start printed no endpoint");
    }
    let bucket = Arc::new(Bucket {
        dir: dir.clone(),
        env,
    });
    run(&["create-bucket", &dir_s])?;
    // Kept beside the data, so the command-line tools of a test reach the same bucket.
    let lines: String = bucket
        .env
        .iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect();
    std::fs::write(data_dir.join("e2e-s3.env"), lines)?;
    running.insert(dir, Arc::downgrade(&bucket));
    Ok(bucket)
}

/// The `TOWER_BREAKGLASS_MINIO_*` variables a server in `data_dir` was started with under
/// `BREAKGLASS_E2E_STORE=s3`; empty otherwise.
pub fn env_of(data_dir: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(data_dir.join("e2e-s3.env"))
        .map(|t| {
            t.lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .unwrap_or_default()
}
