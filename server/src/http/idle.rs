//! When an HTTP/2 connection is idle, so that it can be closed like an idle HTTP/1.1 one.
//!
//! HTTP/1.1's idle keep-alive and unfinished heads are bounded by hyper's header-read timeout.
//! HTTP/2 has no such timer: after the preface, a connection that never opens a stream, that
//! stops inside a header block (the stream does not exist until the block ends), or whose
//! streams have all finished is held for as long as the client likes, and a real client library
//! answers every keep-alive ping. So each HTTP/2 connection counts its open streams here: a
//! request until its answer's body has ended, and a WebSocket (extended CONNECT) for as long as
//! its handler holds the [`Busy`] it finds in the request's extensions. With none open for the
//! request timeout, the connection is shut down (`serve_http`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// One connection's open streams, and since when it has had none.
#[derive(Debug)]
pub struct Activity {
    open: AtomicUsize,
    idle_since: Mutex<Instant>,
    changed: Notify,
}

/// One open stream of a connection, counted while this (or a clone) lives.
#[derive(Debug)]
pub struct Busy(Arc<Activity>);

impl Activity {
    /// A connection with nothing open yet, idle from now.
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity {
            open: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
            changed: Notify::new(),
        })
    }

    /// Counts one more open stream until the returned guard is dropped.
    pub fn busy(self: &Arc<Self>) -> Busy {
        self.open.fetch_add(1, Ordering::SeqCst);
        Busy(self.clone())
    }

    /// Returns once the connection has had no open stream for `limit`.
    pub async fn idle_for(&self, limit: Duration) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the state is read, so a change in between is not missed.
            changed.as_mut().enable();
            if self.open.load(Ordering::SeqCst) > 0 {
                changed.await;
                continue;
            }
            let since = *self
                .idle_since
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let deadline = since + limit;
            if Instant::now() >= deadline {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {}
                () = changed => {}
            }
        }
    }
}

impl Clone for Busy {
    fn clone(&self) -> Busy {
        self.0.busy()
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if self.0.open.fetch_sub(1, Ordering::SeqCst) == 1 {
            *self
                .0
                .idle_since
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Instant::now();
        }
        self.0.changed.notify_waiters();
    }
}

/// `body`, counting as an open stream until it has been sent or dropped.
pub fn hold(body: axum::body::Body, busy: Busy) -> axum::body::Body {
    use http_body_util::BodyExt as _;
    axum::body::Body::new(body.map_frame(move |frame| {
        let _held = &busy;
        frame
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn idle_only_once_the_last_stream_has_been_closed_for_the_limit() {
        let limit = Duration::from_millis(300);
        let a = Activity::new();
        let first = a.busy();
        let second = first.clone();
        let mut watcher = {
            let a = a.clone();
            tokio::spawn(async move { a.idle_for(limit).await })
        };
        drop(first);
        // Well past the limit with one stream still open: not idle.
        let early = tokio::time::timeout(limit * 3, &mut watcher).await;
        assert!(early.is_err(), "idle with a stream still open");
        let closed = Instant::now();
        drop(second);
        watcher.await.expect("the watcher ends");
        assert!(closed.elapsed() >= limit, "idle before the limit");
    }

    #[tokio::test]
    async fn a_connection_that_never_opens_a_stream_is_idle_after_the_limit() {
        let limit = Duration::from_millis(200);
        let start = Instant::now();
        Activity::new().idle_for(limit).await;
        assert!(start.elapsed() >= limit);
    }
}
