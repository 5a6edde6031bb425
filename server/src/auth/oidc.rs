//! OpenID Connect login: the authorization code flow with PKCE, a state and a nonce, the ID
//! token verified against the provider's JWKS. It ends in the same signed session cookie as
//! every other cookie login (`super::session_cookie`); the HTTP routes are in
//! `http/sign_in.rs`.
//!
//! The provider's metadata and keys are fetched on the first login, not at start, so a
//! provider that is down when the server starts costs a sign-in page that says so, not the
//! server. An ID token signed with a key the cached JWKS lacks makes us fetch them once more
//! (the provider rotated its keys) before refusing it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use openidconnect::core::{
    CoreClient, CoreGenderClaim, CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm,
    CoreResponseType,
};
use openidconnect::{
    AdditionalClaims, AuthenticationFlow, AuthorizationCode, ClaimsVerificationError, ClientId,
    ClientSecret, CsrfToken, DiscoveryError, IdToken, IssuerUrl, LogoutRequest, Nonce,
    NonceVerifier, OAuth2TokenResponse, PkceCodeChallenge, PkceCodeVerifier, PostLogoutRedirectUrl,
    ProviderMetadataWithLogout, RedirectUrl, RefreshToken, RequestTokenError, Scope,
    SignatureVerificationError, TokenResponse,
};
use serde::{Deserialize, Serialize};
use tokio::sync::RwLock;
use url::Url;

use crate::config::{Config, OidcSettings, UsernameClaim};

/// Seconds a started sign-in may take before its callback is refused.
pub const LOGIN_SECONDS: i64 = 600;

/// The configured OIDC provider, if any (a router extension, so its cached metadata and keys
/// live as long as the router).
#[derive(Clone)]
pub struct OidcProvider(pub Option<Arc<Provider>>);

impl OidcProvider {
    /// The provider of `[auth.oidc]`; none when that is absent.
    pub fn for_config(config: &Config) -> OidcProvider {
        OidcProvider(config.oidc.clone().and_then(|settings| {
            Provider::new(settings)
                .map_err(|e| tracing::error!(error = %e, "cannot build the OIDC HTTP client; the OIDC login is off"))
                .ok()
                .map(Arc::new)
        }))
    }
}

/// Every claim the standard claims do not take, so the groups claim can have any name.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OtherClaims(HashMap<String, serde_json::Value>);
impl AdditionalClaims for OtherClaims {}

type GroupsIdToken = IdToken<
    OtherClaims,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;

/// What a started sign-in keeps in the browser (a signed, short-lived cookie) until the
/// provider sends it back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PendingLogin {
    /// The `state` the callback must carry.
    pub state: String,
    /// The nonce the ID token must carry.
    pub nonce: String,
    /// The PKCE verifier of the challenge sent.
    pub pkce_verifier: String,
    /// Path to return to after signing in.
    pub return_to: String,
    /// Unix seconds after which the callback is refused.
    pub exp: i64,
}

/// Who an ID token names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    /// The person at the provider, whatever they are called: the issuer and `sub`, which
    /// never change hands; a name is bound to one of them (`Store::bind_identity`).
    pub subject: String,
    /// User name (from the configured username claim).
    pub user: String,
    /// Groups (from the configured groups claim).
    pub groups: Vec<String>,
}

/// Who the provider says signed in.
#[derive(Debug, Clone)]
pub struct OidcIdentity {
    /// Who the ID token names.
    pub claimed: Claimed,
    /// The verified ID token, kept as the hint of an RP-initiated logout.
    pub id_token: String,
    /// The refresh token, when the provider gave one (the `offline_access` scope).
    pub refresh_token: Option<String>,
}

/// What the provider says about a login when asked again ([`Provider::refresh`]).
#[derive(Debug, Clone)]
pub struct Refreshed {
    /// Who the new ID token names, when the answer carried one.
    pub identity: Option<Claimed>,
    /// The refresh token to use next (the provider may rotate it).
    pub refresh_token: String,
}

