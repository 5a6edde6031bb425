//! `verify-evidence`: the checks of the bundle's `VERIFY.md`, offline, on the packed bundle,
//! named the same and in the same order, stopping at the first that fails.

use std::collections::BTreeMap;
use std::io::Read;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use breakglass_shared::api::SessionEventRecord;
use breakglass_shared::Session;
use p256::ecdsa::signature::hazmat::PrehashVerifier;
use p256::ecdsa::{Signature, VerifyingKey};
use p256::pkcs8::DecodePublicKey;

use super::SegmentLink;
use crate::recording::{
    hashedrekord_parts, sha256_hex, single_entry, verify_inclusion_proof, verify_set,
};

/// The first check that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{session}: {check}: {why}")]
pub struct Failure {
    /// The session directory (or `bundle` for the archive itself).
    pub session: String,
    /// The check, as `VERIFY.md` names it.
    pub check: &'static str,
    /// What did not hold.
    pub why: String,
}

/// The bundle's files by path.
type Files = BTreeMap<String, Vec<u8>>;

/// Reads the archive `bytes` into its files.
fn unpack(mut bytes: impl Read) -> Result<Files, String> {
    let mut all = Vec::new();
    bytes
        .read_to_end(&mut all)
        .map_err(|e| format!("cannot read: {e}"))?;
    let mut archive = tar::Archive::new(&all[..]);
    let mut files = Files::new();
    for entry in archive
        .entries()
        .map_err(|e| format!("not a tar archive: {e}"))?
    {
        let mut entry = entry.map_err(|e| format!("a damaged tar entry: {e}"))?;
        let path = entry
            .path()
            .map_err(|e| format!("a tar entry without a path: {e}"))?
            .to_string_lossy()
            // `tar -C dir .` writes `./`-prefixed paths: the same file.
            .trim_start_matches("./")
            .to_string();
        let mut body = Vec::new();
        entry
            .read_to_end(&mut body)
            .map_err(|e| format!("{path}: cannot read: {e}"))?;
        files.insert(path, body);
    }
    Ok(files)
}

/// Checks the bundle read from `bundle`; each check that passed, as a line, or the first that
/// failed.
pub fn verify(bundle: impl Read) -> Result<Vec<String>, Failure> {
    let files = unpack(bundle).map_err(|why| Failure {
        session: "bundle".into(),
        check: "archive",
        why,
    })?;
    let sessions: Vec<String> = files
        .keys()
        .filter_map(|p| p.strip_suffix("/session.json"))
        .map(str::to_string)
        .collect();
    if sessions.is_empty() {
        return Err(Failure {
            session: "bundle".into(),
            check: "archive",
            why: "it holds no session".into(),
        });
    }
    let mut passed = Vec::new();
    for dir in sessions {
        let mut at = Dir {
            dir: &dir,
            files: &files,
            passed: &mut passed,
        };
        at.check_all()?;
    }
    Ok(passed)
}

/// One session directory being checked.
struct Dir<'a> {
    dir: &'a str,
    files: &'a Files,
    passed: &'a mut Vec<String>,
}

impl<'a> Dir<'a> {
    fn fail(&self, check: &'static str, why: impl Into<String>) -> Failure {
        Failure {
            session: self.dir.to_string(),
            check,
            why: why.into(),
        }
    }

    fn ok(&mut self, line: String) {
        self.passed.push(format!("{}: {line}", self.dir));
    }

