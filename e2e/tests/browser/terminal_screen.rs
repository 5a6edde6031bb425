//! The terminal on a small laptop's window (1000×700): it takes the window's free height, so
//! the prompt on its bottom row is on screen without scrolling; each resize of the window, and
//! full screen, reaches the pod (`stty size` says the terminal's rows); Escape in full screen
//! stays with the terminal; underscores are painted inside their row with DejaVu Sans Mono at a
//! device pixel ratio of 1; and End is not placed next to a link.

use std::time::Duration;

use anyhow::{ensure, Context as _};
use breakglass_e2e::browser::{frontend_dist, Browser, ChromeDriver, WebServer, UI_WAIT};
use breakglass_e2e::flows::{
    approve_first_in_queue, panel_version, request_access, type_in_terminal, wait_panel_newer,
    wait_terminal_connected,
};
use breakglass_e2e::server::{config_toml, install_guardrails, ApiClient};
use breakglass_e2e::{wait_for_pod_running, wait_until, ControlPlane, Identity, TestNamespace};
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::Api;
use serde_json::json;

/// Makes the page's viewport `width`×`height` CSS pixels.
async fn set_viewport(b: &Browser, width: u32, height: u32) -> anyhow::Result<()> {
    let chrome = b
        .js("return [window.outerWidth - window.innerWidth, window.outerHeight - window.innerHeight]")
        .await?;
    let extra: Vec<u32> = serde_json::from_value(chrome)?;
    b.client
        .set_window_size(width + extra[0], height + extra[1])
        .await?;
    wait_until(
        &format!("a {width}x{height} viewport"),
        UI_WAIT,
        || async move {
            let now = b
                .js("return [window.innerWidth, window.innerHeight]")
                .await?;
            Ok((now == json!([width, height])).then_some(()))
        },
    )
    .await
}

/// The terminal's rows as xterm.js lays them out (one element a row).
async fn shown_rows(b: &Browser) -> anyhow::Result<u64> {
    b.js("return document.querySelectorAll('.term-box .xterm-rows > div').length")
        .await?
        .as_u64()
        .context("a row count")
}

/// Runs `stty size` in the pod (`tag` marks its output) and returns the rows and columns the
/// pod's terminal has.
async fn pod_size(b: &Browser, tag: &str) -> anyhow::Result<(u64, u64)> {
    let textarea = b
        .wait_present(".term-box textarea.xterm-helper-textarea")
        .await?;
    textarea
        .send_keys(&format!("echo {tag}-$(stty size)-end\n"))
        .await?;
    let prefix = format!("{tag}-");
    let found = wait_until(&format!("the output of {tag}'s stty size"), UI_WAIT, || {
        let prefix = prefix.clone();
        async move {
            let rows = b
                .js("return [...document.querySelectorAll('.term-box .xterm-rows > div')].map(d => d.textContent.trim())")
                .await?;
            let found = rows.as_array().into_iter().flatten().find_map(|r| {
                let size = r.as_str()?.strip_prefix(prefix.as_str())?.strip_suffix("-end")?;
                let (rows, cols) = size.split_once(' ')?;
                Some((rows.parse().ok()?, cols.parse().ok()?))
            });
            Ok(found)
        }
    })
    .await?;
    Ok(found)
}

/// Whether the cursor (the prompt's end) is inside the window and inside the terminal's box.
async fn cursor_in_view(b: &Browser) -> anyhow::Result<serde_json::Value> {
    b.js("const c = document.querySelector('.term-box .xterm-rows .xterm-cursor'); \
          if (!c) return 'no cursor'; \
          const r = c.getBoundingClientRect(); \
          const box = document.querySelector('.term-box').getBoundingClientRect(); \
          const ok = r.top >= 0 && r.bottom <= window.innerHeight && r.bottom <= box.bottom && r.top >= box.top; \
          return ok ? true : `cursor ${r.top}..${r.bottom}, box ${box.top}..${box.bottom}, window ${window.innerHeight}, scrolled ${window.scrollY}`")
        .await
}

