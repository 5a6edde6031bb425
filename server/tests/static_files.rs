//! The frontend's files as the browser gets them: the precompressed `.br` or `.gz` the build
//! wrote beside each file, by the request's `Accept-Encoding`, and the file itself otherwise,
//! deep links (the `index.html` fallback) included.
#![allow(clippy::unwrap_used)]

mod common;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use http_body_util::BodyExt;
use tower::ServiceExt;

/// (status, `Content-Encoding`, `Vary`, body) of `GET path` with `accept` as `Accept-Encoding`.
async fn get(
    app: &axum::Router,
    path: &str,
    accept: Option<&str>,
) -> (StatusCode, String, String, Vec<u8>) {
    let mut req = Request::builder()
        .uri(path)
        .header(header::HOST, "localhost");
    if let Some(a) = accept {
        req = req.header(header::ACCEPT_ENCODING, a);
    }
    let res = app
        .clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let h = |n: header::HeaderName| {
        res.headers()
            .get(n)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    };
    let (encoding, vary) = (h(header::CONTENT_ENCODING), h(header::VARY));
    let status = res.status();
    let body = res.into_body().collect().await.unwrap().to_bytes().to_vec();
    (status, encoding, vary, body)
}

#[tokio::test]
async fn assets_go_out_precompressed_by_what_the_browser_accepts() {
    let s = common::server("sqlite", None).await;
    let dist = s.dir.path().join("dist");
    std::fs::create_dir_all(&dist).unwrap();
    // Stand-ins for what frontend/precompress.mjs writes: the bytes say which file was sent.
    for (name, body) in [
        ("index.html", "<html>index</html>"),
        ("index.html.br", "index-br"),
        ("index.html.gz", "index-gz"),
        ("app_bg.wasm", "wasm-raw"),
        ("app_bg.wasm.br", "wasm-br"),
        ("app_bg.wasm.gz", "wasm-gz"),
        ("only-raw.css", "css-raw"),
    ] {
        std::fs::write(dist.join(name), body).unwrap();
    }
    let app = breakglass_server::app(breakglass_server::state::AppState(s.ctx.clone()));

    let cases = [
        ("/app_bg.wasm", Some("br, gzip"), "br", "wasm-br"),
        (
            "/app_bg.wasm",
            Some("gzip, deflate, br, zstd"),
            "br",
            "wasm-br",
        ),
        ("/app_bg.wasm", Some("gzip"), "gzip", "wasm-gz"),
        ("/app_bg.wasm", None, "", "wasm-raw"),
        ("/app_bg.wasm", Some("identity"), "", "wasm-raw"),
        // No precompressed sibling: the file as it is, never a 404.
        ("/only-raw.css", Some("br, gzip"), "", "css-raw"),
        // A deep link is the index, compressed the same way.
        ("/env/prod", Some("br, gzip"), "br", "index-br"),
        ("/env/prod", Some("gzip"), "gzip", "index-gz"),
        ("/env/prod", None, "", "<html>index</html>"),
        // A pod's name may hold a dot: still a deep link.
        (
            "/env/prod/ns/shop/pod/web.js",
            None,
            "",
            "<html>index</html>",
        ),
    ];
    for (path, accept, encoding, body) in cases {
        let (status, got_encoding, vary, got_body) = get(&app, path, accept).await;
        assert_eq!(status, StatusCode::OK, "{path} {accept:?}");
        assert_eq!(got_encoding, encoding, "{path} {accept:?}");
        assert_eq!(
            String::from_utf8_lossy(&got_body),
            body,
            "{path} {accept:?}"
        );
        // Caches must keep the variants apart.
        if !encoding.is_empty() {
            assert!(
                vary.to_ascii_lowercase().contains("accept-encoding"),
                "{path} {accept:?}: Vary {vary:?}"
            );
        }
    }
}

/// A file of the build that is not there (a chunk a deploy removed) is a 404, not the app's
/// page: the browser's fetch of it fails plainly and the page can say so.
#[tokio::test]
async fn a_missing_build_file_is_not_found() {
    let s = common::server("sqlite", None).await;
    let dist = s.dir.path().join("dist");
    std::fs::create_dir_all(&dist).unwrap();
    std::fs::write(dist.join("index.html"), "<html>index</html>").unwrap();
    let app = breakglass_server::app(breakglass_server::state::AppState(s.ctx.clone()));
    for path in [
        "/split_ops_wall-0123456789abcdef.wasm",
        "/__wasm_split-0123456789abcdef.js",
        "/main-0123.css",
        "/vendor/xterm.mjs",
        "/snippets/x/src/webauthn.js",
    ] {
        let (status, _, _, _) = get(&app, path, Some("br, gzip")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
    }
    for path in [
        "/",
        "/ops-wall",
        "/sessions/0193",
        "/env/prod/ns/shop/pod/a.b.wasm",
    ] {
        let (status, _, _, body) = get(&app, path, None).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert_eq!(
            String::from_utf8_lossy(&body),
            "<html>index</html>",
            "{path}"
        );
    }
}
