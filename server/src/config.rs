//! Configuration: command-line flags with environment fallbacks, over an optional TOML file,
//! over defaults. A bad configuration stops the server at start with the key and the reason.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use breakglass_shared::validate::{self, DurationBounds};
use breakglass_shared::{Permission, PermissionSet, Tier};
use ipnet::IpNet;
use serde::Deserialize;

use crate::recording::{RecordingSettings, TransparencyLogSettings};

/// Flags of `breakglass-server serve` (each also read from its environment variable).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    /// TOML configuration file; everything has a default without one.
    #[arg(long, env = "BREAKGLASS_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to listen on (default 127.0.0.1:8080).
    #[arg(long, env = "BREAKGLASS_LISTEN")]
    pub listen: Option<SocketAddr>,
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

/// The TOML file. Every key is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Address to listen on.
    pub listen: Option<SocketAddr>,
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
    /// Requested-duration bounds per tier.
    #[serde(default)]
    pub durations: TierDurations,
    /// Dev login (demo users, no password). Off unless enabled here or by `--dev`.
    #[serde(default)]
    pub dev_login: DevLoginConfig,
    /// Addresses of auth proxies whose `X-Auth-Request-User` / `-Groups` headers are trusted.
    #[serde(default)]
    pub trusted_proxies: Vec<IpNet>,
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
}

/// `[recording]`: how the terminal is recorded. Where recordings go is chosen by the
/// `TOWER_BREAKGLASS_MINIO_*` environment variables (an S3 bucket when the endpoint is set),
/// else `local_dir`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordingFileConfig {
    /// Seconds between stored versions of a live recording (default 5).
    pub flush_interval_seconds: Option<u64>,
    /// Largest recording in bytes (default 64 MiB); past it the session ends.
    pub max_bytes: Option<u64>,
    /// Most unstored bytes kept in memory while the store fails (default 16 MiB); past it the
    /// session ends (`RecordingFailed`) with everything stored up to then kept.
    pub spool_limit_bytes: Option<u64>,
    /// Record what the person types (`"i"` events) as well as what the terminal shows
    /// (default false).
    pub record_input: Option<bool>,
    /// First retry delay after a failed store, in milliseconds (default 500), doubled per try.
    pub retry_initial_ms: Option<u64>,
    /// Longest retry delay in seconds (default 10).
    pub retry_max_seconds: Option<u64>,
    /// Seconds the end of a session keeps trying to store the final version (default 60).
    pub finish_timeout_seconds: Option<u64>,
    /// Days each stored version is locked in the bucket (GOVERNANCE; default 365).
    pub retention_days: Option<u32>,
    /// Directory of the local store (default `<data_dir>/recordings`).
    pub local_dir: Option<PathBuf>,
    /// A Rekor-compatible transparency log for the final hashes; none when absent.
    pub transparency_log: Option<TransparencyLogFileConfig>,
}

/// `[recording.transparency_log]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransparencyLogFileConfig {
    /// Base URL of the log (`https://rekor.example`), without `/api/v1`.
    pub url: String,
    /// PEM file with the server's ECDSA P-256 private key (PKCS#8) that signs entries
    /// (default `<data_dir>/recording-signing.pem`, created on first start). Replicas must
    /// share it.
    pub signing_key: Option<PathBuf>,
    /// Seconds one request to the log may take (default 10).
    pub timeout_seconds: Option<u64>,
    /// PEM file with the log's own public key; entry timestamps are checked against it
    /// (without it, against the key the log serves at `/api/v1/log/publicKey`).
    pub log_public_key: Option<PathBuf>,
}

