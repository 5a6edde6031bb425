//! What the server's authorization request carries (PKCE with S256, a state, a nonce) and what
//! its callback refuses: a spent or foreign state, an ID token altered on the way or issued for
//! another nonce, a code whose PKCE verifier the server does not hold, a pending cookie someone
//! altered. None of them leaves a login behind.

use anyhow::{anyhow, Context as _};
use base64::Engine as _;
use breakglass_e2e::agent::{sets_cookie, Agent};
use breakglass_e2e::hydra::Persona;
use reqwest::Url;
use serde_json::Value;

use super::{Setup, AUTHORIZE, CALLBACK, PENDING_COOKIE, PENDING_PATH, SESSION_COOKIE};

/// The value of query parameter `name` of `url`.
fn param(url: &Url, name: &str) -> Option<String> {
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// `url` with query parameter `name` set to `value`, the others kept in order.
fn set_param(url: &mut Url, name: &str, value: &str) {
    let pairs: Vec<(String, String)> = url
        .query_pairs()
        .map(|(k, v)| {
            let v = if k == name {
                value.into()
            } else {
                v.into_owned()
            };
            (k.into_owned(), v)
        })
        .collect();
    url.query_pairs_mut().clear().extend_pairs(pairs);
}

/// The PKCE S256 challenge of `verifier`: base64url (no padding) of its SHA-256 (RFC 7636).
fn s256(verifier: &str) -> String {
    let hex = breakglass_server::recording::sha256_hex(verifier.as_bytes());
    let digest: Vec<u8> = (0..hex.len())
        .step_by(2)
        .filter_map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
}

/// Whether `s` is base64url without padding and `len` characters long.
fn is_base64url(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (b[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The pending cookie `sent` (as it goes over the wire) opened with the server's cookie key
/// (the one it generated in its data directory): the sign-in it keeps (state, nonce, PKCE
/// verifier, where to return). Encrypted, so nobody but the server reads it.
fn open_pending(s: &Setup, sent: &str) -> anyhow::Result<Value> {
    let key = std::fs::read(s.dir.path().join("data").join("cookie.key"))?;
    let key = cookie::Key::try_from(key.as_slice())?;
    let mut jar = cookie::CookieJar::new();
    jar.add_original(cookie::Cookie::new(PENDING_COOKIE, percent_decode(sent)));
    let opened = jar
        .private(&key)
        .get(PENDING_COOKIE)
        .ok_or_else(|| anyhow!("the pending cookie does not open with the server's key"))?;
    serde_json::from_str(opened.value())
        .with_context(|| format!("the pending cookie holds no sign-in: {}", opened.value()))
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

/// The authorization request carries PKCE (S256), a state and a nonce, each fresh per sign-in;
/// the verifier the server later sends with the code is the one the challenge was made of.
#[tokio::test]
async fn the_authorization_request_carries_pkce_a_state_and_a_nonce() -> anyhow::Result<()> {
    let s = Setup::start(None, "").await?;
    s.provider
        .script(&s.client, Persona::new("alice", &["engineers"]));
    let agent = Agent::new()?;
    let (authorize, callback) = s.to_callback_via(&agent, |_| {}).await?;
    let get = |name: &str| param(&authorize, name).unwrap_or_default();
    assert!(
        authorize.as_str().starts_with(&s.provider.issuer) && authorize.path() == AUTHORIZE,
        "{authorize}"
    );
    assert_eq!(get("response_type"), "code", "{authorize}");
    assert_eq!(get("client_id"), s.client.id, "{authorize}");
    assert_eq!(get("redirect_uri"), s.url(CALLBACK), "{authorize}");
    assert!(
        get("scope").split(' ').any(|x| x == "openid"),
        "{authorize}"
    );
    assert_eq!(get("code_challenge_method"), "S256", "{authorize}");
    let challenge = get("code_challenge");
    assert!(
        is_base64url(&challenge, 43),
        "a SHA-256 in base64url: {authorize}"
    );
    let (state, nonce) = (get("state"), get("nonce"));
    // openidconnect's random 16 bytes, base64url: nothing a third party could guess.
    assert!(state.len() >= 22 && nonce.len() >= 22, "{authorize}");
    assert_ne!(state, nonce);
    assert_eq!(param(&callback, "state"), Some(state.clone()), "{callback}");

    // What the browser keeps until it comes back is the same sign-in.
    let sent = agent
        .cookie(&s.url(CALLBACK), PENDING_COOKIE)
        .ok_or_else(|| anyhow!("no pending cookie"))?;
    assert!(
        !percent_decode(&sent).contains(&state),
        "the pending cookie is encrypted, not only signed: {sent}"
    );
    let pending = open_pending(&s, &sent)?;
    assert_eq!(pending["state"], state.as_str(), "{pending}");
    assert_eq!(pending["nonce"], nonce.as_str(), "{pending}");

    let me = s.complete(&agent, callback).await?;
    assert_eq!(me["user"]["name"], "alice");
    let calls = s.provider.token_calls(&s.client);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].grant_type, "authorization_code");
    assert_eq!(calls[0].status, 200, "{calls:?}");
    let verifier = calls[0].code_verifier.clone().unwrap_or_default();
    assert!(
        (43..=128).contains(&verifier.len()),
        "RFC 7636's verifier length: {verifier:?}"
    );
    assert_eq!(
        s256(&verifier),
        challenge,
        "the challenge is the verifier's S256"
    );
    assert_eq!(pending["pkce_verifier"], verifier.as_str());

    // Another sign-in shares none of them.
    let (again, _) = s.to_callback_via(&Agent::new()?, |_| {}).await?;
    for name in ["state", "nonce", "code_challenge"] {
        assert_ne!(param(&again, name), param(&authorize, name), "{name}");
    }
    Ok(())
}

/// An ID token issued for another nonce (someone changed the authorization request on its way
/// to the provider, or replays a token of another sign-in) is refused, though properly signed.
#[tokio::test]
async fn an_id_token_for_another_nonce_is_refused() -> anyhow::Result<()> {
    let s = Setup::start(None, "").await?;
    s.provider
        .script(&s.client, Persona::new("alice", &["engineers"]));
    let agent = Agent::new()?;
    let (_, callback) = s
        .to_callback_via(&agent, |u| {
            set_param(u, "nonce", "a-nonce-this-browser-never-started-with");
        })
        .await?;
    s.expect_page(&agent, callback.as_str(), 502, "token-rejected")
        .await?;
    // The exchange went through: what was refused is the ID token.
    let calls = s.provider.token_calls(&s.client);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].status, 200, "{calls:?}");
    let log = s.server.log_text();
    assert!(log.contains("Invalid nonce: nonce mismatch"), "{log}");
    assert!(!log.contains("signed in through OIDC"), "{log}");
    assert_eq!(s.logins().await?, 0, "no login was made");

    // The same client with the nonce it was given signs in.
    let me = s
        .sign_in(&agent, Persona::new("alice", &["engineers"]))
        .await?;
    assert_eq!(me["user"]["name"], "alice");
    assert_eq!(s.logins().await?, 1);
    Ok(())
}

/// A code whose authorization request carried a challenge the server did not make (someone
/// swapped it on the way, to redeem the code with their own verifier) cannot be redeemed with
/// the server's verifier: the provider refuses the exchange and nobody is signed in.
#[tokio::test]
async fn a_code_without_its_pkce_verifier_is_refused() -> anyhow::Result<()> {
    let s = Setup::start(None, "").await?;
    s.provider
        .script(&s.client, Persona::new("alice", &["engineers"]));
    let agent = Agent::new()?;
    let theirs = "a-verifier-of-someone-else-0123456789-abcdefghijklmnop";
    let (_, callback) = s
        .to_callback_via(&agent, |u| set_param(u, "code_challenge", &s256(theirs)))
        .await?;
    s.expect_page(&agent, callback.as_str(), 502, "provider-refused")
        .await?;
    let calls = s.provider.token_calls(&s.client);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].grant_type, "authorization_code");
    assert_eq!(calls[0].status, 400, "the provider refused it: {calls:?}");
    let sent = calls[0].code_verifier.clone().unwrap_or_default();
    assert!(!sent.is_empty() && sent != theirs, "{calls:?}");
    assert_eq!(s.logins().await?, 0, "no login was made");
    Ok(())
}

