//! Command-line tools of `breakglass-server` besides serving.

pub mod doctor;
pub mod evidence;
pub mod export;
pub mod locks;
pub mod logins;
pub mod notify;
pub mod policies;
pub mod recordings;
pub mod sessions;

use std::future::Future;
use std::process::ExitCode;
use std::sync::Arc;

use crate::config::{Config, ServeArgs};
use crate::store::Store;

/// Runs a command on the configured database: loads the configuration (exit 2 when it is
/// wrong), connects, runs `work` and prints what it returns (exit 0), or the error (exit 1).
pub fn with_store<F, Fut>(serve: &ServeArgs, work: F) -> ExitCode
where
    F: FnOnce(Config, Arc<dyn Store>) -> Fut,
    Fut: Future<Output = anyhow::Result<String>>,
{
    let config = match Config::load(serve) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let done = rt.block_on(async {
        let store = crate::store::connect(&config.database_url).await?;
        work(config, store).await
    });
    match done {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The one-thread runtime a command runs on, or the exit code after saying why there is none.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("error: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        })
}
