//! `[auth.oidc] token_keys_file`: the keys that seal the identity provider's tokens (the
//! refresh token that renews a login, the ID token that ends it) in the database, so a copy of
//! the database or a backup is not a way to sign in as anyone at the provider. One key a line
//! (32 bytes, base64 or 64 hex digits; `#` comments and blank lines skipped): the first seals,
//! every one opens, so a key is rotated by putting a new one first and dropping the old one
//! once the logins it sealed have ended. Without the file the keys come from the server's
//! cookie key (`session_secret`, or the one generated in the data directory).

use std::path::Path;

use base64::Engine as _;

use super::ConfigError;

/// The configured token keys, newest (sealing) first; empty when none are configured.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct TokenKeys(pub Vec<[u8; 32]>);

impl std::fmt::Debug for TokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenKeys({} keys, redacted)", self.0.len())
    }
}

impl TokenKeys {
    /// Reads the keys in `path`; errors name `key` and the line at fault.
    pub(super) fn read(key: &str, path: &Path) -> Result<TokenKeys, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new(key, format!("cannot read {}: {e}", path.display())))?;
        TokenKeys::parse(key, &text)
    }

    fn parse(key: &str, text: &str) -> Result<TokenKeys, ConfigError> {
        let mut keys = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bytes = if line.len() == 64 && line.bytes().all(|b| b.is_ascii_hexdigit()) {
                hex::decode(line).ok()
            } else {
                base64::engine::general_purpose::STANDARD.decode(line).ok()
            };
            let k: [u8; 32] = bytes.and_then(|b| b.try_into().ok()).ok_or_else(|| {
                ConfigError::new(
                    key,
                    format!(
                        "line {} is not a key: each key is 32 bytes, written as base64 or \
                             64 hex digits (e.g. `openssl rand -base64 32`)",
                        n + 1
                    ),
                )
            })?;
            if keys.contains(&k) {
                return Err(ConfigError::new(
                    key,
                    format!("line {} repeats a key listed before it", n + 1),
                ));
            }
            keys.push(k);
        }
        if keys.is_empty() {
            return Err(ConfigError::new(
                key,
                "holds no key; put one per line (`openssl rand -base64 32`), or leave the key out",
            ));
        }
        Ok(TokenKeys(keys))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_read_newest_first_and_bad_lines_named() {
        let b64 = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        let hexed = hex::encode([9u8; 32]);
        let k = TokenKeys::parse("k", &format!("# newest first\n{b64}\n\n  {hexed}  \n")).unwrap();
        assert_eq!(k.0, vec![[7u8; 32], [9u8; 32]]);
        assert!(!format!("{k:?}").contains(&b64));
        for (text, says) in [
            ("", "no key"),
            ("# only a comment", "no key"),
            ("c2hvcnQ=", "line 1"),
            (&format!("{b64}\nnot base64!"), "line 2"),
            (&format!("{b64}\n{b64}"), "repeats"),
        ] {
            let e = TokenKeys::parse("auth.oidc.token_keys_file", text).unwrap_err();
            assert_eq!(e.key, "auth.oidc.token_keys_file");
            assert!(e.reason.contains(says), "{text}: {}", e.reason);
        }
    }
}
