//! Anchoring final recording hashes in a Rekor-compatible transparency log, and checking them.
//!
//! At the end of a session the SHA-256 of the final recording version is signed with the
//! server's ECDSA P-256 key and submitted as a `hashedrekord` v0.0.1 entry
//! (`POST /api/v1/log/entries`); the entry's UUID and log index go on the session row
//! (`Progress::Anchored`). Someone who later rewrites both the stored object and the database
//! row still cannot change the log: [`TransparencyLog::check`] fetches the entry and proves it
//! records the row's hash, was signed by this server's key, was signed by the log (the signed
//! entry timestamp) and is included in the log's Merkle tree (RFC 6962 inclusion proof).

mod entry;

use std::path::Path;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use breakglass_shared::session::RekorEntry;
use p256::ecdsa::signature::hazmat::PrehashSigner;
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{
    DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey, LineEnding,
};
use serde_json::{json, Value};

use super::TransparencyLogSettings;
use crate::fsutil::write_private;
pub(crate) use entry::{
    hashedrekord_parts, single_entry, verify_inclusion_proof, verify_set, LogEntry,
};

/// Why talking to the log failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    /// The log could not be reached or answered with a server error; retrying may work.
    #[error("transparency log unavailable: {0}")]
    Unavailable(String),
    /// The log answered, but not as a Rekor log would (or refused the entry).
    #[error("transparency log refused or answered unexpectedly: {0}")]
    Refused(String),
    /// The entry does not exist.
    #[error("transparency log entry {0} does not exist")]
    NotFound(String),
}

/// A Rekor-compatible log and the key this server signs its entries with.
pub struct TransparencyLog {
    base: String,
    http: reqwest::Client,
    key: SigningKey,
    public_pem: String,
    /// The log's own key, when pinned by configuration (else fetched from the log).
    log_key: Option<VerifyingKey>,
}

