//! Security keys: the account page's list, registration and removal, and the confirmation of
//! an action with a key where its environment asks for one.

use breakglass_shared::step_up::{
    RegisterKeyRequest, SecurityKeyInfo, StepUpAction, StepUpOptionsRequest,
};
use uuid::Uuid;

use super::{delete, get_json, post_text, ApiError};

/// `GET /account/keys`.
pub async fn keys() -> Result<Vec<SecurityKeyInfo>, ApiError> {
    get_json("load your security keys", "/account/keys").await
}

/// A browser ceremony that did not finish, as an error of `what`.
fn ceremony(what: &str, why: String) -> ApiError {
    ApiError {
        status: None,
        code: None,
        message: format!("Could not {what}: {why}."),
        field: None,
    }
}

/// Registers a new key named `name`: the server's options, the browser's ceremony (the person
/// touches the key), the answer stored.
pub async fn add_key(name: &str) -> Result<SecurityKeyInfo, ApiError> {
    let what = "add the security key";
    let (_, options) = post_text(what, "/account/keys/options", None, None).await?;
    let answer = crate::webauthn::create(&options)
        .await
        .map_err(|why| ceremony(what, why))?;
    let credential = serde_json::from_str(&answer).map_err(|e| ceremony(what, e.to_string()))?;
    let body = RegisterKeyRequest {
        name: name.trim().to_string(),
        credential,
    };
    super::post_json(what, "/account/keys", Some(&body)).await
}

/// `DELETE /account/keys/{id}`.
pub async fn remove_key(id: Uuid) -> Result<(), ApiError> {
    delete("remove the security key", &format!("/account/keys/{id}")).await
}

/// Where `needed`, the answer of one of the person's keys to a challenge for `action` on
/// `session`, to send with that action once; `None` where the environment asks for no key.
pub async fn confirm(
    needed: bool,
    action: StepUpAction,
    session: Uuid,
) -> Result<Option<String>, ApiError> {
    if !needed {
        return Ok(None);
    }
    let what = format!("{} with your security key", action.verb());
    let body = serde_json::to_string(&StepUpOptionsRequest { action, session })
        .map_err(|e| ceremony(&what, e.to_string()))?;
    let (_, options) = post_text(&what, "/step-up/options", Some(body), None).await?;
    crate::webauthn::assert(&options)
        .await
        .map(Some)
        .map_err(|why| ceremony(&what, why))
}
