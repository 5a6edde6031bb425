//! `page-weight`: the bytes of the first page as the server sends them. Headless Chromium
//! loads the home page until its first screen (the sign-in picker) shows, which says which
//! files the first page needs; each is then requested again with the `Accept-Encoding` a
//! browser sends over HTTPS (`br, gzip`: Chromium sends no `br` over plain HTTP, and
//! production is behind TLS), and the bodies are counted as they come, undecoded.

use std::path::Path;

use breakglass_e2e::bench::{self, Figure, Target};
use breakglass_e2e::browser::{Browser, ChromeDriver, WebServer};

/// DESIGN.md section 14: a release build of a small Leptos page with an xterm.js terminal.
const HELLO_PAGE_KB: f64 = 37.0;
/// Loaded on demand by a terminal or the player (frontend/index.html), never by the first page.
const XTERM: [&str; 3] = [
    "/vendor/xterm.mjs",
    "/vendor/xterm.css",
    "/vendor/addon-fit.mjs",
];

/// Bytes of the body of `GET url` with `accept` as `Accept-Encoding`, as sent (reqwest here
/// has no decompression), and the `Content-Encoding` it came with.
async fn wire_bytes(http: &reqwest::Client, url: &str, accept: &str) -> (usize, String) {
    let res = http
        .get(url)
        .header("accept-encoding", accept)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{url}: {}", res.status());
    let encoding = res
        .headers()
        .get("content-encoding")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("identity")
        .to_string();
    (res.bytes().await.unwrap().len(), encoding)
}

/// Measures and reports the first page (and, as growth rows, the same page gzip-only and
/// uncompressed, and a page with the terminal or the player).
pub async fn run(dist: &Path, driver: &ChromeDriver) {
    let server = WebServer::start(dist, &[]).await.unwrap();
    let b = Browser::open(driver, "weight", false).await.unwrap();
    b.goto(&server.at("/")).await.unwrap();
    b.wait_for("button.user-choice").await.unwrap();
    let fetched = b
        .js("return [location.href, ...performance.getEntriesByType('resource').map(e => e.name)]")
        .await
        .unwrap();
    b.close().await.unwrap();
    let mut files: Vec<String> = fetched
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .filter(|u| u.starts_with(&server.url) && !u.contains("/api/"))
        .map(String::from)
        .collect();
    files.dedup();
    assert!(
        files.iter().any(|f| f.ends_with(".wasm")),
        "the first page loaded no wasm: {files:?}"
    );
    let http = reqwest::Client::new();
    let kb = |accept: &'static str, extra: &[&str]| {
        let urls: Vec<String> = files
            .iter()
            .cloned()
            .chain(extra.iter().map(|p| server.at(p)))
            .collect();
        let http = http.clone();
        async move {
            let mut total = 0;
            for url in &urls {
                let (n, encoding) = wire_bytes(&http, url, accept).await;
                println!("  {accept:<9} {encoding:<8} {:>9} B  {url}", n);
                total += n;
            }
            total as f64 / 1024.0
        }
    };
    let first = kb("br, gzip", &[]).await;
    let gzip = kb("gzip", &[]).await;
    let raw = kb("identity", &[]).await;
    let with_xterm = kb("br, gzip", &XTERM).await;
    let baseline = "Leptos + xterm hello page (DESIGN.md 14)";
    bench::report(
        &Figure::new("page-weight", "total", "KB", HELLO_PAGE_KB, first)
            .size("first page, br")
            .baseline_is(baseline)
            .target(Target::AtMost(300.0)),
    );
    for (size, value) in [
        ("first page, gzip only", gzip),
        ("first page, uncompressed", raw),
        ("+ xterm (terminal/player), br", with_xterm),
    ] {
        bench::report(
            &Figure::new("page-weight", "total", "KB", HELLO_PAGE_KB, value)
                .size(size)
                .baseline_is(baseline),
        );
    }
}
