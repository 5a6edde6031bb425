//! The trusted auth proxy for real: oauth2-proxy (`scripts/oauth2-proxy.sh install`) in front of
//! the real server binary, signing in at the test OpenID provider (`breakglass_e2e::hydra`)
//! and passing `X-Auth-Request-User` / `-Groups`; and the same headers sent by anyone else.

use std::net::{IpAddr, Ipv4Addr};

use anyhow::{anyhow, bail};
use breakglass_e2e::agent::{Agent, Walk};
use breakglass_e2e::hydra::{free_port, Persona, Provider};
use breakglass_e2e::oauth2_proxy::OAuth2Proxy;
use breakglass_e2e::server::ServerProcess;
use serde_json::{json, Value};

/// Only 127.0.0.1 (where oauth2-proxy connects from) is a trusted proxy; 127.0.0.2, on the
/// same machine, is not.
const CONFIG: &str = r#"
trusted_proxies = ["127.0.0.1/32"]

[[environments]]
name = "dev"
tier = "ground"
[environments.permissions]
"tower.breakglass.request" = { groups = ["engineers", "sre"] }
"tower.breakglass.approve" = { groups = ["sre"] }
"#;

async fn server(dir: &std::path::Path) -> anyhow::Result<ServerProcess> {
    let config = dir.join("server.toml");
    std::fs::write(&config, CONFIG)?;
    ServerProcess::start(&config, &dir.join("data"), &[]).await
}

fn request() -> Value {
    json!({
        "environment": "dev", "namespace": "shop", "pod": "web-1", "mode": "live",
        "reason": "checking the proxy end to end", "duration_minutes": 30,
    })
}

#[tokio::test]
async fn oauth2_proxy_signs_people_in_end_to_end() -> anyhow::Result<()> {
    let provider = Provider::shared()?;
    let dir = tempfile::tempdir()?;
    let server = server(dir.path()).await?;
    let port = free_port()?;
    let client = provider
        .register_client(
            &format!("http://127.0.0.1:{port}/oauth2/callback"),
            &format!("http://127.0.0.1:{port}/"),
        )
        .await?;
    provider.script(&client, Persona::new("bob", &["sre", "oncall"]));
    let proxy = OAuth2Proxy::start(
        &dir.path().join("proxy"),
        port,
        &format!("{}/", server.url),
        &provider.issuer,
        &client,
    )
    .await?;

    // An unauthenticated request goes through the provider and comes back answered by the
    // server, as the user the provider named.
    let agent = Agent::new()?;
    let whoami = format!("{}/api/breakglass/whoami", proxy.url);
    let me: Value = match agent.walk(&whoami, |_| false).await? {
        Walk::Done { status, body, .. } if status == 200 => serde_json::from_str(&body)?,
        other => bail!(
            "{other:?}\nproxy log:\n{}\nserver log:\n{}",
            proxy.log_text(),
            server.log_text()
        ),
    };
    assert_eq!(me["user"]["name"], "bob", "{me}");
    assert_eq!(me["user"]["groups"], json!(["sre", "oncall"]));
    assert_eq!(me["environments"][0]["permissions"]["approve"], true);

    // State-changing requests work through it with the CSRF token.
    let csrf = me["csrf_token"]
        .as_str()
        .ok_or_else(|| anyhow!("no csrf"))?;
    let (status, v) = agent
        .post_json(
            &format!("{}/api/breakglass/sessions", proxy.url),
            csrf,
            &request(),
        )
        .await?;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["requester"], "bob");

    // A browser's own X-Auth-Request-User does not get past the proxy.
    let r = agent
        .http
        .get(&whoami)
        .header("x-auth-request-user", "mallory")
        .header("x-auth-request-groups", "admins")
        .send()
        .await?;
    let me: Value = r.json().await?;
    assert_eq!(me["user"]["name"], "bob", "{me}");
    assert_eq!(me["user"]["groups"], json!(["sre", "oncall"]));
    Ok(())
}

#[tokio::test]
async fn proxy_headers_from_an_untrusted_address_authenticate_nobody() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = server(dir.path()).await?;
    let whoami = format!("{}/api/breakglass/whoami", server.url);
    let sessions = format!("{}/api/breakglass/sessions", server.url);
    let as_bob = |agent: &Agent, url: &str| {
        agent
            .http
            .get(url)
            .header("x-auth-request-user", "bob")
            .header("x-auth-request-groups", "sre")
    };

    // From the trusted address the headers are believed (so the refusals below are the
    // address's doing, not the headers').
    let trusted = Agent::new()?;
    let me: Value = as_bob(&trusted, &whoami).send().await?.json().await?;
    assert_eq!(me["user"]["name"], "bob", "{me}");

    let outsider = Agent::from_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)))?;
    let me: Value = as_bob(&outsider, &whoami).send().await?.json().await?;
    assert!(me["user"].is_null(), "{me}");

    // Claiming, in X-Forwarded-For or X-Real-IP, to come from the trusted proxy changes
    // nothing: only the connection's own address counts.
    for (name, value) in [
        ("x-forwarded-for", "127.0.0.1"),
        ("x-forwarded-for", "127.0.0.2, 127.0.0.1"),
        ("x-real-ip", "127.0.0.1"),
        ("forwarded", "for=127.0.0.1"),
    ] {
        let me: Value = as_bob(&outsider, &whoami)
            .header(name, value)
            .send()
            .await?
            .json()
            .await?;
        assert!(me["user"].is_null(), "{name}: {value}: {me}");
        let r = outsider
            .http
            .post(&sessions)
            .header("x-auth-request-user", "bob")
            .header("x-auth-request-groups", "sre")
            .header(name, value)
            .json(&request())
            .send()
            .await?;
        assert_eq!(r.status(), 401, "{name}: {value}");
    }
    let (_, list) = outsider.get_json(&sessions).await?;
    assert_eq!(list["code"], "unauthenticated", "{list}");
    Ok(())
}
