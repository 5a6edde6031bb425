//! Who is signed in: `whoami`, the dev login and signing out. Each answer carries the CSRF
//! token the core sends on state-changing requests.

use breakglass_shared::api::{DevLoginRequest, LogoutResponse, WhoAmI};

use super::{get_json, post_json, set_csrf, ApiError};

/// `GET /whoami` (never 401); remembers the CSRF token.
pub async fn whoami() -> Result<WhoAmI, ApiError> {
    let me: WhoAmI = get_json("who am I", "/whoami").await?;
    set_csrf(me.csrf_token.clone());
    Ok(me)
}

/// `POST /auth/dev-login`: sign in as a demo user; remembers the new CSRF token.
pub async fn dev_login(user: &str) -> Result<WhoAmI, ApiError> {
    let body = DevLoginRequest { user: user.into() };
    let me: WhoAmI = post_json("sign in", "/auth/dev-login", Some(&body)).await?;
    set_csrf(me.csrf_token.clone());
    Ok(me)
}

/// `POST /auth/logout`; after an OIDC login, the provider's logout page to go to next.
pub async fn logout() -> Result<LogoutResponse, ApiError> {
    let out: LogoutResponse = post_json::<(), _>("sign out", "/auth/logout", None).await?;
    set_csrf(None);
    Ok(out)
}
