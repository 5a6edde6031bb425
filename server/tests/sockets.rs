//! The real binary's connection bounds (`[limits] connections`, `connections_per_address`):
//! silent connections count from the moment they are accepted, one past a bound is closed at
//! once, the connections already open keep being served, and a closed one gives its place back;
//! a connection that names no protocol (or stops inside HTTP/2's preface) is closed at the
//! request timeout, and so is one idle after it: HTTP/1.1 kept alive, HTTP/2 stopped inside a
//! header block or with no stream open (while one with an open stream is kept).
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

/// Reads `tcp` until the server closes it; whether it did within 10 s.
async fn closed_within_10s(tcp: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(until, tcp.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => return false,
        }
    }
}

/// HTTP/2's preface and an empty SETTINGS frame.
const H2_START: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

#[tokio::test]
async fn http2_connections_with_no_open_stream_are_closed_and_open_streams_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, url) =
        common::real_server(dir.path(), "[limits]\nrequest_timeout_seconds = 1\n");

    // Stopped inside a header block: HEADERS for stream 1 without END_HEADERS, then nothing.
    let mut cut = connect_from("127.0.0.1", &url).await;
    cut.write_all(H2_START).await.unwrap();
    cut.write_all(b"\x00\x00\x02\x01\x01\x00\x00\x00\x01\x82\x86")
        .await
        .unwrap();
    // The preface and settings, and never a stream.
    let mut quiet = connect_from("127.0.0.1", &url).await;
    quiet.write_all(H2_START).await.unwrap();
    // HTTP/1.1 kept alive after an answer.
    let mut kept = connect_from("127.0.0.1", &url).await;
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    for (what, tcp) in [
        ("inside a header block", &mut cut),
        ("no stream", &mut quiet),
        ("HTTP/1.1 keep-alive", &mut kept),
    ] {
        assert!(
            closed_within_10s(tcp).await,
            "{what}: still open after 10 s"
        );
    }

    // A real client: a request answered, then idle, and the server ends the connection.
    let (client, conn) = h2::client::handshake(connect_from("127.0.0.1", &url).await)
        .await
        .unwrap();
    let mut conn = tokio::spawn(conn);
    let (status, _) = get(&client, &url, "/healthz", None).await;
    assert_eq!(status, 200);
    let ended = tokio::time::timeout(Duration::from_secs(10), &mut conn).await;
    assert!(
        ended.is_ok(),
        "an idle HTTP/2 connection still open after 10 s"
    );

    // A stream that stays open (the live updates) keeps its connection past the limit, and
    // the connection still takes requests.
    let (client, conn) = h2::client::handshake(connect_from("127.0.0.1", &url).await)
        .await
        .unwrap();
    let mut conn = tokio::spawn(conn);
    let login = http::Request::post(format!("http://{url}/api/breakglass/auth/dev-login"))
        .header("content-type", "application/json")
        .body(())
        .unwrap();
    let (answer, mut body) = client
        .clone()
        .ready()
        .await
        .unwrap()
        .send_request(login, false)
        .unwrap();
    body.send_data(br#"{"user":"alice"}"#.to_vec().into(), true)
        .unwrap();
    let answer = answer.await.unwrap();
    assert_eq!(answer.status(), 200);
    let cookie = answer
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().split(';').next().unwrap().to_string())
        .collect::<Vec<_>>()
        .join("; ");
    let (status, _stream) = get(&client, &url, "/api/breakglass/events", Some(&cookie)).await;
    assert_eq!(status, 200);
    let early = tokio::time::timeout(Duration::from_secs(3), &mut conn).await;
    assert!(early.is_err(), "the connection ended with a stream open");
    let (status, _) = get(&client, &url, "/healthz", None).await;
    assert_eq!(status, 200, "the connection no longer takes requests");
    child.kill().unwrap();
    let _ = child.wait();
}

/// GETs `path` on an HTTP/2 connection; the status and the body, left open.
async fn get(
    client: &h2::client::SendRequest<bytes::Bytes>,
    url: &str,
    path: &str,
    cookie: Option<&str>,
) -> (u16, h2::RecvStream) {
    let mut req = http::Request::get(format!("http://{url}{path}"));
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    let (answer, _) = client
        .clone()
        .ready()
        .await
        .unwrap()
        .send_request(req.body(()).unwrap(), true)
        .unwrap();
    let answer = answer.await.unwrap();
    (answer.status().as_u16(), answer.into_body())
}
