//! `breakglass-server sessions list|end`: what is live, and an administrator's end for a
//! session that must stop now (a stuck terminal, a person who cannot be reached, an incident)
//! from a shell, when the page is not where they are. The end is written through the state
//! machine (`lifecycle::operator`); the running server closes the terminal and cleans up, and
//! `end` waits for that so its exit says whether the debug container and the grant are gone.

use std::process::ExitCode;
use std::time::Duration;

use breakglass_shared::Session;
use time::format_description::well_known::Rfc3339;
use uuid::Uuid;

use crate::config::ServeArgs;
use crate::store::Store;

/// `breakglass-server sessions ...`
#[derive(Debug, clap::Subcommand)]
pub enum SessionsCommand {
    /// The live sessions (every state but the final ones), newest first.
    List {
        /// Only this environment's.
        #[arg(long)]
        environment: Option<String>,
        /// The server's configuration (database).
        #[command(flatten)]
        serve: ServeArgs,
    },
    /// End a running session as an administrator: its terminal closes, its recording is
    /// finished, its debug container and grant are removed by the running server.
    End {
        /// The session's id (as `sessions list` or the session page shows it).
        id: Uuid,
        /// Why (kept in the session's history and sent with its notices).
        #[arg(long)]
        reason: String,
        /// Who you are (kept in the session's history).
        #[arg(long)]
        by: String,
        /// Seconds to wait for the server to finish the cleanup; 0 returns once the end is
        /// written.
        #[arg(long, default_value_t = 120)]
        wait: u64,
        /// The server's configuration (database, environments).
        #[command(flatten)]
        serve: ServeArgs,
    },
}

/// Runs a `sessions` subcommand (exit 0 on success, 1 on failure, 2 on bad settings).
pub fn main(cmd: SessionsCommand) -> ExitCode {
    let serve = match &cmd {
        SessionsCommand::List { serve, .. } | SessionsCommand::End { serve, .. } => serve.clone(),
    };
    super::with_store(&serve, |config, store| async move {
        match cmd {
            SessionsCommand::List { environment, .. } => {
                list(store.as_ref(), environment.as_deref()).await
            }
            SessionsCommand::End {
                id,
                reason,
                by,
                wait,
                ..
            } => {
                let (reason, by) = (reason.trim(), by.trim());
                if reason.is_empty() {
                    anyhow::bail!(
                        "--reason: say why the session is ended (it is kept in its history)"
                    );
                }
                if by.is_empty() {
                    anyhow::bail!("--by: name who ends it (it is kept in its history)");
                }
                let config = std::sync::Arc::new(config);
                let s = crate::lifecycle::operator::end(store.as_ref(), config, id, by, reason)
                    .await
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                let mut out = format!(
                    "session {id} ({}'s, {}/{}) is ending: ended by {by} from the command line: {reason}\n",
                    s.requester, s.environment, s.pod
                );
                if wait > 0 {
                    out.push_str(&cleaned_up(store.as_ref(), id, Duration::from_secs(wait)).await?);
                }
                Ok(out)
            }
        }
    })
}

/// Waits until the server has finished the session (terminal closed, recording kept, cluster
/// objects removed); what it says, or why it could not tell.
async fn cleaned_up(store: &dyn Store, id: Uuid, wait: Duration) -> anyhow::Result<String> {
    eprintln!(
        "waiting up to {} s for the server to close the terminal and clean up…",
        wait.as_secs()
    );
    let done = tokio::time::timeout(wait, async {
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        loop {
            tick.tick().await;
            match store.get(id).await? {
                Some(s) if s.state.is_final() => return Ok::<_, anyhow::Error>(s),
                Some(_) => {}
                None => anyhow::bail!("session {id} is no longer in the database"),
            }
        }
    })
    .await;
    match done {
        Ok(Ok(s)) => Ok(format!(
            "{}: the terminal is closed, the recording kept, the debug container and the grant removed\n",
            s.state
        )),
        Ok(Err(e)) => Err(e),
        Err(_) => anyhow::bail!(
            "the end is written, but no server finished the cleanup within {} s: is a server \
             running against this database? Its sweep finishes it on its next pass once one runs \
             (`sessions list` shows the session until then)",
            wait.as_secs()
        ),
    }
}

/// One line per live session: id, environment, state, requester, pod, since, time box end.
async fn list(store: &dyn Store, environment: Option<&str>) -> anyhow::Result<String> {
    let mut live: Vec<Session> = Vec::new();
    for (id, _) in store.live_versions().await? {
        if let Some(s) = store.get(id).await? {
            if environment.is_none_or(|e| e == s.environment) && !s.state.is_final() {
                live.push(s);
            }
        }
    }
    live.sort_unstable_by_key(|s| std::cmp::Reverse(s.id));
    let when = |t: Option<time::OffsetDateTime>| {
        t.and_then(|t| t.format(&Rfc3339).ok())
            .unwrap_or_else(|| "-".into())
    };
    let mut out = format!(
        "{:<36}  {:<12}  {:<15}  {:<16}  {:<32}  {:<20}  {}\n",
        "ID", "ENVIRONMENT", "STATE", "REQUESTER", "NAMESPACE/POD", "SINCE", "ENDS"
    );
    for s in &live {
        out.push_str(&format!(
            "{:<36}  {:<12}  {:<15}  {:<16}  {:<32}  {:<20}  {}\n",
            s.id,
            s.environment,
            s.state.to_string(),
            s.requester,
            format!("{}/{}", s.namespace, s.pod),
            when(Some(s.created_at)),
            when(s.expires_at),
        ));
    }
    out.push_str(&format!("{} live session(s)\n", live.len()));
    Ok(out)
}
