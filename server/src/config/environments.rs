//! The clusters sessions run on: `[[environments]]`, and the keys that hold on every one of
//! them, `debug_image` and `server_namespace`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use breakglass_shared::session::Quorum;
use breakglass_shared::{names, validate};
use breakglass_shared::{Permission, PermissionSet, Tier};
use serde::Deserialize;

use super::ConfigError;

/// The debug toolbox image (`debug-image/`), pinned by digest. Keep in step with the admission
/// policy parameter and the Kyverno image policy (a test checks the three agree).
pub const DEFAULT_DEBUG_IMAGE: &str =
    "ghcr.io/hangar-platform/tower-debug@sha256:4f2b2bde4b1b8a4c5e0a6b0f4cf1d3f0f7a7f2d8c1e9b7a6d5c4b3a29180716f";

/// Namespaces no session may touch, on every cluster, besides the server's own.
pub const PROTECTED_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

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

/// How the server reaches an environment's cluster. Used by activation; in an environment
/// without one, requests fail at once (or, with `--no-clusters`, wait in `Approved`).
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

impl ClusterCredentials {
    /// How the server reaches the cluster, for people who are not its admins: the kind of
    /// credentials, without the server's files or the cluster's address.
    pub fn describe_briefly(&self) -> String {
        match self {
            ClusterCredentials::InCluster => "the server's in-cluster service account".into(),
            ClusterCredentials::Kubeconfig { context, .. } => match context {
                Some(c) => format!("a kubeconfig (context {c})"),
                None => "a kubeconfig".into(),
            },
            ClusterCredentials::MintedToken { home, .. } => {
                format!("tokens minted by `{home}`")
            }
        }
    }

    /// How the server reaches the cluster, for its admins (no secret in it, but the server's
    /// file paths and the cluster's address: see [`ClusterCredentials::describe_briefly`]).
    pub fn describe(&self) -> String {
        match self {
            ClusterCredentials::InCluster => "the server's in-cluster service account".into(),
            ClusterCredentials::Kubeconfig { path, context } => match context {
                Some(c) => format!("kubeconfig {} (context {c})", path.display()),
                None => format!("kubeconfig {}", path.display()),
            },
            ClusterCredentials::MintedToken {
                home,
                server,
                service_account,
                ..
            } => format!("{server}, with tokens of {service_account} minted by `{home}`"),
        }
    }
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
    /// Approvals a Flight request needs here (1 to 5; default 1).
    #[serde(default)]
    pub approvals_required: Option<u8>,
    /// Whether each approval must come through a group holding `approve` here that no earlier
    /// approval came through.
    #[serde(default)]
    pub approvers_from_distinct_groups: bool,
    /// Whether approving, breaking the glass, terminating and approving more time here need a
    /// fresh assertion of one of the person's security keys (suggested for Flight).
    #[serde(default)]
    pub step_up: bool,
    /// Whether a running session's input reaches the pod only while an approver other than
    /// the requester watches its terminal live (suggested for Flight; off by default).
    #[serde(default)]
    pub moderated: bool,
    /// Whether holders of `tower.breakglass.audit` here may watch running sessions live too
    /// (approvers and admins always may).
    #[serde(default)]
    pub auditors_watch: bool,
    /// Receivers (`[notifications]` names) that get every event here.
    #[serde(default)]
    pub notify: Vec<String>,
    /// Receivers told when a request waits past `escalate_after_minutes`.
    #[serde(default)]
    pub escalate_to: Vec<String>,
    /// Minutes a Flight request waits before the `notify` receivers get a reminder (none when
    /// absent).
    pub remind_after_minutes: Option<u32>,
    /// Minutes a Flight request waits before `escalate_to` is told (none when absent).
    pub escalate_after_minutes: Option<u32>,
    /// Hours after its end a glass-broken session's review is overdue (default 168, a week).
    pub review_within_hours: Option<u32>,
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
    /// What a Flight request's approval needs here.
    pub quorum: Quorum,
    /// Whether the actions of `breakglass_shared::step_up::StepUpAction` need a security key.
    pub step_up: bool,
    /// Whether input waits for an approver watching (see `EnvironmentConfig::moderated`).
    pub moderated: bool,
    /// Whether auditors may watch running sessions here.
    pub auditors_watch: bool,
    /// Who is told of what happens here.
    pub notify: super::notifications::Route,
}

