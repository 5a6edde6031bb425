//! `page-weight`: the bytes of the first page as the server sends them, against the same
//! bytes of a Leptos + xterm.js hello page (`hello/`, built by `hello/build.sh` with our
//! frontend's toolchain) measured the same way in the same run. Headless Chromium loads each
//! page from the server until its first screen shows (ours: the sign-in picker; the hello
//! page: its terminal saying hello), which says which files the page needs; each is then
//! requested again with the `Accept-Encoding` a browser sends over HTTPS (`br, gzip`:
//! Chromium sends no `br` over plain HTTP, and production is behind TLS), and the bodies are
//! counted as they come, undecoded.

use std::path::{Path, PathBuf};

use breakglass_e2e::bench::{self, Figure, Target};
use breakglass_e2e::browser::{Browser, ChromeDriver, WebServer};

/// Loaded on demand by a terminal or the player (frontend/index.html), never by the first page.
const XTERM: [&str; 3] = [
    "/vendor/xterm.mjs",
    "/vendor/xterm.css",
    "/vendor/addon-fit.mjs",
];
const BASELINE_IS: &str = "Leptos + xterm hello page, built and served alike";

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

/// A built page served by the server, and the files its first screen took.
struct Page {
    server: WebServer,
    files: Vec<String>,
}

impl Page {
    /// Serves `dist` and loads it until a displayed `ready` element contains `text`.
    async fn load(driver: &ChromeDriver, dist: &Path, ready: &str, text: &str) -> Page {
        let server = WebServer::start(dist, &[]).await.unwrap();
        let b = Browser::open(driver, "weight", false).await.unwrap();
        b.goto(&server.at("/")).await.unwrap();
        b.wait_text(ready, text).await.unwrap();
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
            "{}: the first page loaded no wasm: {files:?}",
            dist.display()
        );
        Page { server, files }
    }

    /// KB on the wire of the page's files and of `extra` paths, asked for with `accept`.
    async fn kb(&self, accept: &str, extra: &[&str]) -> f64 {
        let http = reqwest::Client::new();
        let urls = self
            .files
            .iter()
            .cloned()
            .chain(extra.iter().map(|p| self.server.at(p)));
        let mut total = 0;
        for url in urls {
            let (n, encoding) = wire_bytes(&http, &url, accept).await;
            println!("  {accept:<9} {encoding:<8} {n:>9} B  {url}");
            total += n;
        }
        total as f64 / 1024.0
    }
}

/// The hello page's dist, built now unless a build of the same sources and tools is cached.
fn hello_dist() -> PathBuf {
    let script = breakglass_e2e::workspace_root().join("e2e/benches/frontend/hello/build.sh");
    let out = std::process::Command::new(&script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} failed (its messages are above)",
        script.display()
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// Measures and reports the first page against the hello page, with brotli (the design's
/// figure) and, as growth rows, gzip only, uncompressed, and our page with the terminal's
/// xterm.js against the same hello page.
pub async fn run(dist: &Path, driver: &ChromeDriver) {
    let hello = Page::load(driver, &hello_dist(), ".xterm-rows", "hello from xterm.js").await;
    assert!(
        hello.files.iter().any(|f| f.ends_with("/vendor/xterm.mjs")),
        "the hello page loaded no xterm.js: {:?}",
        hello.files
    );
    let ours = Page::load(driver, dist, "button.user-choice", "").await;
    let rows = [
        (
            "first page, br",
            hello.kb("br, gzip", &[]).await,
            ours.kb("br, gzip", &[]).await,
        ),
        (
            "first page, gzip only",
            hello.kb("gzip", &[]).await,
            ours.kb("gzip", &[]).await,
        ),
        (
            "first page, uncompressed",
            hello.kb("identity", &[]).await,
            ours.kb("identity", &[]).await,
        ),
        (
            "+ xterm (terminal/player), br",
            hello.kb("br, gzip", &[]).await,
            ours.kb("br, gzip", &XTERM).await,
        ),
    ];
    for (i, (size, baseline, value)) in rows.into_iter().enumerate() {
        let fig = Figure::new("page-weight", "total", "KB", baseline, value)
            .size(size)
            .baseline_is(BASELINE_IS);
        bench::report(&if i == 0 {
            fig.target(Target::AtMost(150.0))
        } else {
            fig
        });
    }
}
