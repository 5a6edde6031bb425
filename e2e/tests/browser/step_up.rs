//! Step-up with security keys in Chromium, its virtual authenticator standing in for a key
//! (CDP `WebAuthn.addVirtualAuthenticator`): an approver registers a key on the account page
//! and approves a request in an environment that asks for one, touching the key; a replayed
//! assertion, and an assertion issued for another session, are both refused by the server;
//! without a key the buttons say where to add one.

use anyhow::{ensure, Context as _};
use breakglass_e2e::browser::{frontend_dist, Browser, ChromeDriver, WebServer};
use breakglass_e2e::server::ApiClient;
use serde_json::{json, Value};

const CONFIG: &str = r#"
[[environments]]
name = "prod"
tier = "flight"
step_up = true
[environments.permissions]
"tower.breakglass.request" = { groups = ["engineers", "sre", "admins"] }
"tower.breakglass.approve" = { groups = ["sre", "admins"] }
"tower.breakglass.terminate" = { groups = ["admins"] }
"tower.breakglass.self" = { groups = ["admins"] }
"#;

/// In the page: a challenge for `action` on `session`, answered by the virtual authenticator,
/// then sent with `action` on `target` as many times as `times`; the statuses and codes.
const SEND_ASSERTION: &str = r#"
const [session, target, times, done] = arguments;
const b = (t) => Uint8Array.from(atob(t.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((t.length + 3) % 4)), (c) => c.charCodeAt(0));
const s = (buf) => btoa(String.fromCharCode(...new Uint8Array(buf))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
(async () => {
  const me = await (await fetch('/api/breakglass/whoami')).json();
  const h = { 'content-type': 'application/json', 'x-csrf-token': me.csrf_token };
  const opts = await (await fetch('/api/breakglass/step-up/options', { method: 'POST', headers: h,
    body: JSON.stringify({ action: 'approve', session }) })).json();
  const o = opts.publicKey;
  o.challenge = b(o.challenge);
  o.allowCredentials.forEach((c) => { c.id = b(c.id); });
  const cred = await navigator.credentials.get({ publicKey: o });
  const r = cred.response;
  const answer = JSON.stringify({ id: cred.id, rawId: s(cred.rawId), type: cred.type,
    response: { authenticatorData: s(r.authenticatorData), clientDataJSON: s(r.clientDataJSON),
      signature: s(r.signature), userHandle: r.userHandle ? s(r.userHandle) : null },
    extensions: {} });
  const out = [];
  for (let i = 0; i < times; i++) {
    const res = await fetch(`/api/breakglass/sessions/${target}/approve`, { method: 'POST',
      headers: { 'x-csrf-token': me.csrf_token, 'breakglass-step-up': answer } });
    const body = await res.json();
    out.push([res.status, body.code || body.state, body.message || '']);
  }
  done(out);
})().catch((e) => done([[0, String(e), '']]));
"#;

async fn request(alice: &ApiClient) -> anyhow::Result<String> {
    alice
        .create(json!({
            "environment": "prod", "namespace": "shop", "pod": "web-1", "mode": "live",
            "reason": "orders stuck in the payment worker since 09:10",
        }))
        .await
}

async fn state(alice: &ApiClient, id: &str) -> anyhow::Result<Value> {
    Ok(alice.session(id).await?["session"]["state"].clone())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_that_asks_for_a_key_takes_a_touch_and_counts_once() -> anyhow::Result<()> {
    let dist = frontend_dist()?;
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("server.toml");
    std::fs::write(&config, CONFIG)?;
    let config = config.display().to_string();
    let server = WebServer::start(&dist, &["--no-clusters", "--config", &config]).await?;
    // Security keys answer a page on a domain: localhost, not 127.0.0.1.
    let at = |path: &str| server.at(path).replace("127.0.0.1", "localhost");
    let result = async {
        let alice = ApiClient::login(&server.url, "alice").await?;
        let driver = ChromeDriver::start().await?;
        let bob = Browser::open(&driver, "bob", false).await?;
        let carol = Browser::open(&driver, "carol", false).await?;

        // Without a key, the buttons say where to add one.
        let first = request(&alice).await?;
        carol.goto(&at(&format!("/sessions/{first}"))).await?;
        carol.dev_sign_in("carol").await?;
        carol
            .wait_text("[data-testid=needs-key]", "Add one on your account page")
            .await?;

        // bob's key: the virtual authenticator, registered on the account page.
        bob.goto(&at("/account")).await?;
        bob.dev_sign_in("bob").await?;
        bob.cdp("WebAuthn.enable", json!({})).await?;
        bob.cdp(
            "WebAuthn.addVirtualAuthenticator",
            json!({ "options": {
                "protocol": "ctap2", "transport": "usb", "hasResidentKey": true,
                "hasUserVerification": true, "isUserVerified": true,
                "automaticPresenceSimulation": true,
            }}),
        )
        .await?;
        bob.wait_for("[data-testid=no-keys]").await?;
        bob.fill("#bg-key-name", "Virtual key").await?;
        bob.click("[data-action=add-key]").await?;
        bob.wait_text("[data-testid=key-added]", "Added Virtual key")
            .await?;
        bob.wait_text("[data-testid=keys]", "Virtual key").await?;
        bob.check_page("35-account-keys").await?;

        // The approval: one click, one touch.
        bob.goto(&at(&format!("/sessions/{first}"))).await?;
        bob.click("[data-action=approve]").await?;
        breakglass_e2e::wait_until(
            "approved with the key",
            breakglass_e2e::browser::UI_WAIT,
            || async { Ok((state(&alice, &first).await? == "Approved").then_some(())) },
        )
        .await
        .context("the approval with the key")?;

        // The same assertion twice: once it counts, then it is spent.
        let second = request(&alice).await?;
        let out = bob
            .client
            .execute_async(SEND_ASSERTION, vec![json!(second), json!(second), json!(2)])
            .await?;
        ensure!(
            out[0][0] == 200 && out[0][1] == "Approved",
            "the first use: {out}"
        );
        ensure!(
            out[1][0] == 403 && out[1][1] == "step_up_required",
            "a replayed assertion: {out}"
        );

        // An assertion asked for one session, sent with another: refused, nothing changes.
        let (asked, other) = (request(&alice).await?, request(&alice).await?);
        let out = bob
            .client
            .execute_async(SEND_ASSERTION, vec![json!(asked), json!(other), json!(1)])
            .await?;
        ensure!(
            out[0][0] == 403
                && out[0][1] == "step_up_required"
                && out[0][2].as_str().unwrap_or_default().contains(&asked),
            "an assertion for another session: {out}"
        );
        ensure!(
            state(&alice, &other).await? == "PendingApproval",
            "{other} moved"
        );
        ensure!(
            state(&alice, &asked).await? == "PendingApproval",
            "{asked} moved"
        );

        // A cookie alone, straight to the API: refused.
        let (status, body) = ApiClient::login(&server.url, "bob")
            .await?
            .post(&format!("/sessions/{other}/approve"), json!({}))
            .await?;
        ensure!(
            status == 403 && body["code"] == "step_up_required",
            "{status} {body}"
        );
        for b in [bob, carol] {
            b.close().await?;
        }
        anyhow::Ok(())
    }
    .await;
    if result.is_err() {
        eprintln!("server log:\n{}", server.log_text());
    }
    result
}
