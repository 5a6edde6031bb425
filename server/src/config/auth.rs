//! Who may come in and how they are recognised: `public_url`, `session_secret`,
//! `trusted_proxies`, `[dev_login]` and `[auth.oidc]`.

use std::path::PathBuf;

use breakglass_shared::names;
use ipnet::IpNet;
use serde::Deserialize;
use url::Url;

use super::proxies::TrustedProxiesMinPrefix;
use super::token_keys::TokenKeys;
use super::ConfigError;

/// `public_url` in the form the server compares and reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl {
    /// `https://host[:port]` as a browser sends it in `Origin` (lowercase host, no default
    /// port), compared with `Origin` headers.
    pub origin: String,
    /// Whether cookies are `Secure`.
    pub secure: bool,
}

impl PublicUrl {
    /// Parses `http(s)://host[:port][/...]`. The scheme must be written in lowercase and the
    /// host must follow `//` directly (`https:host` and `https:///host`, which the URL
    /// standard would repair, are refused), so a mistyped value stops the server instead of
    /// becoming an Origin that no browser sends.
    pub fn parse(s: &str) -> Option<PublicUrl> {
        let rest = s
            .strip_prefix("https://")
            .or_else(|| s.strip_prefix("http://"))?;
        if rest.starts_with('/') {
            return None;
        }
        let url = Url::parse(s).ok()?;
        Some(PublicUrl {
            origin: url.origin().ascii_serialization(),
            secure: url.scheme() == "https",
        })
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
    /// Lets the dev login run beside a real sign-in (`[auth.oidc]` or an https `public_url`),
    /// which it otherwise refuses: such a server looks like production, and the dev login
    /// there lets anyone in as anyone. For test installs that need both; logged at start.
    #[serde(default)]
    pub unsafe_beside_real_sign_in: bool,
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

/// The file's top-level keys of this section (`[dev_login]` resolves on its own).
pub(super) struct AuthFile {
    pub public_url: Option<String>,
    pub session_secret: Option<String>,
    pub trusted_proxies: Vec<IpNet>,
    pub trusted_proxies_min_prefix: TrustedProxiesMinPrefix,
}

/// The resolved top-level keys.
pub(super) struct Auth {
    pub public_url: Option<PublicUrl>,
    pub session_secret: Option<String>,
    pub trusted_proxies: Vec<IpNet>,
}

impl AuthFile {
    /// Checks the public URL, the length of the cookie secret and the width of the trusted
    /// proxies' ranges.
    pub fn resolve(self) -> Result<Auth, ConfigError> {
        self.trusted_proxies_min_prefix
            .check(&self.trusted_proxies)?;
        let public_url = match &self.public_url {
            Some(u) => Some(PublicUrl::parse(u).ok_or_else(|| {
                ConfigError::new("public_url", "must be an http:// or https:// URL")
            })?),
            None => None,
        };
        if let Some(s) = &self.session_secret {
            if s.len() < 64 {
                return Err(ConfigError::new(
                    "session_secret",
                    "must be at least 64 characters (e.g. `openssl rand -hex 32`)",
                ));
            }
        }
        Ok(Auth {
            public_url,
            session_secret: self.session_secret,
            trusted_proxies: self.trusted_proxies,
        })
    }
}

/// The resolved `[dev_login]`.
pub(super) struct DevLogin {
    pub enabled: bool,
    pub users: Vec<DevUser>,
    pub beside_real_sign_in: bool,
}

impl DevLoginConfig {
    /// On when enabled here or by `--dev` (`dev`); the demo users when on without users.
    /// Names are normalised as every signed-in name is (`fold_case`). `real_sign_in` names the
    /// production sign-in this server also has, if any: beside it the dev login is refused
    /// unless `unsafe_beside_real_sign_in` says otherwise.
    pub(super) fn resolve(
        self,
        dev: bool,
        fold_case: bool,
        real_sign_in: Option<&str>,
    ) -> Result<DevLogin, ConfigError> {
        let enabled = dev || self.enabled;
        if let (true, Some(real), false) = (enabled, real_sign_in, self.unsafe_beside_real_sign_in)
        {
            return Err(ConfigError::new(
                "dev_login",
                format!(
                    "the dev login lets anyone sign in as any demo user without a password, and \
                     this server also has {real}, so it looks like a real install; turn the dev \
                     login off (no --dev, no dev_login.enabled), or for a test install that \
                     needs both set dev_login.unsafe_beside_real_sign_in = true"
                ),
            ));
        }
        let mut users = self.users;
        for (i, u) in users.iter_mut().enumerate() {
            let key = || format!("dev_login.users[{i}].name");
            if u.name.trim().is_empty() || u.name.len() > 64 {
                return Err(ConfigError::new(key(), "must be 1 to 64 characters"));
            }
            u.name = names::normalise(&u.name, fold_case)
                .map_err(|e| ConfigError::new(key(), e.to_string()))?;
        }
        if let Some((i, _)) = users
            .iter()
            .enumerate()
            .find(|(i, u)| users[..*i].iter().any(|v| v.name == u.name))
        {
            return Err(ConfigError::new(
                format!("dev_login.users[{i}].name"),
                "names a demo user listed before it (names compare without regard to case)",
            ));
        }
        if enabled && users.is_empty() {
            users = demo_users();
        }
        Ok(DevLogin {
            enabled,
            users,
            beside_real_sign_in: enabled && real_sign_in.is_some(),
        })
    }
}

/// The path the provider sends the browser back to; `auth.oidc.redirect_url` must end in it.
pub const OIDC_CALLBACK_PATH: &str = "/api/breakglass/auth/oidc/callback";

/// `[auth]`: sign-in through an identity provider.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSectionConfig {
    /// `[auth.oidc]`: OpenID Connect login; off when absent.
    pub oidc: Option<OidcFileConfig>,
    /// Whether user names compare without regard to case (default true): every name that
    /// comes in (proxy header, ID token claim, dev login) and every user the configuration
    /// grants something is lower-cased once, so `Zoe` and `zoe` are one person. Turn it off
    /// only where the identity provider itself tells such names apart.
    pub case_insensitive_names: Option<bool>,
}

/// `[auth.oidc]` as written in the file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OidcFileConfig {
    /// The provider's issuer URL (its discovery document is at
    /// `ISSUER/.well-known/openid-configuration` and must name exactly this issuer).
    pub issuer_url: String,
    /// The client id registered at the provider.
    pub client_id: String,
    /// File holding the client secret (e.g. a mounted Kubernetes Secret). Without it the
    /// secret comes from `BREAKGLASS_OIDC_CLIENT_SECRET`; exactly one of the two.
    pub client_secret_file: Option<PathBuf>,
    /// Where the provider sends the browser back:
    /// `https://PUBLIC-HOST/api/breakglass/auth/oidc/callback`, registered at the provider.
    pub redirect_url: String,
    /// Scopes to ask for (default `openid`, `profile`, `email`); must include `openid`.
    pub scopes: Option<Vec<String>>,
    /// ID-token claim listing the user's groups (default `groups`): a list of strings, or one
    /// string. The groups are matched against each environment's `permissions`.
    pub groups_claim: Option<String>,
    /// ID-token claim naming the user (default `preferred_username`).
    pub username_claim: Option<UsernameClaim>,
    /// Seconds a login lasts before the user must sign in again (default 8 hours; 10 s to
    /// 7 days), whatever the provider's own session does.
    pub session_lifetime_seconds: Option<u64>,
    /// Seconds between asking the provider again about a login (default 300; 1 to 86400):
    /// with a refresh token (ask for the `offline_access` scope) the server renews it that
    /// often, takes the groups of the new ID token, and ends the login at once when the
    /// provider refuses (the user was removed, their sessions revoked).
    pub claims_refresh_seconds: Option<u64>,
    /// File of the keys sealing the provider's tokens in the database (`config/token_keys.rs`
    /// says how it is written); without it they come from the cookie key.
    pub token_keys_file: Option<PathBuf>,
}

