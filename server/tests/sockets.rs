//! The real binary's connection bounds (`[limits] connections`, `connections_per_address`):
//! silent connections count from the moment they are accepted, one past a bound is closed at
//! once, the connections already open keep being served, and a closed one gives its place back;
//! a connection that names no protocol (or stops inside HTTP/2's preface) is closed at the
//! request timeout.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};

/// A connection to `url` from loopback address `from` (127.0.0.x), saying nothing yet.
async fn connect_from(from: &str, url: &str) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket.connect(url.parse().unwrap()).await.unwrap()
}

/// Asks `/healthz` on `tcp` and reads the answer to the end.
async fn health(mut tcp: TcpStream) -> String {
    let _ = tcp
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether the server closed `tcp` without a word (within 10 s).
async fn closed_unanswered(tcp: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test]
async fn silent_connections_are_bounded_in_all_and_per_address() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, url) = common::real_server(
        dir.path(),
        "[limits]\nrequest_timeout_seconds = 120\nconnections = 16\nconnections_per_address = 2\n",
    );

    // Two silent connections from one address; a third from it is closed at once.
    let mut first = connect_from("127.0.0.1", &url).await;
    let second = connect_from("127.0.0.1", &url).await;
    let mut third = connect_from("127.0.0.1", &url).await;
    assert!(
        closed_unanswered(&mut third).await,
        "a third from one address"
    );
    // Another address is served meanwhile.
    let other = health(connect_from("127.0.0.2", &url).await).await;
    assert!(other.starts_with("HTTP/1.1 200"), "{other}");

    // Fill the total: 14 more silent ones from seven other addresses, two each.
    let mut held = Vec::new();
    for host in 3..=9 {
        for _ in 0..2 {
            held.push(connect_from(&format!("127.0.0.{host}"), &url).await);
        }
    }
    // The server accepts what the kernel queued one by one: until it has taken all of them a
    // new one may still get in (and then counts too), so the one past the total is waited for.
    let mut refused = false;
    for _ in 0..10 {
        let mut past = connect_from("127.0.0.10", &url).await;
        let mut buf = [0u8; 8];
        match tokio::time::timeout(Duration::from_secs(2), past.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => {
                refused = true;
                break;
            }
            _ => held.push(past),
        }
    }
    assert!(refused, "past the total");

    // One closes: its place comes back (once the server has seen it go).
    first.shutdown().await.unwrap();
    assert!(closed_unanswered(&mut first).await);
    drop(first);
    let mut answered = String::new();
    for _ in 0..50 {
        answered = health(connect_from("127.0.0.11", &url).await).await;
        if answered.starts_with("HTTP/1.1 200") {
            break;
        }
    }
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");

    // A connection that was open all along is still served.
    let kept = health(second).await;
    assert!(kept.starts_with("HTTP/1.1 200"), "{kept}");
    child.kill().unwrap();
    let _ = child.wait();
}

#[tokio::test]
async fn a_connection_that_names_no_protocol_in_time_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, url) =
        common::real_server(dir.path(), "[limits]\nrequest_timeout_seconds = 1\n");
    // Nothing at all; HTTP/2's preface cut short; the preface whole and then nothing.
    let mut silent = connect_from("127.0.0.1", &url).await;
    let mut cut = connect_from("127.0.0.1", &url).await;
    cut.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    let mut begun = connect_from("127.0.0.1", &url).await;
    begun.write_all(b"GET /heal").await.unwrap();
    for (what, tcp) in [
        ("silent", &mut silent),
        ("cut preface", &mut cut),
        ("cut head", &mut begun),
    ] {
        assert!(closed_unanswered(tcp).await, "{what} still open after 10 s");
    }
    // A whole request is answered.
    let ok = health(connect_from("127.0.0.1", &url).await).await;
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    child.kill().unwrap();
    let _ = child.wait();
}
