//! What an operator does to a session from the command line, where no lifecycle runs (another
//! process, perhaps another machine). The change goes through the state machine and the
//! store's compare-and-set like every other ([`super::commit_with`]), with its notices. The
//! work it leaves (closing the terminal, finishing and anchoring the recording, removing the
//! debug container and the grant) is the running server's: its sweep drives every `Ending`
//! session that nobody drives on its next pass, and on PostgreSQL the change's notice makes
//! the replica that holds the terminal read the row at once.

use std::sync::Arc;

use breakglass_shared::{EndReason, Session, SessionEvent};
use uuid::Uuid;

use super::{commit_with, Commit, Error};
use crate::config::Config;
use crate::outbox::Outbox;
use crate::store::{EventDraft, Store};

/// Ends session `id` as an administrator: `Ending`, reason `AdminForceEnded`, with `by` as the
/// event's actor and `reason` in its detail (so the history says who and why).
pub async fn end(
    store: &dyn Store,
    config: Arc<Config>,
    id: Uuid,
    by: &str,
    reason: &str,
) -> Result<Session, Error> {
    let outbox = Outbox::new(config);
    let event = SessionEvent::SystemEnd {
        reason: EndReason::AdminForceEnded,
    };
    let (next, _, _) = commit_with(store, &outbox, id, |s, now| {
        let next = s.apply(&event, now)?;
        let draft = EventDraft {
            actor: by.to_string(),
            kind: event.kind().to_string(),
            detail: Some(format!(
                "{} from the command line: {reason}",
                EndReason::AdminForceEnded.kind()
            )),
            at: now,
            notices: Vec::new(),
        };
        Ok((next, draft, Commit::SystemEnd))
    })
    .await?;
    Ok(next)
}
