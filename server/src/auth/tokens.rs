//! The identity provider's tokens sealed for the database: AES-256-GCM under the configured
//! token keys (`config::TokenKeys`) or, without them, a key derived from the cookie key. A
//! sealed token names its key (so rotation needs no migration) and is bound to its login's
//! id (so a sealed token copied onto another login's row does not open there).
//!
//! Stored form: `v1.<key id>.<base64url(nonce || ciphertext || tag)>`, the key id being the
//! first 4 bytes of the key's SHA-256 in hex.

use axum_extra::extract::cookie::Key;
use base64::Engine as _;
use rand::RngCore as _;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::config::Config;

const VERSION: &str = "v1";
const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Seals and opens tokens for one server's keys.
pub struct TokenSeal {
    /// Key id and key, the sealing one first.
    keys: Vec<(String, LessSafeKey)>,
}

impl TokenSeal {
    /// The seal of `config`'s token keys, or of the one derived from `cookie_key` when none
    /// are configured.
    pub fn new(config: &Config, cookie_key: &Key) -> TokenSeal {
        let configured = config
            .oidc
            .as_ref()
            .map(|o| o.token_keys.0.clone())
            .unwrap_or_default();
        let raw = if configured.is_empty() {
            let mut h = Sha256::new();
            h.update(b"breakglass oidc token key v1\0");
            h.update(cookie_key.master());
            vec![<[u8; 32]>::from(h.finalize())]
        } else {
            configured
        };
        TokenSeal::of(&raw)
    }

    fn of(raw: &[[u8; 32]]) -> TokenSeal {
        let keys = raw
            .iter()
            .filter_map(|k| {
                let id = hex::encode(&Sha256::digest(k)[..4]);
                // A 32-byte key is what AES-256 takes: this cannot fail.
                let key = UnboundKey::new(&AES_256_GCM, k).ok()?;
                Some((id, LessSafeKey::new(key)))
            })
            .collect();
        TokenSeal { keys }
    }

    /// `token` sealed for the row of `login` under the newest key.
    pub fn seal(&self, login: Uuid, token: &str) -> String {
        let Some((id, key)) = self.keys.first() else {
            // `new` always makes at least one key; an empty seal keeps nothing rather than
            // keeping a token in clear.
            return String::new();
        };
        let mut nonce = [0u8; NONCE_LEN];
        rand::thread_rng().fill_bytes(&mut nonce);
        let mut buf = token.as_bytes().to_vec();
        if key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(login.as_bytes()),
                &mut buf,
            )
            .is_err()
        {
            return String::new();
        }
        let mut out = nonce.to_vec();
        out.extend_from_slice(&buf);
        format!("{VERSION}.{id}.{}", B64.encode(out))
    }

    /// The token in `stored` for the row of `login`; `None` when it was sealed under a key
    /// this server no longer has, for another login, or altered. A value written before
    /// tokens were sealed is read as it is (it is sealed when the login is next renewed).
    pub fn open(&self, login: Uuid, stored: &str) -> Option<String> {
        let Some(rest) = stored.strip_prefix("v1.") else {
            return (!stored.is_empty()).then(|| stored.to_string());
        };
        let (id, body) = rest.split_once('.')?;
        let Some((_, key)) = self.keys.iter().find(|(k, _)| k == id) else {
            tracing::warn!(%login, key = id, "a stored provider token is sealed under a key this server no longer has; the login must sign in again to be renewed");
            return None;
        };
        let bytes = B64.decode(body).ok()?;
        if bytes.len() < NONCE_LEN {
            return None;
        }
        let (nonce, sealed) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = sealed.to_vec();
        let plain = key
            .open_in_place(nonce, Aad::from(login.as_bytes()), &mut buf)
            .ok()?;
        String::from_utf8(plain.to_vec()).ok()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sealed_tokens_open_only_for_their_login_under_a_key_still_held() {
        let (old, new) = ([1u8; 32], [2u8; 32]);
        let login = Uuid::new_v4();
        let before = TokenSeal::of(&[old]);
        let sealed = before.seal(login, "refresh-token-abc");
        assert!(sealed.starts_with("v1."), "{sealed}");
        assert!(!sealed.contains("refresh-token-abc"));
        assert_ne!(
            sealed,
            before.seal(login, "refresh-token-abc"),
            "a fresh nonce each time"
        );
        assert_eq!(
            before.open(login, &sealed).as_deref(),
            Some("refresh-token-abc")
        );
        assert_eq!(
            before.open(Uuid::new_v4(), &sealed),
            None,
            "another login's row"
        );

        // Rotation: the new key seals, the old one still opens; once dropped, it does not.
        let rotated = TokenSeal::of(&[new, old]);
        assert_eq!(
            rotated.open(login, &sealed).as_deref(),
            Some("refresh-token-abc")
        );
        let resealed = rotated.seal(login, "next");
        assert_eq!(before.open(login, &resealed), None);
        assert_eq!(TokenSeal::of(&[new]).open(login, &sealed), None);

        // Altered anywhere: refused.
        let mut altered = sealed.clone().into_bytes();
        let last = altered.len() - 2;
        altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
        assert_eq!(
            before.open(login, &String::from_utf8(altered).unwrap()),
            None
        );
        for bad in ["v1.", "v1.x", "v1.abcd.%%%", "v1.abcd."] {
            assert_eq!(before.open(login, bad), None, "{bad}");
        }
        // A value from before sealing reads as it is.
        assert_eq!(before.open(login, "plain").as_deref(), Some("plain"));
    }
}
