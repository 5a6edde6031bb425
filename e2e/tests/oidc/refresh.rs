//! The provider asked about a login again with its refresh token every
//! `claims_refresh_seconds`: a revoked login ends, new groups change permissions (its tokens
//! sealed at rest all along), and two replicas due at once spend the refresh token once.

use std::time::Duration;

use anyhow::anyhow;
use breakglass_e2e::agent::Agent;
use breakglass_e2e::hydra::Persona;
use breakglass_e2e::wait_until;
use serde_json::Value;

use super::{env_names, permission, request, Setup};

/// The `[auth.oidc]` keys of a server that asks the provider again every `seconds`.
fn refreshing(seconds: u64) -> String {
    format!(
        "scopes = [\"openid\", \"profile\", \"email\", \"offline_access\"]\n\
         claims_refresh_seconds = {seconds}"
    )
}

/// The provider is asked about a login again every `claims_refresh_seconds` with its refresh
/// token: while the provider accepts it the person stays signed in; once the provider revokes
/// the person's sessions and tokens, the login here ends at the next check, long before its
/// lifetime.
#[tokio::test]
async fn a_login_the_provider_revokes_ends_at_the_next_check() -> anyhow::Result<()> {
    let s = Setup::start(None, &refreshing(1)).await?;
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
    let refreshes = s.provider.refreshes(&s.client);
    assert!(
        refreshes.len() >= 2 && refreshes.iter().all(|c| c.status == 200),
        "{refreshes:?}"
    );
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

/// The groups the provider gives at the next check are the login's from then on: the same
/// cookie may make requests it could not, and no longer those it could.
#[tokio::test]
async fn new_groups_at_the_provider_change_permissions_at_the_next_check() -> anyhow::Result<()> {
    let s = Setup::start(None, &refreshing(3)).await?;
    let agent = Agent::new()?;
    let me = s
        .sign_in(&agent, Persona::new("dave", &["engineers"]))
        .await?;
    let csrf = me["csrf_token"]
        .as_str()
        .ok_or_else(|| anyhow!("no csrf: {me}"))?
        .to_string();
    let sessions = s.url("/api/breakglass/sessions");
    assert_eq!(env_names(&me), ["dev"], "{me}");
    let (status, v) = agent.post_json(&sessions, &csrf, &request("prod")).await?;
    assert_eq!(status, 400, "prod is not an engineer's to name: {v}");

    // The provider puts dave in `sre`; until the next check the login keeps what it had.
    s.provider.script(&s.client, Persona::new("dave", &["sre"]));
    let me = s.whoami(&agent).await?;
    assert_eq!(
        me["user"]["groups"],
        serde_json::json!(["engineers"]),
        "{me}"
    );
    let me = until_groups(&s, &agent, &["sre"]).await?;
    assert_eq!(env_names(&me), ["dev", "prod"], "{me}");
    assert!(permission(&me, "prod", "request") && permission(&me, "dev", "approve"));
    let (status, v) = agent.post_json(&sessions, &csrf, &request("prod")).await?;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["requester"], "dave");

    // And back out of it: the request he could make a moment ago is refused again.
    s.provider
        .script(&s.client, Persona::new("dave", &["engineers"]));
    let me = until_groups(&s, &agent, &["engineers"]).await?;
    assert!(!permission(&me, "dev", "approve"), "{me}");
    let (status, v) = agent.post_json(&sessions, &csrf, &request("prod")).await?;
    assert_eq!(status, 400, "{v}");

    let refreshes = s.provider.refreshes(&s.client);
    assert!(
        refreshes.len() >= 2 && refreshes.iter().all(|c| c.status == 200),
        "{refreshes:?}"
    );

    // The provider's tokens are sealed at rest: every stored one is a sealed value, and none
    // of the refresh tokens the provider issued (each spent later) is in the database.
    let stored = s.stored_tokens().await?;
    assert_eq!(stored.len(), 1, "{stored:?}");
    for token in stored.iter().flat_map(|(id, refresh)| [id, refresh]) {
        let token = token.as_deref().unwrap_or_default();
        assert!(token.starts_with("v1."), "stored in clear: {token}");
        for spent in refreshes.iter().filter_map(|c| c.refresh_token.as_deref()) {
            assert!(!token.contains(spent), "a provider token in clear");
        }
    }
    Ok(())
}

/// Waits until `whoami` of `agent` names `groups`; that `whoami`.
async fn until_groups(s: &Setup, agent: &Agent, groups: &[&str]) -> anyhow::Result<Value> {
    let what = format!("the login's groups become {groups:?}");
    wait_until(&what, Duration::from_secs(20), || async {
        let me = s.whoami(agent).await?;
        if me["user"].is_null() {
            return Err(anyhow!("signed out: {}", s.server.log_text()));
        }
        Ok((me["user"]["groups"] == serde_json::json!(groups)).then_some(me))
    })
    .await
}

/// Two replicas on one database, both due to ask the provider about the same login at the
/// same moment: one of them spends the refresh token, once, and both keep serving the login.
/// The proxy's count is the proof: a second use that Hydra notices revokes the whole chain
/// (and the login with it), but two uses at the same instant may both be answered 200.
#[tokio::test]
async fn two_replicas_due_at_once_spend_the_refresh_token_once() -> anyhow::Result<()> {
    let database = breakglass_e2e::postgres::fresh_database().await?;
    let top = format!(
        "database_url = \"{database}\"\nsession_secret = \"{}\"",
        "replicas-share-this-cookie-secret-".repeat(2)
    );
    let interval = 2;
    let s = Setup::start_with(None, &refreshing(interval), &top).await?;
    let other = s.replica("data-2").await?;
    let agent = Agent::new()?;
    let me = s.sign_in(&agent, Persona::new("erin", &["sre"])).await?;
    assert_eq!(me["user"]["name"], "erin");
    // Cookies know hosts, not ports: the agent's cookie goes to both replicas.
    let whoami = [&s.server.url, &other.url].map(|u| format!("{u}/api/breakglass/whoami"));
    let (status, me) = agent.get_json(&whoami[1]).await?;
    assert_eq!(
        (status, &me["user"]["name"]),
        (200, &Value::from("erin")),
        "{me}"
    );

    for round in 1..=3 {
        tokio::time::sleep(Duration::from_millis(interval * 1000 + 300)).await;
        let before = s.provider.refreshes(&s.client).len();
        let answers =
            futures::future::try_join_all((0..8).map(|i| agent.get_json(&whoami[i % 2]))).await?;
        for (i, (status, me)) in answers.iter().enumerate() {
            assert_eq!(
                (*status, &me["user"]["name"]),
                (200, &Value::from("erin")),
                "round {round}, request {i} to replica {}: {me}\n{}\n{}",
                i % 2,
                s.server.log_text(),
                other.log_text()
            );
        }
        let refreshes = s.provider.refreshes(&s.client);
        assert_eq!(
            refreshes.len() - before,
            1,
            "round {round}: one refresh for both replicas: {refreshes:?}"
        );
    }
    let refreshes = s.provider.refreshes(&s.client);
    assert!(refreshes.iter().all(|c| c.status == 200), "{refreshes:?}");
    let mut spent: Vec<_> = refreshes.iter().map(|c| c.refresh_token.clone()).collect();
    spent.sort();
    spent.dedup();
    assert_eq!(spent.len(), refreshes.len(), "a refresh token spent twice");
    for url in &whoami {
        let (_, me) = agent.get_json(url).await?;
        assert_eq!(me["user"]["name"], "erin", "{url}: {me}");
    }
    Ok(())
}
