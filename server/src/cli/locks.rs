//! `breakglass-server lock|unlock ENV --reason ... --by ...` (or `--user NAME`) and
//! `breakglass-server locks`: the security team's switch from a shell, for when the page is not
//! where they are. The lock is a row in the database: every replica stops what it covers at its
//! next check (within about a second), and the unlock follows the page's rule (a second admin
//! where any Flight environment is concerned).

use std::process::ExitCode;

use breakglass_shared::lock::{LockScope, UnlockStep};
use breakglass_shared::names;

use crate::config::{Config, ServeArgs};
use crate::locks;

/// What a lock or an unlock names.
#[derive(Debug, clap::Args)]
pub struct LockArgs {
    /// The environment.
    #[arg(required_unless_present = "user", conflicts_with = "user")]
    pub environment: Option<String>,
    /// A person instead: every environment, for them.
    #[arg(long)]
    pub user: Option<String>,
    /// Why (shown to everyone it stops, kept in the history).
    #[arg(long)]
    pub reason: String,
    /// Who you are (kept in the history; on Flight, the unlock's second admin must be another).
    #[arg(long)]
    pub by: String,
    /// The server's configuration (database, environments, name rules).
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// `breakglass-server locks`
#[derive(Debug, clap::Args)]
pub struct LocksArgs {
    /// Also print every lock, unlock request and unlock ever recorded.
    #[arg(long)]
    pub history: bool,
    /// The server's configuration (database).
    #[command(flatten)]
    pub serve: ServeArgs,
}

fn target(config: &Config, args: &LockArgs) -> anyhow::Result<(LockScope, String)> {
    Ok(match (&args.environment, &args.user) {
        (_, Some(user)) => (
            LockScope::User,
            names::normalise(user, config.fold_names)
                .map_err(|e| anyhow::anyhow!("--user: {e}"))?,
        ),
        (Some(env), None) => (LockScope::Environment, env.clone()),
        (None, None) => anyhow::bail!("name an environment or --user"),
    })
}

/// `lock`: puts the lock in force.
pub fn lock_main(args: LockArgs) -> ExitCode {
    let serve = args.serve.clone();
    super::with_store(&serve, |config, store| async move {
        let (scope, target) = target(&config, &args)?;
        let now = time::OffsetDateTime::now_utc();
        let lock = locks::lock(
            store.as_ref(),
            &config,
            scope,
            &target,
            &args.by,
            &args.reason,
            now,
        )
        .await?;
        Ok(format!("{}\n", lock.sentence()))
    })
}

/// `unlock`: lifts the lock, or records the first admin's request.
pub fn unlock_main(args: LockArgs) -> ExitCode {
    let serve = args.serve.clone();
    super::with_store(&serve, |config, store| async move {
        let (scope, target) = target(&config, &args)?;
        let now = time::OffsetDateTime::now_utc();
        let step = locks::unlock(
            store.as_ref(),
            &config,
            scope,
            &target,
            &args.by,
            &args.reason,
            now,
        )
        .await?;
        let hint = match step {
            UnlockStep::Lifted => "",
            UnlockStep::AwaitingSecond => " (by running the same unlock with their own --by)",
        };
        Ok(format!("{}{hint}\n", step.sentence(&target)))
    })
}

/// `locks`: the locks in force (and the history).
pub fn list_main(args: LocksArgs) -> ExitCode {
    super::with_store(&args.serve, |_, store| async move {
        let mut out = String::new();
        let locks = store.locks().await?;
        for l in &locks {
            out.push_str(&format!(
                "{} {}  by {} at {}: {}",
                l.scope, l.target, l.locked_by, l.locked_at, l.reason
            ));
            if let Some(u) = &l.unlock {
                out.push_str(&format!(
                    "  (unlock asked by {} at {}: {})",
                    u.by, u.at, u.reason
                ));
            }
            out.push('\n');
        }
        out.push_str(&format!("{} lock(s) in force\n", locks.len()));
        if args.history {
            for e in store.lock_events().await? {
                out.push_str(&format!(
                    "{}  {} {}  {} by {}: {}\n",
                    e.at, e.scope, e.target, e.kind, e.actor, e.reason
                ));
            }
        }
        Ok(out)
    })
}
