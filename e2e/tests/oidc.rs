//! The OIDC login against a real provider: ORY Hydra (`scripts/hydra.sh`, one per test binary)
//! with the tests' own login/consent app (`breakglass_e2e::hydra`), and the real server binary.
//! Each test registers its own client at Hydra and scripts who signs in.
//!
//! Needs `scripts/hydra.sh install` and PostgreSQL (`scripts/postgres.sh start`); the browser
//! case needs Chromium and `frontend/dist` too.

use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use breakglass_e2e::agent::{sets_cookie, Agent, Walk};
use breakglass_e2e::hydra::{free_port, OAuthClient, Persona, Provider};
use breakglass_e2e::server::ServerProcess;
use breakglass_e2e::wait_until;
use reqwest::Url;
use serde_json::{json, Value};

const CALLBACK: &str = "/api/breakglass/auth/oidc/callback";
const LOGIN: &str = "/api/breakglass/auth/oidc/login";
const SESSION_COOKIE: &str = "breakglass_session";
const PENDING_COOKIE: &str = "breakglass_oidc_login";

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
    _dir: tempfile::TempDir,
}

impl Setup {
    /// A server with `[auth.oidc]` at `issuer` (default: the provider's) and `extra` keys in
    /// that section.
    async fn start(issuer: Option<&str>, extra: &str) -> anyhow::Result<Setup> {
        Setup::start_with(issuer, extra, "").await
    }