/// Every link or link-styled button on the same line as End and closer than 48 pixels to it.
async fn links_next_to_end(b: &Browser) -> anyhow::Result<serde_json::Value> {
    b.js(
        "const end = document.querySelector('[data-testid=session-panel] [data-action=end]'); \
          if (!end) return 'no End button'; \
          const e = end.getBoundingClientRect(); \
          return [...document.querySelectorAll('a, .button-link')].filter(a => { \
            const r = a.getBoundingClientRect(); \
            if (r.width === 0) return false; \
            const sameLine = r.top < e.bottom && e.top < r.bottom; \
            const gap = Math.max(r.left - e.right, e.left - r.right); \
            return sameLine && gap < 48; \
          }).map(a => a.textContent.trim())",
    )
    .await
}

/// A server with one environment `env` of `tier` on the test control plane (guardrails
/// installed), and a running pod `web-1` (container `app`) in a fresh namespace.
pub(crate) async fn server_with_pod(
    env: &str,
    tier: &str,
    prefix: &str,
) -> anyhow::Result<(WebServer, TestNamespace, tempfile::TempDir)> {
    server_with_pod_and(env, tier, prefix, "").await
}

/// [`server_with_pod`] with `keys` (TOML lines, each ending in a newline, e.g.
/// `"moderated = true\n"`) added to the environment's settings.
pub(crate) async fn server_with_pod_and(
    env: &str,
    tier: &str,
    prefix: &str,
    keys: &str,
) -> anyhow::Result<(WebServer, TestNamespace, tempfile::TempDir)> {
    let dist = frontend_dist()?;
    let cp = ControlPlane::shared().await?;
    let dir = tempfile::tempdir()?;
    let cfg = dir.path().join("server.toml");
    let kubeconfig = cp.kubeconfig_path(Identity::BreakglassSa)?;
    // An environment's own keys go right after its `tier` line, inside its table (its
    // permissions' table follows).
    let tier_line = format!("tier = \"{tier}\"\n");
    let toml = config_toml(&[(env, tier, kubeconfig)], "").replacen(
        &tier_line,
        &format!("{tier_line}{keys}"),
        1,
    );
    std::fs::write(&cfg, toml)?;
    install_guardrails(cp, &cfg, env, cp.username(Identity::BreakglassSa)?).await?;
    let ns = cp.namespace(prefix).await?;
    let pods: Api<Pod> = Api::namespaced(cp.client(Identity::Admin).await?, ns.name());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "web-1", "labels": { "app": "web" } },
        "spec": { "containers": [{ "name": "app", "image": "registry.example/app:1" }] }
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    wait_for_pod_running(&pods, "web-1", Duration::from_secs(30)).await?;
    let cfg = cfg.to_string_lossy().into_owned();
    let server = WebServer::start(&dist, &["--config", &cfg]).await?;
    Ok((server, ns, dir))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_terminal_fills_the_window_and_shows_every_glyph() -> anyhow::Result<()> {
    // Flight, as every environment on the shared control plane in this binary (its policies
    // are the cluster's): bob approves.
    let (server, ns, _dir) = server_with_pod("prod", "flight", "bg-term-screen").await?;
    let result = async {
        let driver = ChromeDriver::start().await?;
        let alice = Browser::open(&driver, "alice", false).await?;
        let bob = Browser::open(&driver, "bob", false).await?;
        alice.goto(&server.at("/")).await?;
        alice.dev_sign_in("alice").await?;
        set_viewport(&alice, 1000, 700).await?;
        alice
            .goto(&server.at(&format!("/env/prod/ns/{}/pod/web-1", ns.name())))
            .await?;
        request_access(&alice, "the worker's queue on a small laptop").await?;
        bob.goto(&server.at("/")).await?;
        bob.dev_sign_in("bob").await?;
        approve_first_in_queue(&bob).await?;
        bob.close().await?;
        wait_terminal_connected(&alice).await?;
        let result = screen_checks(&alice, &server.at("")).await;
        alice.explain(result).await?;
        alice.close().await
    }
    .await;
    if result.is_err() {
        eprintln!("server log:\n{}", server.log_text());
    }
    ns.delete().await?;
    result
}

