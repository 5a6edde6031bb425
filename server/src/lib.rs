//! The break-glass server: REST API, live events, storage, the lifecycle and its ports (the
//! cluster driver, the recorder, the terminal relay), the sweep and the CLI. `ARCHITECTURE.md`
//! at the repository root maps the floors and the two data paths.

pub mod auth;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod connections;
pub mod credentials;
pub mod error;
pub mod evidence;
pub mod export;
#[cfg(feature = "failpoints")]
pub mod failpoint;
mod fsutil;
pub mod guardrails;
pub mod holds;
pub mod http;
pub mod lifecycle;
pub mod locks;
pub mod metrics;
pub mod notify;
pub mod outbox;
pub mod ports;
pub mod recorder;
pub mod recording;
pub mod relay;
pub mod revocation;
pub mod search;
pub mod state;
pub mod step_up;
pub mod store;
pub mod sweep;
pub mod watch;
pub mod watching;

use std::sync::Arc;

pub use http::app;

use crate::config::Config;
use crate::state::{AppState, Context};

/// Starts the server with `config` and serves until Ctrl-C or SIGTERM.
pub async fn run(mut config: Config) -> anyhow::Result<()> {
    let listener = bind(config.listen).await?;
    // Port 0 asks for any free port: the others reach this replica at the one it got.
    let port = listener.local_addr()?.port();
    if let Some(url) = config
        .advertise_url
        .as_mut()
        .filter(|u| u.port() == Some(0))
    {
        let _ = url.set_port(Some(port));
    }
    let clusters = cluster::Clusters::from_config(&config);
    let ctx = Context::with_clusters(config, clusters).await?;
    serve_on(ctx, listener).await
}

async fn bind(at: std::net::SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(at)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {at}: {e}"))
}

/// Serves `ctx` until Ctrl-C or SIGTERM: the HTTP listener and the sweep.
pub async fn serve(ctx: Arc<Context>) -> anyhow::Result<()> {
    let listener = bind(ctx.config.listen).await?;
    serve_on(ctx, listener).await
}

/// [`serve`] on a listener already bound.
async fn serve_on(ctx: Arc<Context>, listener: tokio::net::TcpListener) -> anyhow::Result<()> {
    let addr = listener.local_addr()?;
    let listener = no_delay(listener);
    let url = match &ctx.config.public_url {
        Some(p) => p.origin.clone(),
        None => format!("http://{addr}"),
    };
    #[cfg(feature = "failpoints")]
    failpoint::announce();
    println!("break-glass is listening: open {url}/");
    if ctx.config.dev_login {
        let users: Vec<&str> = ctx
            .config
            .dev_users
            .iter()
            .map(|u| u.name.as_str())
            .collect();
        println!(
            "DEV MODE: anyone can sign in as a demo user ({}) without a password. Never use this in production.",
            users.join(", ")
        );
        if ctx.config.dev_login_beside_real_sign_in {
            tracing::warn!(
                "the dev login is on beside a real sign-in (dev_login.unsafe_beside_real_sign_in): \
                 anyone who reaches this server can sign in as any demo user"
            );
            println!(
                "WARNING: the dev login runs beside a real sign-in (dev_login.unsafe_beside_real_sign_in = true): anyone can sign in as a demo user."
            );
        }
    }
    if !ctx.config.static_dir.join("index.html").exists() {
        println!(
            "note: no built frontend in {} (run `scripts/dev.sh` or `trunk build`); the API works without it",
            ctx.config.static_dir.display()
        );
    }
    tokio::spawn(sweep::run(ctx.clone()));
    // Each ended recording into the search index, at the sweep's pace.
    tokio::spawn(
        search::Indexer::new(ctx.store.clone(), ctx.recorder.clone())
            .run(ctx.config.sweep_interval),
    );
    let head_timeout = ctx.config.limits.request_timeout;
    let budget = http::sockets::SocketBudget::new(
        ctx.config.limits.connections,
        ctx.config.limits.connections_per_address,
        ctx.config.trusted_proxies.clone(),
    );
    let router = app(AppState(ctx));
    serve_http(listener, router, head_timeout, budget, shutdown_signal()).await;
    Ok(())
}