/// A pending cookie altered in the browser (one byte of its ciphertext changed) is no sign-in
/// of ours: the callback is refused before the code is spent, and the code still completes
/// with the cookie the server made.
#[tokio::test]
async fn an_altered_pending_cookie_is_refused_before_the_code_is_spent() -> anyhow::Result<()> {
    let s = Setup::start(None, "").await?;
    s.provider
        .script(&s.client, Persona::new("alice", &["engineers"]));
    let agent = Agent::new()?;
    let callback = s.to_callback(&agent).await?;
    let here = s.url(CALLBACK);
    let sent = agent
        .cookie(&here, PENDING_COOKIE)
        .ok_or_else(|| anyhow!("no pending cookie"))?;
    open_pending(&s, &sent)?;
    let mut raw = percent_decode(&sent).into_bytes();
    let mid = raw.len() / 2;
    raw[mid] = if raw[mid] == b'A' { b'B' } else { b'A' };
    let altered = percent_encode(&String::from_utf8(raw)?);
    assert!(
        open_pending(&s, &altered).is_err(),
        "the alteration is seen"
    );
    agent.set_cookie(
        &here,
        &format!("{PENDING_COOKIE}={altered}; Path={PENDING_PATH}"),
    )?;
    s.expect_page(&agent, callback.as_str(), 400, "expired")
        .await?;
    let calls = s.provider.token_calls(&s.client);
    assert!(calls.is_empty(), "the code was not exchanged: {calls:?}");

    agent.set_cookie(
        &here,
        &format!("{PENDING_COOKIE}={sent}; Path={PENDING_PATH}"),
    )?;
    let r = agent.http.get(callback).send().await?;
    assert_eq!(r.status(), 303, "{}", r.text().await?);
    assert!(sets_cookie(r.headers(), SESSION_COOKIE));
    assert_eq!(s.logins().await?, 1);
    Ok(())
}