/// Why a sign-in did not complete; each is shown to the person as a page.
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    /// The provider did not answer (or answered with an HTTP error).
    #[error("the identity provider could not be reached: {0}")]
    Unreachable(String),
    /// The provider answered, but its discovery document is not one we can use (e.g. it
    /// names another issuer).
    #[error("the identity provider's metadata is unusable: {0}")]
    BadProvider(String),
    /// The person declined (or the provider refused them).
    #[error("access was denied at the identity provider")]
    Denied,
    /// The provider refused the request or the code exchange.
    #[error("the identity provider refused the sign-in: {0}")]
    Refused(String),
    /// No sign-in in progress in this browser matches the callback: it took too long, was
    /// already used, or was started elsewhere.
    #[error("no matching sign-in in progress (expired, already used, or from another browser)")]
    Expired,
    /// The ID token did not verify (signature, issuer, audience, expiry or nonce).
    #[error("the ID token failed verification: {0}")]
    TokenRejected(String),
    /// The ID token lacks the configured username claim.
    #[error("the ID token has no `{0}` claim")]
    MissingClaim(&'static str),
    /// The username claim is `email` and the provider does not say the address is verified:
    /// anyone could have typed it.
    #[error("the ID token's email is not verified")]
    UnverifiedEmail,
}

/// The configured provider and what was learnt from it.
pub struct Provider {
    settings: OidcSettings,
    http: reqwest::Client,
    metadata: RwLock<Option<Arc<ProviderMetadataWithLogout>>>,
}

impl Provider {
    /// A provider for `settings`; nothing is fetched yet.
    pub fn new(settings: OidcSettings) -> Result<Provider, reqwest::Error> {
        let http = reqwest::Client::builder()
            // Following redirects would let a provider's answer send us anywhere.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()?;
        Ok(Provider {
            settings,
            http,
            metadata: RwLock::new(None),
        })
    }

    /// The configuration it runs with.
    pub fn settings(&self) -> &OidcSettings {
        &self.settings
    }

    async fn discover(&self) -> Result<Arc<ProviderMetadataWithLogout>, OidcError> {
        let issuer = IssuerUrl::new(self.settings.issuer_url.clone())
            .map_err(|e| OidcError::BadProvider(e.to_string()))?;
        let meta = ProviderMetadataWithLogout::discover_async(issuer, &self.http)
            .await
            .map_err(|e| match e {
                DiscoveryError::Request(e) => OidcError::Unreachable(e.to_string()),
                DiscoveryError::Response(status, _, _) => {
                    OidcError::Unreachable(format!("its discovery document answered {status}"))
                }
                other => OidcError::BadProvider(other.to_string()),
            })?;
        let meta = Arc::new(meta);
        *self.metadata.write().await = Some(meta.clone());
        Ok(meta)
    }

    async fn cached(&self) -> Result<Arc<ProviderMetadataWithLogout>, OidcError> {
        if let Some(m) = self.metadata.read().await.clone() {
            return Ok(m);
        }
        self.discover().await
    }

    fn client(
        &self,
        meta: &ProviderMetadataWithLogout,
    ) -> openidconnect::core::CoreClient<
        openidconnect::EndpointSet,
        openidconnect::EndpointNotSet,
        openidconnect::EndpointNotSet,
        openidconnect::EndpointNotSet,
        openidconnect::EndpointMaybeSet,
        openidconnect::EndpointMaybeSet,
    > {
        CoreClient::from_provider_metadata(
            meta.clone(),
            ClientId::new(self.settings.client_id.clone()),
            Some(ClientSecret::new(self.settings.client_secret.clone())),
        )
        .set_redirect_uri(RedirectUrl::from_url(self.settings.redirect_url.clone()))
    }