/// Serves `router` on `listener` until `signal`, then lets the open connections finish.
///
/// What `axum::serve` does, plus a deadline for each request's head: without a timer, a client
/// sending its headers a byte at a time holds a connection (and a task) for as long as it
/// likes, and enough of them take every socket the server may open; a bound on the open
/// connections (`http::sockets`); and the same deadline for an HTTP/2 connection with no open
/// stream (`http::idle`), which hyper would keep for good. The body and the answer have their
/// own bounds (`http::limits`).
async fn serve_http<L>(
    mut listener: L,
    router: axum::Router,
    head_timeout: std::time::Duration,
    budget: http::sockets::SocketBudget,
    signal: impl std::future::Future<Output = ()>,
) where
    L: axum::serve::Listener<Addr = std::net::SocketAddr>,
{
    use axum::http::Request;
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use std::convert::Infallible;
    use tower::ServiceExt as _;

    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(head_timeout);
    // WebSockets over HTTP/2 need the CONNECT protocol, as axum::serve enables it.
    builder
        .http2()
        .timer(TokioTimer::new())
        .enable_connect_protocol();
    // Every connection's task holds a sender; the receiver ends when the last one has gone.
    let (stopping, _) = tokio::sync::watch::channel(false);
    let (alive, mut all_done) = tokio::sync::mpsc::channel::<()>(1);
    tokio::pin!(signal);
    loop {
        let (io, peer) = tokio::select! {
            conn = listener.accept() => conn,
            () = &mut signal => break,
        };
        // Past a bound the socket is closed here, before a byte of it is read.
        let Some(ticket) = budget.admit(peer.ip()) else {
            tracing::debug!(%peer, "connection refused: the connection bounds are reached");
            continue;
        };
        let builder = builder.clone();
        let router = router.clone();
        let mut stop = stopping.subscribe();
        let alive = alive.clone();
        tokio::spawn(async move {
            let _alive = alive;
            let io = http::sockets::Counted::new(io, ticket);
            let Some(io) = http::sockets::opening(io, head_timeout).await else {
                tracing::debug!(%peer, "connection closed: it named no protocol in time");
                return;
            };
            let h2 = io.is_http2();
            let activity = http::idle::Activity::new();
            // Each request carries the peer's address and a `Busy` for its stream, which its
            // answer's body holds until it has been sent (and a WebSocket's handler for as long
            // as the socket is open).
            let counted = activity.clone();
            let service = tower::service_fn(move |req: Request<hyper::body::Incoming>| {
                let busy = counted.busy();
                let mut req = req.map(axum::body::Body::new);
                req.extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer));
                req.extensions_mut().insert(busy.clone());
                let router = router.clone();
                async move {
                    let res = router.oneshot(req).await?;
                    Ok::<_, Infallible>(res.map(|b| http::idle::hold(b, busy)))
                }
            });
            let service = hyper_util::service::TowerToHyperService::new(service);
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
            tokio::pin!(conn);
            let idle = async {
                if h2 {
                    activity.idle_for(head_timeout).await;
                } else {
                    std::future::pending::<()>().await;
                }
            };
            let server_stops = async {
                let _ = stop.wait_for(|s| *s).await;
            };
            // An idle HTTP/2 connection is shut down, and dropped if it has not ended within
            // the timeout (a peer that never acknowledges the shutdown holds nothing); at the
            // server's stop, every connection is shut down and what runs on it may finish.
            let ended = tokio::select! {
                r = conn.as_mut() => r,
                () = idle => {
                    tracing::debug!(%peer, "closing an HTTP/2 connection with no open stream");
                    conn.as_mut().graceful_shutdown();
                    tokio::time::timeout(head_timeout, conn).await.unwrap_or(Ok(()))
                }
                () = server_stops => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = ended {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    stopping.send_replace(true);
    drop(alive);
    let _ = all_done.recv().await;
}

/// Every accepted connection with `TCP_NODELAY`: the terminal's echo goes out as small
/// WebSocket frames, and Nagle's algorithm holds a small frame back until the one before it is
/// acknowledged, which the browser's delayed ACK makes tens of milliseconds (BENCHMARKS.md,
/// "Relay and recording").
fn no_delay(
    listener: tokio::net::TcpListener,
) -> axum::serve::TapIo<tokio::net::TcpListener, fn(&mut tokio::net::TcpStream)> {
    use axum::serve::ListenerExt;
    fn set(tcp: &mut tokio::net::TcpStream) {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set on a connection");
        }
    }
    listener.tap_io(set as fn(&mut tokio::net::TcpStream))
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use axum::serve::Listener;

    use std::net::SocketAddr;
    use std::time::Duration;

    use axum::extract::ConnectInfo;
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The address a handler sees is the client's own: the auth layer trusts proxy headers
    /// only from configured addresses, so the listener must hand the real peer on.
    #[tokio::test]
    async fn handlers_see_the_address_the_request_came_from() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let router = axum::Router::new().route(
            "/peer",
            get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }),
        );
        tokio::spawn(super::serve_http(
            super::no_delay(listener),
            router,
            Duration::from_secs(30),
            crate::http::sockets::SocketBudget::new(16, 16, vec![]),
            std::future::pending(),
        ));
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let me = tcp.local_addr().unwrap();
        tcp.write_all(b"GET /peer HTTP/1.1\r\nHost: breakglass\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut out = Vec::new();
        tcp.read_to_end(&mut out).await.unwrap();
        let answer = String::from_utf8_lossy(&out);
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        assert!(answer.ends_with(&me.to_string()), "{answer}");
    }

    #[tokio::test]
    async fn accepted_connections_do_not_wait_for_acks() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut listener = super::no_delay(listener);
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (accepted, _) = listener.accept().await;
        assert!(accepted.nodelay().unwrap());
    }
}
