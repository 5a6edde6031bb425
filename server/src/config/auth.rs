//! Who may come in and how they are recognised: `public_url`, `session_secret`,
//! `trusted_proxies` and `[dev_login]`.

use ipnet::IpNet;
use serde::Deserialize;
use url::Url;

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
}

/// The resolved top-level keys.
pub(super) struct Auth {
    pub public_url: Option<PublicUrl>,
    pub session_secret: Option<String>,
    pub trusted_proxies: Vec<IpNet>,
}

impl AuthFile {
    /// Checks the public URL and the length of the cookie secret.
    pub fn resolve(self) -> Result<Auth, ConfigError> {
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
}

impl DevLoginConfig {
    /// On when enabled here or by `--dev` (`dev`); the demo users when on without users.
    pub(super) fn resolve(self, dev: bool) -> Result<DevLogin, ConfigError> {
        let enabled = dev || self.enabled;
        let mut users = self.users;
        for (i, u) in users.iter().enumerate() {
            if u.name.trim().is_empty() || u.name.len() > 64 {
                return Err(ConfigError::new(
                    format!("dev_login.users[{i}].name"),
                    "must be 1 to 64 characters",
                ));
            }
        }
        if enabled && users.is_empty() {
            users = demo_users();
        }
        Ok(DevLogin { enabled, users })
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
}
