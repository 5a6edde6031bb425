//! The wasm cut into chunks (frontend/wasm.mjs): home and a pod's page with the Debug panel's
//! form load none of them, a page in a chunk loads its own on first use, and a chunk that
//! cannot be fetched says so with **Try again**, which loads it once it is there again (nothing
//! else of the page breaks). A chunk whose fetch stalls: `stalls.rs`.

use std::path::Path;

use anyhow::{ensure, Context as _};
use breakglass_e2e::browser::{frontend_dist, Browser, ChromeDriver, WebServer};

/// The wasm files the page has fetched so far.
async fn wasm_fetched(b: &Browser) -> anyhow::Result<Vec<String>> {
    let v = b
        .js("return performance.getEntriesByType('resource').map(e => new URL(e.name).pathname).filter(p => p.endsWith('.wasm'))")
        .await?;
    Ok(v.as_array()
        .context("a list")?
        .iter()
        .filter_map(|p| p.as_str().map(str::to_owned))
        .collect())
}

/// A copy of the build, to take files away from.
fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn pages_in_chunks_load_on_first_use_and_a_failed_load_can_be_retried() -> anyhow::Result<()>
{
    let copy = tempfile::tempdir()?;
    copy_dir(&frontend_dist()?, copy.path())?;
    let aside = tempfile::tempdir()?;
    // The Ops wall's own chunk (and its compressed forms) taken away: the server then answers
    // its address with index.html, as for any unknown path, which is not a wasm.
    let mut moved = Vec::new();
    for entry in std::fs::read_dir(copy.path())? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.starts_with("split_ops_wall-") {
            std::fs::rename(copy.path().join(&name), aside.path().join(&name))?;
            moved.push(name);
        }
    }
    ensure!(
        !moved.is_empty(),
        "the build has no Ops wall chunk (split_ops_wall-*.wasm)"
    );

    let server = WebServer::start(copy.path(), &["--no-clusters"]).await?;
    let driver = ChromeDriver::start().await?;
    let bob = Browser::open(&driver, "bob", false).await?;
    let result = async {
        bob.goto(&server.at("/")).await?;
        bob.dev_sign_in("bob").await?;
        bob.wait_for("[data-testid=queue-strip]").await?;
        let home = wasm_fetched(&bob).await?;
        ensure!(
            home.len() == 1 && home[0].ends_with("_bg.wasm"),
            "home fetched only the main module, not {home:?}"
        );

        // A pod's page, loaded by its address, with the Debug panel's form: the first load
        // carries that too.
        bob.goto(&server.at("/env/prod/ns/shop/pod/web-1")).await?;
        bob.wait_for("#bg-reason").await?;
        let pod = wasm_fetched(&bob).await?;
        ensure!(
            pod.len() == 1 && pod[0].ends_with("_bg.wasm"),
            "a pod's page fetched only the main module, not {pod:?}"
        );

        bob.click("nav[aria-label=Main] a[href='/ops-wall']")
            .await?;
        bob.wait_text("[data-testid=chunk-error]", "Could not load this page")
            .await?;
        bob.check_page("80-chunk-failed").await?;

        for name in &moved {
            std::fs::rename(aside.path().join(name), copy.path().join(name))?;
        }
        bob.click("[data-testid=chunk-error] button").await?;
        bob.wait_for("[data-testid=ops-wall]").await?;
        let now = wasm_fetched(&bob).await?;
        ensure!(
            now.iter().any(|p| p.contains("/split_ops_wall-")),
            "the Ops wall's chunk was fetched: {now:?}"
        );
        // The rest of the app is unharmed: home again, without a reload.
        bob.click("[data-testid=ops-wall] a.wall-home").await?;
        bob.wait_for("[data-testid=queue-strip]").await?;
        Ok(())
    }
    .await;
    if result.is_err() {
        eprintln!("server log:\n{}", server.log_text());
    }
    bob.close().await?;
    result
}