/// The checks on alice's terminal; `base` is the server's address (bob answers through its
/// API).
async fn screen_checks(alice: &Browser, base: &str) -> anyhow::Result<()> {
    // Enough output that the prompt sits on the bottom row.
    type_in_terminal(alice, "seq 1 120\n", "120").await?;
    let (rows, cols) = pod_size(alice, "small").await?;
    let seen = cursor_in_view(alice).await?;
    ensure!(
        seen == json!(true),
        "the prompt is not on screen at 1000x700: {seen}"
    );
    ensure!(
        rows >= 14,
        "the terminal has {rows} rows at 1000x700: it does not take the window's free height"
    );
    ensure!(
        rows == shown_rows(alice).await?,
        "the pod's terminal has {rows} rows and the page shows {}",
        shown_rows(alice).await?
    );
    let near = links_next_to_end(alice).await?;
    ensure!(
        near == json!([]),
        "End sits next to a link or a link button: {near}"
    );
    alice.check_page("20b-terminal-1000x700").await?;
    // The ask for more time, unfolded beside the time left, passes the same checks; folded
    // again, the terminal keeps its height.
    alice.click("[data-testid=extension] > summary").await?;
    alice
        .wait_text("[data-testid=extensions-left]", "0 of 2 extensions used")
        .await?;
    alice.wait_for("[data-testid=extension-form]").await?;
    alice.check_page("20d-terminal-more-time").await?;
    // A live update rebuilds the panel (output makes the recording store a new version, which
    // is a new version of the session): what the reader unfolded and typed stays.
    let why = "the worker's queue needs longer";
    alice
        .fill("[data-testid=extension-form] input[type=text]", why)
        .await?;
    let before = panel_version(alice).await?;
    type_in_terminal(alice, "seq 1 30\n", "30").await?;
    wait_panel_newer(alice, before).await?;
    let kept = alice
        .js(
            "const d = document.querySelector('[data-testid=extension]'); \
             const i = document.querySelector('[data-testid=extension-form] input[type=text]'); \
             return [d && d.open, i && i.value]",
        )
        .await?;
    ensure!(
        kept == json!([true, why]),
        "after a live update the ask for more time is [unfolded, reason] = {kept}"
    );
    // Sent, the reason goes with the ask; refused, the form is back and empty: what was kept
    // for it is dropped once it is sent.
    alice.click("[data-action=extend]").await?;
    alice
        .wait_text("[data-testid=extension-waiting]", why)
        .await?;
    let id = alice
        .js("return document.querySelector('[data-testid=session-panel] [data-testid=session-headline]').id.slice('panel-'.length)")
        .await?;
    let id = id.as_str().context("the panel's session id")?.to_string();
    let bob = ApiClient::login(base, "bob").await?;
    let (status, body) = bob
        .post(
            &format!("/sessions/{id}/extension/deny"),
            json!({ "reason": "not during the release freeze" }),
        )
        .await?;
    ensure!(status == 200, "bob's refusal of more time: {status} {body}");
    alice
        .wait_text(
            "[data-testid=extension-refused]",
            "not during the release freeze",
        )
        .await?;
    alice.wait_for("[data-testid=extension-form]").await?;
    let reason = alice
        .js("return document.querySelector('[data-testid=extension-form] input[type=text]').value")
        .await?;
    ensure!(
        reason == json!(""),
        "after the ask was sent and refused the reason field holds {reason}"
    );
    // The refusal unfolded the box once; folded again, it stays folded through the next live
    // update (it would take the terminal's rows every time the recording stores a version).
    alice.click("[data-testid=extension] > summary").await?;
    alice.wait_gone("[data-testid=extension-form]").await?;
    let before = panel_version(alice).await?;
    type_in_terminal(alice, "echo folded-$((6*7))\n", "folded-42").await?;
    wait_panel_newer(alice, before).await?;
    let open = alice
        .js("return document.querySelector('[data-testid=extension]').open")
        .await?;
    ensure!(
        open == json!(false),
        "the box with bob's refusal, folded by alice, unfolded again after a live update"
    );

    // A bigger window: the terminal grows, and the pod hears of it.
    set_viewport(alice, 1440, 900).await?;
    wait_until("the terminal to grow with the window", UI_WAIT, || async {
        Ok((shown_rows(alice).await? > rows).then_some(()))
    })
    .await?;
    let (rows_big, cols_big) = pod_size(alice, "big").await?;
    ensure!(
        rows_big == shown_rows(alice).await? && rows_big > rows && cols_big > cols,
        "after the window grew the pod's terminal is {rows_big}x{cols_big} \
         (was {rows}x{cols}; the page shows {} rows)",
        shown_rows(alice).await?
    );

    // Full screen: the whole window, and Escape is the terminal's (editors use it).
    set_viewport(alice, 1000, 700).await?;
    alice.click("[data-testid=terminal-full-screen]").await?;
    wait_until("the terminal to fill the window", UI_WAIT, || async {
        let h = alice
            .js("return document.querySelector('.term-box').getBoundingClientRect().height / window.innerHeight")
            .await?;
        Ok(h.as_f64().is_some_and(|f| f > 0.85).then_some(()))
    })
    .await?;
    let textarea = alice
        .wait_present(".term-box textarea.xterm-helper-textarea")
        .await?;
    textarea.send_keys("\u{e00c}").await?;
    // The pod got it (its terminal echoes it as ^[); Ctrl-U then clears the line.
    wait_until("the pod to echo the Escape", UI_WAIT, || async {
        let rows = alice
            .js("return [...document.querySelectorAll('.term-box .xterm-rows > div')].some(d => d.textContent.includes('$ ^['))")
            .await?;
        Ok((rows == json!(true)).then_some(()))
    })
    .await?;
    textarea.send_keys("\u{15}").await?;
    let (rows_full, _) = pod_size(alice, "full").await?;
    let pressed = alice
        .displayed_attr("[data-testid=terminal-full-screen]", "aria-pressed")
        .await?;
    ensure!(
        pressed.as_deref() == Some("true"),
        "Escape left full screen (aria-pressed {pressed:?})"
    );
    ensure!(
        rows_full > rows && rows_full == shown_rows(alice).await?,
        "in full screen the pod's terminal has {rows_full} rows (was {rows})"
    );
    alice.check_page("20c-terminal-full-screen").await?;
    alice.click("[data-testid=terminal-full-screen]").await?;
    alice
        .wait_for(
            ".terminal-wrap:not(.term-full) [data-testid=terminal-full-screen][aria-pressed=false]",
        )
        .await?;

    // Underscores: their ink falls inside their own row.
    type_in_terminal(alice, "clear; echo ____\n", "____").await?;
    let row = alice
        .js(
            "const rows = [...document.querySelectorAll('.term-box .xterm-rows > div')]; \
             const i = rows.findIndex(d => d.textContent.trim() === '____'); \
             if (i < 0) return null; rows[i].id = 'underscores'; return i",
        )
        .await?;
    ensure!(row.is_number(), "no row reads ____");
    let pixels = alice.pixels_of("#underscores").await?;
    // Light ink on the dark terminal background.
    let ink = pixels.count(|[r, g, b]| u32::from(r) + u32::from(g) + u32::from(b) > 3 * 128);
    ensure!(
        ink > 0,
        "no ink of ____ inside its row ({}x{} pixels): the row cuts off low glyphs",
        pixels.width,
        pixels.height
    );
    Ok(())
}
