//! What a Rekor log returns for an entry, and the checks on it that need no network: the
//! `hashedrekord` body, the signed entry timestamp and the RFC 6962 inclusion proof.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use p256::ecdsa::signature::Verifier;
use p256::ecdsa::{Signature, VerifyingKey};
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::{clip, LogError};

/// One log entry as the log returns it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LogEntry {
    pub body: String,
    pub integrated_time: i64,
    #[serde(rename = "logID")]
    pub log_id: String,
    pub log_index: i64,
    pub verification: Option<Verification>,
}

/// What the log adds to an entry to prove it holds it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Verification {
    pub signed_entry_timestamp: Option<String>,
    pub inclusion_proof: Option<InclusionProof>,
}

/// The audit path from the entry's leaf to the root of a tree of `tree_size` entries.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InclusionProof {
    pub hashes: Vec<String>,
    pub log_index: u64,
    pub root_hash: String,
    pub tree_size: u64,
}

/// A Rekor answer is an object with exactly one `uuid: entry` member.
pub(crate) fn single_entry(text: &str) -> Result<(String, LogEntry), LogError> {
    let map: BTreeMap<String, LogEntry> = serde_json::from_str(text)
        .map_err(|e| LogError::Refused(format!("unexpected entry answer ({e}): {}", clip(text))))?;
    let mut it = map.into_iter();
    match (it.next(), it.next()) {
        (Some(one), None) => Ok(one),
        _ => Err(LogError::Refused(format!(
            "expected exactly one entry in the answer: {}",
            clip(text)
        ))),
    }
}

/// (hash hex, DER signature, PEM public key) of a `hashedrekord` entry body.
pub(crate) fn hashedrekord_parts(body: &[u8]) -> Result<(String, Vec<u8>, String), String> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| format!("entry body is not JSON: {e}"))?;
    if v["kind"] != "hashedrekord" {
        return Err(format!("entry is a {} entry, not hashedrekord", v["kind"]));
    }
    let spec = &v["spec"];
    let hash = spec["data"]["hash"]["value"]
        .as_str()
        .ok_or("entry has no hash")?
        .to_string();
    if spec["data"]["hash"]["algorithm"] != "sha256" {
        return Err("entry hash is not sha256".into());
    }
    let sig = spec["signature"]["content"]
        .as_str()
        .and_then(|s| B64.decode(s).ok())
        .ok_or("entry has no signature")?;
    let pem = spec["signature"]["publicKey"]["content"]
        .as_str()
        .and_then(|s| B64.decode(s).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or("entry has no public key")?;
    Ok((hash, sig, pem))
}

/// The signed entry timestamp is the log's signature over the canonical JSON of body,
/// integratedTime, logID and logIndex (keys sorted, no spaces).
pub(crate) fn verify_set(
    entry: &LogEntry,
    set_b64: &str,
    log_key: &VerifyingKey,
) -> Result<(), String> {
    let payload = serde_json::to_vec(&json!({
        "body": entry.body,
        "integratedTime": entry.integrated_time,
        "logID": entry.log_id,
        "logIndex": entry.log_index,
    }))
    .map_err(|e| format!("cannot encode the entry timestamp payload: {e}"))?;
    let sig = B64
        .decode(set_b64)
        .ok()
        .and_then(|d| Signature::from_der(&d).ok())
        .ok_or("the signed entry timestamp is not a DER signature")?;
    log_key.verify(&payload, &sig).map_err(|_| {
        "the log's signed entry timestamp does not verify with the log's key".to_string()
    })
}

fn leaf_hash(leaf: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(leaf);
    h.finalize().into()
}

fn node_hash(left: &[u8], right: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// RFC 9162 section 2.1.3.2: the root computed from the leaf and the audit path equals the
/// proof's root hash.
pub(crate) fn verify_inclusion_proof(leaf: &[u8], proof: &InclusionProof) -> Result<(), String> {
    let hashes = proof
        .hashes
        .iter()
        .map(|h| hex::decode(h).ok().filter(|d| d.len() == 32))
        .collect::<Option<Vec<_>>>()
        .ok_or("the inclusion proof has a malformed hash")?;
    let root =
        hex::decode(&proof.root_hash).map_err(|_| "the inclusion proof's root is not hex")?;
    if inclusion_root(proof.log_index, proof.tree_size, leaf_hash(leaf), &hashes)
        .is_some_and(|r| r[..] == root[..])
    {
        Ok(())
    } else {
        Err(format!(
            "the inclusion proof does not lead to the log's root {} (tree size {})",
            proof.root_hash, proof.tree_size
        ))
    }
}

/// The root an audit path leads to, or `None` when the path does not fit the tree.
fn inclusion_root(index: u64, size: u64, leaf: [u8; 32], path: &[Vec<u8>]) -> Option<[u8; 32]> {
    if index >= size {
        return None;
    }
    let (mut fnode, mut snode) = (index, size - 1);
    let mut r = leaf;
    for p in path {
        if snode == 0 {
            return None;
        }
        if fnode & 1 == 1 || fnode == snode {
            r = node_hash(p, &r);
            while fnode & 1 == 0 && fnode != 0 {
                fnode >>= 1;
                snode >>= 1;
            }
        } else {
            r = node_hash(&r, p);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    (snode == 0).then_some(r)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The tree of leaves `0..n` built the RFC 6962 way, and the audit path of `index`.
    fn tree_root(leaves: &[[u8; 32]]) -> [u8; 32] {
        if leaves.len() == 1 {
            return leaves[0];
        }
        let k = leaves.len().next_power_of_two() / 2;
        let k = if k == leaves.len() { k / 2 } else { k };
        node_hash(&tree_root(&leaves[..k]), &tree_root(&leaves[k..]))
    }

    fn path(leaves: &[[u8; 32]], index: usize) -> Vec<Vec<u8>> {
        if leaves.len() == 1 {
            return vec![];
        }
        let k = leaves.len().next_power_of_two() / 2;
        let k = if k == leaves.len() { k / 2 } else { k };
        if index < k {
            let mut p = path(&leaves[..k], index);
            p.push(tree_root(&leaves[k..]).to_vec());
            p
        } else {
            let mut p = path(&leaves[k..], index - k);
            p.push(tree_root(&leaves[..k]).to_vec());
            p
        }
    }

    #[test]
    fn inclusion_proofs_verify_for_every_leaf_of_every_small_tree_and_fail_when_changed() {
        for n in 1..=17usize {
            let leaves: Vec<[u8; 32]> = (0..n).map(|i| leaf_hash(&[i as u8])).collect();
            let root = tree_root(&leaves);
            for i in 0..n {
                let p = path(&leaves, i);
                assert_eq!(
                    inclusion_root(i as u64, n as u64, leaves[i], &p),
                    Some(root),
                    "n={n} i={i}"
                );
                // Another leaf, index or size does not lead to the root.
                let other = leaf_hash(b"x");
                assert_ne!(inclusion_root(i as u64, n as u64, other, &p), Some(root));
                if n > 1 {
                    assert_ne!(
                        inclusion_root(((i + 1) % n) as u64, n as u64, leaves[i], &p),
                        Some(root),
                        "n={n} i={i}"
                    );
                }
                assert_eq!(inclusion_root(n as u64, n as u64, leaves[i], &p), None);
            }
        }
    }
}
