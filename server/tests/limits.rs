//! `[limits]`: one user's live-update streams are bounded, a request head or body that
//! trickles in is cut off at the request timeout with nothing written, and a read that hangs on a dependency answers
//! at the timeout instead of holding the connection.
#![allow(clippy::unwrap_used)]

mod common;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use breakglass_server::config::FileConfig;
use common::{Caller, TestServer};
use tower::ServiceExt;

/// `GET /events` as `c`; the response (its body is the open stream) or the error.
async fn open_stream(s: &TestServer, c: &Caller) -> axum::response::Response {
    let req = Request::get("/api/breakglass/events")
        .header(header::HOST, "localhost")
        .header(header::COOKIE, c.cookie.clone().unwrap())
        .body(Body::empty())
        .unwrap();
    s.app.clone().oneshot(req).await.unwrap()
}

#[tokio::test]
async fn one_user_holds_at_most_the_configured_live_streams() {
    let file: FileConfig = toml::from_str("[limits]\nlive_streams_per_user = 3").unwrap();
    let s = common::server_with("sqlite", None, file).await;
    let alice = s.login("alice").await;
    let bob = s.login("bob").await;
    let mut open = Vec::new();
    for _ in 0..3 {
        let r = open_stream(&s, &alice).await;
        assert_eq!(r.status(), StatusCode::OK);
        open.push(r);
    }
    let refused = open_stream(&s, &alice).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let body = axum::body::to_bytes(refused.into_body(), 4096)
        .await
        .unwrap();
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["code"], "too_many_requests", "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("close some tabs"),
        "{body}"
    );
    // Another user is not held back by alice's streams.
    assert_eq!(open_stream(&s, &bob).await.status(), StatusCode::OK);
    // A closed tab gives its place back.
    drop(open.pop());
    assert_eq!(open_stream(&s, &alice).await.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_body_that_trickles_in_is_cut_off_with_nothing_written() {
    let file: FileConfig = toml::from_str("[limits]\nrequest_timeout_seconds = 1").unwrap();
    let s = common::server_with("sqlite", None, file).await;
    let alice = s.login("alice").await;
    let before = s.counts().await;
    // The first bytes come, the rest never does.
    let first = futures::stream::iter([Ok::<_, std::io::Error>(axum::body::Bytes::from_static(
        b"{\"environment\": \"dev\", ",
    ))]);
    let body = Body::from_stream(futures::StreamExt::chain(first, futures::stream::pending()));
    let req = Request::post("/api/breakglass/sessions")
        .header(header::HOST, "localhost")
        .header(header::COOKIE, alice.cookie.clone().unwrap())
        .header("x-csrf-token", alice.csrf.clone().unwrap())
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .unwrap();
    let r = s.raw(req).await;
    assert_eq!(r.status, StatusCode::REQUEST_TIMEOUT, "{:?}", r.body);
    assert_eq!(r.body["code"], "timeout");
    assert_eq!(r.body["field"], "body");
    assert_eq!(s.counts().await, before);
}

#[tokio::test]
async fn a_read_that_hangs_on_a_cluster_answers_at_the_timeout() {
    // An "API server" that accepts connections and never says a word.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = tokio::spawn(async move {
        let mut conns = Vec::new();
        while let Ok((c, _)) = silent.accept().await {
            conns.push(c);
        }
    });
    let s = common::server_on_cluster(
        &format!("https://127.0.0.1:{port}"),
        "[limits]\nrequest_timeout_seconds = 2\n",
    )
    .await;
    let alice = s.login("alice").await;
    let r = s
        .send(
            &alice,
            Method::GET,
            "/api/breakglass/environments/dev/namespaces",
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{:?}", r.body);
    assert_eq!(r.body["code"], "unavailable");
    held.abort();
}

/// The real binary, with the timeout from its config file: a client that sends its request
/// head and never finishes it loses the connection at the timeout, instead of holding it (and
/// a socket of the server's) as long as it likes.
#[tokio::test]
async fn a_request_head_that_trickles_in_is_cut_off_at_the_timeout() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    let dir = tempfile::tempdir().unwrap();
    let (mut child, url) =
        common::real_server(dir.path(), "[limits]\nrequest_timeout_seconds = 1\n");

    let mut slow = tokio::net::TcpStream::connect(&url).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: breakglass\r\n")
        .await
        .unwrap();
    // A second header line, and then nothing: the head never ends.
    slow.write_all(b"X-Slow: 1\r\n").await.unwrap();
    let mut answer = Vec::new();
    let closed = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        slow.read_to_end(&mut answer),
    )
    .await;
    // A whole request on a new connection is still answered.
    let mut whole = tokio::net::TcpStream::connect(&url).await.unwrap();
    whole
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: breakglass\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut ok = Vec::new();
    whole.read_to_end(&mut ok).await.unwrap();
    child.kill().unwrap();
    let _ = child.wait();

    assert!(
        closed.is_ok(),
        "the server still held the unfinished request after 20 s"
    );
    let answer = String::from_utf8_lossy(&answer);
    assert!(!answer.contains("200 OK"), "{answer}");
    assert!(
        String::from_utf8_lossy(&ok).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&ok)
    );
}