    /// Like [`Setup::start`], with `top` keys before the `[auth.oidc]` section.
    async fn start_with(issuer: Option<&str>, extra: &str, top: &str) -> anyhow::Result<Setup> {
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
            _dir: dir,
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.url)
    }

    /// Starts a sign-in as whoever is scripted and walks through the provider up to the
    /// callback, which is returned unrequested.
    async fn to_callback(&self, agent: &Agent) -> anyhow::Result<Url> {
        match agent
            .walk(&self.url(&format!("{LOGIN}?return_to=/env/dev")), |u| {
                u.path() == CALLBACK
            })
            .await?
        {
            Walk::Stopped(callback) => Ok(callback),
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

#[tokio::test]
async fn groups_claim_maps_to_the_permissions_of_each_environment() -> anyhow::Result<()> {
    let s = Setup::start(None, "").await?;

    let alice = Agent::new()?;
    let me = s
        .sign_in(&alice, Persona::new("alice", &["engineers"]))
        .await?;
    assert_eq!(me["user"]["name"], "alice");
    assert_eq!(me["user"]["groups"], json!(["engineers"]));
    assert_eq!(me["oidc_login"], true);
    assert_eq!(env_names(&me), ["dev"], "engineers see dev only: {me}");
    assert!(permission(&me, "dev", "request"));
    assert!(!permission(&me, "dev", "approve"));
    // prod is as if it did not exist for her.
    let (status, _) = alice
        .get_json(&s.url("/api/breakglass/environments/prod/guardrails"))
        .await?;
    assert_eq!(status, 404);

    let bob = Agent::new()?;
    let me = s.sign_in(&bob, Persona::new("bob", &["sre"])).await?;
    assert_eq!(env_names(&me), ["dev", "prod"]);
    assert!(permission(&me, "dev", "approve"));
    assert!(permission(&me, "prod", "request"));
    assert!(!permission(&me, "prod", "approve"));

    // The cookie and CSRF rules are the same as the dev login's: a state-changing request
    // without the token is refused, with it the server accepts it.
    let csrf = me["csrf_token"]
        .as_str()
        .ok_or_else(|| anyhow!("no csrf"))?;
    let body = request("dev");
    let r = bob
        .http
        .post(s.url("/api/breakglass/sessions"))
        .json(&body)
        .send()
        .await?;
    assert_eq!(r.status(), 403, "no CSRF token");
    let (status, v) = bob
        .post_json(&s.url("/api/breakglass/sessions"), csrf, &body)
        .await?;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["requester"], "bob");

    // Someone the provider knows but break-glass grants nothing: told so, not signed in.
    let zoe = Agent::new()?;
    s.provider
        .script(&s.client, Persona::new("zoe", &["marketing"]));
    let callback = s.to_callback(&zoe).await?;
    let page = s
        .expect_page(&zoe, callback.as_str(), 403, "no-permission")
        .await?;
    assert!(page.contains("You are zoe (groups: marketing)"), "{page}");
    Ok(())
}

#[tokio::test]
async fn denied_consent_shows_what_happened() -> anyhow::Result<()> {
    let s = Setup::start(None, "").await?;
    let agent = Agent::new()?;
    s.provider.script(
        &s.client,
        Persona {
            deny_consent: true,
            ..Persona::new("alice", &["engineers"])
        },
    );
    let callback = s.to_callback(&agent).await?;
    assert!(
        callback
            .query()
            .unwrap_or_default()
            .contains("error=access_denied"),
        "{callback}"
    );
    let page = s
        .expect_page(&agent, callback.as_str(), 403, "access-denied")
        .await?;
    assert!(page.contains("Sign in again and allow"), "{page}");
    Ok(())
}

#[tokio::test]
async fn an_issuer_that_names_another_issuer_signs_nobody_in() -> anyhow::Result<()> {
    // Hydra's own address: its discovery document names the issuer browsers use (the
    // address in front of it), not this one.
    let provider = Provider::shared()?;
    let wrong = format!("{}/", provider.direct_public);
    let s = Setup::start(Some(&wrong), "").await?;
    let agent = Agent::new()?;
    s.provider
        .script(&s.client, Persona::new("alice", &["engineers"]));
    let page = s
        .expect_page(&agent, &s.url(LOGIN), 502, "provider-misconfigured")
        .await?;
    assert!(page.contains("auth.oidc.issuer_url"), "{page}");
    Ok(())
}

#[tokio::test]
async fn a_provider_that_is_down_shows_a_page_and_the_server_stays_up() -> anyhow::Result<()> {
    let nobody = format!("http://127.0.0.1:{}/", free_port()?);
    let s = Setup::start(Some(&nobody), "").await?;
    let agent = Agent::new()?;
    let page = s
        .expect_page(&agent, &s.url(LOGIN), 502, "provider-unreachable")
        .await?;
    assert!(page.contains("Try again in a minute"), "{page}");
    let r = agent.http.get(s.url("/healthz")).send().await?;
    assert_eq!(r.status(), 200);
    Ok(())
}

#[tokio::test]
async fn a_tampered_id_token_is_refused() -> anyhow::Result<()> {
    let s = Setup::start(None, "").await?;
    let agent = Agent::new()?;
    s.provider.script(
        &s.client,
        Persona {
            tamper_id_token: true,
            ..Persona::new("alice", &["engineers"])
        },
    );
    let callback = s.to_callback(&agent).await?;
    s.expect_page(&agent, callback.as_str(), 502, "token-rejected")
        .await?;
    assert!(
        !s.server.log_text().contains("signed in through OIDC"),
        "nobody signed in"
    );
    // The same client untampered signs in: the refusal was the token's, not the setup's.
    let me = s
        .sign_in(&agent, Persona::new("alice", &["engineers"]))
        .await?;
    assert_eq!(me["user"]["name"], "alice");
    Ok(())
}

#[tokio::test]
async fn a_replayed_state_is_refused() -> anyhow::Result<()> {
    let s = Setup::start(None, "").await?;
    s.provider
        .script(&s.client, Persona::new("alice", &["engineers"]));
    let alice = Agent::new()?;
    let callback = s.to_callback(&alice).await?;
    let pending = alice.cookies_for(&s.url(CALLBACK));
    assert!(pending.contains(PENDING_COOKIE), "{pending}");
    let r = alice.http.get(callback.clone()).send().await?;
    assert_eq!(r.status(), 303);
    assert!(sets_cookie(r.headers(), SESSION_COOKIE));

    // The same callback again in the same browser: the sign-in it belonged to is spent.
    let again = Agent::new()?;
    let page = s
        .expect_page(&again, callback.as_str(), 400, "expired")
        .await?;
    assert!(page.contains("already used"), "{page}");

    // Someone who copied both the callback and the pending cookie: the state matches, but the
    // provider refuses the spent code.
    let thief = Agent::new()?;
    let base: Url = s.server.url.parse()?;
    for c in pending
        .split("; ")
        .filter(|c| c.starts_with(PENDING_COOKIE))
    {
        thief.jar.add_cookie_str(
            &format!("{c}; Path=/api/breakglass/auth/oidc"),
            &base.join(CALLBACK)?,
        );
    }
    s.expect_page(&thief, callback.as_str(), 502, "provider-refused")
        .await?;

    // A callback whose state is not this browser's sign-in.
    let mallory = Agent::new()?;
    let _ = s.to_callback(&mallory).await?;
    let mut forged = callback.clone();
    let code = callback
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    forged
        .query_pairs_mut()
        .clear()
        .append_pair("code", &code)
        .append_pair("state", "not-the-state-of-this-sign-in");
    s.expect_page(&mallory, forged.as_str(), 400, "expired")
        .await?;
    Ok(())
}

#[tokio::test]
async fn a_session_ends_after_the_configured_lifetime() -> anyhow::Result<()> {
    let s = Setup::start(None, "session_lifetime_seconds = 10").await?;
    let agent = Agent::new()?;
    let me = s.sign_in(&agent, Persona::new("bob", &["sre"])).await?;
    assert_eq!(me["user"]["name"], "bob");
    let csrf = me["csrf_token"].as_str().unwrap_or_default().to_string();
    wait_until("the login expires", Duration::from_secs(40), || async {
        let me = s.whoami(&agent).await?;
        Ok(me["user"].is_null().then_some(()))
    })
    .await?;
    let (status, v) = agent
        .post_json(&s.url("/api/breakglass/sessions"), &csrf, &request("dev"))
        .await?;
    assert_eq!(status, 401, "{v}");
    Ok(())
}

/// The provider is asked about a login again every `claims_refresh_seconds` with its refresh
/// token: while the provider accepts it the person stays signed in; once the provider revokes
/// the person's sessions and tokens, the login here ends at the next check, long before its
/// lifetime.
#[tokio::test]
async fn a_login_the_provider_revokes_ends_at_the_next_check() -> anyhow::Result<()> {
    let s = Setup::start(
        None,
        "scopes = [\"openid\", \"profile\", \"email\", \"offline_access\"]\n\
         claims_refresh_seconds = 1",
    )
    .await?;
    let agent = Agent::new()?;
    let me = s.sign_in(&agent, Persona::new("carol", &["sre"])).await?;
    assert_eq!(me["user"]["name"], "carol");
    // Past one interval, the check renews the tokens and the login holds (twice, so the
    // rotated refresh token was kept and used).
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let me = s.whoami(&agent).await?;
        assert_eq!(me["user"]["name"], "carol", "{}", s.server.log_text());
    }
    // The provider's administrator revokes everything carol was granted.
    let r = reqwest::Client::new()
        .delete(format!(
            "{}/admin/oauth2/auth/sessions/consent?subject=carol&all=true",
            s.provider.admin
        ))
        .send()
        .await?;
    assert!(r.status().is_success(), "{}", r.status());
    wait_until("the login ends here", Duration::from_secs(20), || async {
        let me = s.whoami(&agent).await?;
        Ok(me["user"].is_null().then_some(()))
    })
    .await?;
    assert!(
        s.server
            .log_text()
            .contains("login ended by the identity provider"),
        "{}",
        s.server.log_text()
    );
    Ok(())
}

