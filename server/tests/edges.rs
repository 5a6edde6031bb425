//! What every request meets before a handler: the name it must give (a rebinding domain gets
//! 421 on every route, the terminal's included), the caching it may not have (no API answer is
//! kept by a cache), the metric labels it may not grow, and the sign-in's return path.
#![allow(clippy::unwrap_used)]

mod common;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use breakglass_server::config::FileConfig;
use common::TestServer;

/// A GET of `path` naming `host`, with `caller`'s cookie.
fn get(path: &str, host: &str, caller: Option<&common::Caller>) -> Request<Body> {
    let mut r = Request::builder()
        .method(Method::GET)
        .uri(path)
        .header(header::HOST, host);
    if let Some(c) = caller.and_then(|c| c.cookie.as_ref()) {
        r = r.header(header::COOKIE, c);
    }
    r.body(Body::empty()).unwrap()
}

/// Every surface: the API (read and write), the live updates, the terminal's upgrade, the
/// frontend's pages.
const SURFACES: [(&str, &str); 5] = [
    ("GET", "/api/breakglass/whoami"),
    ("GET", "/api/breakglass/events"),
    ("POST", "/api/breakglass/auth/dev-login"),
    (
        "GET",
        "/api/breakglass/sessions/0190b8a6-1111-7000-8000-000000000000/terminal",
    ),
    ("GET", "/env/prod"),
];

async fn status_of(s: &TestServer, method: &str, path: &str, host: &str) -> (StatusCode, String) {
    let mut r = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, host);
    if path.ends_with("/terminal") {
        r = r
            .header(header::CONNECTION, "upgrade")
            .header(header::UPGRADE, "websocket")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==");
    }
    let body = if method == "POST" {
        r = r.header(header::CONTENT_TYPE, "application/json");
        Body::from(r#"{"user":"alice"}"#)
    } else {
        Body::empty()
    };
    let res = s.raw(r.body(body).unwrap()).await;
    (res.status, res.body.to_string())
}

#[tokio::test]
async fn without_a_public_url_only_loopback_names_are_answered() {
    let s = common::server("sqlite", None).await;
    for (method, path) in SURFACES {
        for host in ["rebind.example:8080", "10.0.0.5:8080", "0.0.0.0:8080"] {
            let (status, body) = status_of(&s, method, path, host).await;
            assert_eq!(
                status,
                StatusCode::MISDIRECTED_REQUEST,
                "{method} {path} as {host}"
            );
            assert!(
                body.contains("public_url"),
                "{path}: says what to do: {body}"
            );
        }
        for host in ["localhost:8080", "127.0.0.1:8080", "[::1]:8080"] {
            let (status, _) = status_of(&s, method, path, host).await;
            assert_ne!(
                status,
                StatusCode::MISDIRECTED_REQUEST,
                "{method} {path} as {host}"
            );
        }
    }
    // The API's refusal is the error body, naming its code.
    let r = s
        .raw(get("/api/breakglass/whoami", "rebind.example", None))
        .await;
    assert_eq!(r.body["code"], "misdirected_request", "{:?}", r.body);
    // Probes and scrapers name the pod's address.
    for path in ["/healthz", "/metrics"] {
        let r = s.raw(get(path, "10.0.0.5:8080", None)).await;
        assert_eq!(r.status, StatusCode::OK, "{path}");
    }
}

