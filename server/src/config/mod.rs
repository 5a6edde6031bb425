//! Configuration: command-line flags with environment fallbacks, over an optional TOML file,
//! over defaults. A bad configuration stops the server at start with the key and the reason.
//!
//! The TOML file keeps its flat layout ([`FileConfig`]); resolving it is split by section, one
//! file each: `server` (listen address, database, directories), `auth` (public URL, cookie
//! secret, trusted proxies, dev login), `sessions` (durations and timings), `environments`
//! (clusters, debug image, protected namespaces) and `recording`. Each section checks its own
//! keys; [`Config::resolve`] only puts the sections together, in the order the keys are
//! checked.

mod auth;
mod environments;
mod notifications;
mod proxies;
mod recording;
mod server;
mod sessions;
mod token_keys;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use ipnet::IpNet;
use serde::Deserialize;

pub use auth::{
    demo_users, is_loopback_host, AuthSectionConfig, DevLoginConfig, DevUser, OidcFileConfig,
    OidcSettings, PublicUrl, UsernameClaim, OIDC_CALLBACK_PATH,
};
pub use environments::{
    demo_environments, is_pinned_image, ClusterCredentials, Environment, EnvironmentConfig,
    Holders, DEFAULT_DEBUG_IMAGE, PROTECTED_NAMESPACES,
};
pub use notifications::{
    certificates, Notifications, NotificationsFile, Receiver, Route, Secret, SiemSink, SigningKey,
    Smtp, SmtpTls, Target,
};
pub use proxies::TrustedProxiesMinPrefix;
pub use recording::{RecordingFileConfig, TransparencyLogFileConfig};
pub use sessions::TierDurations;
pub use token_keys::TokenKeys;

use crate::recording::RecordingSettings;

/// Flags of `breakglass-server serve` (each also read from its environment variable).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    /// TOML configuration file; everything has a default without one.
    #[arg(long, env = "BREAKGLASS_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to listen on (default 127.0.0.1:8080).
    #[arg(long, env = "BREAKGLASS_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// The URL the other replicas reach this one at (to watch a terminal it serves); default
    /// `http://LISTEN` when the listen address is not a wildcard.
    #[arg(long, env = "BREAKGLASS_ADVERTISE_URL")]
    pub advertise_url: Option<String>,
    /// `sqlite://PATH` or `postgres://...` (default: SQLite file in the data directory).
    #[arg(long, env = "BREAKGLASS_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Directory for the SQLite database, the cookie key and local recordings
    /// (default `./.breakglass`).
    #[arg(long, env = "BREAKGLASS_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Directory with the built frontend (default `frontend/dist`).
    #[arg(long, env = "BREAKGLASS_STATIC_DIR")]
    pub static_dir: Option<PathBuf>,
    /// Dev mode: enable the dev login with demo users, and demo environments when the
    /// configuration has none. Never for production.
    #[arg(long, env = "BREAKGLASS_DEV")]
    pub dev: bool,
    /// Let requests in environments without a cluster wait in `Approved` (an API-only demo
    /// or test) instead of failing at once; the UI labels such environments.
    #[arg(long, env = "BREAKGLASS_NO_CLUSTERS")]
    pub no_clusters: bool,
    /// The OIDC client secret, when `[auth.oidc]` names no `client_secret_file`.
    #[arg(long, env = "BREAKGLASS_OIDC_CLIENT_SECRET", hide_env_values = true)]
    pub oidc_client_secret: Option<String>,
}

/// A configuration problem: which key and why.
#[derive(Debug, thiserror::Error)]
#[error("config key `{key}`: {reason}")]
pub struct ConfigError {
    /// Dotted path of the key, e.g. `environments[1].tier`.
    pub key: String,
    /// What is wrong and what would be right.
    pub reason: String,
}

impl ConfigError {
    fn new(key: impl Into<String>, reason: impl Into<String>) -> ConfigError {
        ConfigError {
            key: key.into(),
            reason: reason.into(),
        }
    }
}