#[tokio::test]
async fn logout_ends_the_session_here_and_at_the_provider() -> anyhow::Result<()> {
    let s = Setup::start(None, "").await?;
    let agent = Agent::new()?;
    let me = s.sign_in(&agent, Persona::new("bob", &["sre"])).await?;
    let csrf = me["csrf_token"].as_str().unwrap_or_default().to_string();
    let (status, out) = agent
        .post_json(&s.url("/api/breakglass/auth/logout"), &csrf, &json!({}))
        .await?;
    assert_eq!(status, 200, "{out}");
    let end = out["end_session_url"]
        .as_str()
        .ok_or_else(|| anyhow!("no end_session_url: {out}"))?;
    assert!(end.starts_with(&s.provider.issuer), "{end}");
    assert!(end.contains("id_token_hint="), "{end}");
    assert!(s.whoami(&agent).await?["user"].is_null());

    // The browser goes there; the provider ends its session and sends it back to us.
    let home = Url::parse(&s.url("/"))?;
    match agent.walk(end, |u| *u == home).await? {
        Walk::Stopped(_) => {}
        Walk::Done {
            url, status, body, ..
        } => bail!("logout ended at {url} ({status}): {body}"),
    }
    assert_eq!(s.provider.logouts(&s.client), 1);
    Ok(())
}

