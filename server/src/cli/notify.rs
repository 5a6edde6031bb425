//! `breakglass-server notify test RECEIVER`: sends a test notification to one configured
//! receiver, as the worker would (signed webhook, Slack message, mail), and prints what the
//! receiver answered, so an operator sees a receiver work before a request depends on it.

use std::process::ExitCode;
use std::sync::Arc;

use breakglass_shared::notify::{NoticeKind, Notification};
use breakglass_shared::session::NewSession;
use breakglass_shared::{Mode, Session, Tier};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::config::{Config, ServeArgs};
use crate::notify::Sender;
use crate::outbox::Outbox;

/// `breakglass-server notify ...`
#[derive(Debug, clap::Subcommand)]
pub enum NotifyCommand {
    /// Send a test message to RECEIVER (a `[notifications]` name) and print its answer.
    Test {
        /// The receiver's name.
        receiver: String,
        /// The server's configuration.
        #[command(flatten)]
        serve: ServeArgs,
    },
}

/// Runs a `notify` subcommand: exit 0 when the receiver took the message, 1 when it did not,
/// 2 on a bad configuration or an unknown receiver.
pub fn main(cmd: NotifyCommand) -> ExitCode {
    let NotifyCommand::Test { receiver, serve } = cmd;
    let config = match Config::load(&serve) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(r) = config.notifications.receiver(&receiver).cloned() else {
        let names: Vec<_> = config
            .notifications
            .receivers
            .iter()
            .map(|r| r.name.as_str())
            .collect();
        eprintln!(
            "error: no receiver `{receiver}`; the configured ones are: {}",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        );
        return ExitCode::from(2);
    };
    let rt = match super::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let note = sample(&config);
    let id = format!("msg_{}", Uuid::now_v7().simple());
    let payload = serde_json::to_string(&note).unwrap_or_default();
    let sent = rt.block_on(async {
        let sender = Sender::new(config.clone())?;
        anyhow::Ok(sender.send(&r, &id, &note, &payload).await)
    });
    match sent {
        Ok(Ok(answer)) => {
            println!(
                "{} `{}` took the test message {id}: {} {}",
                r.kind(),
                r.name,
                answer
                    .status
                    .map_or_else(|| "-".to_string(), |s| s.to_string()),
                answer.body.trim()
            );
            ExitCode::SUCCESS
        }
        Ok(Err(f)) => {
            eprintln!(
                "error: {} `{}` did not take the test message: {}",
                r.kind(),
                r.name,
                f.error
            );
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// A made-up request that waits for approval, in the first environment (or `test`).
fn sample(config: &Arc<Config>) -> Notification {
    let now = OffsetDateTime::now_utc();
    let env = config.environments.first();
    let session = Session::new_request(
        Uuid::now_v7(),
        NewSession {
            environment: env.map_or_else(|| "test".into(), |e| e.name.clone()),
            tier: env.map_or(Tier::Flight, |e| e.tier),
            namespace: "notification-test".into(),
            pod: "no-such-pod".into(),
            target_container: None,
            mode: Mode::Live,
            reason: "A test message from `breakglass-server notify test`; nobody asked for access."
                .into(),
            ticket: None,
            duration_minutes: 15,
            recycle: false,
            requester: "notification-test".into(),
            quorum: Default::default(),
            extension_limits: Default::default(),
        },
        now,
    );
    let base = Outbox::new(config.clone()).base().to_string();
    Notification::new(
        NoticeKind::Requested,
        &session,
        "notification-test",
        now,
        &base,
    )
}