impl std::fmt::Debug for TransparencyLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransparencyLog")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// Loads the server's signing key from `path` (PKCS#8 or SEC1 PEM), creating a new P-256 key
/// there (mode 0600) when the file does not exist.
pub fn load_or_create_key(path: &Path) -> Result<SigningKey, String> {
    match std::fs::read_to_string(path) {
        Ok(pem) => SigningKey::from_pkcs8_pem(&pem)
            .or_else(|_| p256::SecretKey::from_sec1_pem(&pem).map(SigningKey::from))
            .map_err(|e| {
                format!(
                    "{} is not an ECDSA P-256 private key in PEM (PKCS#8 or SEC1): {e}",
                    path.display()
                )
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = SigningKey::random(&mut rand::rngs::OsRng);
            let pem = key
                .to_pkcs8_pem(LineEnding::LF)
                .map_err(|e| format!("cannot encode a new signing key: {e}"))?;
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            }
            write_private(path, pem.as_bytes())
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            tracing::info!(path = %path.display(), "created the recording signing key");
            Ok(key)
        }
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

impl TransparencyLog {
    /// The log of `settings`, signing with the key in its `signing_key` file (created when
    /// missing).
    pub fn open(settings: &TransparencyLogSettings) -> Result<TransparencyLog, String> {
        let key = load_or_create_key(&settings.signing_key)
            .map_err(|e| format!("recording.transparency_log.signing_key: {e}"))?;
        let log = TransparencyLog::with_key(&settings.url, key, settings.timeout)?;
        match &settings.log_public_key {
            None => Ok(log),
            Some(path) => {
                let pem = std::fs::read_to_string(path).map_err(|e| {
                    format!(
                        "recording.transparency_log.log_public_key: cannot read {}: {e}",
                        path.display()
                    )
                })?;
                log.with_log_key(&pem).map_err(|e| {
                    format!(
                        "recording.transparency_log.log_public_key: {}: {e}",
                        path.display()
                    )
                })
            }
        }
    }

    /// Pins the log's own public key (PEM): entry timestamps are checked against it instead of
    /// the key the log serves, so a log (or someone between) cannot swap keys unnoticed.
    pub fn with_log_key(mut self, pem: &str) -> Result<TransparencyLog, String> {
        let key = VerifyingKey::from_public_key_pem(pem.trim())
            .map_err(|e| format!("not an ECDSA P-256 public key in PEM: {e}"))?;
        self.log_key = Some(key);
        Ok(self)
    }

    /// A log at `base` (without `/api/v1`) signing with `key`.
    pub fn with_key(
        base: &str,
        key: SigningKey,
        timeout: Duration,
    ) -> Result<TransparencyLog, String> {
        let public_pem = key
            .verifying_key()
            .to_public_key_pem(LineEnding::LF)
            .map_err(|e| format!("cannot encode the public key: {e}"))?;
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(TransparencyLog {
            base: base.trim_end_matches('/').to_string(),
            http,
            key,
            public_pem,
            log_key: None,
        })
    }

    /// The log's base URL.
    pub fn url(&self) -> &str {
        &self.base
    }

    /// The PEM public key entries are signed with (for auditors).
    pub fn public_key_pem(&self) -> &str {
        &self.public_pem
    }

    /// The `hashedrekord` v0.0.1 proposal for `sha256_hex`, signed with the server's key.
    fn proposal(&self, sha256_hex: &str) -> Result<Value, LogError> {
        let digest = hex::decode(sha256_hex)
            .ok()
            .filter(|d| d.len() == 32)
            .ok_or_else(|| {
                LogError::Refused(format!("{sha256_hex:?} is not a SHA-256 hex digest"))
            })?;
        let signature: Signature = self
            .key
            .sign_prehash(&digest)
            .map_err(|e| LogError::Refused(format!("cannot sign the digest: {e}")))?;
        Ok(json!({
            "apiVersion": "0.0.1",
            "kind": "hashedrekord",
            "spec": {
                "signature": {
                    "content": B64.encode(signature.to_der().as_bytes()),
                    "publicKey": { "content": B64.encode(self.public_pem.as_bytes()) }
                },
                "data": { "hash": { "algorithm": "sha256", "value": sha256_hex.to_ascii_lowercase() } }
            }
        }))
    }

    /// Submits `sha256_hex` (signed) and returns the entry. Idempotent: when the log already
    /// holds the same entry (409), that entry is returned.
    pub async fn anchor(&self, sha256_hex: &str) -> Result<RekorEntry, LogError> {
        let proposal = self.proposal(sha256_hex)?;
        let url = format!("{}/api/v1/log/entries", self.base);
        let resp = self
            .http
            .post(&url)
            .json(&proposal)
            .send()
            .await
            .map_err(|e| LogError::Unavailable(format!("POST {url}: {e}")))?;
        let status = resp.status();
        if status.as_u16() == 409 {
            // An equivalent entry exists (a re-driven end after a crash): its URL is in
            // `Location`, ending in the UUID.
            let uuid = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|l| l.rsplit('/').next())
                .map(str::to_string)
                .ok_or_else(|| {
                    LogError::Refused("409 from the log without a Location header".into())
                })?;
            let (uuid, entry) = self.fetch(&uuid).await?;
            return Ok(RekorEntry {
                uuid,
                log_index: entry.log_index,
            });
        }
        let text = resp
            .text()
            .await
            .map_err(|e| LogError::Unavailable(format!("POST {url}: reading the answer: {e}")))?;
        if status.is_server_error() {
            return Err(LogError::Unavailable(format!(
                "POST {url}: {status}: {}",
                clip(&text)
            )));
        }
        if status.as_u16() != 201 {
            return Err(LogError::Refused(format!(
                "POST {url}: {status}: {}",
                clip(&text)
            )));
        }
        let (uuid, entry) = single_entry(&text)?;
        Ok(RekorEntry {
            uuid,
            log_index: entry.log_index,
        })
    }

    /// The entry called `uuid`, with the UUID the log files it under.
    async fn fetch(&self, uuid: &str) -> Result<(String, LogEntry), LogError> {
        self.fetch_text(uuid).await.map(|(_, found)| found)
    }

    /// [`TransparencyLog::fetch`] with the answer's text.
    async fn fetch_text(&self, uuid: &str) -> Result<(String, (String, LogEntry)), LogError> {
        if uuid.is_empty() || !uuid.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(LogError::Refused(format!(
                "{uuid:?} is not a log entry UUID"
            )));
        }
        let url = format!("{}/api/v1/log/entries/{uuid}", self.base);
        let (status, text) = self.get(&url).await?;
        match status.as_u16() {
            200 => single_entry(&text).map(|found| (text, found)),
            404 => Err(LogError::NotFound(uuid.to_string())),
            s if s >= 500 => Err(LogError::Unavailable(format!(
                "GET {url}: {status}: {}",
                clip(&text)
            ))),
            _ => Err(LogError::Refused(format!(
                "GET {url}: {status}: {}",
                clip(&text)
            ))),
        }
    }

    /// The log's answer for entry `uuid`, as it sent it (`{uuid: entry}` with the entry's
    /// verification: its signed timestamp and inclusion proof), for an evidence bundle.
    pub async fn entry_answer(&self, uuid: &str) -> Result<String, LogError> {
        self.fetch_text(uuid).await.map(|(text, _)| text)
    }

    /// The log's own public key (PEM): the pinned one when configured, else as the log serves
    /// it.
    pub async fn log_public_key_pem(&self) -> Result<String, LogError> {
        let key = match &self.log_key {
            Some(k) => *k,
            None => self.log_key().await?,
        };
        key.to_public_key_pem(LineEnding::LF)
            .map_err(|e| LogError::Refused(format!("cannot encode the log's key: {e}")))
    }

    /// Status and body of `GET url`; a transport failure is [`LogError::Unavailable`].
    async fn get(&self, url: &str) -> Result<(reqwest::StatusCode, String), LogError> {
        let resp = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| LogError::Unavailable(format!("GET {url}: {e}")))?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .map_err(|e| LogError::Unavailable(format!("GET {url}: reading the answer: {e}")))?;
        Ok((status, text))
    }

    /// The log's own public key (it signs entry timestamps).
    async fn log_key(&self) -> Result<VerifyingKey, LogError> {
        let url = format!("{}/api/v1/log/publicKey", self.base);
        let (status, text) = self.get(&url).await?;
        if !status.is_success() {
            return Err(LogError::Unavailable(format!(
                "GET {url}: {status}: {}",
                clip(&text)
            )));
        }
        VerifyingKey::from_public_key_pem(text.trim()).map_err(|e| {
            LogError::Refused(format!(
                "the log's public key is not an ECDSA P-256 PEM key: {e}"
            ))
        })
    }

    /// Checks `entry` against the row's `sha256_hex`: the entry exists, records that hash,
    /// carries this server's signature over it, was signed by the log, and is included in the
    /// log's tree. `Ok` says what was seen; `Err` names what failed.
    pub async fn check(&self, entry: &RekorEntry, sha256_hex: &str) -> Result<String, String> {
        let (_, found) = self.fetch(&entry.uuid).await.map_err(|e| e.to_string())?;
        if found.log_index != entry.log_index {
            return Err(format!(
                "entry {} is at log index {}, the row says {}",
                entry.uuid, found.log_index, entry.log_index
            ));
        }
        let body = B64
            .decode(&found.body)
            .map_err(|e| format!("entry body is not base64: {e}"))?;
        let (hash, sig, pem) = hashedrekord_parts(&body)?;
        if !hash.eq_ignore_ascii_case(sha256_hex) {
            return Err(format!(
                "log entry {} records sha256 {hash}, the row says {sha256_hex}",
                entry.uuid
            ));
        }
        let signer = VerifyingKey::from_public_key_pem(pem.trim())
            .map_err(|e| format!("entry's public key is not an ECDSA P-256 key: {e}"))?;
        if signer != *self.key.verifying_key() {
            return Err(format!(
                "log entry {} was signed by another key, not this server's",
                entry.uuid
            ));
        }
        let digest = hex::decode(&hash).map_err(|e| format!("entry hash is not hex: {e}"))?;
        let signature =
            Signature::from_der(&sig).map_err(|e| format!("entry signature is not DER: {e}"))?;
        p256::ecdsa::signature::hazmat::PrehashVerifier::verify_prehash(
            &signer, &digest, &signature,
        )
        .map_err(|_| {
            format!(
                "the signature in log entry {} does not match its hash",
                entry.uuid
            )
        })?;

        let verification = found
            .verification
            .as_ref()
            .ok_or_else(|| "the log returned no verification data for the entry".to_string())?;
        let set = verification
            .signed_entry_timestamp
            .as_deref()
            .ok_or_else(|| "the log returned no signed entry timestamp".to_string())?;
        let (log_key, which) = match &self.log_key {
            Some(k) => (*k, "pinned log key"),
            None => (
                self.log_key().await.map_err(|e| e.to_string())?,
                "log key as served by the log",
            ),
        };
        verify_set(&found, set, &log_key)?;
        let proof = verification
            .inclusion_proof
            .as_ref()
            .ok_or_else(|| "the log returned no inclusion proof".to_string())?;
        verify_inclusion_proof(&body, proof)?;
        Ok(format!(
            "entry {} (log index {}) records this hash, signed by this server; log signature \
             ({which}) and inclusion in a tree of {} entries verified",
            entry.uuid, found.log_index, proof.tree_size
        ))
    }
}

