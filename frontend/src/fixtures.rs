//! Sessions for the host unit tests of the views' logic.

use breakglass_shared::session::NewSession;
use breakglass_shared::{Mode, Session, SessionState, Tier};
use time::OffsetDateTime;
use uuid::Uuid;

/// alice's Flight request on `prod/shop/web-1` with id `n` (created `n` seconds after a fixed
/// moment), in `state` at `version`.
pub fn session(n: u128, state: SessionState, version: i64) -> Session {
    let mut s = Session::new_request(
        Uuid::from_u128(n),
        NewSession {
            environment: "prod".into(),
            tier: Tier::Flight,
            namespace: "shop".into(),
            pod: "web-1".into(),
            target_container: None,
            mode: Mode::Live,
            reason: "checking a stuck worker".into(),
            ticket: None,
            duration_minutes: 30,
            recycle: false,
            requester: "alice".into(),
            quorum: breakglass_shared::session::Quorum::default(),
            extension_limits: breakglass_shared::session::ExtensionLimits::default(),
        },
        OffsetDateTime::from_unix_timestamp(1_700_000_000 + n as i64)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH),
    );
    s.state = state;
    s.version = version;
    s
}