/// `value` when it lies in `min..=max`, else an error naming `key` with the bounds.
fn within(key: impl Into<String>, value: u64, min: u64, max: u64) -> Result<u64, ConfigError> {
    if value < min || value > max {
        return Err(ConfigError::new(
            key,
            format!("must be between {min} and {max}"),
        ));
    }
    Ok(value)
}

/// The TOML file. Every key is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Address to listen on.
    pub listen: Option<SocketAddr>,
    /// The URL the other replicas reach this one at.
    pub advertise_url: Option<String>,
    /// Database URL (`sqlite://...` or `postgres://...`).
    pub database_url: Option<String>,
    /// Data directory.
    pub data_dir: Option<PathBuf>,
    /// Built frontend directory.
    pub static_dir: Option<PathBuf>,
    /// The URL people open; an `https` URL marks cookies `Secure` and is the only accepted
    /// Origin for state-changing requests and WebSocket upgrades.
    pub public_url: Option<String>,
    /// Secret for signing session cookies (at least 64 characters); generated into the data
    /// directory when absent. Set it (the same on every replica) when running several.
    pub session_secret: Option<String>,
    /// Minutes a Flight request waits for approval before it expires (default 60).
    pub approval_expiry_minutes: Option<u32>,
    /// Seconds between sweeps (default 5).
    pub sweep_interval_seconds: Option<u64>,
    /// Seconds activation may wait for the debug container to run (default 60).
    pub activation_timeout_seconds: Option<u64>,
    /// Seconds a break-glass object in a cluster must have existed before the sweep may judge
    /// it an orphan and remove it (default 60).
    pub orphan_min_age_seconds: Option<u64>,
    /// Requested-duration bounds per tier.
    #[serde(default)]
    pub durations: TierDurations,
    /// Dev login (demo users, no password). Off unless enabled here or by `--dev`.
    #[serde(default)]
    pub dev_login: DevLoginConfig,
    /// Addresses of auth proxies whose `X-Auth-Request-User` / `-Groups` headers are trusted.
    #[serde(default)]
    pub trusted_proxies: Vec<IpNet>,
    /// The widest range `trusted_proxies` may hold, as a minimum prefix length per address
    /// family (default /8 for IPv4, /32 for IPv6).
    #[serde(default)]
    pub trusted_proxies_min_prefix: TrustedProxiesMinPrefix,
    /// Sign-in through an identity provider (`[auth.oidc]`).
    #[serde(default)]
    pub auth: AuthSectionConfig,
    /// The debug image, pinned by digest (`repo@sha256:...`); default [`DEFAULT_DEBUG_IMAGE`].
    /// The admission policies admit exactly this image.
    pub debug_image: Option<String>,
    /// Namespace the server runs in on its home cluster (never debuggable; holds its Lease).
    pub server_namespace: Option<String>,
    /// How sessions are recorded (`[recording]`).
    #[serde(default)]
    pub recording: RecordingFileConfig,
    /// Environments (one cluster each).
    #[serde(default)]
    pub environments: Vec<EnvironmentConfig>,
    /// `[limits]`: how much one client may hold of the server.
    #[serde(default)]
    pub limits: LimitsFileConfig,
    /// `[notifications]`: receivers and retries.
    #[serde(default)]
    pub notifications: NotificationsFile,
}

/// `[limits]` as written in the file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsFileConfig {
    /// Seconds a request's head or body may take to arrive, and a read (GET) may take to answer
    /// (default 30; 1 to 600).
    pub request_timeout_seconds: Option<u64>,
    /// Live-update streams (`GET /events`, one per open tab) one user may hold open on one
    /// replica (default 16; 1 to 1000).
    pub live_streams_per_user: Option<u64>,
    /// Connections the server holds open at once, whatever they carry (default 16384; 16 to
    /// 1000000); past it a new one is closed as it is accepted.
    pub connections: Option<u64>,
    /// Connections one client address (an IPv6 client's /64) holds open at once (default
    /// 4096; 1 to `connections`); the trusted proxies count in `connections` only.
    pub connections_per_address: Option<u64>,
}

