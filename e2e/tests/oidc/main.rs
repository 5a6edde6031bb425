//! The OIDC login against a real provider: ORY Hydra (`scripts/hydra.sh`, one per test binary)
//! with the tests' own login/consent app (`breakglass_e2e::hydra`), and the real server binary.
//! Each test registers its own client at Hydra and scripts who signs in.
//!
//! Needs `scripts/hydra.sh install` and PostgreSQL (`scripts/postgres.sh start`); the browser
//! case needs Chromium and `frontend/dist` too.
//!
//! `sign_in`: who gets in with which permissions, and the pages of a sign-in that fails;
//! `callback`: what the authorization request carries and what the callback refuses (state,
//! nonce, PKCE verifier, a tampered token or cookie); `refresh`: the provider asked again
//! with the refresh token, on one replica and on two; `revoked`: a group taken away at the
//! provider ends the person's open terminal, stream and session (on the test control plane).

use std::path::PathBuf;

use anyhow::bail;
use breakglass_e2e::agent::{sets_cookie, Agent, Walk};
use breakglass_e2e::hydra::{free_port, OAuthClient, Persona, Provider};
use breakglass_e2e::server::ServerProcess;
use reqwest::Url;
use serde_json::{json, Value};

mod callback;
mod identity;
mod refresh;
mod revoked;
#[path = "../rig/mod.rs"]
#[allow(clippy::unwrap_used)]
mod rig;
mod sign_in;

const CALLBACK: &str = "/api/breakglass/auth/oidc/callback";
const LOGIN: &str = "/api/breakglass/auth/oidc/login";
const SESSION_COOKIE: &str = "breakglass_session";
const PENDING_COOKIE: &str = "breakglass_oidc_login";
/// The pending cookie's path (`http/sign_in.rs`).
const PENDING_PATH: &str = "/api/breakglass/auth/oidc";
/// The provider's authorization endpoint, below its issuer (Hydra's discovery document).
const AUTHORIZE: &str = "/oauth2/auth";

/// Two environments: in `dev` engineers and SREs may request and SREs approve; in `prod`
/// only SREs may request.
const ENVIRONMENTS: &str = r#"
[[environments]]
name = "dev"
tier = "ground"
[environments.permissions]
"tower.breakglass.request" = { groups = ["engineers", "sre"] }
"tower.breakglass.approve" = { groups = ["sre"] }

[[environments]]
name = "prod"
tier = "flight"
[environments.permissions]
"tower.breakglass.request" = { groups = ["sre"] }
"#;

/// A server signing in through the provider with its own client.
struct Setup {
    provider: &'static Provider,
    client: OAuthClient,
    server: ServerProcess,
    config: PathBuf,
    dir: tempfile::TempDir,
}

impl Setup {
    /// A server with `[auth.oidc]` at `issuer` (default: the provider's) and `extra` keys in
    /// that section.
    async fn start(issuer: Option<&str>, extra: &str) -> anyhow::Result<Setup> {
        Setup::start_with(issuer, extra, "").await
    }

    /// Like [`Setup::start`], with `top` keys before the `[auth.oidc]` section. The server's
    /// port is picked before it starts (the redirect URL names it), so another process may
    /// take it first: then it starts again on another port.
    async fn start_with(issuer: Option<&str>, extra: &str, top: &str) -> anyhow::Result<Setup> {
        let mut attempt = 1;
        loop {
            match Setup::start_once(issuer, extra, top).await {
                Err(e) if attempt < 3 && format!("{e:#}").contains("in use") => attempt += 1,
                other => return other,
            }
        }
    }

    async fn start_once(issuer: Option<&str>, extra: &str, top: &str) -> anyhow::Result<Setup> {
        let provider = Provider::shared()?;
        let port = free_port()?;
        let base = format!("http://127.0.0.1:{port}");
        let client = provider
            .register_client(&format!("{base}{CALLBACK}"), &format!("{base}/"))
            .await?;
        let dir = tempfile::tempdir()?;
        let secret = dir.path().join("client-secret");
        std::fs::write(&secret, &client.secret)?;
        let config = dir.path().join("server.toml");
        std::fs::write(
            &config,
            format!(
                "{top}\n[auth.oidc]\nissuer_url = \"{}\"\nclient_id = \"{}\"\nclient_secret_file = \"{}\"\n\
                 redirect_url = \"{base}{CALLBACK}\"\n{extra}\n{ENVIRONMENTS}",
                issuer.unwrap_or(&provider.issuer),
                client.id,
                secret.display(),
            ),
        )?;
        let server = ServerProcess::start_on(
            &config,
            &dir.path().join("data"),
            &[],
            &format!("127.0.0.1:{port}"),
        )
        .await?;
        Ok(Setup {
            provider,
            client,
            server,
            config,
            dir,
        })
    }