#[tokio::test]
async fn with_a_public_url_only_its_host_and_port_are_answered() {
    let file: FileConfig = toml::from_str(r#"public_url = "http://bg.example:8080""#).unwrap();
    let s = common::server_with("sqlite", None, file).await;
    for (method, path) in SURFACES {
        for host in [
            "localhost:8080",
            "127.0.0.1:8080",
            "bg.example",
            "bg.example:9090",
        ] {
            let (status, body) = status_of(&s, method, path, host).await;
            assert_eq!(
                status,
                StatusCode::MISDIRECTED_REQUEST,
                "{method} {path} as {host}"
            );
            assert!(body.contains("http://bg.example:8080"), "{body}");
        }
        let (status, _) = status_of(&s, method, path, "BG.example:8080").await;
        assert_ne!(status, StatusCode::MISDIRECTED_REQUEST, "{method} {path}");
    }
    // Two Host lines, one of them ours, are still a name that is not ours.
    let mut r = get("/api/breakglass/whoami", "bg.example:8080", None);
    r.headers_mut()
        .append(header::HOST, "rebind.example".parse().unwrap());
    assert_eq!(s.raw(r).await.status, StatusCode::MISDIRECTED_REQUEST);
}

#[tokio::test]
async fn no_api_answer_is_cached_and_static_files_may_be() {
    let s = common::server("sqlite", None).await;
    let alice = s.login("alice").await;
    for path in [
        "/api/breakglass/whoami",
        "/api/breakglass/sessions",
        "/api/breakglass/environments",
        "/api/breakglass/openapi.json",
        "/api/breakglass/no-such-route",
        "/api/breakglass/sessions/0190b8a6-1111-7000-8000-000000000000/recording",
    ] {
        let r = s.raw(get(path, "localhost", Some(&alice))).await;
        assert_eq!(
            r.headers
                .get(header::CACHE_CONTROL)
                .map(|v| v.to_str().unwrap()),
            Some("no-store"),
            "{path} ({})",
            r.status
        );
    }
    // A refusal made before any handler (a wrong name) carries it too.
    let r = s
        .raw(get(
            "/api/breakglass/whoami",
            "rebind.example",
            Some(&alice),
        ))
        .await;
    assert_eq!(r.status, StatusCode::MISDIRECTED_REQUEST);
    // Outside the API nothing is forced (an ops route here; the frontend's hashed assets keep
    // what the file server says).
    let r = s.raw(get("/healthz", "localhost", None)).await;
    assert!(r.headers.get(header::CACHE_CONTROL).is_none());
}

#[tokio::test]
async fn a_method_a_client_makes_up_is_one_metric_label() {
    let s = common::server("sqlite", None).await;
    for i in 0..20 {
        let r = Request::builder()
            .method(Method::from_bytes(format!("MADEUP{i}").as_bytes()).unwrap())
            .uri("/api/breakglass/whoami")
            .header(header::HOST, "localhost")
            .body(Body::empty())
            .unwrap();
        s.raw(r).await;
    }
    let metrics = s.raw(get("/metrics", "localhost", None)).await.body;
    let text = metrics.as_str().unwrap();
    let requests: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("breakglass_http_requests_total{"))
        .collect();
    assert!(!text.contains("MADEUP"), "{requests:?}");
    assert!(
        requests
            .iter()
            .any(|l| l.contains("method=\"other\"") && l.ends_with(" 20")),
        "{requests:?}"
    );
}

/// The `__Host-` session cookie a successful answer sets (or removes), whole.
fn host_session_cookie(r: &common::Resp) -> String {
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let cookies: Vec<String> = r
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    cookies
        .iter()
        .find(|c| c.starts_with("__Host-breakglass_session="))
        .cloned()
        .unwrap_or_else(|| panic!("{cookies:?}"))
}

/// A POST to `path` on https://bg.example, from its own page, with `headers` and `body`.
fn post_on_bg(path: &str, headers: &[(&str, &str)], body: &'static str) -> Request<Body> {
    let mut r = Request::builder()
        .method(Method::POST)
        .uri(path)
        .header(header::HOST, "bg.example")
        .header(header::ORIGIN, "https://bg.example");
    for (name, value) in headers {
        r = r.header(*name, *value);
    }
    r.body(Body::from(body)).unwrap()
}

#[tokio::test]
async fn on_https_the_session_cookie_is_host_prefixed_and_its_removal_is_secure() {
    // The dev login signs alice in; beside https it needs its explicit override.
    let file: FileConfig = toml::from_str(
        "public_url = \"https://bg.example\"\n[dev_login]\nunsafe_beside_real_sign_in = true",
    )
    .unwrap();
    let s = common::server_with("sqlite", None, file).await;
    let r = s
        .raw(post_on_bg(
            "/api/breakglass/auth/dev-login",
            &[(header::CONTENT_TYPE.as_str(), "application/json")],
            r#"{"user":"alice"}"#,
        ))
        .await;
    let session = host_session_cookie(&r);
    for attr in ["Secure", "Path=/", "HttpOnly"] {
        assert!(session.split("; ").any(|a| a == attr), "{attr}: {session}");
    }
    assert!(!session.contains("Domain"), "{session}");
    let cookie = session.split(';').next().unwrap().to_string();
    let csrf = r.body["csrf_token"].as_str().unwrap().to_string();

    // The prefixed cookie signs in; the same value under the plain name does not.
    let whoami = |cookie: String| {
        Request::builder()
            .uri("/api/breakglass/whoami")
            .header(header::HOST, "bg.example")
            .header(header::COOKIE, cookie)
            .body(Body::empty())
            .unwrap()
    };
    assert_eq!(
        s.raw(whoami(cookie.clone())).await.body["user"]["name"],
        "alice"
    );
    let plain = cookie.replacen("__Host-", "", 1);
    assert!(s.raw(whoami(plain)).await.body["user"].is_null());

    let r = s
        .raw(post_on_bg(
            "/api/breakglass/auth/logout",
            &[("cookie", cookie.as_str()), ("x-csrf-token", csrf.as_str())],
            "",
        ))
        .await;
    let removal = host_session_cookie(&r);
    assert!(removal.split("; ").any(|a| a == "Secure"), "{removal}");
    assert!(removal.contains("Max-Age=0"), "{removal}");
}
