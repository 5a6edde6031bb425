//! `GET /events`: Server-Sent Events of session changes the caller may see, whichever replica
//! committed them (`Context::changes` carries the other replicas' too). When changes may have
//! been missed (this stream fell behind, or the database's notifications were interrupted) the
//! client is told `lagged` and refetches.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::Extension;
use breakglass_shared::ErrorBody;
use futures::stream::Stream;
use tokio_stream::wrappers::{BroadcastStream, WatchStream};
use tokio_stream::StreamExt;

use super::limits::LiveStreams;
use crate::auth::CurrentUser;
use crate::error::ApiError;
use crate::state::AppState;

/// Decrements the open-streams gauge when the stream is dropped (client gone).
struct OpenStream(prometheus::IntGauge);

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Live session changes: event `session` with a `SessionChange` JSON body; `lagged` when the
/// client fell behind and should reload its lists.
#[utoipa::path(get, path = "/api/breakglass/events", tag = "events",
    responses(
        (status = 200, description = "text/event-stream of `session` events", content_type = "text/event-stream", body = String),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 429, description = "The user holds as many streams as one may", body = ErrorBody),
    ))]
pub async fn stream(
    State(state): State<AppState>,
    Extension(streams): Extension<LiveStreams>,
    user: CurrentUser,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let place = streams.open(&user.name)?;
    let visible = user.visible_environments(&state);
    state.metrics.sse_open.inc();
    let guard = OpenStream(state.metrics.sse_open.clone());
    let changes = BroadcastStream::new(state.changes.subscribe()).map(Result::ok);
    let missed = WatchStream::from_changes(state.missed.subscribe()).map(|_| None);
    let stream = changes.merge(missed).filter_map(move |msg| {
        let _keep = (&guard, &place);
        match msg {
            Some(change) if visible.contains(&change.session.environment) => Event::default()
                .event("session")
                .json_data(&change)
                .ok()
                .map(Ok),
            Some(_) => None,
            None => Some(Ok(Event::default().event("lagged").data("reload"))),
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
