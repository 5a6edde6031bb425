//! A login record turned into the caller it stands for, now: live, of a login still
//! configured, and (after an OIDC sign-in) as the provider sees it at its last check. The
//! cookie's requests come through here, and so does the check of what people hold open
//! (`crate::revocation`), so a socket ends for exactly the reasons a request is refused.

use std::sync::Arc;

use axum_extra::extract::cookie::Key;
use breakglass_shared::names;
use uuid::Uuid;

use super::{csrf_token, oidc, tokens, CurrentUser, Source};
use crate::config::Config;
use crate::error::ApiError;
use crate::store::{Login, LoginSelector, LoginSource, Store};

/// The caller login `id` stands for, or `None` when it no longer lets anybody in (ended,
/// expired, a demo user or a provider no longer configured, refused by the provider at its
/// check, which `provider` makes when due).
pub async fn resolve_login(
    config: &Config,
    key: &Key,
    store: &dyn Store,
    provider: Option<Arc<oidc::Provider>>,
    id: Uuid,
) -> Result<Option<CurrentUser>, ApiError> {
    let Some(mut login) = store.get_login(id).await? else {
        return Ok(None);
    };
    if !login.is_live(time::OffsetDateTime::now_utc()) {
        return Ok(None);
    }
    let (source, groups) = match login.source {
        // A demo user is only honoured while the dev login is on and still lists them, with
        // the groups the configuration gives them now.
        LoginSource::Dev => {
            let Some(user) = config
                .dev_users
                .iter()
                .find(|u| u.name == login.user)
                .filter(|_| config.dev_login)
            else {
                return Ok(None);
            };
            (Source::DevCookie, user.groups.clone())
        }
        LoginSource::Oidc => {
            let Some(settings) = &config.oidc else {
                return Ok(None);
            };
            match recheck(config, key, store, provider, settings.claims_refresh, login).await? {
                Some(l) => {
                    let groups = l.groups.clone();
                    login = l;
                    (Source::Oidc, groups)
                }
                None => return Ok(None),
            }
        }
    };
    Ok(Some(CurrentUser {
        csrf_token: csrf_token(key, &login.user, &login.nonce),
        nonce: login.nonce,
        name: login.user,
        groups,
        source,
        login: Some(login.id),
    }))
}

/// An OIDC login as the provider sees it now: unchanged while it was asked less than
/// `every` ago (or gave no refresh token, or another request is asking right now); else
/// renewed with its refresh token and carrying the new ID token's groups; `None` (and the
/// record ended) when the provider refuses it or names someone else. A provider that cannot be
/// reached leaves the login as it was until the next check: the person keeps working.
async fn recheck(
    config: &Config,
    key: &Key,
    store: &dyn Store,
    provider: Option<Arc<oidc::Provider>>,
    every: time::Duration,
    mut login: Login,
) -> Result<Option<Login>, ApiError> {
    let now = time::OffsetDateTime::now_utc();
    let (Some(provider), Some(sealed)) = (provider, login.refresh_token.clone()) else {
        return Ok(Some(login));
    };
    if now - login.claims_checked_at < every
        || !store
            .claim_login_check(login.id, login.claims_checked_at, now)
            .await?
    {
        return Ok(Some(login));
    }
    // Only a login due for its check opens its token: the seal's keys are not made per request.
    let seal = tokens::TokenSeal::new(config, key);
    let Some(refresh) = seal.open(login.id, &sealed) else {
        return Ok(Some(login));
    };
    match provider.refresh(&refresh).await {
        Ok(answer) => {
            if let Some(claimed) = answer.identity {
                let user = &claimed.user;
                if names::normalise(user, config.fold_names).ok().as_ref() != Some(&login.user) {
                    let why = format!("the provider now names {user:?}");
                    return end_login(store, &login, &why, now).await;
                }
                if !store
                    .bind_identity(&claimed.subject, &login.user, now)
                    .await?
                {
                    let why = "the name now belongs to another subject at the provider";
                    return end_login(store, &login, why, now).await;
                }
                login.groups = claimed.groups;
            }
            let sealed = seal.seal(login.id, &answer.refresh_token);
            store
                .set_login_claims(login.id, &login.groups, Some(&sealed))
                .await?;
            login.refresh_token = Some(sealed);
            Ok(Some(login))
        }
        Err(e @ (oidc::OidcError::Refused(_) | oidc::OidcError::TokenRejected(_))) => {
            end_login(store, &login, &e.to_string(), now).await
        }
        Err(e) => {
            tracing::warn!(user = %login.user, error = %e, "cannot ask the identity provider about a login; keeping it until the next check");
            Ok(Some(login))
        }
    }
}

/// Ends `login` because of what the provider answered (`why`, for the log).
async fn end_login(
    store: &dyn Store,
    login: &Login,
    why: &str,
    now: time::OffsetDateTime,
) -> Result<Option<Login>, ApiError> {
    tracing::info!(user = %login.user, login = %login.id, why, "login ended by the identity provider's answer");
    store
        .revoke_logins(&LoginSelector::Id(login.id), "identity provider", now)
        .await?;
    Ok(None)
}
