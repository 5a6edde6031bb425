//! `breakglass-server logins list|revoke`: the administrator's hold on who is signed in. A
//! login ended here is refused on the next request of every copy of its cookie, on every
//! replica (they read the same table), and what it holds open (terminals, live streams) ends
//! within two seconds (`crate::revocation`), so removing someone's access does not wait for
//! their cookie to expire.

use std::process::ExitCode;

use breakglass_shared::names;
use uuid::Uuid;

use crate::config::{Config, ServeArgs};
use breakglass_shared::SessionState;

use crate::store::{ListFilter, LoginSelector};

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
        /// Also end every session of --user that is running or about to (its terminal closes,
        /// its debug container is stopped and its grant removed by the running server).
        /// Without it the sessions stay theirs, and signing in again opens them.
        #[arg(long, requires_all = ["user", "reason"])]
        end_sessions: bool,
        /// Why the sessions are ended (kept in each one's history); with --end-sessions.
        #[arg(long, requires = "end_sessions")]
        reason: Option<String>,
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
        run(config, store, cmd).await
    })
}

/// A user name as the server stores it, or why it cannot be one.
fn user_name(config: &Config, raw: &str) -> anyhow::Result<String> {
    names::normalise(raw, config.fold_names).map_err(|e| anyhow::anyhow!("--user: {e}"))
}

async fn run(
    config: Config,
    store: std::sync::Arc<dyn crate::store::Store>,
    cmd: LoginsCommand,
) -> anyhow::Result<String> {
    let now = time::OffsetDateTime::now_utc();
    match cmd {
        LoginsCommand::List { user, .. } => {
            let user = user.map(|u| user_name(&config, &u)).transpose()?;
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
        LoginsCommand::Revoke {
            user,
            id,
            by,
            end_sessions,
            reason,
            ..
        } => {
            let user = user.map(|u| user_name(&config, &u)).transpose()?;
            let which = match (&user, id) {
                (Some(u), _) => LoginSelector::User(u.clone()),
                (None, Some(id)) => LoginSelector::Id(id),
                (None, None) => anyhow::bail!("name --user or --id"),
            };
            let reason = reason.as_deref().map(str::trim).unwrap_or_default();
            if end_sessions && reason.is_empty() {
                anyhow::bail!(
                    "--reason: say why their sessions are ended (it is kept in each one's history)"
                );
            }
            let n = store.revoke_logins(&which, &by, now).await?;
            let mut out = format!("ended {n} login(s)\n");
            let Some(user) = user else {
                return Ok(out);
            };
            let running = store
                .list(&ListFilter {
                    requester: Some(user.clone()),
                    in_progress: true,
                    limit: 1000,
                    ..Default::default()
                })
                .await?;
            let running: Vec<_> = running
                .into_iter()
                .filter(|s| s.state != SessionState::Ending)
                .collect();
            if !end_sessions {
                if !running.is_empty() {
                    out.push_str(&format!(
                        "{} session(s) of {user} still run and stay theirs (signing in again opens them); --end-sessions --reason R ends them\n",
                        running.len()
                    ));
                }
                return Ok(out);
            }
            let config = std::sync::Arc::new(config);
            let mut failed = 0;
            for s in &running {
                match crate::lifecycle::operator::end(store.as_ref(), config.clone(), s.id, &by, reason)
                    .await
                {
                    Ok(_) => out.push_str(&format!(
                        "session {} ({}/{}) is ending: ended by {by} from the command line: {reason}\n",
                        s.id, s.environment, s.pod
                    )),
                    Err(e) => {
                        failed += 1;
                        out.push_str(&format!("session {} could not be ended: {e}\n", s.id));
                    }
                }
            }
            if failed > 0 {
                anyhow::bail!("{out}{failed} session(s) of {user} could not be ended; end each with `sessions end`");
            }
            out.push_str(&format!(
                "{} session(s) of {user} ended; the running server removes what each left in its cluster\n",
                running.len()
            ));
            Ok(out)
        }
    }
}
