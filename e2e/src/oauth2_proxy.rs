//! oauth2-proxy in front of the server under test (built by `scripts/oauth2-proxy.sh install`):
//! it signs people in at the test provider ([`crate::hydra`]) and passes who they are to the
//! server in `X-Auth-Request-User` / `X-Auth-Request-Groups`, the headers the server trusts
//! from its `trusted_proxies`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use tokio::process::{Child, Command};

use crate::hydra::OAuthClient;

/// The pinned version `scripts/oauth2-proxy.sh` builds.
pub const VERSION: &str = "v7.15.6";

/// A running oauth2-proxy.
pub struct OAuth2Proxy {
    _child: Child,
    /// Where browsers reach it, e.g. `http://127.0.0.1:40123`.
    pub url: String,
    /// Its log.
    pub log: PathBuf,
}

/// The binary: `BREAKGLASS_OAUTH2_PROXY_BIN`, else the pinned build in the cache.
fn binary() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("BREAKGLASS_OAUTH2_PROXY_BIN").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let cache = std::env::var_os("BREAKGLASS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/breakglass"));
    let bin = cache.join("bin").join(format!("oauth2-proxy-{VERSION}"));
    if !bin.exists() {
        bail!(
            "oauth2-proxy {VERSION} is not installed at {}; run: scripts/oauth2-proxy.sh install",
            bin.display()
        );
    }
    Ok(bin)
}

impl OAuth2Proxy {
    /// Starts it on 127.0.0.1:`port` in front of `upstream`, signing in at `issuer` as
    /// `client` (whose redirect URI must be `http://127.0.0.1:PORT/oauth2/callback`); its
    /// configuration and log go to `dir`. Waits until it answers `/ping`.
    pub async fn start(
        dir: &Path,
        port: u16,
        upstream: &str,
        issuer: &str,
        client: &OAuthClient,
    ) -> anyhow::Result<OAuth2Proxy> {
        let bin = binary()?;
        std::fs::create_dir_all(dir)?;
        let url = format!("http://127.0.0.1:{port}");
        // The alpha configuration is the one that can name the headers sent upstream; the
        // flag-only configuration sends X-Forwarded-User / -Groups instead.
        let alpha = format!(
            "server:\n  bindAddress: \"127.0.0.1:{port}\"\n\
             upstreamConfig:\n  upstreams:\n    - id: breakglass\n      path: /\n      uri: \"{upstream}\"\n\
             injectRequestHeaders:\n\
             \x20 - name: X-Auth-Request-User\n    values:\n      - claimSource:\n          claim: user\n\
             \x20 - name: X-Auth-Request-Groups\n    values:\n      - claimSource:\n          claim: groups\n\
             providers:\n  - id: hydra\n    provider: oidc\n    clientID: \"{}\"\n    clientSecret: \"{}\"\n\
             \x20   scope: \"openid profile email\"\n\
             \x20   oidcConfig:\n      issuerURL: \"{issuer}\"\n      emailClaim: email\n\
             \x20     groupsClaim: groups\n      userIDClaim: preferred_username\n      audienceClaims: [aud]\n",
            client.id, client.secret
        );
        let config = dir.join("oauth2-proxy.yaml");
        std::fs::write(&config, alpha)?;
        let log = dir.join("oauth2-proxy.log");
        let log_file = std::fs::File::create(&log)?;
        let child = Command::new(&bin)
            .arg("--alpha-config")
            .arg(&config)
            .arg(format!("--redirect-url={url}/oauth2/callback"))
            .arg("--cookie-secret=0123456789abcdef0123456789abcdef")
            .arg("--cookie-secure=false")
            .arg("--email-domain=*")
            .arg("--skip-provider-button=true")
            .stdout(Stdio::from(log_file.try_clone()?))
            .stderr(Stdio::from(log_file))
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let http = reqwest::Client::new();
        let ping = format!("{url}/ping");
        crate::wait_until(
            "oauth2-proxy answers /ping",
            Duration::from_secs(30),
            || {
                let (http, ping) = (&http, &ping);
                async move {
                    let r = http.get(ping).send().await?;
                    Ok(r.status().is_success().then_some(()))
                }
            },
        )
        .await
        .map_err(|e| {
            anyhow!(
                "{e:#}; log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        })?;
        Ok(OAuth2Proxy {
            _child: child,
            url,
            log,
        })
    }

    /// Its log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}
