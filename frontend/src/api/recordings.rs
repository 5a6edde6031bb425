//! A session's recording: its addresses, its bytes and the server's integrity check.

use breakglass_shared::recording::{RecordingRetention, VerifyResult};
use breakglass_shared::search::SearchResults;
use gloo_net::http::Request;
use uuid::Uuid;
use web_sys::RequestCredentials;

use super::{get_json, query_string, send, url, within, ApiError, RECORDING_WITHIN_MS};

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
        within(Request::get(&recording_url(id)), RECORDING_WITHIN_MS)
            .credentials(RequestCredentials::SameOrigin)
            .build(),
    )
    .await?;
    res.binary().await.map_err(|e| ApiError::failed(what, e))
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

/// The path and query of a recording search for `q`, listing at most `limit` sessions.
fn search_path(q: &str, limit: Option<u32>) -> String {
    format!(
        "/recordings/search{}",
        query_string(&[
            ("q", Some(q.into())),
            ("limit", limit.map(|l| l.to_string()))
        ])
    )
}

/// `GET /recordings/search?q=...&limit=...`: the sessions whose recordings showed every word of
/// `q`, among those the caller may read. A bad `q` or `limit` is a 400 naming the field.
pub async fn search_recordings(q: &str, limit: Option<u32>) -> Result<SearchResults, ApiError> {
    get_json("search the recordings", &search_path(q, limit)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_queries() {
        assert_eq!(
            search_path("kubectl get pods", None),
            "/recordings/search?q=kubectl%20get%20pods"
        );
        assert_eq!(
            url(&search_path("é", Some(5))),
            "/api/breakglass/recordings/search?q=%C3%A9&limit=5"
        );
    }
}