impl RecordingFileConfig {
    /// Checks every key (named as `recording.<key>` in errors) and fills defaults.
    fn resolve(self, data_dir: &Path) -> Result<RecordingSettings, ConfigError> {
        use std::time::Duration;
        let d = crate::recording::WriterConfig::default();
        let within = |key: &str, v: Option<u64>, min: u64, max: u64, default: u64| {
            let v = v.unwrap_or(default);
            if v < min || v > max {
                return Err(ConfigError::new(
                    format!("recording.{key}"),
                    format!("must be between {min} and {max}"),
                ));
            }
            Ok(v)
        };
        const MIB: u64 = 1024 * 1024;
        let flush = within(
            "flush_interval_seconds",
            self.flush_interval_seconds,
            1,
            300,
            5,
        )?;
        let max_bytes = within(
            "max_bytes",
            self.max_bytes,
            64 * 1024,
            4096 * MIB,
            d.max_bytes as u64,
        )?;
        let spool = within(
            "spool_limit_bytes",
            self.spool_limit_bytes,
            64 * 1024,
            4096 * MIB,
            d.spool_limit as u64,
        )?;
        let retry_initial = within("retry_initial_ms", self.retry_initial_ms, 10, 60_000, 500)?;
        let retry_max = within("retry_max_seconds", self.retry_max_seconds, 1, 600, 10)?;
        if retry_max * 1000 < retry_initial {
            return Err(ConfigError::new(
                "recording.retry_max_seconds",
                "must not be shorter than recording.retry_initial_ms",
            ));
        }
        let finish = within(
            "finish_timeout_seconds",
            self.finish_timeout_seconds,
            1,
            3600,
            60,
        )?;
        let retention_days = within(
            "retention_days",
            self.retention_days.map(u64::from),
            1,
            36_500,
            365,
        )?;
        let transparency_log = match self.transparency_log {
            None => None,
            Some(t) => {
                let url = t.url.trim().trim_end_matches('/').to_string();
                let rest = url
                    .strip_prefix("https://")
                    .or_else(|| url.strip_prefix("http://"));
                if rest.is_none_or(|r| r.is_empty()) {
                    return Err(ConfigError::new(
                        "recording.transparency_log.url",
                        "must be an http:// or https:// URL of a Rekor-compatible log",
                    ));
                }
                let timeout = within(
                    "transparency_log.timeout_seconds",
                    t.timeout_seconds,
                    1,
                    300,
                    10,
                )?;
                Some(TransparencyLogSettings {
                    url,
                    signing_key: t
                        .signing_key
                        .unwrap_or_else(|| data_dir.join("recording-signing.pem")),
                    timeout: Duration::from_secs(timeout),
                    log_public_key: t.log_public_key,
                })
            }
        };
        Ok(RecordingSettings {
            writer: crate::recording::WriterConfig {
                flush_interval: Duration::from_secs(flush),
                max_bytes: usize::try_from(max_bytes).unwrap_or(usize::MAX),
                spool_limit: usize::try_from(spool).unwrap_or(usize::MAX),
                record_input: self.record_input.unwrap_or(false),
                retry_initial: Duration::from_millis(retry_initial),
                retry_max: Duration::from_secs(retry_max),
                finish_timeout: Duration::from_secs(finish),
            },
            retention: Duration::from_secs(retention_days * 24 * 60 * 60),
            local_dir: self
                .local_dir
                .unwrap_or_else(|| data_dir.join("recordings")),
            transparency_log,
        })
    }
}

/// The debug toolbox image (`debug-image/`), pinned by digest. Keep in step with the admission
/// policy parameter and the Kyverno image policy (a test checks the three agree).
pub const DEFAULT_DEBUG_IMAGE: &str =
    "ghcr.io/hangar-platform/tower-debug@sha256:4f2b2bde4b1b8a4c5e0a6b0f4cf1d3f0f7a7f2d8c1e9b7a6d5c4b3a29180716f";

/// Namespaces no session may touch, on every cluster, besides the server's own.
pub const PROTECTED_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

/// Duration bounds per tier.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TierDurations {
    /// Ground bounds (default 5..=60, proposing 30).
    #[serde(default)]
    pub ground: DurationBounds,
    /// Flight bounds (default 5..=60, proposing 30).
    #[serde(default)]
    pub flight: DurationBounds,
}

impl TierDurations {
    /// Bounds for `tier`.
    pub fn for_tier(&self, tier: Tier) -> DurationBounds {
        match tier {
            Tier::Ground => self.ground,
            Tier::Flight => self.flight,
        }
    }
}

