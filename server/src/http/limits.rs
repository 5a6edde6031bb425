//! How much one client may hold of the server (`[limits]`): a request body must arrive within
//! the request timeout (checked where bodies are read, `extract::ApiJson`), a read must answer
//! within it, and one user holds at most so many live-update streams. Without these, one
//! slow or greedy client (a script, a stuck tab farm) would tie up connections and memory
//! meant for everyone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use breakglass_shared::ErrorCode;

use crate::config::Limits;
use crate::error::ApiError;

/// The request timeout, carried to the extractors in the request's extensions.
#[derive(Debug, Clone, Copy)]
pub struct RequestTimeout(pub Duration);

/// Puts the timeout on the request, and bounds reads (GET, HEAD) by it. Writes are not cut
/// off halfway: each of their steps is bounded by its own dependency's timeout, and cutting
/// one between its database commit and what follows would leave work for the sweep.
pub async fn bound(State(limits): State<Limits>, mut req: Request, next: Next) -> Response {
    let timeout = limits.request_timeout;
    req.extensions_mut().insert(RequestTimeout(timeout));
    if !matches!(*req.method(), Method::GET | Method::HEAD) || proportional_read(&req) {
        return next.run(req).await;
    }
    let path = req.uri().path().to_string();
    match tokio::time::timeout(timeout, next.run(req)).await {
        Ok(res) => res,
        Err(_) => ApiError {
            body: breakglass_shared::ErrorBody::new(
                ErrorCode::Unavailable,
                "the server took too long to answer; try again shortly",
            ),
            source: Some(anyhow::anyhow!("{path}: no answer within {timeout:?}")),
        }
        .into_response(),
    }
}

/// Reads whose work grows with a recording's size (verifying it hashes every byte from the
/// store): a fixed bound would refuse exactly the long sessions reviewers most need to check.
/// Like writes, each of their store calls is bounded by the store client's own timeouts.
fn proportional_read(req: &Request) -> bool {
    req.extensions()
        .get::<axum::extract::MatchedPath>()
        .is_some_and(|p| p.as_str().ends_with("/recording/verify"))
}

/// The live-update streams each user holds open on this replica.
#[derive(Debug, Clone)]
pub struct LiveStreams {
    per_user: usize,
    open: Arc<Mutex<HashMap<String, usize>>>,
}

/// One open stream of a user; closing it (dropping) gives the place back.
#[derive(Debug)]
pub struct LiveStream {
    user: String,
    open: Arc<Mutex<HashMap<String, usize>>>,
}

impl LiveStreams {
    /// At most `per_user` streams per user.
    pub fn new(per_user: usize) -> LiveStreams {
        LiveStreams {
            per_user,
            open: Arc::default(),
        }
    }

    /// A place for one more stream of `user`, or 429 saying what to close.
    pub fn open(&self, user: &str) -> Result<LiveStream, ApiError> {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = open.entry(user.to_string()).or_default();
        if *n >= self.per_user {
            return Err(ApiError::new(
                ErrorCode::TooManyRequests,
                format!(
                    "you have {} live-update streams open (one per break-glass tab), the most one \
                     person may; close some tabs and reload this one",
                    self.per_user
                ),
            ));
        }
        *n += 1;
        Ok(LiveStream {
            user: user.to_string(),
            open: self.open.clone(),
        })
    }
}

impl Drop for LiveStream {
    fn drop(&mut self) {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = open.get_mut(&self.user) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.user);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use axum::routing::get;
    use axum::Router;
    use tower::ServiceExt;

    /// Two reads that never finish on their own: a plain one is answered at the bound, while
    /// verifying a recording is left to run (it hashes the whole recording).
    #[tokio::test]
    async fn only_size_bound_reads_outlive_the_request_timeout() {
        let limits = Limits {
            request_timeout: Duration::from_millis(200),
            live_streams_per_user: 1,
            connections: 16,
            connections_per_address: 16,
        };
        let app = Router::new()
            .route("/s/{id}", get(std::future::pending::<&'static str>))
            .route(
                "/s/{id}/recording/verify",
                get(std::future::pending::<&'static str>),
            )
            .layer(axum::middleware::from_fn_with_state(limits, bound));
        let read = |uri: &'static str| {
            app.clone()
                .oneshot(Request::get(uri).body(axum::body::Body::empty()).unwrap())
        };
        let cut = read("/s/1").await.unwrap();
        assert_eq!(cut.status(), axum::http::StatusCode::SERVICE_UNAVAILABLE);
        // Ten times the bound, and still at work.
        let left =
            tokio::time::timeout(Duration::from_secs(2), read("/s/1/recording/verify")).await;
        assert!(left.is_err(), "the verification was cut off: {left:?}");
    }
}