/// Which standard claim names the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsernameClaim {
    /// `sub`: stable but often opaque.
    Sub,
    /// `preferred_username`.
    PreferredUsername,
    /// `email`.
    Email,
}

impl UsernameClaim {
    /// The claim's name in the ID token.
    pub fn name(self) -> &'static str {
        match self {
            UsernameClaim::Sub => "sub",
            UsernameClaim::PreferredUsername => "preferred_username",
            UsernameClaim::Email => "email",
        }
    }
}

/// The resolved `[auth.oidc]`: every key checked, the secret read.
#[derive(Clone)]
pub struct OidcSettings {
    /// Issuer URL exactly as configured (the ID token's `iss` must equal it).
    pub issuer_url: String,
    /// Client id.
    pub client_id: String,
    /// Client secret (kept out of `Debug`).
    pub client_secret: String,
    /// The callback URL.
    pub redirect_url: Url,
    /// Where the provider sends the browser after an RP-initiated logout: the redirect URL's
    /// origin.
    pub post_logout_redirect_url: Url,
    /// Scopes besides `openid` (which is always sent).
    pub extra_scopes: Vec<String>,
    /// Groups claim.
    pub groups_claim: String,
    /// Username claim.
    pub username_claim: UsernameClaim,
    /// Login lifetime.
    pub session_lifetime: time::Duration,
    /// How often a login's claims are asked of the provider again.
    pub claims_refresh: time::Duration,
    /// The keys of `token_keys_file`, none without it (redacted in `Debug`).
    pub token_keys: TokenKeys,
}

