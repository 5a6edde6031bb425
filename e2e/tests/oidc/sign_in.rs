//! Who gets in, with which permissions, and what a person sees when a sign-in does not
//! complete; logout, the login's lifetime and the provider's rotated keys.

use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use breakglass_e2e::agent::{Agent, Walk};
use breakglass_e2e::hydra::{free_port, Persona, Provider};
use breakglass_e2e::wait_until;
use reqwest::Url;
use serde_json::json;

use super::{env_names, permission, request, Setup, LOGIN};

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
/// started from as themselves, then "Sign out", which ends the provider's session too. Each of
/// our pages on the way (sign-in, signed in, signed out) passes axe-core in both schemes.
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
        // Every page of ours this visits passes axe-core, light and dark.
        bob.assert_accessible("oidc-sign-in").await?;
        bob.click("[data-testid=oidc-sign-in]").await?;
        // Through the provider's login and consent (scripted) and back to /env/dev as bob.
        bob.wait_for("[data-testid=sign-out]").await?;
        let here = bob.js("return location.pathname").await?;
        assert_eq!(here, json!("/env/dev"), "back where the sign-in started");
        let name = bob
            .js("return document.querySelector('[data-testid=sign-out]').title")
            .await?;
        assert_eq!(name, json!("Sign out bob"));
        bob.check_page("oidc-signed-in").await?;

        bob.click("[data-testid=sign-out]").await?;
        bob.wait_for("[data-testid=oidc-sign-in]").await?;
        bob.check_page("oidc-signed-out").await?;
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
