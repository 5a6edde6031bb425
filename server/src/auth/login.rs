//! Beginning a login: its record (with the provider's tokens sealed) and the cookie that
//! names it, and the caller a just-made login is.

use axum_extra::extract::cookie::{Cookie, Key};
use rand::RngCore as _;
use uuid::Uuid;

use super::{csrf_token, session_cookie, tokens, CookieClaims, CurrentUser, Source};
use crate::config::Config;
use crate::error::ApiError;
use crate::store::{Login, LoginSource, Store};

/// What an identity provider handed over at sign-in (nothing for the dev login).
#[derive(Debug, Clone, Default)]
pub struct ProviderTokens {
    /// The ID token, the hint of an RP-initiated logout.
    pub id_token: Option<String>,
    /// The refresh token the login's claims are asked again with.
    pub refresh_token: Option<String>,
}

/// A login about to begin: who, through what, with which groups, for how long, and what the
/// provider handed over.
#[derive(Debug)]
pub struct NewLogin<'a> {
    /// The signed-in name (normalised).
    pub user: &'a str,
    /// The dev login or the provider.
    pub source: LoginSource,
    /// The groups at sign-in.
    pub groups: Vec<String>,
    /// How long the login lasts.
    pub lifetime: time::Duration,
    /// The provider's tokens (none for the dev login).
    pub tokens: ProviderTokens,
}

/// Starts login `new`: the record in `store` (the provider's tokens sealed, see [`tokens`]),
/// and the cookie that names it.
pub async fn begin_login(
    config: &Config,
    key: &Key,
    store: &dyn Store,
    new: NewLogin<'_>,
) -> Result<(Login, Cookie<'static>), ApiError> {
    let NewLogin {
        user,
        source,
        groups,
        lifetime,
        tokens,
    } = new;
    let mut nonce = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut nonce);
    let now = time::OffsetDateTime::now_utc();
    let id = Uuid::new_v4();
    let seal = tokens::TokenSeal::new(config, key);
    let login = Login {
        id,
        user: user.to_string(),
        source,
        groups,
        nonce: hex::encode(nonce),
        created_at: now,
        expires_at: now + lifetime,
        revoked_at: None,
        revoked_by: None,
        id_token: tokens.id_token.map(|t| seal.seal(id, &t)),
        refresh_token: tokens.refresh_token.map(|t| seal.seal(id, &t)),
        claims_checked_at: now,
    };
    store.insert_login(&login).await?;
    let cookie = session_cookie(config, &CookieClaims { login: login.id });
    Ok((login, cookie))
}

/// The caller as [`identify`] sees a just-made `login` (for the answer of a sign-in).
pub fn current_of(key: &Key, login: &Login, groups: Vec<String>) -> CurrentUser {
    CurrentUser {
        name: login.user.clone(),
        groups,
        csrf_token: csrf_token(key, &login.user, &login.nonce),
        nonce: login.nonce.clone(),
        source: match login.source {
            LoginSource::Dev => Source::DevCookie,
            LoginSource::Oidc => Source::Oidc,
        },
        login: Some(login.id),
    }
}
