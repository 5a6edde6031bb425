//! Secrets of the receivers: where each is read from, and the types that hold them so that
//! `Debug` (the configuration is logged and printed) never shows one.

use std::path::PathBuf;

use base64::Engine;
use serde::Deserialize;

use super::ConfigError;

/// A secret given inline, in a file, or in an environment variable: exactly one of them.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretSource {
    pub(super) value: Option<String>,
    pub(super) file: Option<PathBuf>,
    pub(super) env: Option<String>,
}

/// A value never printed: `Debug` shows `<secret>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub(super) String);

impl Secret {
    /// The value, for the one place that uses it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<secret>")
    }
}

/// A webhook signing key's bytes; `Debug` shows `<secret>`.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningKey(Vec<u8>);

impl SigningKey {
    /// A key of these bytes (the configuration checks their length).
    pub fn new(bytes: Vec<u8>) -> SigningKey {
        SigningKey(bytes)
    }

    /// The key bytes, for the one place that signs.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<secret>")
    }
}

impl SecretSource {
    pub(super) fn given(&self) -> bool {
        self.value.is_some() || self.file.is_some() || self.env.is_some()
    }

    /// The one value given, trimmed; `key.name`, `key.name_file`, `key.name_env` are its keys.
    pub(super) fn read(&self, key: &str, name: &str) -> Result<String, ConfigError> {
        let text = match (&self.value, &self.file, &self.env) {
            (Some(v), None, None) => v.clone(),
            (None, Some(f), None) => std::fs::read_to_string(f).map_err(|e| {
                ConfigError::new(
                    format!("{key}.{name}_file"),
                    format!("cannot read {}: {e}", f.display()),
                )
            })?,
            (None, None, Some(var)) => std::env::var(var).map_err(|_| {
                ConfigError::new(
                    format!("{key}.{name}_env"),
                    format!("the environment variable {var} is not set"),
                )
            })?,
            _ => {
                return Err(ConfigError::new(
                    format!("{key}.{name}"),
                    format!("give exactly one of `{name}`, `{name}_file` and `{name}_env`"),
                ))
            }
        };
        let text = text.trim().to_string();
        if text.is_empty() {
            return Err(ConfigError::new(format!("{key}.{name}"), "is empty"));
        }
        Ok(text)
    }
}

/// The key bytes of a `whsec_<base64>` secret.
pub(super) fn webhook_key(key: &str, secret: &str) -> Result<SigningKey, ConfigError> {
    let bytes = secret
        .strip_prefix("whsec_")
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
    match bytes {
        Some(b) if (24..=64).contains(&b.len()) => Ok(SigningKey(b)),
        _ => Err(ConfigError::new(
            key,
            "must be `whsec_` and the base64 of 24 to 64 random bytes (e.g. \
             `echo whsec_$(head -c 32 /dev/urandom | base64)`); several are separated by spaces",
        )),
    }
}
