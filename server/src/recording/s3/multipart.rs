//! Storing a large object piece by piece (the final cast assembled from its segments): a
//! multipart upload with parts of [`PART`] bytes, so memory holds one part, never the cast.
//! Each part carries its SHA-256 (the server refuses a part that does not match); the whole is
//! hashed as it goes and the upload is completed only when that hash is the one expected,
//! otherwise aborted, so a broken source stores nothing. An object that fits in one part is
//! a plain put.

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    ChecksumAlgorithm, CompletedMultipartUpload, CompletedPart, ObjectLockMode,
};
use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::{classify, retain_until, S3Store};
use crate::recording::{
    pieces_mismatch, CastBody, Chunks, RecordingStore, RecordingStoreError, StoredVersion,
    CONTENT_TYPE,
};

/// Bytes per part (S3 wants at least 5 MiB for every part but the last).
pub(super) const PART: usize = 8 * 1024 * 1024;

fn b64(digest: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(digest)
}

/// Fills `buf` from `chunks` up to [`PART`] bytes (or the end); false at the end.
async fn fill(
    chunks: &mut dyn Chunks,
    buf: &mut Vec<u8>,
    carry: &mut Vec<u8>,
) -> Result<bool, RecordingStoreError> {
    buf.append(carry);
    while buf.len() < PART {
        match chunks.next_chunk().await? {
            Some(c) => buf.extend_from_slice(&c),
            None => return Ok(false),
        }
    }
    *carry = buf.split_off(PART);
    Ok(true)
}

/// See the module documentation.
pub(super) async fn put_chunks(
    s3: &S3Store,
    key: &str,
    chunks: &mut dyn Chunks,
    sha256: [u8; 32],
    bytes: u64,
) -> Result<StoredVersion, RecordingStoreError> {
    let (mut buf, mut carry) = (Vec::new(), Vec::new());
    let more = fill(chunks, &mut buf, &mut carry).await?;
    if !more && carry.is_empty() {
        let body = CastBody::new(buf);
        if body.len() != bytes || body.digest() != sha256 {
            return Err(pieces_mismatch(key, body.len(), bytes, &sha256));
        }
        return s3.put_version(key, body).await;
    }
    let bucket = &s3.config.bucket;
    let upload = s3
        .client
        .create_multipart_upload()
        .bucket(bucket)
        .key(key)
        .content_type(CONTENT_TYPE)
        .checksum_algorithm(ChecksumAlgorithm::Sha256)
        .object_lock_mode(ObjectLockMode::Governance)
        .object_lock_retain_until_date(retain_until(s3.config.retention))
        .send()
        .await
        .map_err(|e| classify(&format!("start the upload of {key}"), None, &e))?;
    let upload_id = upload
        .upload_id()
        .ok_or_else(|| {
            RecordingStoreError::Unavailable(format!("start the upload of {key}: no upload id"))
        })?
        .to_string();
    let result = upload_parts(
        s3,
        key,
        &upload_id,
        chunks,
        (buf, carry, more),
        sha256,
        bytes,
    )
    .await;
    if result.is_err() {
        // Best effort: an upload left behind stores nothing visible and the bucket's lifecycle
        // (or the next abort) removes its parts.
        let _ = s3
            .client
            .abort_multipart_upload()
            .bucket(bucket)
            .key(key)
            .upload_id(&upload_id)
            .send()
            .await;
    }
    result
}

async fn upload_parts(
    s3: &S3Store,
    key: &str,
    upload_id: &str,
    chunks: &mut dyn Chunks,
    first: (Vec<u8>, Vec<u8>, bool),
    sha256: [u8; 32],
    bytes: u64,
) -> Result<StoredVersion, RecordingStoreError> {
    let bucket = &s3.config.bucket;
    let (mut buf, mut carry, mut more) = first;
    let (mut hasher, mut len) = (Sha256::new(), 0u64);
    let mut parts = Vec::new();
    loop {
        hasher.update(&buf);
        len += buf.len() as u64;
        let number = i32::try_from(parts.len() + 1)
            .map_err(|_| RecordingStoreError::Refused(format!("{key} needs too many parts")))?;
        let part_sha = b64(&Sha256::digest(&buf));
        let out = s3
            .client
            .upload_part()
            .bucket(bucket)
            .key(key)
            .upload_id(upload_id)
            .part_number(number)
            .checksum_sha256(&part_sha)
            .body(ByteStream::from(std::mem::take(&mut buf)))
            .send()
            .await
            .map_err(|e| classify(&format!("upload part {number} of {key}"), None, &e))?;
        parts.push(
            CompletedPart::builder()
                .part_number(number)
                .set_e_tag(out.e_tag().map(str::to_string))
                .checksum_sha256(part_sha)
                .build(),
        );
        if !more && carry.is_empty() {
            break;
        }
        more = fill(chunks, &mut buf, &mut carry).await?;
        if buf.is_empty() {
            break;
        }
    }
    if len != bytes || <[u8; 32]>::from(hasher.finalize()) != sha256 {
        return Err(pieces_mismatch(key, len, bytes, &sha256));
    }
    let done = s3
        .client
        .complete_multipart_upload()
        .bucket(bucket)
        .key(key)
        .upload_id(upload_id)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .set_parts(Some(parts))
                .build(),
        )
        .send()
        .await
        .map_err(|e| classify(&format!("complete the upload of {key}"), None, &e))?;
    Ok(StoredVersion {
        version_id: s3.version_of(key, done.version_id())?,
        sha256: hex::encode(sha256),
        bytes,
    })
}