    fn file(&self, name: &str) -> Option<&'a [u8]> {
        self.files
            .get(&format!("{}/{name}", self.dir))
            .map(Vec::as_slice)
    }

    fn json<T: serde::de::DeserializeOwned>(
        &self,
        check: &'static str,
        name: &str,
    ) -> Result<T, Failure> {
        let bytes = self
            .file(name)
            .ok_or_else(|| self.fail(check, format!("{name} is missing")))?;
        serde_json::from_slice(bytes).map_err(|e| self.fail(check, format!("{name}: {e}")))
    }

    fn check_all(&mut self) -> Result<(), Failure> {
        let row: Session = self.json("events", "session.json")?;
        let events: Vec<SessionEventRecord> = self.json("events", "events.json")?;
        if let Some(rec) = &row.recording {
            const CHECK: &str = "recording hash";
            let cast = self
                .file("recording.cast")
                .ok_or_else(|| self.fail(CHECK, "recording.cast is missing"))?;
            let sha = sha256_hex(cast);
            if sha != rec.sha256.to_ascii_lowercase() {
                return Err(self.fail(
                    CHECK,
                    format!(
                        "recording.cast hashes to {sha}, the row says {}",
                        rec.sha256
                    ),
                ));
            }
            if cast.len() as u64 != rec.bytes {
                return Err(self.fail(
                    CHECK,
                    format!(
                        "recording.cast has {} bytes, the row says {}",
                        cast.len(),
                        rec.bytes
                    ),
                ));
            }
            self.ok(format!("{CHECK} {sha}"));
            self.segments(cast)?;
            if let Some(entry) = &row.rekor {
                self.log(entry, &rec.sha256, cast)?;
            }
        }
        if let Some(spec) = &row.spec {
            const CHECK: &str = "approved spec";
            let doc = self
                .file("spec.json")
                .ok_or_else(|| self.fail(CHECK, "spec.json is missing"))?;
            let sha = sha256_hex(doc);
            if sha != spec.sha256 {
                return Err(self.fail(
                    CHECK,
                    format!("spec.json hashes to {sha}, the row says {}", spec.sha256),
                ));
            }
            let named = format!("spec sha256 {}", spec.sha256);
            if !events.iter().any(|e| {
                matches!(e.kind.as_str(), "approve" | "break_glass" | "create")
                    && e.detail.as_deref() == Some(named.as_str())
            }) {
                return Err(self.fail(
                    CHECK,
                    format!("no approval, broken glass or Ground request names spec {sha}"),
                ));
            }
            self.ok(format!("{CHECK} {sha}"));
        }
        self.events(&row, &events)
    }

    fn segments(&mut self, cast: &[u8]) -> Result<(), Failure> {
        const CHECK: &str = "segments chain";
        if self.file("segments.json").is_none() {
            return Ok(());
        }
        let links: Vec<SegmentLink> = self.json(CHECK, "segments.json")?;
        let mut prev = String::new();
        for l in &links {
            if l.prev_sha256 != prev {
                return Err(self.fail(
                    CHECK,
                    format!(
                        "segment {} records {} for the one before it, which hashes to {prev}",
                        l.index, l.prev_sha256
                    ),
                ));
            }
            let end = usize::try_from(l.offset + l.bytes).unwrap_or(usize::MAX);
            let through = cast.get(..end).ok_or_else(|| {
                self.fail(CHECK, format!("segment {} ends past the cast", l.index))
            })?;
            if sha256_hex(through) != l.cast_sha256 {
                return Err(self.fail(
                    CHECK,
                    format!(
                        "the cast through segment {} does not hash to {}",
                        l.index, l.cast_sha256
                    ),
                ));
            }
            let start = usize::try_from(l.offset).unwrap_or(usize::MAX);
            prev = sha256_hex(through.get(start..).unwrap_or_default());
        }
        self.ok(format!("{CHECK} ({} segments)", links.len()));
        Ok(())
    }

    fn log(
        &mut self,
        row_entry: &breakglass_shared::session::RekorEntry,
        sha256: &str,
        cast: &[u8],
    ) -> Result<(), Failure> {
        const ENTRY: &str = "log entry";
        let key = |name: &str| {
            self.files
                .get(&format!("keys/{name}"))
                .and_then(|pem| std::str::from_utf8(pem).ok())
                .and_then(|pem| VerifyingKey::from_public_key_pem(pem.trim()).ok())
                .ok_or_else(|| {
                    self.fail(ENTRY, format!("keys/{name} is missing or not a P-256 key"))
                })
        };
        let (server_key, log_key) = (key("recording-signing.pub")?, key("log.pub")?);
        let answer = self
            .file("rekor-entry.json")
            .and_then(|b| std::str::from_utf8(b).ok())
            .ok_or_else(|| self.fail(ENTRY, "rekor-entry.json is missing"))?;
        let (_, entry) = single_entry(answer).map_err(|e| self.fail(ENTRY, e.to_string()))?;
        if entry.log_index != row_entry.log_index {
            return Err(self.fail(
                ENTRY,
                format!(
                    "the entry is at log index {}, the row says {}",
                    entry.log_index, row_entry.log_index
                ),
            ));
        }
        let body = B64
            .decode(&entry.body)
            .map_err(|e| self.fail(ENTRY, format!("the entry's body is not base64: {e}")))?;
        let (hash, sig, pem) = hashedrekord_parts(&body).map_err(|e| self.fail(ENTRY, e))?;
        if !hash.eq_ignore_ascii_case(sha256) {
            return Err(self.fail(ENTRY, format!("the entry records {hash}, the row {sha256}")));
        }
        let signer = VerifyingKey::from_public_key_pem(pem.trim())
            .map_err(|e| self.fail(ENTRY, format!("the entry's key is not P-256: {e}")))?;
        if signer != server_key {
            return Err(self.fail(
                ENTRY,
                "the entry was signed by another key than keys/recording-signing.pub",
            ));
        }
        let digest = hex::decode(sha256_hex(cast)).unwrap_or_default();
        let signature = Signature::from_der(&sig)
            .map_err(|e| self.fail(ENTRY, format!("the entry's signature is not DER: {e}")))?;
        server_key
            .verify_prehash(&digest, &signature)
            .map_err(|_| {
                self.fail(
                    ENTRY,
                    "the server's signature in the entry does not verify over recording.cast",
                )
            })?;
        self.ok(format!(
            "{ENTRY} {} at index {}",
            row_entry.uuid, row_entry.log_index
        ));

        let verification = entry.verification.as_ref();
        let set = verification
            .and_then(|v| v.signed_entry_timestamp.as_deref())
            .ok_or_else(|| self.fail("log signature", "the entry has no signed entry timestamp"))?;
        verify_set(&entry, set, &log_key).map_err(|e| self.fail("log signature", e))?;
        self.ok(format!(
            "log signature (integrated at {}, Unix seconds)",
            entry.integrated_time
        ));
        let proof = verification
            .and_then(|v| v.inclusion_proof.as_ref())
            .ok_or_else(|| self.fail("inclusion proof", "the entry has no inclusion proof"))?;
        verify_inclusion_proof(&body, proof).map_err(|e| self.fail("inclusion proof", e))?;
        self.ok(format!(
            "inclusion proof (tree of {} entries)",
            proof.tree_size
        ));
        Ok(())
    }

    fn events(&mut self, row: &Session, events: &[SessionEventRecord]) -> Result<(), Failure> {
        const CHECK: &str = "events";
        for pair in events.windows(2) {
            if pair[1].from_state != Some(pair[0].to_state) {
                return Err(self.fail(
                    CHECK,
                    format!(
                        "event {} starts in {:?}, the one before it ended in {}",
                        pair[1].id, pair[1].from_state, pair[0].to_state
                    ),
                ));
            }
        }
        match events.last() {
            Some(last) if last.to_state == row.state => {}
            Some(last) => {
                return Err(self.fail(
                    CHECK,
                    format!(
                        "the history ends in {}, the row is {}",
                        last.to_state, row.state
                    ),
                ))
            }
            None => return Err(self.fail(CHECK, "events.json is empty")),
        }
        let approvers: Vec<&str> = events
            .iter()
            .filter(|e| e.kind == "approve")
            .map(|e| e.actor.as_str())
            .collect();
        let on_row: Vec<&str> = row.approvals.iter().map(|a| a.by.as_str()).collect();
        if approvers != on_row {
            return Err(self.fail(
                CHECK,
                format!("the approval events name {approvers:?}, the row {on_row:?}"),
            ));
        }
        self.ok(format!("{CHECK} ({}, ending {})", events.len(), row.state));
        Ok(())
    }
}