/// The dev login.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DevLoginConfig {
    /// On or off.
    #[serde(default)]
    pub enabled: bool,
    /// Demo users to pick from; three defaults (alice, bob, carol) when empty.
    #[serde(default)]
    pub users: Vec<DevUser>,
}

/// A demo user.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DevUser {
    /// User name.
    pub name: String,
    /// Groups.
    #[serde(default)]
    pub groups: Vec<String>,
}

/// Users and groups holding one permission.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Holders {
    /// User names.
    #[serde(default)]
    pub users: Vec<String>,
    /// Group names.
    #[serde(default)]
    pub groups: Vec<String>,
}

/// How the server reaches an environment's cluster. Used by activation; an environment without
/// one can take requests, but they stay `Approved` until a cluster is configured.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClusterCredentials {
    /// The pod's own service account (the server runs in this cluster).
    InCluster,
    /// A kubeconfig file and optional context (exec credential plugins included).
    Kubeconfig {
        /// Path of the kubeconfig.
        path: PathBuf,
        /// Context; the file's current context when absent.
        context: Option<String>,
    },
    /// A token minted per step with the TokenRequest API of the home cluster.
    MintedToken {
        /// Environment whose cluster is home (where the service account lives).
        home: String,
        /// Namespace of the service account there.
        namespace: String,
        /// Service account name there (e.g. `tower-actor`).
        service_account: String,
        /// Audience the target cluster expects.
        audience: String,
        /// API server URL of the target cluster.
        server: String,
        /// PEM file of the target cluster's CA.
        ca_file: Option<PathBuf>,
    },
}

/// One environment.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentConfig {
    /// Name (a DNS label), shown in the UI and used in URLs.
    pub name: String,
    /// `ground` or `flight`.
    pub tier: Tier,
    /// Cluster credentials.
    pub cluster: Option<ClusterCredentials>,
    /// Permission name → holders, e.g. `"tower.breakglass.approve" = { groups = ["sre"] }`.
    #[serde(default)]
    pub permissions: BTreeMap<String, Holders>,
    /// The server's username on this cluster, for rendering policies offline; activation and
    /// `doctor` learn it live with a SelfSubjectReview.
    pub identity: Option<String>,
    /// More namespaces no session may touch here (added to the standard protected ones).
    #[serde(default)]
    pub protected_namespaces: Vec<String>,
}

/// A resolved environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Environment {
    /// Name.
    pub name: String,
    /// Tier.
    pub tier: Tier,
    /// Cluster credentials.
    pub cluster: Option<ClusterCredentials>,
    /// Holders per permission.
    pub permissions: BTreeMap<Permission, Holders>,
    /// The server's username there, if configured.
    pub identity: Option<String>,
    /// Every protected namespace here: the standard ones, the server's own, the configured.
    pub protected_namespaces: Vec<String>,
}

impl Environment {
    /// What a user with these groups holds here.
    pub fn permissions_of(&self, user: &str, groups: &[String]) -> PermissionSet {
        let mut set = PermissionSet::NONE;
        for (p, h) in &self.permissions {
            if h.users.iter().any(|u| u == user) || h.groups.iter().any(|g| groups.contains(g)) {
                set.grant(*p);
            }
        }
        set
    }
}

/// The resolved configuration the server runs with.
#[derive(Debug, Clone)]
pub struct Config {
    /// Listen address.
    pub listen: SocketAddr,
    /// Database URL.
    pub database_url: String,
    /// Data directory.
    pub data_dir: PathBuf,
    /// Built frontend.
    pub static_dir: PathBuf,
    /// Public URL, if configured.
    pub public_url: Option<url_lite::PublicUrl>,
    /// Cookie signing secret, if configured (else generated in the data dir).
    pub session_secret: Option<String>,
    /// Approval expiry.
    pub approval_expiry: time::Duration,
    /// Sweep interval.
    pub sweep_interval: std::time::Duration,
    /// Bound on waiting for the debug container.
    pub activation_timeout: std::time::Duration,
    /// Duration bounds.
    pub durations: TierDurations,
    /// Dev login on.
    pub dev_login: bool,
    /// Demo users.
    pub dev_users: Vec<DevUser>,
    /// Trusted proxies.
    pub trusted_proxies: Vec<IpNet>,
    /// Environments in configuration order.
    pub environments: Vec<Environment>,
    /// The pinned debug image.
    pub debug_image: String,
    /// The server's own namespace.
    pub server_namespace: String,
    /// The `[recording]` section.
    pub recording: RecordingSettings,
}