impl std::fmt::Debug for OidcSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcSettings")
            .field("issuer_url", &self.issuer_url)
            .field("client_id", &self.client_id)
            .field("client_secret", &"[redacted]")
            .field("redirect_url", &self.redirect_url.as_str())
            .field("extra_scopes", &self.extra_scopes)
            .field("groups_claim", &self.groups_claim)
            .field("username_claim", &self.username_claim)
            .field("session_lifetime", &self.session_lifetime)
            .field("claims_refresh", &self.claims_refresh)
            .field("token_keys", &self.token_keys)
            .finish()
    }
}

fn http_url(key: &str, text: &str) -> Result<Url, ConfigError> {
    let url = Url::parse(text)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
        .ok_or_else(|| ConfigError::new(key, "must be an http:// or https:// URL"))?;
    Ok(url)
}

impl OidcFileConfig {
    /// Checks every key and reads the client secret (`env_secret` is
    /// `BREAKGLASS_OIDC_CLIENT_SECRET`).
    pub(super) fn resolve(self, env_secret: Option<&str>) -> Result<OidcSettings, ConfigError> {
        let issuer = http_url("auth.oidc.issuer_url", &self.issuer_url)?;
        if issuer.scheme() != "https" && !is_loopback(&issuer) {
            return Err(ConfigError::new(
                "auth.oidc.issuer_url",
                "must be https:// (plain http only on a loopback address, for tests)",
            ));
        }
        if self.client_id.trim().is_empty() {
            return Err(ConfigError::new("auth.oidc.client_id", "must not be empty"));
        }
        let client_secret = match (&self.client_secret_file, env_secret) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::new(
                    "auth.oidc.client_secret_file",
                    "BREAKGLASS_OIDC_CLIENT_SECRET is set too; keep one of the two",
                ))
            }
            (None, None) => {
                return Err(ConfigError::new(
                    "auth.oidc.client_secret_file",
                    "missing: name a file holding the client secret, or set BREAKGLASS_OIDC_CLIENT_SECRET",
                ))
            }
            (Some(path), None) => std::fs::read_to_string(path)
                .map_err(|e| {
                    ConfigError::new(
                        "auth.oidc.client_secret_file",
                        format!("cannot read {}: {e}", path.display()),
                    )
                })?
                .trim()
                .to_string(),
            (None, Some(s)) => s.trim().to_string(),
        };
        if client_secret.is_empty() {
            return Err(ConfigError::new(
                "auth.oidc.client_secret_file",
                "the client secret is empty",
            ));
        }
        let redirect_url = http_url("auth.oidc.redirect_url", &self.redirect_url)?;
        if redirect_url.path() != OIDC_CALLBACK_PATH || redirect_url.query().is_some() {
            return Err(ConfigError::new(
                "auth.oidc.redirect_url",
                format!("must be this server's address followed by {OIDC_CALLBACK_PATH}"),
            ));
        }
        let mut post_logout_redirect_url = redirect_url.clone();
        post_logout_redirect_url.set_path("/");
        let scopes = self
            .scopes
            .unwrap_or_else(|| vec!["openid".into(), "profile".into(), "email".into()]);
        if !scopes.iter().any(|s| s == "openid") {
            return Err(ConfigError::new(
                "auth.oidc.scopes",
                "must include \"openid\"",
            ));
        }
        if let Some(bad) = scopes
            .iter()
            .find(|s| s.is_empty() || s.chars().any(char::is_whitespace))
        {
            return Err(ConfigError::new(
                "auth.oidc.scopes",
                format!("{bad:?} is not a scope: scopes are single words"),
            ));
        }
        let groups_claim = self.groups_claim.unwrap_or_else(|| "groups".into());
        if groups_claim.trim().is_empty() {
            return Err(ConfigError::new(
                "auth.oidc.groups_claim",
                "must not be empty",
            ));
        }
        let lifetime = super::within(
            "auth.oidc.session_lifetime_seconds",
            self.session_lifetime_seconds.unwrap_or(8 * 3600),
            10,
            7 * 24 * 3600,
        )?;
        let refresh = super::within(
            "auth.oidc.claims_refresh_seconds",
            self.claims_refresh_seconds.unwrap_or(300),
            1,
            24 * 3600,
        )?;
        Ok(OidcSettings {
            issuer_url: self.issuer_url,
            client_id: self.client_id,
            client_secret,
            redirect_url,
            post_logout_redirect_url,
            extra_scopes: scopes.into_iter().filter(|s| s != "openid").collect(),
            groups_claim,
            username_claim: self
                .username_claim
                .unwrap_or(UsernameClaim::PreferredUsername),
            session_lifetime: time::Duration::seconds(i64::try_from(lifetime).unwrap_or(i64::MAX)),
            claims_refresh: time::Duration::seconds(i64::try_from(refresh).unwrap_or(i64::MAX)),
            token_keys: match &self.token_keys_file {
                Some(path) => TokenKeys::read("auth.oidc.token_keys_file", path)?,
                None => TokenKeys::default(),
            },
        })
    }
}

