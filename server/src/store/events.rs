//! A session's events as of its row read apart from them. The session's get reads the row
//! and its events on two connections at once (one round trip to the database on the way), and
//! the evidence bundle reads them one after the other: either pair may straddle a change, and
//! what is answered must still be one version's row with exactly its events.

use breakglass_shared::api::SessionEventRecord;
use breakglass_shared::Session;

use super::{Store, StoreError};

/// `events`, read apart from the row `s` (on another connection, or after it), made the events
/// of that row: a store writes one event per committed version, in the change's transaction,
/// so fewer than its version were read before its last change (they are read again) and any
/// past it belong to later changes this row does not show (they are dropped).
pub async fn events_as_of(
    store: &dyn Store,
    s: &Session,
    mut events: Vec<SessionEventRecord>,
) -> Result<Vec<SessionEventRecord>, StoreError> {
    let version = usize::try_from(s.version).unwrap_or(0);
    if events.len() < version {
        events = store.events(s.id).await?;
    }
    events.truncate(version);
    Ok(events)
}
