//! The request the store benches seed their sessions from, so both store the same rows.

use breakglass_shared::session::NewSession;
use breakglass_shared::{Mode, Tier};

/// Session `i`'s request: in `environment` (of `tier`), for one of 97 payment workers, by
/// `requester`, 30 minutes.
pub fn request(i: usize, environment: &str, tier: Tier, requester: String) -> NewSession {
    NewSession {
        environment: environment.into(),
        tier,
        namespace: "payments".into(),
        pod: format!("worker-{}", i % 97),
        target_container: None,
        mode: Mode::Live,
        reason: "investigating stuck payment worker".into(),
        ticket: None,
        duration_minutes: 30,
        recycle: false,
        requester,
        quorum: breakglass_shared::session::Quorum::default(),
        extension_limits: breakglass_shared::session::ExtensionLimits::default(),
    }
}
