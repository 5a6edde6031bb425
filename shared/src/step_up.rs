//! Step-up with security keys: in an environment that asks for it, approving, breaking the
//! glass, terminating and approving more time each need a fresh WebAuthn assertion from one of
//! the person's registered keys (a passkey or a hardware key). The server issues a challenge
//! for one action on one session and keeps it with both; the assertion comes back with that
//! action in the [`STEP_UP_HEADER`] and is good for it once. This module holds what both sides
//! need: the actions, the request and answer bodies, and the header.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::access::Action;

/// The request header carrying the assertion (the browser's `PublicKeyCredential` as JSON)
/// with the action it was asked for.
pub const STEP_UP_HEADER: &str = "breakglass-step-up";

/// An action that needs a key in an environment with step-up.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum StepUpAction {
    /// Approve a request.
    Approve,
    /// Break the glass.
    BreakGlass,
    /// Terminate a session.
    Terminate,
    /// Approve more time.
    ApproveExtension,
}

impl StepUpAction {
    /// The step-up action of a person's `action`, for those that need one.
    pub fn of(action: Action) -> Option<StepUpAction> {
        Some(match action {
            Action::Approve => StepUpAction::Approve,
            Action::BreakGlass => StepUpAction::BreakGlass,
            Action::Terminate => StepUpAction::Terminate,
            Action::ApproveExtension => StepUpAction::ApproveExtension,
            _ => return None,
        })
    }

    /// The person's action it confirms (the inverse of [`StepUpAction::of`]).
    pub fn action(self) -> Action {
        match self {
            StepUpAction::Approve => Action::Approve,
            StepUpAction::BreakGlass => Action::BreakGlass,
            StepUpAction::Terminate => Action::Terminate,
            StepUpAction::ApproveExtension => Action::ApproveExtension,
        }
    }

    /// The stable name stored with a challenge (`break_glass`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// What it does, for sentences ("to break the glass").
    pub fn verb(self) -> &'static str {
        match self {
            StepUpAction::Approve => "approve",
            StepUpAction::BreakGlass => "break the glass",
            StepUpAction::Terminate => "terminate",
            StepUpAction::ApproveExtension => "approve more time",
        }
    }
}

/// `POST /step-up/options`: a challenge for one action on one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct StepUpOptionsRequest {
    /// What is to be done.
    pub action: StepUpAction,
    /// To which session.
    #[cfg_attr(feature = "server", schema(value_type = String, format = Uuid))]
    pub session: Uuid,
}

/// A registered key, as its owner's account page lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct SecurityKeyInfo {
    /// Its id (to remove it).
    #[cfg_attr(feature = "server", schema(value_type = String, format = Uuid))]
    pub id: Uuid,
    /// The name its owner gave it.
    pub name: String,
    /// When it was registered.
    #[serde(with = "time::serde::rfc3339")]
    #[cfg_attr(feature = "server", schema(value_type = String, format = DateTime))]
    pub created_at: OffsetDateTime,
    /// When it last confirmed an action.
    #[serde(with = "time::serde::rfc3339::option", default)]
    #[cfg_attr(feature = "server", schema(value_type = Option<String>, format = DateTime))]
    pub last_used_at: Option<OffsetDateTime>,
}

/// `POST /account/keys`: the browser's answer to the registration options, and a name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RegisterKeyRequest {
    /// A name to tell the key apart ("YubiKey on my keyring"): 1 to 100 characters.
    #[cfg_attr(feature = "server", schema(min_length = 1, max_length = 100))]
    pub name: String,
    /// The `PublicKeyCredential` of `navigator.credentials.create`, as JSON (binary fields in
    /// unpadded base64url).
    #[cfg_attr(feature = "server", schema(value_type = Object))]
    pub credential: serde_json::Value,
}

/// The longest name of a key.
pub const KEY_NAME_MAX: usize = 100;

/// Checks a key's name: not blank, at most [`KEY_NAME_MAX`] characters, plain text.
pub fn key_name(name: &str) -> Result<(), crate::validate::FieldError> {
    let n = name.trim().chars().count();
    if n == 0 {
        return Err(crate::validate::FieldError::new(
            "name",
            "is required: name the key so you can tell it apart later",
        ));
    }
    if n > KEY_NAME_MAX {
        return Err(crate::validate::FieldError::new(
            "name",
            format!("must be at most {KEY_NAME_MAX} characters"),
        ));
    }
    crate::validate::plain_text("name", name, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_actions_that_need_a_key_and_their_names() {
        assert_eq!(
            StepUpAction::of(Action::Approve),
            Some(StepUpAction::Approve)
        );
        assert_eq!(StepUpAction::of(Action::Deny), None);
        for a in [
            StepUpAction::Approve,
            StepUpAction::BreakGlass,
            StepUpAction::Terminate,
            StepUpAction::ApproveExtension,
        ] {
            assert_eq!(StepUpAction::of(a.action()), Some(a));
        }
        assert_eq!(StepUpAction::of(Action::End), None);
        assert_eq!(StepUpAction::BreakGlass.as_str(), "break_glass");
        assert_eq!(
            "approve_extension".parse::<StepUpAction>(),
            Ok(StepUpAction::ApproveExtension)
        );
        assert!(key_name(" ").is_err());
        assert!(key_name(&"k".repeat(101)).is_err());
        assert!(key_name("YubiKey 5C").is_ok());
    }
}
