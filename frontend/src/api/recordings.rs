//! A session's recording: its addresses, its bytes and the server's integrity check.

use breakglass_shared::recording::{RecordingRetention, VerifyResult};
use gloo_net::http::Request;
use uuid::Uuid;
use web_sys::RequestCredentials;

use super::{get_json, send, url, ApiError};

/// Where the `.cast` of session `id` is.
pub fn recording_url(id: Uuid) -> String {
    url(&format!("/sessions/{id}/recording"))
}

/// The same, served as an attachment (the download link).
pub fn recording_download_url(id: Uuid) -> String {
    format!("{}?download=true", recording_url(id))
}

/// Where the evidence bundle of session `id` is (a tar, served as an attachment).
pub fn evidence_url(id: Uuid) -> String {
    url(&format!("/sessions/{id}/evidence"))
}

/// The raw bytes of the recording (asciicast v2).
pub async fn recording(id: Uuid) -> Result<Vec<u8>, ApiError> {
    let what = "load the recording";
    let res = send(
        what,
        Request::get(&recording_url(id))
            .credentials(RequestCredentials::SameOrigin)
            .build(),
    )
    .await?;
    res.binary().await.map_err(|e| ApiError::network(what, e))
}

/// The server's integrity check of the stored recording.
pub async fn verify_recording(id: Uuid) -> Result<VerifyResult, ApiError> {
    get_json(
        "verify the recording",
        &format!("/sessions/{id}/recording/verify"),
    )
    .await
}

/// How the store keeps the recording (its lock, as the store reports it).
pub async fn recording_retention(id: Uuid) -> Result<RecordingRetention, ApiError> {
    get_json(
        "read the recording's retention",
        &format!("/sessions/{id}/recording/retention"),
    )
    .await
}