    /// Another server on the same configuration with a data directory of its own: a second
    /// replica when the configuration names a shared database (and cookie secret).
    async fn replica(&self, name: &str) -> anyhow::Result<ServerProcess> {
        ServerProcess::start(&self.config, &self.dir.path().join(name), &[]).await
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.url)
    }

    /// Starts a sign-in as whoever is scripted and walks through the provider up to the
    /// callback, which is returned unrequested.
    async fn to_callback(&self, agent: &Agent) -> anyhow::Result<Url> {
        Ok(self.to_callback_via(agent, |_| {}).await?.1)
    }

    /// Like [`Setup::to_callback`], stopping first at the authorization request the server
    /// sends the browser to, which `change` may alter before the browser follows it (someone
    /// between the browser and the provider); that request as sent, and the callback.
    async fn to_callback_via(
        &self,
        agent: &Agent,
        change: impl FnOnce(&mut Url),
    ) -> anyhow::Result<(Url, Url)> {
        let start = self.url(&format!("{LOGIN}?return_to=/env/dev"));
        let mut authorize = match agent.walk(&start, |u| u.path() == AUTHORIZE).await? {
            Walk::Stopped(url) => url,
            Walk::Done {
                url, status, body, ..
            } => bail!(
                "the sign-in ended at {url} ({status}) before the provider: {body}\nserver log:\n{}",
                self.server.log_text()
            ),
        };
        change(&mut authorize);
        match agent
            .walk(authorize.as_str(), |u| u.path() == CALLBACK)
            .await?
        {
            Walk::Stopped(callback) => Ok((authorize, callback)),
            Walk::Done {
                url, status, body, ..
            } => bail!(
                "the sign-in ended at {url} ({status}) before the callback: {body}\nserver log:\n{}",
                self.server.log_text()
            ),
        }
    }

    /// Signs `agent` in as `persona`; the callback's answer must be a redirect back to where
    /// the sign-in started, setting the session cookie. Returns `whoami`.
    async fn sign_in(&self, agent: &Agent, persona: Persona) -> anyhow::Result<Value> {
        self.provider.script(&self.client, persona);
        let callback = self.to_callback(agent).await?;
        self.complete(agent, callback).await
    }

    /// Requests `callback`, which must sign `agent` in and send it back to where the sign-in
    /// started. Returns `whoami`.
    async fn complete(&self, agent: &Agent, callback: Url) -> anyhow::Result<Value> {
        let r = agent.http.get(callback).send().await?;
        if r.status() != 303 || !sets_cookie(r.headers(), SESSION_COOKIE) {
            bail!(
                "callback answered {} without a session cookie: {}",
                r.status(),
                r.text().await?
            );
        }
        let location = r.headers().get("location").and_then(|v| v.to_str().ok());
        assert_eq!(location, Some("/env/dev"), "back where the sign-in started");
        self.whoami(agent).await
    }

    async fn whoami(&self, agent: &Agent) -> anyhow::Result<Value> {
        let (status, me) = agent.get_json(&self.url("/api/breakglass/whoami")).await?;
        assert_eq!(status, 200, "{me}");
        Ok(me)
    }

    /// GETs `callback` and expects the error page with `reason` and `status`, and no session.
    async fn expect_page(
        &self,
        agent: &Agent,
        url: &str,
        status: u16,
        reason: &str,
    ) -> anyhow::Result<String> {
        let r = agent.http.get(url).send().await?;
        let got = r.status().as_u16();
        let set = sets_cookie(r.headers(), SESSION_COOKIE);
        let body = r.text().await?;
        assert_eq!(got, status, "{body}");
        assert!(!set, "an error page must not sign anyone in");
        assert!(
            body.contains(&format!("data-reason=\"{reason}\"")),
            "expected reason {reason}: {body}"
        );
        let me = self.whoami(agent).await?;
        assert!(me["user"].is_null(), "nobody is signed in: {me}");
        Ok(body)
    }

    /// How many login records the server's database holds, ended ones included.
    /// Every login's stored ID and refresh tokens, as the database holds them.
    async fn stored_tokens(&self) -> anyhow::Result<Vec<(Option<String>, Option<String>)>> {
        let url = breakglass_e2e::server::database_url_of(&self.dir.path().join("data"));
        let q = "SELECT id_token, refresh_token FROM breakglass_logins";
        Ok(if url.starts_with("postgres") {
            let db = sqlx::PgPool::connect(&url).await?;
            let rows = sqlx::query_as(q).fetch_all(&db).await?;
            db.close().await;
            rows
        } else {
            let db = sqlx::SqlitePool::connect(&url).await?;
            let rows = sqlx::query_as(q).fetch_all(&db).await?;
            db.close().await;
            rows
        })
    }

    async fn logins(&self) -> anyhow::Result<i64> {
        Ok(i64::try_from(self.stored_tokens().await?.len())?)
    }
}

/// A request for access to a pod in `env`.
fn request(env: &str) -> Value {
    json!({
        "environment": env, "namespace": "shop", "pod": "web-1", "mode": "live",
        "reason": "checking the login end to end", "duration_minutes": 30,
    })
}

fn env_names(me: &Value) -> Vec<String> {
    me["environments"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn permission(me: &Value, env: &str, which: &str) -> bool {
    me["environments"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["name"] == env))
        .and_then(|e| e["permissions"][which].as_bool())
        .unwrap_or(false)
}