/// Tiny parsed form of `public_url` (scheme and origin), kept here to avoid another dependency.
pub mod url_lite {
    /// The public URL split into what the server needs.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PublicUrl {
        /// `https://host[:port]`, compared with `Origin` headers.
        pub origin: String,
        /// Whether cookies are `Secure`.
        pub secure: bool,
    }

    /// Parses `http(s)://host[:port][/...]`.
    pub fn parse(s: &str) -> Option<PublicUrl> {
        let (scheme, rest) = s.split_once("://")?;
        if scheme != "http" && scheme != "https" {
            return None;
        }
        let host = rest.split('/').next().filter(|h| !h.is_empty())?;
        Some(PublicUrl {
            origin: format!("{scheme}://{host}"),
            secure: scheme == "https",
        })
    }
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

    /// Applies flags over a parsed file and checks everything.
    pub fn resolve(args: &ServeArgs, file: FileConfig) -> Result<Config, ConfigError> {
        let data_dir = args
            .data_dir
            .clone()
            .or(file.data_dir)
            .unwrap_or_else(|| PathBuf::from(".breakglass"));
        let database_url = args
            .database_url
            .clone()
            .or(file.database_url)
            .unwrap_or_else(|| format!("sqlite://{}", data_dir.join("breakglass.db").display()));
        if !(database_url.starts_with("sqlite:")
            || database_url.starts_with("postgres://")
            || database_url.starts_with("postgresql://"))
        {
            return Err(ConfigError::new(
                "database_url",
                "must start with sqlite:, postgres:// or postgresql://",
            ));
        }
        let public_url = match &file.public_url {
            Some(u) => Some(url_lite::parse(u).ok_or_else(|| {
                ConfigError::new("public_url", "must be an http:// or https:// URL")
            })?),
            None => None,
        };
        if let Some(s) = &file.session_secret {
            if s.len() < 64 {
                return Err(ConfigError::new(
                    "session_secret",
                    "must be at least 64 characters (e.g. `openssl rand -hex 32`)",
                ));
            }
        }
        for (tier, b) in [
            ("ground", file.durations.ground),
            ("flight", file.durations.flight),
        ] {
            if b.min_minutes == 0
                || b.min_minutes > b.default_minutes
                || b.default_minutes > b.max_minutes
            {
                return Err(ConfigError::new(
                    format!("durations.{tier}"),
                    "needs 0 < min_minutes <= default_minutes <= max_minutes",
                ));
            }
            if b.max_minutes > 24 * 60 {
                return Err(ConfigError::new(
                    format!("durations.{tier}.max_minutes"),
                    "must be at most 1440 (one day)",
                ));
            }
        }
        let approval_expiry_minutes = file.approval_expiry_minutes.unwrap_or(60);
        if approval_expiry_minutes == 0 {
            return Err(ConfigError::new(
                "approval_expiry_minutes",
                "must be at least 1",
            ));
        }
        let sweep = file.sweep_interval_seconds.unwrap_or(5);
        if sweep == 0 || sweep > 300 {
            return Err(ConfigError::new(
                "sweep_interval_seconds",
                "must be between 1 and 300",
            ));
        }
        let activation_timeout = file.activation_timeout_seconds.unwrap_or(60);
        if activation_timeout == 0 || activation_timeout > 900 {
            return Err(ConfigError::new(
                "activation_timeout_seconds",
                "must be between 1 and 900",
            ));
        }
        let dev_login = args.dev || file.dev_login.enabled;
        let mut dev_users = file.dev_login.users;
        for (i, u) in dev_users.iter().enumerate() {
            if u.name.trim().is_empty() || u.name.len() > 64 {
                return Err(ConfigError::new(
                    format!("dev_login.users[{i}].name"),
                    "must be 1 to 64 characters",
                ));
            }
        }
        if dev_login && dev_users.is_empty() {
            dev_users = demo_users();
        }
        let debug_image = file
            .debug_image
            .unwrap_or_else(|| DEFAULT_DEBUG_IMAGE.to_string());
        if !is_pinned_image(&debug_image) {
            return Err(ConfigError::new(
                "debug_image",
                "must be pinned by digest: REPOSITORY@sha256:<64 hex digits>",
            ));
        }
        let server_namespace = file
            .server_namespace
            .unwrap_or_else(|| "breakglass".to_string());
        validate::dns_label("server_namespace", &server_namespace)
            .map_err(|e| ConfigError::new("server_namespace", e.message))?;
        let mut raw_envs = file.environments;
        if raw_envs.is_empty() && args.dev {
            raw_envs = demo_environments();
        }
        let mut environments: Vec<Environment> = Vec::with_capacity(raw_envs.len());
        for (i, e) in raw_envs.into_iter().enumerate() {
            let key = format!("environments[{i}]");
            validate::dns_label("name", &e.name)
                .map_err(|err| ConfigError::new(format!("{key}.name"), err.message))?;
            if environments.iter().any(|x| x.name == e.name) {
                return Err(ConfigError::new(
                    format!("{key}.name"),
                    format!("`{}` is used twice", e.name),
                ));
            }
            let mut permissions = BTreeMap::new();
            for (name, holders) in e.permissions {
                let p = Permission::from_name(&name).ok_or_else(|| {
                    ConfigError::new(
                        format!("{key}.permissions.{name}"),
                        "unknown permission; use tower.breakglass.request, .approve, .terminate or .self",
                    )
                })?;
                permissions.insert(p, holders);
            }
            let mut protected: Vec<String> =
                PROTECTED_NAMESPACES.iter().map(|n| n.to_string()).collect();
            protected.push(server_namespace.clone());
            for (j, n) in e.protected_namespaces.iter().enumerate() {
                validate::dns_label("protected_namespaces", n).map_err(|err| {
                    ConfigError::new(format!("{key}.protected_namespaces[{j}]"), err.message)
                })?;
                if !protected.contains(n) {
                    protected.push(n.clone());
                }
            }
            environments.push(Environment {
                name: e.name,
                tier: e.tier,
                cluster: e.cluster,
                permissions,
                identity: e.identity,
                protected_namespaces: protected,
            });
        }
        for (i, e) in environments.iter().enumerate() {
            if let Some(ClusterCredentials::MintedToken { home, .. }) = &e.cluster {
                if !environments
                    .iter()
                    .any(|x| &x.name == home && x.name != e.name)
                {
                    return Err(ConfigError::new(
                        format!("environments[{i}].cluster.home"),
                        format!("`{home}` is not another configured environment"),
                    ));
                }
            }
        }
        let recording = file.recording.resolve(&data_dir)?;
        Ok(Config {
            recording,
            listen: args
                .listen
                .or(file.listen)
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080))),
            database_url,
            data_dir,
            static_dir: args
                .static_dir
                .clone()
                .or(file.static_dir)
                .unwrap_or_else(|| PathBuf::from("frontend/dist")),
            public_url,
            session_secret: file.session_secret,
            approval_expiry: time::Duration::minutes(i64::from(approval_expiry_minutes)),
            sweep_interval: std::time::Duration::from_secs(sweep),
            activation_timeout: std::time::Duration::from_secs(activation_timeout),
            durations: file.durations,
            dev_login,
            dev_users,
            trusted_proxies: file.trusted_proxies,
            environments,
            debug_image,
            server_namespace,
        })
    }

    /// The environment called `name`.
    pub fn environment(&self, name: &str) -> Option<&Environment> {
        self.environments.iter().find(|e| e.name == name)
    }
}

