//! What the page does when the network stalls rather than fails: a request the browser holds
//! unanswered (the DevTools protocol's request interception, which nobody releases) stands for
//! a connection dropped without the browser noticing, or a proxy holding the request. A chunk
//! of the app and an API call each give up after their time limit and say so, and the page
//! recovers once the network answers again.

use std::time::{Duration, Instant};

use anyhow::ensure;
use breakglass_e2e::browser::{frontend_dist, Browser, ChromeDriver, WebServer};
use serde_json::json;

/// bob's browser on a server with no clusters.
struct Rig {
    server: WebServer,
    _driver: ChromeDriver,
    bob: Browser,
}

impl Rig {
    async fn start() -> anyhow::Result<Rig> {
        let server = WebServer::start(&frontend_dist()?, &["--no-clusters"]).await?;
        let driver = ChromeDriver::start().await?;
        let bob = Browser::open(&driver, "bob", false).await?;
        Ok(Rig {
            server,
            _driver: driver,
            bob,
        })
    }

    /// Signs bob in, then holds every request whose address matches `pattern` unanswered.
    async fn signed_in_holding(&self, pattern: &str) -> anyhow::Result<()> {
        self.bob.goto(&self.server.at("/")).await?;
        self.bob.dev_sign_in("bob").await?;
        self.bob.wait_for("[data-testid=queue-strip]").await?;
        self.bob
            .cdp(
                "Fetch.enable",
                json!({ "patterns": [{ "urlPattern": pattern }] }),
            )
            .await?;
        Ok(())
    }

    /// Lets requests through again.
    async fn release(&self) -> anyhow::Result<()> {
        self.bob.cdp("Fetch.disable", json!({})).await?;
        Ok(())
    }

    /// The test's `result`, with the server's log printed when it failed.
    async fn finish(self, result: anyhow::Result<()>) -> anyhow::Result<()> {
        if result.is_err() {
            eprintln!("server log:\n{}", self.server.log_text());
        }
        self.bob.close().await?;
        result
    }
}

/// A chunk's fetch that never answers (held by the browser itself, through the DevTools
/// protocol's request interception, which nobody releases) shows the loading state, then gives
/// up with **Try again** once the loader's time limit (20 s, `frontend/wasm.mjs`) has passed;
/// the retry, with the network answering again, loads the page.
#[tokio::test(flavor = "multi_thread")]
async fn a_chunk_whose_fetch_stalls_gives_up_and_can_be_retried() -> anyhow::Result<()> {
    let rig = Rig::start().await?;
    let bob = &rig.bob;
    let result = async {
        rig.signed_in_holding("*/split_ops_wall-*").await?;
        bob.click("nav[aria-label=Main] a[href='/ops-wall']")
            .await?;
        let asked = Instant::now();
        bob.wait_text("p.loading", "Loading this page").await?;
        bob.wait_for_within("[data-testid=chunk-error]", Duration::from_secs(60))
            .await?;
        let waited = asked.elapsed();
        ensure!(
            waited >= Duration::from_secs(15),
            "the stalled fetch gave up after {waited:?}, before its time limit"
        );
        bob.wait_text("[data-testid=chunk-error]", "stalled")
            .await?;

        rig.release().await?;
        bob.click("[data-testid=chunk-error] button").await?;
        bob.wait_for("[data-testid=ops-wall]").await?;
        Ok(())
    }
    .await;
    rig.finish(result).await
}

/// An API call that never answers (the home page's lists) shows the loading state, then, past
/// the time limit (30 s, `frontend/src/api.rs`), an error that says the server did not answer
/// in time; with the network back, the page loads them.
#[tokio::test(flavor = "multi_thread")]
async fn an_api_call_that_stalls_gives_up_and_says_so() -> anyhow::Result<()> {
    let rig = Rig::start().await?;
    let bob = &rig.bob;
    let result = async {
        rig.signed_in_holding("*/api/breakglass/sessions?*").await?;
        bob.goto(&rig.server.at("/")).await?;
        let asked = Instant::now();
        bob.wait_text(
            "[data-testid=my-sessions] p.loading",
            "Loading your sessions",
        )
        .await?;
        bob.wait_for_within(
            "[data-testid=my-sessions] [role=alert]",
            Duration::from_secs(90),
        )
        .await?;
        let waited = asked.elapsed();
        ensure!(
            waited >= Duration::from_secs(25),
            "the stalled call gave up after {waited:?}, before its time limit"
        );
        bob.wait_text(
            "[data-testid=my-sessions] [role=alert]",
            "did not answer in time",
        )
        .await?;

        rig.release().await?;
        bob.goto(&rig.server.at("/")).await?;
        bob.wait_text(
            "[data-testid=my-sessions]",
            "You have not asked for access yet",
        )
        .await?;
        Ok(())
    }
    .await;
    rig.finish(result).await
}