/// The resolved `[limits]`.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// See [`LimitsFileConfig::request_timeout_seconds`].
    pub request_timeout: std::time::Duration,
    /// See [`LimitsFileConfig::live_streams_per_user`].
    pub live_streams_per_user: usize,
    /// See [`LimitsFileConfig::connections`].
    pub connections: usize,
    /// See [`LimitsFileConfig::connections_per_address`].
    pub connections_per_address: usize,
}

impl LimitsFileConfig {
    fn resolve(self) -> Result<Limits, ConfigError> {
        let t = within(
            "limits.request_timeout_seconds",
            self.request_timeout_seconds.unwrap_or(30),
            1,
            600,
        )?;
        let n = within(
            "limits.live_streams_per_user",
            self.live_streams_per_user.unwrap_or(16),
            1,
            1000,
        )?;
        let total = within(
            "limits.connections",
            self.connections.unwrap_or(16_384),
            16,
            1_000_000,
        )?;
        let per_address = within(
            "limits.connections_per_address",
            self.connections_per_address.unwrap_or(4096.min(total)),
            1,
            total,
        )?;
        let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        Ok(Limits {
            request_timeout: std::time::Duration::from_secs(t),
            live_streams_per_user: size(n),
            connections: size(total),
            connections_per_address: size(per_address),
        })
    }
}

/// The resolved configuration the server runs with.
#[derive(Debug, Clone)]
pub struct Config {
    /// Listen address.
    pub listen: SocketAddr,
    /// Where the other replicas reach this one (a watcher there is served from here).
    pub advertise_url: Option<url::Url>,
    /// Database URL.
    pub database_url: String,
    /// Data directory.
    pub data_dir: PathBuf,
    /// Built frontend.
    pub static_dir: PathBuf,
    /// Public URL, if configured.
    pub public_url: Option<PublicUrl>,
    /// Cookie signing secret, if configured (else generated in the data dir).
    pub session_secret: Option<String>,
    /// Approval expiry.
    pub approval_expiry: time::Duration,
    /// Sweep interval.
    pub sweep_interval: std::time::Duration,
    /// Bound on waiting for the debug container.
    pub activation_timeout: std::time::Duration,
    /// Age below which the sweep leaves a break-glass object without a live session alone.
    pub orphan_min_age: std::time::Duration,
    /// Duration bounds.
    pub durations: TierDurations,
    /// Dev login on.
    pub dev_login: bool,
    /// Demo users.
    pub dev_users: Vec<DevUser>,
    /// The dev login is on beside a real sign-in, by `dev_login.unsafe_beside_real_sign_in`.
    pub dev_login_beside_real_sign_in: bool,
    /// Trusted proxies.
    pub trusted_proxies: Vec<IpNet>,
    /// OIDC login, when `[auth.oidc]` is configured.
    pub oidc: Option<OidcSettings>,
    /// `auth.case_insensitive_names`: signed-in names are lower-cased (as the configuration's
    /// were when it was read).
    pub fold_names: bool,
    /// Environments in configuration order.
    pub environments: Vec<Environment>,
    /// The pinned debug image.
    pub debug_image: String,
    /// The server's own namespace.
    pub server_namespace: String,
    /// The `[recording]` section.
    pub recording: RecordingSettings,
    /// `--no-clusters`: requests in environments without a cluster wait instead of failing.
    pub no_clusters: bool,
    /// `[limits]`.
    pub limits: Limits,
    /// Notification receivers and retries.
    pub notifications: Notifications,
}

impl Config {
    /// Reads the file named by the flags (if any), applies flags over it, fills defaults and
    /// checks everything.
    pub fn load(args: &ServeArgs) -> Result<Config, ConfigError> {
        let file = match &args.config {
            Some(path) => read_file(path)?,
            None => FileConfig::default(),
        };
        Config::resolve(args, file)
    }