impl Environment {
    /// Those of `groups` that hold `approve` here: the groups an approval can count through.
    pub fn approving_groups(&self, groups: &[String]) -> Vec<String> {
        self.permissions
            .get(&Permission::Approve)
            .map(|h| {
                groups
                    .iter()
                    .filter(|g| h.groups.contains(g))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

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

/// The demo environments of dev mode: `dev` (Ground) and `prod` (Flight).
pub fn demo_environments() -> Vec<EnvironmentConfig> {
    let holders = |groups: &[&str]| Holders {
        users: vec![],
        groups: groups
            .iter()
            .map(std::string::ToString::to_string)
            .collect(),
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
    let demo = |name: &str, tier| EnvironmentConfig {
        name: name.into(),
        tier,
        cluster: None,
        permissions: perms(),
        identity: None,
        protected_namespaces: vec![],
        approvals_required: None,
        approvers_from_distinct_groups: false,
        step_up: false,
        moderated: false,
        auditors_watch: false,
        notify: vec![],
        escalate_to: vec![],
        remind_after_minutes: None,
        escalate_after_minutes: None,
        review_within_hours: None,
    };
    vec![demo("dev", Tier::Ground), demo("prod", Tier::Flight)]
}

/// The file's keys of this section.
pub(super) struct EnvironmentsFile {
    pub debug_image: Option<String>,
    pub server_namespace: Option<String>,
    pub environments: Vec<EnvironmentConfig>,
}

/// The resolved section.
pub(super) struct Environments {
    pub debug_image: String,
    pub server_namespace: String,
    pub environments: Vec<Environment>,
}

impl EnvironmentsFile {
    /// Checks the image pin, the namespace and every environment (the demo ones under `--dev`
    /// (`dev`) when none is configured), then that each minted-token home is another one.
    /// Granted user names are normalised as signed-in names are (`fold_names`).
    pub fn resolve(self, dev: bool, fold_names: bool) -> Result<Environments, ConfigError> {
        let debug_image = self
            .debug_image
            .unwrap_or_else(|| DEFAULT_DEBUG_IMAGE.to_string());
        if !is_pinned_image(&debug_image) {
            return Err(ConfigError::new(
                "debug_image",
                "must be pinned by digest: REPOSITORY@sha256:<64 hex digits>",
            ));
        }
        let server_namespace = self
            .server_namespace
            .unwrap_or_else(|| "breakglass".to_string());
        validate::dns_label("server_namespace", &server_namespace)
            .map_err(|e| ConfigError::new("server_namespace", e.message))?;
        let mut raw = self.environments;
        if raw.is_empty() && dev {
            raw = demo_environments();
        }
        let mut environments: Vec<Environment> = Vec::with_capacity(raw.len());
        for (i, e) in raw.into_iter().enumerate() {
            let env = e.resolve(
                &format!("environments[{i}]"),
                &server_namespace,
                &environments,
                fold_names,
            )?;
            environments.push(env);
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
        Ok(Environments {
            debug_image,
            server_namespace,
            environments,
        })
    }
}

impl EnvironmentConfig {
    /// Checks the name (also against the `earlier` environments), the permission names and
    /// the protected namespaces (errors name keys under `key`), and adds the standard
    /// protected namespaces and `server_namespace`.
    fn resolve(
        self,
        key: &str,
        server_namespace: &str,
        earlier: &[Environment],
        fold_names: bool,
    ) -> Result<Environment, ConfigError> {
        validate::dns_label("name", &self.name)
            .map_err(|err| ConfigError::new(format!("{key}.name"), err.message))?;
        if earlier.iter().any(|x| x.name == self.name) {
            return Err(ConfigError::new(
                format!("{key}.name"),
                format!("`{}` is used twice", self.name),
            ));
        }
        let mut permissions = BTreeMap::new();
        for (name, mut holders) in self.permissions {
            let p = Permission::from_name(&name).ok_or_else(|| {
                ConfigError::new(
                    format!("{key}.permissions.{name}"),
                    "unknown permission; use tower.breakglass.request, .approve, .terminate, .self or .audit",
                )
            })?;
            for (j, u) in holders.users.iter_mut().enumerate() {
                *u = names::normalise(u, fold_names).map_err(|e| {
                    ConfigError::new(
                        format!("{key}.permissions.{name}.users[{j}]"),
                        e.to_string(),
                    )
                })?;
            }
            permissions.insert(p, holders);
        }
        let mut protected: Vec<String> = PROTECTED_NAMESPACES
            .iter()
            .map(std::string::ToString::to_string)
            .collect();
        protected.push(server_namespace.to_string());
        for (j, n) in self.protected_namespaces.iter().enumerate() {
            validate::dns_label("protected_namespaces", n).map_err(|err| {
                ConfigError::new(format!("{key}.protected_namespaces[{j}]"), err.message)
            })?;
            if !protected.contains(n) {
                protected.push(n.clone());
            }
        }
        let required = self.approvals_required.unwrap_or(1);
        if !(1..=5).contains(&required) {
            return Err(ConfigError::new(
                format!("{key}.approvals_required"),
                "must be 1 to 5",
            ));
        }
        if self.tier == Tier::Ground && (required > 1 || self.approvers_from_distinct_groups) {
            return Err(ConfigError::new(
                format!("{key}.approvals_required"),
                "a Ground environment approves its requests at once; a quorum is for Flight",
            ));
        }
        Ok(Environment {
            name: self.name,
            tier: self.tier,
            cluster: self.cluster,
            permissions,
            identity: self.identity,
            protected_namespaces: protected,
            quorum: Quorum {
                required,
                distinct_groups: self.approvers_from_distinct_groups,
            },
            step_up: self.step_up,
            moderated: self.moderated,
            auditors_watch: self.auditors_watch,
            notify: super::notifications::Route::resolve(
                key,
                self.notify,
                self.escalate_to,
                self.remind_after_minutes,
                self.escalate_after_minutes,
                self.review_within_hours,
            )?,
        })
    }
}

/// Security keys answer only a secure page whose host is a domain: an environment that asks
/// for them needs `public_url` on https or on `localhost` (the default without one).
pub(super) fn step_up_needs_a_secure_origin(
    environments: &[Environment],
    public_url: Option<&super::PublicUrl>,
) -> Result<(), ConfigError> {
    let Some(i) = environments.iter().position(|e| e.step_up) else {
        return Ok(());
    };
    match public_url {
        Some(p)
            if !p.secure
                && p.origin != "http://localhost"
                && !p.origin.starts_with("http://localhost:") =>
        {
            Err(ConfigError::new(
                format!("environments[{i}].step_up"),
                format!(
                    "security keys need the server on https (public_url is {}), or on \
                     http://localhost",
                    p.origin
                ),
            ))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::parse;

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