#[tokio::test]
async fn rotated_provider_keys_are_fetched_again() -> anyhow::Result<()> {
    let s = Setup::start(None, "").await?;
    let agent = Agent::new()?;
    s.sign_in(&agent, Persona::new("alice", &["engineers"]))
        .await?;
    let kid = s.provider.rotate_id_token_key().await?;
    let me = s
        .sign_in(&Agent::new()?, Persona::new("bob", &["sre"]))
        .await
        .with_context(|| format!("after rotating to key {kid}"))?;
    assert_eq!(me["user"]["name"], "bob");
    assert!(
        s.server
            .log_text()
            .contains("fetching the provider's keys again"),
        "the second sign-in needed the new key"
    );
    Ok(())
}

/// A person in a browser: the sign-in page's button, the provider, back on the page they
/// started from as themselves, then "Sign out", which ends the provider's session too.
#[tokio::test(flavor = "multi_thread")]
async fn a_person_signs_in_and_out_through_the_provider_in_the_browser() -> anyhow::Result<()> {
    use breakglass_e2e::browser::{frontend_dist, Browser, ChromeDriver};
    let dist = frontend_dist()?;
    let setup =
        Setup::start_with(None, "", &format!("static_dir = \"{}\"", dist.display())).await?;
    setup
        .provider
        .script(&setup.client, Persona::new("bob", &["sre"]));
    let driver = ChromeDriver::start().await?;
    let bob = Browser::open(&driver, "bob", false).await?;
    let result = async {
        bob.goto(&setup.url("/env/dev")).await?;
        bob.wait_for("[data-testid=oidc-sign-in]").await?;
        bob.click("[data-testid=oidc-sign-in]").await?;
        // Through the provider's login and consent (scripted) and back to /env/dev as bob.
        bob.wait_for("[data-testid=sign-out]").await?;
        let here = bob.js("return location.pathname").await?;
        assert_eq!(here, json!("/env/dev"), "back where the sign-in started");
        let name = bob
            .js("return document.querySelector('[data-testid=sign-out]').title")
            .await?;
        assert_eq!(name, json!("Sign out bob"));
        bob.screenshot("oidc-signed-in").await?;

        bob.click("[data-testid=sign-out]").await?;
        bob.wait_for("[data-testid=oidc-sign-in]").await?;
        wait_until("the provider's logout", Duration::from_secs(20), || async {
            Ok((setup.provider.logouts(&setup.client) == 1).then_some(()))
        })
        .await?;
        anyhow::Ok(())
    }
    .await;
    bob.close().await?;
    result.with_context(|| format!("server log:\n{}", setup.server.log_text()))
}
