//! Step-up with security keys (WebAuthn, the `webauthn-rs` library): registering a person's
//! keys, and confirming one action on one session with a fresh assertion of one of them.
//!
//! Every challenge is stored with what it is for (registering, or an action and its session)
//! and whom, and is taken out of the database when the answer comes back, before anything is
//! checked: an assertion is good once, for what it was asked for, on whichever replica it
//! arrives. A cookie alone, a replayed assertion and one issued for another session or action
//! are all refused.

use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use breakglass_shared::step_up::{SecurityKeyInfo, StepUpAction};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;
use webauthn_rs::prelude::{
    CreationChallengeResponse, Passkey, PasskeyAuthentication, PasskeyRegistration,
    PublicKeyCredential, RegisterPublicKeyCredential, RequestChallengeResponse, Url, Webauthn,
    WebauthnBuilder,
};

use crate::config::Config;
use crate::store::{Challenge, SecurityKey, Store, StoreError};

/// How long a challenge may be answered: long enough to find the key and touch it.
const ANSWER_WITHIN: Duration = Duration::minutes(2);

/// The purpose of a registration challenge.
const REGISTER: &str = "register";

/// Why a key could not be registered or an action was not confirmed.
#[derive(Debug, thiserror::Error)]
pub enum StepUpError {
    /// Security keys cannot work with this server's address.
    #[error("security keys are not available here: {0}")]
    Unavailable(String),
    /// The person has no key to confirm with.
    #[error(
        "you have no security key yet: add one on your account page (Account, at the top of \
         every page), then {0} again"
    )]
    NoKey(&'static str),
    /// The action came without an assertion.
    #[error("to {0} here, confirm with your security key")]
    Missing(&'static str),
    /// The answer does not parse as a WebAuthn credential.
    #[error("the security key's answer is not readable: {0}")]
    Malformed(String),
    /// The challenge was used already, has expired, or was never issued.
    #[error("this confirmation was used already or has expired: confirm again with your key")]
    Spent,
    /// The challenge was issued for something else.
    #[error("this confirmation was asked for {0}, not for this: confirm again with your key")]
    OtherPurpose(String),
    /// The library refused the answer.
    #[error("your security key's answer did not verify ({0}): try again, or use another key")]
    Invalid(String),
    /// The key is registered already.
    #[error("this key is registered already")]
    Registered,
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The relying party and its keys.
pub struct StepUp {
    webauthn: Result<Webauthn, String>,
    store: Arc<dyn Store>,
}

/// The relying party of `config`: the host of `public_url` and its origin; without one, the
/// browser's `localhost` on any port (the embedded default a newcomer opens).
fn relying_party(config: &Config) -> Result<Webauthn, String> {
    let origin = match &config.public_url {
        Some(p) => p.origin.clone(),
        None => "http://localhost".into(),
    };
    let url = Url::parse(&origin).map_err(|e| format!("public_url: {e}"))?;
    let host = url.host_str().unwrap_or_default().to_string();
    if url.scheme() != "https" && host != "localhost" {
        return Err(format!(
            "they need the server on https (public_url is {origin}), or on http://localhost"
        ));
    }
    WebauthnBuilder::new(&host, &url)
        .map(|b| {
            b.rp_name("Break-glass")
                .timeout(ANSWER_WITHIN.unsigned_abs())
                .allow_any_port(config.public_url.is_none())
        })
        .and_then(WebauthnBuilder::build)
        .map_err(|e| format!("the relying party {host} is refused: {e}"))
}

/// The challenge bytes of a ceremony as stored: lowercase hex.
fn challenge_key(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The challenge a browser answered, read from its signed client data.
fn answered_challenge(client_data_json: &[u8]) -> Result<String, StepUpError> {
    #[derive(serde::Deserialize)]
    struct ClientData {
        challenge: String,
    }
    let data: ClientData = serde_json::from_slice(client_data_json)
        .map_err(|e| StepUpError::Malformed(format!("client data: {e}")))?;
    let bytes = URL_SAFE_NO_PAD
        .decode(data.challenge.trim_end_matches('='))
        .map_err(|e| StepUpError::Malformed(format!("challenge: {e}")))?;
    Ok(challenge_key(&bytes))
}

fn json<T: serde::Serialize>(value: &T) -> Result<String, StepUpError> {
    serde_json::to_string(value).map_err(|e| StepUpError::Malformed(e.to_string()))
}

fn parse<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> Result<T, StepUpError> {
    serde_json::from_str(text).map_err(|e| StepUpError::Malformed(format!("{what}: {e}")))
}

impl StepUp {
    /// The relying party of `config`, over `store`.
    pub fn new(config: &Config, store: Arc<dyn Store>) -> StepUp {
        StepUp {
            webauthn: relying_party(config),
            store,
        }
    }

    fn webauthn(&self) -> Result<&Webauthn, StepUpError> {
        self.webauthn
            .as_ref()
            .map_err(|why| StepUpError::Unavailable(why.clone()))
    }

    /// `user`'s keys, as their account page lists them.
    pub async fn keys(&self, user: &str) -> Result<Vec<SecurityKeyInfo>, StepUpError> {
        Ok(self
            .store
            .keys_of(user)
            .await?
            .into_iter()
            .map(|k| SecurityKeyInfo {
                id: k.id,
                name: k.name,
                created_at: k.created_at,
                last_used_at: k.last_used_at,
            })
            .collect())
    }

    async fn passkeys(&self, user: &str) -> Result<Vec<(SecurityKey, Passkey)>, StepUpError> {
        self.store
            .keys_of(user)
            .await?
            .into_iter()
            .map(|k| {
                let p = parse("a stored key", &k.passkey_json)?;
                Ok((k, p))
            })
            .collect()
    }

    async fn keep(
        &self,
        challenge: &[u8],
        user: &str,
        purpose: &str,
        session: Option<Uuid>,
        state: String,
    ) -> Result<(), StepUpError> {
        let now = OffsetDateTime::now_utc();
        let c = Challenge {
            challenge: challenge_key(challenge),
            user_name: user.to_string(),
            purpose: purpose.to_string(),
            session_id: session,
            state_json: state,
            expires_at: now + ANSWER_WITHIN,
        };
        Ok(self.store.put_challenge(&c, now).await?)
    }

    /// Takes the challenge `client_data_json` answers, if it is `user`'s for `purpose` on
    /// `session` and still valid.
    async fn redeem(
        &self,
        client_data_json: &[u8],
        user: &str,
        purpose: &str,
        session: Option<Uuid>,
    ) -> Result<Challenge, StepUpError> {
        let key = answered_challenge(client_data_json)?;
        let c = self
            .store
            .take_challenge(&key)
            .await?
            .filter(|c| c.expires_at > OffsetDateTime::now_utc() && c.user_name == user)
            .ok_or(StepUpError::Spent)?;
        if c.purpose != purpose || c.session_id != session {
            let what = match c.session_id {
                Some(id) => format!("{} on session {id}", c.purpose.replace('_', " ")),
                None => c.purpose.replace('_', " "),
            };
            return Err(StepUpError::OtherPurpose(what));
        }
        Ok(c)
    }

    /// What the browser needs to register a new key for `user` (their keys excluded).
    pub async fn registration_options(
        &self,
        user: &str,
    ) -> Result<CreationChallengeResponse, StepUpError> {
        let webauthn = self.webauthn()?;
        let have: Vec<_> = self
            .passkeys(user)
            .await?
            .into_iter()
            .map(|(_, p)| p.cred_id().clone())
            .collect();
        // The same handle for a person every time, and nothing in it but a digest of the name.
        let digest = <sha2::Sha256 as sha2::Digest>::digest(user.as_bytes());
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        let handle = Uuid::from_bytes(bytes);
        let (options, state): (_, PasskeyRegistration) = webauthn
            .start_passkey_registration(handle, user, user, Some(have))
            .map_err(|e| StepUpError::Invalid(e.to_string()))?;
        let challenge = options.public_key.challenge.clone();
        self.keep(&challenge, user, REGISTER, None, json(&state)?)
            .await?;
        Ok(options)
    }

    /// Registers the key `credential` answers with, as `name`, for `user`.
    pub async fn register(
        &self,
        user: &str,
        name: &str,
        credential: serde_json::Value,
    ) -> Result<SecurityKeyInfo, StepUpError> {
        let webauthn = self.webauthn()?;
        let answer: RegisterPublicKeyCredential = serde_json::from_value(credential)
            .map_err(|e| StepUpError::Malformed(e.to_string()))?;
        let c = self
            .redeem(&answer.response.client_data_json, user, REGISTER, None)
            .await?;
        let state: PasskeyRegistration = parse("the registration", &c.state_json)?;
        let passkey = webauthn
            .finish_passkey_registration(&answer, &state)
            .map_err(|e| StepUpError::Invalid(e.to_string()))?;
        let key = SecurityKey {
            id: Uuid::now_v7(),
            user_name: user.to_string(),
            name: name.trim().to_string(),
            credential_id: URL_SAFE_NO_PAD.encode(passkey.cred_id()),
            passkey_json: json(&passkey)?,
            created_at: OffsetDateTime::now_utc(),
            last_used_at: None,
        };
        if !self.store.add_key(&key).await? {
            return Err(StepUpError::Registered);
        }
        Ok(SecurityKeyInfo {
            id: key.id,
            name: key.name,
            created_at: key.created_at,
            last_used_at: None,
        })
    }

    /// Removes `user`'s key `id`; `false` when they have none by that id.
    pub async fn remove(&self, user: &str, id: Uuid) -> Result<bool, StepUpError> {
        Ok(self.store.remove_key(user, id).await?)
    }

    /// A challenge for `user` to confirm `action` on `session` with one of their keys.
    pub async fn options(
        &self,
        user: &str,
        action: StepUpAction,
        session: Uuid,
    ) -> Result<RequestChallengeResponse, StepUpError> {
        let webauthn = self.webauthn()?;
        let keys: Vec<Passkey> = self
            .passkeys(user)
            .await?
            .into_iter()
            .map(|(_, p)| p)
            .collect();
        if keys.is_empty() {
            return Err(StepUpError::NoKey(action.verb()));
        }
        let (options, state): (_, PasskeyAuthentication) = webauthn
            .start_passkey_authentication(&keys)
            .map_err(|e| StepUpError::Invalid(e.to_string()))?;
        let challenge = options.public_key.challenge.clone();
        self.keep(
            &challenge,
            user,
            action.as_str(),
            Some(session),
            json(&state)?,
        )
        .await?;
        Ok(options)
    }

    /// Confirms that `user` answered, with one of their keys, the challenge issued for
    /// `action` on `session`; `answer` is the browser's `PublicKeyCredential` as JSON (none:
    /// the action came with a cookie alone). Good once.
    pub async fn confirm(
        &self,
        user: &str,
        action: StepUpAction,
        session: Uuid,
        answer: Option<&str>,
    ) -> Result<(), StepUpError> {
        let webauthn = self.webauthn()?;
        let answer = answer.ok_or(StepUpError::Missing(action.verb()))?;
        let answer: PublicKeyCredential = parse("the answer", answer)?;
        let c = self
            .redeem(
                &answer.response.client_data_json,
                user,
                action.as_str(),
                Some(session),
            )
            .await?;
        let state: PasskeyAuthentication = parse("the challenge", &c.state_json)?;
        let done = webauthn
            .finish_passkey_authentication(&answer, &state)
            .map_err(|e| StepUpError::Invalid(e.to_string()))?;
        // The counter moves on (a clone of the key would show as a counter going back).
        let keys = self.passkeys(user).await?;
        let Some((key, mut passkey)) = keys
            .into_iter()
            .find(|(_, p)| p.cred_id() == done.cred_id())
        else {
            return Err(StepUpError::Invalid("not one of your keys".into()));
        };
        passkey.update_credential(&done);
        self.store
            .key_used(key.id, &json(&passkey)?, OffsetDateTime::now_utc())
            .await?;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_answered_challenge_is_read_from_the_client_data() {
        let data = br#"{"type":"webauthn.get","challenge":"AAEC_w","origin":"http://localhost"}"#;
        assert_eq!(answered_challenge(data).unwrap(), "000102ff");
        assert!(matches!(
            answered_challenge(b"{}"),
            Err(StepUpError::Malformed(_))
        ));
    }
}