    /// Applies flags over a parsed file and checks everything. The sections are resolved in
    /// the order their keys were always checked, so with several bad keys the same one is
    /// named first.
    pub fn resolve(args: &ServeArgs, file: FileConfig) -> Result<Config, ConfigError> {
        let FileConfig {
            listen,
            advertise_url,
            database_url,
            data_dir,
            static_dir,
            public_url,
            session_secret,
            approval_expiry_minutes,
            sweep_interval_seconds,
            activation_timeout_seconds,
            orphan_min_age_seconds,
            durations,
            dev_login,
            trusted_proxies,
            trusted_proxies_min_prefix,
            auth: auth_section,
            debug_image,
            server_namespace,
            recording,
            environments,
            limits,
            notifications,
        } = file;
        let server = server::ServerFile {
            listen,
            advertise_url,
            database_url,
            data_dir,
            static_dir,
        }
        .resolve(args)?;
        let auth = auth::AuthFile {
            public_url,
            session_secret,
            trusted_proxies,
            trusted_proxies_min_prefix,
        }
        .resolve()?;
        let sessions = sessions::SessionsFile {
            durations,
            approval_expiry_minutes,
            sweep_interval_seconds,
            activation_timeout_seconds,
            orphan_min_age_seconds,
        }
        .resolve()?;
        let fold_names = auth_section.case_insensitive_names.unwrap_or(true);
        let real_sign_in = if auth_section.oidc.is_some() {
            Some("[auth.oidc]")
        } else if auth.public_url.as_ref().is_some_and(|p| p.secure) {
            Some("an https public_url")
        } else {
            None
        };
        let dev = dev_login.resolve(args.dev, fold_names, real_sign_in)?;
        let envs = environments::EnvironmentsFile {
            debug_image,
            server_namespace,
            environments,
        }
        .resolve(args.dev, fold_names)?;
        environments::step_up_needs_a_secure_origin(&envs.environments, auth.public_url.as_ref())?;
        let recording = recording.resolve(&server.data_dir)?;
        let notifications = notifications.resolve()?;
        notifications.check_routes(envs.environments.iter().enumerate().flat_map(|(i, e)| {
            [
                (
                    format!("environments[{i}].notify"),
                    e.notify.receivers.as_slice(),
                ),
                (
                    format!("environments[{i}].escalate_to"),
                    e.notify.escalate_to.as_slice(),
                ),
            ]
        }))?;
        let oidc = auth_section
            .oidc
            .map(|o| o.resolve(args.oidc_client_secret.as_deref()))
            .transpose()?;
        Ok(Config {
            recording,
            listen: server.listen,
            advertise_url: server.advertise_url,
            database_url: server.database_url,
            data_dir: server.data_dir,
            static_dir: server.static_dir,
            public_url: auth.public_url,
            session_secret: auth.session_secret,
            approval_expiry: sessions.approval_expiry,
            sweep_interval: sessions.sweep_interval,
            activation_timeout: sessions.activation_timeout,
            orphan_min_age: sessions.orphan_min_age,
            durations: sessions.durations,
            dev_login: dev.enabled,
            dev_users: dev.users,
            dev_login_beside_real_sign_in: dev.beside_real_sign_in,
            trusted_proxies: auth.trusted_proxies,
            oidc,
            fold_names,
            environments: envs.environments,
            debug_image: envs.debug_image,
            server_namespace: envs.server_namespace,
            no_clusters: args.no_clusters,
            limits: limits.resolve()?,
            notifications,
        })
    }

    /// The environment called `name`.
    pub fn environment(&self, name: &str) -> Option<&Environment> {
        self.environments.iter().find(|e| e.name == name)
    }
}

fn read_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new("config", format!("cannot read {}: {e}", path.display())))?;
    toml::from_str(&text).map_err(|e| {
        let key = e.span().map_or_else(
            || "config".to_string(),
            |s| {
                let line = text[..s.start.min(text.len())].lines().count().max(1);
                format!("{} line {line}", path.display())
            },
        );
        ConfigError::new(key, e.message().to_string())
    })
}

/// `text` as a config file, resolved with no flags (for the section tests).
#[cfg(test)]
fn parse(text: &str) -> Result<Config, ConfigError> {
    let file: FileConfig =
        toml::from_str(text).map_err(|e| ConfigError::new("toml", e.to_string()))?;
    Config::resolve(&ServeArgs::default(), file)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