    /// Starts a sign-in: the provider URL to send the browser to, and what to keep until it
    /// comes back. `return_to` must already be a safe local path.
    pub async fn begin(&self, return_to: String) -> Result<(Url, PendingLogin), OidcError> {
        let meta = self.cached().await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let (url, state, nonce) = self
            .client(&meta)
            .authorize_url(
                AuthenticationFlow::<CoreResponseType>::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .add_scopes(self.settings.extra_scopes.iter().cloned().map(Scope::new))
            .set_pkce_challenge(challenge)
            .url();
        let pending = PendingLogin {
            state: state.secret().clone(),
            nonce: nonce.secret().clone(),
            pkce_verifier: verifier.secret().clone(),
            return_to,
            exp: time::OffsetDateTime::now_utc().unix_timestamp() + LOGIN_SECONDS,
        };
        Ok((url, pending))
    }

    /// Completes the sign-in `pending` with the callback's `code`: exchanges it (with the
    /// PKCE verifier) and verifies the ID token. The caller has checked `state` already.
    pub async fn finish(
        &self,
        pending: &PendingLogin,
        code: String,
    ) -> Result<OidcIdentity, OidcError> {
        let meta = self.cached().await?;
        let client = self.client(&meta);
        let response = client
            .exchange_code(AuthorizationCode::new(code))
            .map_err(|e| OidcError::BadProvider(e.to_string()))?
            .set_pkce_verifier(PkceCodeVerifier::new(pending.pkce_verifier.clone()))
            .request_async(&self.http)
            .await
            .map_err(token_error)?;
        let raw = response
            .id_token()
            .ok_or_else(|| OidcError::TokenRejected("the token response has no ID token".into()))?
            .to_string();
        let nonce = Nonce::new(pending.nonce.clone());
        let claimed = self.identity_in(&raw, Some(&nonce)).await?;
        Ok(OidcIdentity {
            claimed,
            id_token: raw,
            refresh_token: response.refresh_token().map(|t| t.secret().clone()),
        })
    }

    /// Asks the provider about a login again with its refresh token: who it names and their
    /// groups now (from the new ID token; `None` when the answer carries none), and the refresh
    /// token to use next. [`OidcError::Refused`] means the provider no longer accepts the
    /// login.
    pub async fn refresh(&self, refresh_token: &str) -> Result<Refreshed, OidcError> {
        let meta = self.cached().await?;
        let client = self.client(&meta);
        let token = RefreshToken::new(refresh_token.to_string());
        let response = client
            .exchange_refresh_token(&token)
            .map_err(|e| OidcError::BadProvider(e.to_string()))?
            .request_async(&self.http)
            .await
            .map_err(token_error)?;
        let identity = match response.id_token() {
            // A refreshed ID token need not carry the sign-in's nonce.
            Some(t) => Some(self.identity_in(&t.to_string(), None).await?),
            None => None,
        };
        Ok(Refreshed {
            identity,
            refresh_token: response
                .refresh_token()
                .map_or_else(|| refresh_token.to_string(), |t| t.secret().clone()),
        })
    }

    /// Who an ID token names, once it verified (signature, issuer, audience, expiry, and
    /// `nonce` when given). An unknown signing key makes us fetch the provider's keys once
    /// more: it rotated them since we fetched them. An email counts as a name only when the
    /// provider says it is verified.
    async fn identity_in(&self, raw: &str, nonce: Option<&Nonce>) -> Result<Claimed, OidcError> {
        let token: GroupsIdToken = raw
            .parse()
            .map_err(|e: serde_json::Error| OidcError::TokenRejected(e.to_string()))?;
        let check_nonce = |found: Option<&Nonce>| match nonce {
            None => Ok(()),
            Some(want) => want.verify(found),
        };
        let meta = self.cached().await?;
        let claims = match token.claims(&self.client(&meta).id_token_verifier(), check_nonce) {
            Err(ClaimsVerificationError::SignatureVerification(
                SignatureVerificationError::NoMatchingKey,
            )) => {
                tracing::info!(
                    "ID token signed with a key we do not know; fetching the provider's keys again"
                );
                let meta = self.discover().await?;
                token.claims(&self.client(&meta).id_token_verifier(), check_nonce)
            }
            other => other,
        }
        .map_err(|e| OidcError::TokenRejected(e.to_string()))?;
        let claim = self.settings.username_claim;
        let user = match claim {
            UsernameClaim::Sub => Some(claims.subject().as_str()),
            UsernameClaim::PreferredUsername => claims.preferred_username().map(|u| u.as_str()),
            UsernameClaim::Email => claims.email().map(|e| e.as_str()),
        }
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .ok_or(OidcError::MissingClaim(claim.name()))?;
        if claim == UsernameClaim::Email && claims.email_verified() != Some(true) {
            return Err(OidcError::UnverifiedEmail);
        }
        Ok(Claimed {
            subject: format!("{}#{}", claims.issuer().as_str(), claims.subject().as_str()),
            user: user.to_string(),
            groups: groups_of(claims.additional_claims(), &self.settings.groups_claim),
        })
    }

    /// Where to send the browser after a local logout so the provider ends its session too
    /// (RP-initiated logout), when the provider offers it; `None` otherwise, and when the
    /// provider cannot be reached (the local logout stands on its own).
    pub async fn end_session_url(&self, id_token: Option<&str>) -> Option<Url> {
        let meta = match self.cached().await {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, "logout: the provider is unreachable; signing out locally only");
                return None;
            }
        };
        let endpoint = meta.additional_metadata().end_session_endpoint.clone()?;
        let mut req = LogoutRequest::from(endpoint)
            .set_client_id(ClientId::new(self.settings.client_id.clone()))
            .set_post_logout_redirect_uri(PostLogoutRedirectUrl::from_url(
                self.settings.post_logout_redirect_url.clone(),
            ));
        if let Some(token) = id_token.and_then(|t| t.parse::<GroupsIdToken>().ok()) {
            req = req.set_id_token_hint(&token);
        }
        Some(req.http_get_url())
    }
}

