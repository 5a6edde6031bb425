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
pub mod failpoint;
mod fsutil;
pub mod guardrails;
pub mod http;
pub mod lifecycle;
pub mod metrics;
pub mod ports;
pub mod recorder;
pub mod recording;
pub mod relay;
pub mod state;
pub mod store;
pub mod sweep;

use std::sync::Arc;

pub use http::app;

use crate::config::Config;
use crate::state::{AppState, Context};

/// Starts the server with `config` and serves until Ctrl-C or SIGTERM.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let clusters = cluster::Clusters::from_config(&config);
    let ctx = Context::with_clusters(config, clusters).await?;
    serve(ctx).await
}

/// Serves `ctx` until Ctrl-C or SIGTERM: the HTTP listener and the sweep.
pub async fn serve(ctx: Arc<Context>) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(ctx.config.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", ctx.config.listen))?;
    let addr = listener.local_addr()?;
    let listener = no_delay(listener);
    let url = match &ctx.config.public_url {
        Some(p) => p.origin.clone(),
        None => format!("http://{addr}"),
    };
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
    }
    if !ctx.config.static_dir.join("index.html").exists() {
        println!(
            "note: no built frontend in {} (run `scripts/dev.sh` or `trunk build`); the API works without it",
            ctx.config.static_dir.display()
        );
    }
    tokio::spawn(sweep::run(ctx.clone()));
    let router = app(AppState(ctx));
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown_signal())
    .await?;
    Ok(())
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