fn is_loopback(url: &Url) -> bool {
    url.host().is_some_and(|h| is_loopback_host(&h))
}

/// Whether `host` names this machine: a loopback address, `localhost`, or a name under
/// `.localhost` (RFC 6761: never resolved anywhere else).
pub fn is_loopback_host<S: AsRef<str>>(host: &url::Host<S>) -> bool {
    match host {
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback(),
        url::Host::Domain(d) => d.as_ref() == "localhost" || d.as_ref().ends_with(".localhost"),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn public_url_keeps_the_origin_a_browser_sends() {
        let cases = [
            (
                "https://breakglass.example.com",
                "https://breakglass.example.com",
                true,
            ),
            (
                "https://breakglass.example.com/",
                "https://breakglass.example.com",
                true,
            ),
            (
                "https://bg.example:8443/ui/x?y#z",
                "https://bg.example:8443",
                true,
            ),
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080", false),
            ("http://[::1]:8080/", "http://[::1]:8080", false),
            // What a browser puts in `Origin`: lowercase host, no default port.
            (
                "https://BG.Example.com:443/",
                "https://bg.example.com",
                true,
            ),
            ("http://bg.example:80", "http://bg.example", false),
        ];
        for (text, origin, secure) in cases {
            let p = PublicUrl::parse(text).unwrap_or_else(|| panic!("refused: {text}"));
            assert_eq!(p.origin, origin, "{text}");
            assert_eq!(p.secure, secure, "{text}");
        }
        for text in [
            "",
            "breakglass.example.com",
            "ftp://breakglass.example.com",
            "HTTPS://breakglass.example.com",
            " https://breakglass.example.com",
            "https:breakglass.example.com",
            "https://",
            "https:///breakglass.example.com",
            "https://bg.example:99999",
            "https://bg example",
        ] {
            assert_eq!(PublicUrl::parse(text), None, "accepted: {text}");
        }
    }

    #[test]
    fn public_url_is_checked_at_start() {
        let c = super::super::parse("public_url = \"https://bg.example/\"").unwrap();
        assert_eq!(
            c.public_url,
            Some(PublicUrl {
                origin: "https://bg.example".into(),
                secure: true,
            })
        );
        let e = super::super::parse("public_url = \"bg.example\"").unwrap_err();
        assert_eq!(e.key, "public_url");
    }

    fn oidc_text(dir: &std::path::Path, extra: &str) -> String {
        let secret = dir.join("secret");
        std::fs::write(&secret, "s3cret\n").unwrap();
        format!(
            "[auth.oidc]\nissuer_url = \"https://id.example/\"\nclient_id = \"bg\"\n\
             redirect_url = \"https://bg.example/api/breakglass/auth/oidc/callback\"\n\
             client_secret_file = \"{}\"\n{extra}",
            secret.display()
        )
    }

    #[test]
    fn oidc_keys_are_checked_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let c = super::super::parse(&oidc_text(dir.path(), "")).unwrap();
        let o = c.oidc.unwrap();
        assert_eq!(o.client_secret, "s3cret");
        assert_eq!(o.extra_scopes, ["profile", "email"]);
        assert_eq!(o.groups_claim, "groups");
        assert_eq!(o.username_claim, UsernameClaim::PreferredUsername);
        assert_eq!(o.session_lifetime, time::Duration::hours(8));
        assert_eq!(o.post_logout_redirect_url.as_str(), "https://bg.example/");
        assert!(!format!("{o:?}").contains("s3cret"));

        let cases = [
            ("scopes = [\"profile\"]", "auth.oidc.scopes"),
            ("scopes = [\"openid\", \"a b\"]", "auth.oidc.scopes"),
            ("groups_claim = \"\"", "auth.oidc.groups_claim"),
            (
                "session_lifetime_seconds = 5",
                "auth.oidc.session_lifetime_seconds",
            ),
        ];
        for (extra, key) in cases {
            let e = super::super::parse(&oidc_text(dir.path(), extra))
                .err()
                .unwrap();
            assert_eq!(e.key, key, "{extra}");
        }
        let swaps = [
            (
                "https://id.example/",
                "http://id.example/",
                "auth.oidc.issuer_url",
            ),
            ("https://id.example/", "id.example", "auth.oidc.issuer_url"),
            (
                "client_id = \"bg\"",
                "client_id = \" \"",
                "auth.oidc.client_id",
            ),
            (
                "/api/breakglass/auth/oidc/callback",
                "/callback",
                "auth.oidc.redirect_url",
            ),
            (
                "client_secret_file = ",
                "client_secret_file = \"/nonexistent\"\n#",
                "auth.oidc.client_secret_file",
            ),
        ];
        let text = oidc_text(dir.path(), "");
        for (from, to, key) in swaps {
            let e = super::super::parse(&text.replacen(from, to, 1))
                .err()
                .unwrap();
            assert_eq!(e.key, key, "{to}");
        }
        let e = super::super::parse(&text.replace("[auth.oidc]", "[auth.oidc]\nissuer = \"x\""));
        assert!(e.is_err());
    }
}