fn clip(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    #[test]
    fn signing_key_is_created_once_with_private_mode_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys/signing.pem");
        let a = load_or_create_key(&path).unwrap();
        let b = load_or_create_key(&path).unwrap();
        assert_eq!(a.verifying_key(), b.verifying_key());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        std::fs::write(dir.path().join("bad.pem"), "not a key").unwrap();
        let e = load_or_create_key(&dir.path().join("bad.pem")).unwrap_err();
        assert!(e.contains("not an ECDSA P-256 private key"), "{e}");
    }

    #[test]
    fn proposal_is_a_hashedrekord_signed_over_the_digest() {
        let key = SigningKey::random(&mut rand::rngs::OsRng);
        let log =
            TransparencyLog::with_key("http://127.0.0.1:1", key, Duration::from_secs(1)).unwrap();
        let sha = crate::recording::sha256_hex(b"cast");
        let p = log.proposal(&sha).unwrap();
        let body = serde_json::to_vec(&p).unwrap();
        let (hash, sig, pem) = hashedrekord_parts(&body).unwrap();
        assert_eq!(hash, sha);
        let vk = VerifyingKey::from_public_key_pem(&pem).unwrap();
        let sig = Signature::from_der(&sig).unwrap();
        use p256::ecdsa::signature::hazmat::PrehashVerifier;
        vk.verify_prehash(&hex::decode(&sha).unwrap(), &sig)
            .unwrap();
        assert!(vk.verify_prehash(&[0u8; 32], &sig).is_err());
        assert!(log.proposal("zz").is_err());
    }
}
