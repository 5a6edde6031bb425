//! `/sessions/{id}/recording`: the cast (stream and download) and its verification, for the
//! requester and for approvers and reviewers of the environment only.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use breakglass_shared::access::Action;
use breakglass_shared::recording::{RecordingRetention, VerifyCheck, VerifyResult};
use breakglass_shared::{ErrorBody, ErrorCode};
use serde::Deserialize;

use crate::auth::CurrentUser;
use crate::config::Config;
use crate::error::ApiError;
use crate::http::extract::{ApiQuery, SessionId};
use crate::recorder::Recorder;
use crate::recording::CheckOutcome;
use crate::store::Store;

/// Query of the recording download.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
pub struct RecordingQuery {
    /// `true`: as an attachment named `<id>.cast`.
    pub download: Option<bool>,
}

/// The session's recording (asciicast v2): the version on record, or the latest while live.
#[utoipa::path(get, path = "/api/breakglass/sessions/{id}/recording", tag = "recordings",
    params(("id" = String, Path, description = "Session id (UUID)"), RecordingQuery),
    responses(
        (status = 200, description = "The cast", content_type = "application/x-asciicast", body = String),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Not the requester nor an approver there", body = ErrorBody),
        (status = 404, description = "No such session, or nothing recorded", body = ErrorBody),
    ))]
pub async fn recording(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    State(recorder): State<Arc<Recorder>>,
    user: CurrentUser,
    SessionId(id): SessionId,
    ApiQuery(q): ApiQuery<RecordingQuery>,
) -> Result<Response, ApiError> {
    let (s, _) = user
        .session(&config, store.as_ref(), id, Action::ReadRecording)
        .await?;
    let bytes = recorder
        .read(&s)
        .await
        .map_err(|e| ApiError::new(ErrorCode::Unavailable, format!("the recording store: {e}")))?
        .ok_or_else(nothing_recorded)?;
    let mut res = ([(header::CONTENT_TYPE, "application/x-asciicast")], bytes).into_response();
    if q.download == Some(true) {
        if let Ok(v) = format!("attachment; filename=\"{id}.cast\"").parse() {
            res.headers_mut().insert(header::CONTENT_DISPOSITION, v);
        }
    }
    Ok(res)
}

/// Checks the stored recording against the hash on the session row.
#[utoipa::path(get, path = "/api/breakglass/sessions/{id}/recording/verify", tag = "recordings",
    params(("id" = String, Path, description = "Session id (UUID)")),
    responses(
        (status = 200, description = "The checks", body = VerifyResult),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Not the requester nor an approver there", body = ErrorBody),
        (status = 404, description = "No such session, or nothing recorded", body = ErrorBody),
    ))]
pub async fn verify(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    State(recorder): State<Arc<Recorder>>,
    user: CurrentUser,
    SessionId(id): SessionId,
) -> Result<Json<VerifyResult>, ApiError> {
    let (s, _) = user
        .session(&config, store.as_ref(), id, Action::ReadRecording)
        .await?;
    let report = recorder.verify(&s).await.ok_or_else(nothing_recorded)?;
    Ok(Json(VerifyResult {
        ok: report.ok(),
        checks: report
            .checks
            .iter()
            .map(|c| {
                let (outcome, detail) = match &c.outcome {
                    CheckOutcome::Pass(d) => ("pass", d),
                    CheckOutcome::Fail(d) => ("fail", d),
                    CheckOutcome::Skipped(d) => ("skipped", d),
                };
                VerifyCheck {
                    name: c.name.to_string(),
                    outcome: outcome.to_string(),
                    detail: detail.clone(),
                }
            })
            .collect(),
    }))
}

/// How the store keeps the session's recording: the lock mode and retain-until date of the
/// version on the row, as the store reports them now.
#[utoipa::path(get, path = "/api/breakglass/sessions/{id}/recording/retention", tag = "recordings",
    params(("id" = String, Path, description = "Session id (UUID)")),
    responses(
        (status = 200, description = "The lock, as the store reports it", body = RecordingRetention),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Not the requester nor an approver or reviewer there", body = ErrorBody),
        (status = 404, description = "No such session, or nothing recorded", body = ErrorBody),
        (status = 503, description = "The recording store did not answer", body = ErrorBody),
    ))]
pub async fn retention(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    State(recorder): State<Arc<Recorder>>,
    user: CurrentUser,
    SessionId(id): SessionId,
) -> Result<Json<RecordingRetention>, ApiError> {
    let (s, _) = user
        .session(&config, store.as_ref(), id, Action::ReadRecording)
        .await?;
    let rec = s.recording.as_ref().ok_or_else(nothing_recorded)?;
    let version = Some(rec.version.as_str()).filter(|v| !v.is_empty());
    let recordings = recorder.store();
    let lock = recordings
        .retention(&rec.key, version)
        .await
        .map_err(|e| ApiError::new(ErrorCode::Unavailable, format!("the recording store: {e}")))?;
    Ok(Json(RecordingRetention {
        store: recordings.describe(),
        lockable: lock.is_some(),
        legal_hold: lock.as_ref().is_some_and(|l| l.legal_hold),
        retain_until: lock.as_ref().and_then(|l| l.retain_until),
        mode: lock.and_then(|l| l.mode),
    }))
}

/// The session's evidence bundle (`crate::evidence`): a tar with its row, events, approved
/// spec, recording and transparency-log entry, and the VERIFY.md an auditor follows offline.
#[utoipa::path(get, path = "/api/breakglass/sessions/{id}/evidence", tag = "recordings",
    params(("id" = String, Path, description = "Session id (UUID)")),
    responses(
        (status = 200, description = "The bundle, as an attachment `evidence-<id>.tar`", content_type = "application/x-tar", body = Vec<u8>),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Not the requester nor an approver or reviewer there", body = ErrorBody),
        (status = 404, description = "No such session", body = ErrorBody),
        (status = 503, description = "The recording store or the transparency log did not answer", body = ErrorBody),
    ))]
pub async fn evidence(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    State(recorder): State<Arc<Recorder>>,
    user: CurrentUser,
    SessionId(id): SessionId,
) -> Result<Response, ApiError> {
    user.session(&config, store.as_ref(), id, Action::ReadRecording)
        .await?;
    let src = recorder.evidence_sources(store.clone());
    let tar = crate::evidence::write(&src, &[id], Vec::new())
        .await
        .map_err(|e| match e {
            crate::evidence::EvidenceError::Store(e) => ApiError::from(e),
            other => ApiError::new(
                ErrorCode::Unavailable,
                format!("the evidence bundle: {other}"),
            ),
        })?;
    let mut res = ([(header::CONTENT_TYPE, "application/x-tar")], tar).into_response();
    if let Ok(v) = format!("attachment; filename=\"evidence-{id}.tar\"").parse() {
        res.headers_mut().insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(res)
}

/// 404 for a session whose row names no recording.
fn nothing_recorded() -> ApiError {
    ApiError::not_found("nothing was recorded for this session")
}
