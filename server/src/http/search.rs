//! `/recordings/search`: the sessions whose recordings showed a text, with the moments, over
//! the recordings the caller may read (their own, and those of environments where they
//! approve: the rule of the recording's own route, checked again on every session found).

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use breakglass_shared::search::{query_words, SearchResults, DEFAULT_SESSIONS, MAX_SESSIONS};
use breakglass_shared::ErrorBody;
use serde::Deserialize;

use crate::auth::CurrentUser;
use crate::config::Config;
use crate::error::ApiError;
use crate::http::extract::ApiQuery;
use crate::store::{Readable, Store};

/// Query of the recording search.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
pub struct SearchQuery {
    /// The words to find (a line matches when it holds them all, as words or their
    /// beginnings: `kubectl get pods`).
    pub q: Option<String>,
    /// Most sessions listed (1 to 50, default 20).
    pub limit: Option<u32>,
}

/// Finds sessions by what their recordings showed: the screen's lines as a person saw them,
/// and the commands the shell ran. Ended recordings only, once indexed (`pending` counts those
/// waiting).
#[utoipa::path(get, path = "/api/breakglass/recordings/search", tag = "recordings",
    params(SearchQuery),
    responses(
        (status = 200, description = "The sessions found, newest first, each with its first moments", body = SearchResults),
        (status = 400, description = "`q` or `limit` is invalid; `field` names it", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
    ))]
pub async fn search(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    user: CurrentUser,
    ApiQuery(q): ApiQuery<SearchQuery>,
) -> Result<Json<SearchResults>, ApiError> {
    let words = query_words(q.q.as_deref().unwrap_or_default())?;
    let limit = q.limit.unwrap_or(DEFAULT_SESSIONS);
    if limit == 0 || limit > MAX_SESSIONS {
        return Err(ApiError::invalid(
            "limit",
            format!("limit: must be between 1 and {MAX_SESSIONS}"),
        ));
    }
    let readable = Readable {
        environments: config
            .environments
            .iter()
            .filter(|e| e.permissions_of(&user.name, &user.groups).approve)
            .map(|e| e.name.clone())
            .collect(),
        requester: user.name.clone(),
    };
    let may_read = |s: &breakglass_shared::Session| {
        crate::search::may_read(s, &user.name, &user.permissions(&config, &s.environment))
    };
    let sessions =
        crate::search::find(store.as_ref(), &words, &readable, may_read, limit as usize).await?;
    let pending = store.pending_count().await?;
    Ok(Json(SearchResults {
        words,
        sessions,
        pending,
    }))
}
