//! `GET /events`: Server-Sent Events of session changes the caller may see, whichever replica
//! committed them (`Context::changes` carries the other replicas' too). When changes may have
//! been missed (this stream fell behind, or the database's notifications were interrupted) the
//! client is told `lagged` and refetches.
//!
//! Each change is turned into its JSON once per replica ([`Fanout`]), not once per stream: with
//! 1,000 streams open, serialising the session for each of them was most of the time a change
//! took to reach the last one (BENCHMARKS.md, "Activation, store and live updates").

use std::convert::Infallible;
use std::sync::{Arc, Once};
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::Extension;
use breakglass_shared::api::SessionChange;
use breakglass_shared::ErrorBody;
use futures::stream::Stream;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::watch;
use tokio_stream::wrappers::{BroadcastStream, WatchStream};
use tokio_stream::StreamExt;

use super::limits::LiveStreams;
use crate::auth::CurrentUser;
use crate::config::Config;
use crate::error::ApiError;
use crate::holds::{Held, Holds};
use crate::metrics::Metrics;

/// Decrements the open-streams gauge when the stream is dropped (client gone).
struct OpenStream(prometheus::IntGauge);

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A change as every stream sends it.
enum Rendered {
    /// A session changed: its environment (who may see it) and the `SessionChange` JSON.
    Session { environment: String, json: String },
    /// The renderer fell behind the changes: every stream must tell its client to refetch.
    Lagged,
    /// The locks in force changed: every page reads its environments' locks again.
    Locks,
}

/// The replica's streams' one subscription to `Context::changes`: a task renders each change
/// once and hands it to every stream on a channel of its own. Started by the first stream.
#[derive(Clone)]
pub struct Fanout(Arc<FanoutInner>);

struct FanoutInner {
    changes: broadcast::Sender<SessionChange>,
    missed: watch::Sender<u64>,
    locks: watch::Sender<u64>,
    rendered: broadcast::Sender<Arc<Rendered>>,
    started: Once,
}

impl Fanout {
    /// The streams' share of the replica's `changes`, of `missed`, bumped when other
    /// replicas' changes may have been missed, and of `locks`, bumped when the locks changed.
    pub fn new(
        changes: broadcast::Sender<SessionChange>,
        missed: watch::Sender<u64>,
        locks: watch::Sender<u64>,
    ) -> Fanout {
        // As deep as `Context::changes`: a stream lags no sooner than it would have there.
        Fanout(Arc::new(FanoutInner {
            changes,
            missed,
            locks,
            rendered: broadcast::channel(1024).0,
            started: Once::new(),
        }))
    }

    /// The rendered changes from now on; starts the renderer if none runs yet.
    fn subscribe(&self) -> broadcast::Receiver<Arc<Rendered>> {
        let rx = self.0.rendered.subscribe();
        self.0.started.call_once(|| {
            tokio::spawn(render(self.0.changes.subscribe(), self.0.rendered.clone()));
        });
        rx
    }
}

/// Renders each change once, until the replica's change channel closes.
async fn render(
    mut changes: broadcast::Receiver<SessionChange>,
    out: broadcast::Sender<Arc<Rendered>>,
) {
    loop {
        let rendered = match changes.recv().await {
            Ok(change) => match serde_json::to_string(&change) {
                Ok(json) => Rendered::Session {
                    environment: change.session.environment,
                    json,
                },
                Err(e) => {
                    tracing::error!(error = %e, "a session change could not be serialised");
                    continue;
                }
            },
            Err(RecvError::Lagged(_)) => Rendered::Lagged,
            Err(RecvError::Closed) => return,
        };
        // No stream open is no error: the next one subscribes to what comes after.
        let _ = out.send(Arc::new(rendered));
    }
}

/// Live session changes: event `session` with a `SessionChange` JSON body; `lagged` when the
/// client fell behind and should reload its lists; `locks` when the locks in force changed
/// (read `whoami` again for each environment's lock).
#[utoipa::path(get, path = "/api/breakglass/events", tag = "events",
    responses(
        (status = 200, description = "text/event-stream of `session` events", content_type = "text/event-stream", body = String),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 429, description = "The user holds as many streams as one may", body = ErrorBody),
    ))]
pub async fn stream(
    State(config): State<Arc<Config>>,
    State(metrics): State<Metrics>,
    State(holds): State<Arc<Holds>>,
    Extension(streams): Extension<LiveStreams>,
    Extension(fanout): Extension<Fanout>,
    user: CurrentUser,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let place = streams.open(&user.name)?;
    let visible = user.visible_environments(&config);
    // The stream ends when the person's right to it does, or what they may see changes (the
    // page reconnects and reads what it may see now); `crate::revocation` decides.
    let mut hold = holds.open(crate::revocation::holder_of(&config, &user), Held::Events);
    metrics.sse_open.inc();
    let guard = OpenStream(metrics.sse_open);
    let changes = BroadcastStream::new(fanout.subscribe()).map(Result::ok);
    let missed = WatchStream::from_changes(fanout.0.missed.subscribe()).map(|_| None);
    let locks = WatchStream::from_changes(fanout.0.locks.subscribe())
        .map(|_| Some(Arc::new(Rendered::Locks)));
    let lagged = || Some(Ok(Event::default().event("lagged").data("reload")));
    let stream = changes.merge(missed).merge(locks).filter_map(move |msg| {
        let _keep = (&guard, &place);
        match msg.as_deref() {
            Some(Rendered::Session { environment, json }) if visible.contains(environment) => {
                Some(Ok(Event::default().event("session").data(json)))
            }
            Some(Rendered::Session { .. }) => None,
            Some(Rendered::Locks) => Some(Ok(Event::default().event("locks").data("reload"))),
            Some(Rendered::Lagged) | None => lagged(),
        }
    });
    let stream = futures::StreamExt::take_until(stream, async move {
        let why = hold.ended().await;
        tracing::debug!(%why, "live-update stream ended by the server");
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