/// A token endpoint's refusal or failure as the sign-in's error.
fn token_error<RE: std::error::Error + 'static, T: openidconnect::ErrorResponse + 'static>(
    e: RequestTokenError<RE, T>,
) -> OidcError {
    match e {
        RequestTokenError::ServerResponse(r) => OidcError::Refused(r.to_string()),
        RequestTokenError::Request(e) => OidcError::Unreachable(e.to_string()),
        other => OidcError::Refused(other.to_string()),
    }
}

/// The groups in claim `name`: a list of strings, or one string; none when absent.
fn groups_of(claims: &OtherClaims, name: &str) -> Vec<String> {
    match claims.0.get(name) {
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str())
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(String::from)
            .collect(),
        Some(serde_json::Value::String(g)) if !g.trim().is_empty() => vec![g.trim().to_string()],
        _ => vec![],
    }
}

/// `return_to` when it is a path on this server (so a crafted sign-in link cannot send the
/// browser elsewhere afterwards), else `/`.
pub fn safe_return_path(return_to: Option<&str>) -> String {
    match return_to {
        Some(p) if is_local_path(p) => p.to_string(),
        _ => "/".to_string(),
    }
}

/// A path on this server and nothing a browser could read as another place: it starts with
/// one `/` (no scheme, no authority), holds only visible ASCII (browsers drop tabs and
/// newlines from URLs, so `/\t/evil.example` would become `//evil.example`), no backslash
/// (read as `/`), and no percent escape of any of those, of `/` or of `%` itself (a second
/// decoding along the way must not make one appear). Such characters never occur in the app's
/// own paths, so refusing them costs a return to the home page at worst.
fn is_local_path(p: &str) -> bool {
    let b = p.as_bytes();
    if b.first() != Some(&b'/') || matches!(b.get(1), Some(b'/' | b'\\')) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let decoded = b
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match decoded {
                    Some(c) if c.is_ascii_graphic() && !matches!(c, b'/' | b'\\' | b'%') => {}
                    _ => return false,
                }
                i += 3;
            }
            b'\\' => return false,
            c if !c.is_ascii_graphic() => return false,
            _ => i += 1,
        }
    }
    true
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_a_list_or_one_string() {
        let claims: OtherClaims = serde_json::from_value(serde_json::json!({
            "groups": ["sre", " ", "admins", 3],
            "team": "payments",
        }))
        .unwrap();
        assert_eq!(groups_of(&claims, "groups"), ["sre", "admins"]);
        assert_eq!(groups_of(&claims, "team"), ["payments"]);
        assert!(groups_of(&claims, "roles").is_empty());
    }

    #[test]
    fn only_local_paths_are_returned_to() {
        assert_eq!(safe_return_path(Some("/env/prod?x=1")), "/env/prod?x=1");
        for bad in [
            "https://evil.example/",
            "//evil.example",
            "/\\evil.example",
            "env",
            "",
            "/%2F/evil.example",
            "/%2f%2fevil.example",
            "/%5Cevil.example",
            "/%255C%255Cevil.example",
            "/\t/evil.example",
            "/\n/evil.example",
            "/ /evil.example",
            "/%09/evil.example",
            "/%0a",
            "/%00",
            "/%7F",
            "/%E2%80%AE",
            "/caf\u{e9}",
            "/\u{202e}",
            "/%",
            "/%4",
            "/%zz",
            "/env/x\r\nSet-Cookie: a=b",
        ] {
            assert_eq!(safe_return_path(Some(bad)), "/", "{bad}");
        }
        assert_eq!(safe_return_path(None), "/");
        for good in [
            "/",
            "/env/prod/ns/shop/pod/checkout",
            "/sessions/01?t=12.5",
            "/a%3Fb",
        ] {
            assert_eq!(safe_return_path(Some(good)), good);
        }
    }
}
