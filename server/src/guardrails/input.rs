//! What rendering takes ([`RenderInput`]) and why it fails ([`RenderError`]): a leaf that the
//! renderer, the templates and the identity check all use, so none of them imports another
//! to reach these.

use breakglass_shared::Tier;

use crate::config::{Config, Environment};

/// Why the policies could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The server's username is unusable in a policy.
    #[error("identity `{identity}`: {reason}")]
    Identity {
        /// The username given.
        identity: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A value from the configuration cannot go into a policy.
    #[error("{0}")]
    Value(String),
    /// A template is broken (a bug in `policies/`).
    #[error("template policies/{template}: {reason}")]
    Template {
        /// The template file, relative to `policies/`.
        template: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// Everything that differs between clusters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderInput {
    /// The environment's name (for messages only).
    pub environment: String,
    /// Its tier: Flight grants need an approver or a broken glass.
    pub tier: Tier,
    /// The server's username on that cluster (the policies name it literally).
    pub identity: String,
    /// The server's namespace (Lease, debug image parameter; protected).
    pub server_namespace: String,
    /// The debug image, pinned by digest.
    pub debug_image: String,
    /// Namespaces where no grant may be made.
    pub protected_namespaces: Vec<String>,
    /// The longest session on this tier, in minutes (the grant TTL bound).
    pub max_ttl_minutes: u32,
}

impl RenderInput {
    /// The input for `env` of `config`, with the server's `identity` there.
    pub fn new(config: &Config, env: &Environment, identity: &str) -> RenderInput {
        RenderInput {
            environment: env.name.clone(),
            tier: env.tier,
            identity: identity.to_string(),
            server_namespace: config.server_namespace.clone(),
            debug_image: config.debug_image.clone(),
            protected_namespaces: env.protected_namespaces.clone(),
            max_ttl_minutes: config.durations.for_tier(env.tier).max_minutes,
        }
    }
}
