//! `breakglass-server logins list|revoke`: the administrator's hold on who is signed in. A
//! login ended here is refused on the next request of every copy of its cookie, on every
//! replica (they read the same table), and what it holds open (terminals, live streams) ends
//! within two seconds (`crate::revocation`), so removing someone's access does not wait for
//! their cookie to expire.

use std::process::ExitCode;

use breakglass_shared::names;
use uuid::Uuid;

use crate::config::{Config, ServeArgs};
use crate::store::LoginSelector;

/// `breakglass-server logins ...`
#[derive(Debug, clap::Subcommand)]
pub enum LoginsCommand {
    /// List the live logins (of one user with --user), newest first.
    List {
        /// Only this user's logins.
        #[arg(long)]
        user: Option<String>,
        /// The server's configuration (database, name rules).
        #[command(flatten)]
        serve: ServeArgs,
    },
    /// End logins at once: every live login of --user, or the one --id names.
    Revoke {
        /// End every live login of this user.
        #[arg(long, conflicts_with = "id", required_unless_present = "id")]
        user: Option<String>,
        /// End this login.
        #[arg(long)]
        id: Option<Uuid>,
        /// Who is ending them (shown in the login record).
        #[arg(long, default_value = "administrator")]
        by: String,
        /// The server's configuration (database, name rules).
        #[command(flatten)]
        serve: ServeArgs,
    },
}

/// Runs a `logins` subcommand (exit 0 on success, 1 on failure, 2 on bad settings).
pub fn main(cmd: LoginsCommand) -> ExitCode {
    let serve = match &cmd {
        LoginsCommand::List { serve, .. } | LoginsCommand::Revoke { serve, .. } => serve.clone(),
    };
    super::with_store(&serve, |config, store| async move {
        run(&config, store, cmd).await
    })
}

/// A user name as the server stores it, or why it cannot be one.
fn user_name(config: &Config, raw: &str) -> anyhow::Result<String> {
    names::normalise(raw, config.fold_names).map_err(|e| anyhow::anyhow!("--user: {e}"))
}

async fn run(
    config: &Config,
    store: std::sync::Arc<dyn crate::store::Store>,
    cmd: LoginsCommand,
) -> anyhow::Result<String> {
    let now = time::OffsetDateTime::now_utc();
    match cmd {
        LoginsCommand::List { user, .. } => {
            let user = user.map(|u| user_name(config, &u)).transpose()?;
            let logins = store.live_logins(user.as_deref(), now).await?;
            let mut out = String::new();
            for l in &logins {
                out.push_str(&format!(
                    "{}  {}  {}  since {}  until {}\n",
                    l.id,
                    l.user,
                    l.source.as_str(),
                    l.created_at,
                    l.expires_at
                ));
            }
            out.push_str(&format!("{} live login(s)\n", logins.len()));
            Ok(out)
        }
        LoginsCommand::Revoke { user, id, by, .. } => {
            let which = match (user, id) {
                (Some(u), _) => LoginSelector::User(user_name(config, &u)?),
                (None, Some(id)) => LoginSelector::Id(id),
                (None, None) => anyhow::bail!("name --user or --id"),
            };
            let n = store.revoke_logins(&which, &by, now).await?;
            Ok(format!("ended {n} login(s)\n"))
        }
    }
}
