//! Extensions in the cluster: before a change that gives a running session more time is
//! written, its grant's TTL says the new time. The cluster goes first so the row never
//! promises time the cluster's own backstop (the TTL cleanup of the grant) would cut short; a
//! grant left with more time than a row that lost a race is harmless, since the server deletes
//! the grant at the session's end.

use breakglass_shared::SessionEvent;
use time::OffsetDateTime;
use uuid::Uuid;

use super::{Error, Lifecycle};

impl Lifecycle {
    /// For an extension `event` on session `id`: refused under a lock, and, where it would give
    /// time now, the grant extended first. Any other refusal is the commit's to report.
    pub(super) async fn prepare_extension(
        &self,
        id: Uuid,
        event: &SessionEvent,
    ) -> Result<(), Error> {
        let s = self.get(id).await?;
        self.refuse_if_locked(&s.environment, &s.requester).await?;
        let Ok(next) = s.apply(event, OffsetDateTime::now_utc()) else {
            return Ok(());
        };
        if next.granted_minutes() == s.granted_minutes() {
            return Ok(());
        }
        if let Some(cluster) = self.cluster_for(&s.environment) {
            cluster.extend(&next).await?;
        }
        Ok(())
    }
}