/// `REPOSITORY@sha256:<64 lowercase hex>`.
pub fn is_pinned_image(image: &str) -> bool {
    match image.rsplit_once("@sha256:") {
        Some((repo, digest)) => {
            !repo.is_empty()
                && digest.len() == 64
                && digest
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        }
        None => false,
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

/// The demo users of dev mode: alice requests, bob approves, carol is an admin.
pub fn demo_users() -> Vec<DevUser> {
    let u = |n: &str, g: &str| DevUser {
        name: n.into(),
        groups: vec![g.into()],
    };
    vec![
        u("alice", "engineers"),
        u("bob", "sre"),
        u("carol", "admins"),
    ]
}

/// The demo environments of dev mode: `dev` (Ground) and `prod` (Flight).
pub fn demo_environments() -> Vec<EnvironmentConfig> {
    let holders = |groups: &[&str]| Holders {
        users: vec![],
        groups: groups.iter().map(|g| g.to_string()).collect(),
    };
    let perms = || {
        BTreeMap::from([
            (
                Permission::Request.name().to_string(),
                holders(&["engineers", "sre", "admins"]),
            ),
            (
                Permission::Approve.name().to_string(),
                holders(&["sre", "admins"]),
            ),
            (
                Permission::Terminate.name().to_string(),
                holders(&["admins"]),
            ),
            (
                Permission::SelfApprove.name().to_string(),
                holders(&["admins"]),
            ),
        ])
    };
    vec![
        EnvironmentConfig {
            name: "dev".into(),
            tier: Tier::Ground,
            cluster: None,
            permissions: perms(),
            identity: None,
            protected_namespaces: vec![],
        },
        EnvironmentConfig {
            name: "prod".into(),
            tier: Tier::Flight,
            cluster: None,
            permissions: perms(),
            identity: None,
            protected_namespaces: vec![],
        },
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        let file: FileConfig =
            toml::from_str(text).map_err(|e| ConfigError::new("toml", e.to_string()))?;
        Config::resolve(&ServeArgs::default(), file)
    }

    #[test]
    fn no_config_at_all_gives_sqlite_in_the_data_dir_and_no_dev_login() {
        let c = Config::resolve(&ServeArgs::default(), FileConfig::default()).unwrap();
        assert_eq!(c.database_url, "sqlite://.breakglass/breakglass.db");
        assert!(!c.dev_login);
        assert!(c.environments.is_empty());
        let dev = Config::resolve(
            &ServeArgs {
                dev: true,
                ..Default::default()
            },
            FileConfig::default(),
        )
        .unwrap();
        assert!(dev.dev_login);
        assert_eq!(dev.dev_users.len(), 3);
        assert_eq!(dev.environments.len(), 2);
    }

    #[test]
    fn bad_keys_are_named() {
        let cases = [
            ("[[environments]]\nname = \"Prod\"\ntier = \"flight\"", "environments[0].name"),
            ("[[environments]]\nname = \"a\"\ntier = \"flight\"\n[[environments]]\nname = \"a\"\ntier = \"ground\"", "environments[1].name"),
            ("[[environments]]\nname = \"a\"\ntier = \"flight\"\n[environments.permissions]\n\"tower.breakglass.exec\" = {}", "environments[0].permissions.tower.breakglass.exec"),
            ("session_secret = \"short\"", "session_secret"),
            ("[durations.flight]\nmin_minutes = 10\nmax_minutes = 5\ndefault_minutes = 7", "durations.flight"),
            ("database_url = \"mysql://x\"", "database_url"),
            ("approval_expiry_minutes = 0", "approval_expiry_minutes"),
            ("debug_image = \"alpine:latest\"", "debug_image"),
            ("[[environments]]\nname = \"a\"\ntier = \"flight\"\nprotected_namespaces = [\"Bad\"]", "environments[0].protected_namespaces[0]"),
            ("[recording]\nflush_interval_seconds = 0", "recording.flush_interval_seconds"),
            ("[recording]\nspool_limit_bytes = 10", "recording.spool_limit_bytes"),
            ("[recording]\nretry_initial_ms = 5000\nretry_max_seconds = 2", "recording.retry_max_seconds"),
            ("[recording]\nretention_days = 0", "recording.retention_days"),
            ("[recording.transparency_log]\nurl = \"rekor.example\"", "recording.transparency_log.url"),
            ("[recording.transparency_log]\nurl = \"https://r\"\ntimeout_seconds = 0", "recording.transparency_log.timeout_seconds"),
        ];
        for (text, key) in cases {
            let e = parse(text)
                .err()
                .unwrap_or_else(|| panic!("accepted: {text}"));
            assert_eq!(e.key, key, "{text}");
        }
        // Unknown keys and bad tiers are refused by the parser, with the line.
        let e = read_text_err("listen_adress = \"x\"");
        assert!(e.reason.contains("unknown field"), "{e}");
        let e = read_text_err("[[environments]]\nname = \"a\"\ntier = \"orbit\"");
        assert!(
            e.reason.contains("orbit") || e.reason.contains("variant"),
            "{e}"
        );
        assert!(e.key.contains("line 3"), "{e}");
    }

    fn read_text_err(text: &str) -> ConfigError {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        std::fs::write(&p, text).unwrap();
        read_file(&p).err().unwrap()
    }

    #[test]
    fn recording_section_defaults_and_values() {
        let c = parse("").unwrap();
        assert_eq!(
            c.recording.writer,
            crate::recording::WriterConfig::default()
        );
        assert_eq!(
            c.recording.local_dir,
            PathBuf::from(".breakglass/recordings")
        );
        assert_eq!(c.recording.retention.as_secs(), 365 * 86_400);
        assert!(c.recording.transparency_log.is_none());
        let c = parse(
            "[recording]\nflush_interval_seconds = 2\nrecord_input = true\nmax_bytes = 1048576\nspool_limit_bytes = 65536\nretry_initial_ms = 100\nretry_max_seconds = 3\nfinish_timeout_seconds = 9\nretention_days = 30\nlocal_dir = \"/srv/rec\"\n[recording.transparency_log]\nurl = \"http://127.0.0.1:3000/\"\nlog_public_key = \"/etc/rekor.pub\"",
        )
        .unwrap();
        let w = &c.recording.writer;
        assert_eq!(w.flush_interval.as_secs(), 2);
        assert!(w.record_input);
        assert_eq!((w.max_bytes, w.spool_limit), (1_048_576, 65_536));
        assert_eq!(w.retry_initial.as_millis(), 100);
        assert_eq!((w.retry_max.as_secs(), w.finish_timeout.as_secs()), (3, 9));
        assert_eq!(c.recording.retention.as_secs(), 30 * 86_400);
        assert_eq!(c.recording.local_dir, PathBuf::from("/srv/rec"));
        let t = c.recording.transparency_log.unwrap();
        assert_eq!(t.url, "http://127.0.0.1:3000");
        assert_eq!(
            t.signing_key,
            PathBuf::from(".breakglass/recording-signing.pem")
        );
        assert_eq!(t.timeout.as_secs(), 10);
        assert_eq!(t.log_public_key, Some(PathBuf::from("/etc/rekor.pub")));
    }

    #[test]
    fn permissions_by_user_and_group() {
        let c = parse(
            "[[environments]]\nname = \"prod\"\ntier = \"flight\"\n[environments.permissions]\n\"tower.breakglass.approve\" = { users = [\"dan\"], groups = [\"sre\"] }\n\"tower.breakglass.request\" = { groups = [\"eng\"] }",
        )
        .unwrap();
        let env = c.environment("prod").unwrap();
        assert!(env.permissions_of("dan", &[]).approve);
        assert!(env.permissions_of("x", &["sre".into()]).approve);
        let eng = env.permissions_of("x", &["eng".into()]);
        assert!(eng.request && !eng.approve);
    }
}
