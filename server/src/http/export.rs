//! `GET /export`: the audit export (`crate::export`) of the environments where the caller is
//! an admin (`tower.breakglass.terminate`) or an auditor (`tower.breakglass.audit`), streamed
//! as a download.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use breakglass_shared::ErrorBody;
use futures::TryStreamExt as _;
use serde::Deserialize;
use time::OffsetDateTime;
use utoipa::IntoParams;

use crate::auth::CurrentUser;
use crate::config::Config;
use crate::error::ApiError;
use crate::export::{ExportFormat, ExportRange};
use crate::store::Store;

/// The query of `GET /export`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ExportQuery {
    /// The earliest request time included, RFC 3339 (e.g. `2026-01-01T00:00:00Z`).
    pub since: String,
    /// The latest request time included, RFC 3339; default now.
    pub until: Option<String>,
    /// Only this environment (default: every one where the caller may export).
    pub environment: Option<String>,
    /// `jsonl` (default), `csv`, or `ocsf` (OCSF 1.5.0 events, one per line).
    pub format: Option<String>,
}

/// Checks the query against what `user` may export; the range to stream and its format.
pub fn range_of(
    config: &Config,
    user: &CurrentUser,
    q: &ExportQuery,
    now: OffsetDateTime,
) -> Result<(ExportRange, ExportFormat), ApiError> {
    let (range, format) =
        crate::export::parse(&q.since, q.until.as_deref(), q.format.as_deref(), now)?;
    let mut environments: Vec<String> = config
        .environments
        .iter()
        .filter(|e| {
            let p = e.permissions_of(&user.name, &user.groups);
            p.terminate || p.audit
        })
        .map(|e| e.name.clone())
        .collect();
    if let Some(env) = &q.environment {
        // One they cannot see at all answers as if it did not exist.
        user.environment(config, env)?;
        if !environments.contains(env) {
            return Err(ApiError::forbidden(format!(
                "exporting {env} needs tower.breakglass.audit or tower.breakglass.terminate there"
            )));
        }
        environments = vec![env.clone()];
    }
    if environments.is_empty() {
        return Err(ApiError::forbidden(
            "the export needs tower.breakglass.audit or tower.breakglass.terminate in an environment",
        ));
    }
    Ok((
        ExportRange {
            environments,
            ..range
        },
        format,
    ))
}

/// Every session requested in the range, one record each, newest first, as a download.
#[utoipa::path(get, path = "/api/breakglass/export", tag = "audit",
    params(ExportQuery),
    responses(
        (status = 200, description = "The records: JSON lines (`application/x-ndjson`) or CSV with a header row (`text/csv`); the columns are listed in docs/export.md", content(
            (String = "application/x-ndjson"),
            (String = "text/csv"),
        )),
        (status = 400, description = "A bad `since`, `until` or `format` (the field is named)", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Needs tower.breakglass.audit or tower.breakglass.terminate", body = ErrorBody),
        (status = 404, description = "No such environment", body = ErrorBody),
    ))]
pub async fn export(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    user: CurrentUser,
    Query(q): Query<ExportQuery>,
) -> Result<Response, ApiError> {
    let (range, format) = range_of(&config, &user, &q, OffsetDateTime::now_utc())?;
    tracing::info!(user = %user.name, environments = ?range.environments, since = %q.since, format = format.extension(), "audit export");
    let body = crate::export::stream(store, range, format).inspect_err(|e| {
        // The head has gone: the client sees the download cut short.
        tracing::error!(error = %e, "the audit export stopped");
    });
    let name = format!("breakglass-export.{}", format.extension());
    Ok((
        [
            (header::CONTENT_TYPE, format.content_type().to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}\""),
            ),
            (header::CACHE_CONTROL, "no-store".to_string()),
        ],
        Body::from_stream(body),
    )
        .into_response())
}
