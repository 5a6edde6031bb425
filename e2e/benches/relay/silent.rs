//! Connections that never send a byte, held open against a server: each is opened again as
//! soon as the server closes it (at its request timeout), as a client bent on holding the
//! server's sockets would.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncReadExt as _;
use tokio::net::TcpStream;
use tokio::task::JoinSet;

/// The held connections; dropping it closes them all.
pub struct Silent {
    _tasks: JoinSet<()>,
}

/// Opens `n` silent connections to `addr` (`host:port`) and returns once all are open.
pub async fn hold(addr: &str, n: usize) -> Silent {
    let opened = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    for _ in 0..n {
        let (addr, opened) = (addr.to_string(), opened.clone());
        tasks.spawn(async move {
            let mut first = true;
            loop {
                let Ok(mut tcp) = TcpStream::connect(&addr).await else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                if std::mem::take(&mut first) {
                    opened.fetch_add(1, Ordering::SeqCst);
                }
                // Until the server closes it.
                let mut buf = [0u8; 64];
                while matches!(tcp.read(&mut buf).await, Ok(n) if n > 0) {}
            }
        });
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while opened.load(Ordering::SeqCst) < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} of {n} silent connections opened in a minute",
            opened.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Silent { _tasks: tasks }
}
