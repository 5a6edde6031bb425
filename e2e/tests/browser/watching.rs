//! Watching a session live: an approver opens a running session's page, watches its terminal
//! read-only (`components/watch.rs`) while the requester's page says who watches; what he
//! types goes nowhere. In a moderated environment the requester's input waits until an
//! approver watches, and waits again once he stops.

use std::time::Duration;

use anyhow::{ensure, Context as _};
use breakglass_e2e::browser::{Browser, ChromeDriver, WebServer, UI_WAIT};
use breakglass_e2e::flows::{
    absent, end_session, panel_state, panel_version, request_access, type_in_terminal,
    wait_panel_newer, wait_terminal_connected,
};
use breakglass_e2e::wait_until;

use super::terminal_screen::{server_with_pod, server_with_pod_and};

/// The requester's terminal on her page.
const TERMINAL: &str = ".term-box";

/// The watcher's live view on his.
const VIEW: &str = ".watch-box";

/// How soon output on the requester's screen is on the watcher's too: within a second.
const LIVE: Duration = Duration::from_secs(1);

/// The rows xterm.js painted in the terminal inside `host`, as text (its no-break spaces as
/// spaces).
async fn rows(b: &Browser, host: &str) -> anyhow::Result<Vec<String>> {
    let script = format!(
        "return [...document.querySelectorAll({})].map(d => d.textContent.replace(/\\u00a0/g, ' '))",
        serde_json::to_string(&format!("{host} .xterm-rows > div"))?
    );
    serde_json::from_value(b.js(&script).await?).context("the terminal's rows as strings")
}

/// How many rows of the terminal in `host` contain `text`.
async fn rows_with(b: &Browser, host: &str, text: &str) -> anyhow::Result<usize> {
    Ok(rows(b, host)
        .await?
        .iter()
        .filter(|r| r.contains(text))
        .count())
}

/// Waits, at most `within`, until a row of the terminal in `host` reads `line` (trailing
/// blanks aside).
async fn wait_row(b: &Browser, host: &str, line: &str, within: Duration) -> anyhow::Result<()> {
    let found = wait_until(
        &format!("{}: `{host}` to show {line:?}", b.name),
        within,
        || async {
            let rows = rows(b, host).await?;
            Ok(rows.iter().any(|r| r.trim_end() == line).then_some(()))
        },
    )
    .await;
    b.explain(found).await
}

/// Waits until exactly `n` rows of the terminal in `host` contain `text`.
async fn wait_rows_with(b: &Browser, host: &str, text: &str, n: usize) -> anyhow::Result<()> {
    let found = wait_until(
        &format!("{}: `{host}` to show {text:?} on {n} row(s)", b.name),
        UI_WAIT,
        || async { Ok((rows_with(b, host, text).await? == n).then_some(())) },
    )
    .await;
    b.explain(found).await
}

/// alice requests `web-1` in namespace `ns`, bob approves it from his queue, and alice's
/// terminal connects; returns the session page's path (from alice's panel).
async fn approved_session(
    server: &WebServer,
    alice: &Browser,
    bob: &Browser,
    ns: &str,
    reason: &str,
) -> anyhow::Result<String> {
    alice.goto(&server.at("/")).await?;
    alice.dev_sign_in("alice").await?;
    alice
        .goto(&server.at(&format!("/env/prod/ns/{ns}/pod/web-1")))
        .await?;
    request_access(alice, reason).await?;
    panel_state(alice, "PendingApproval").await?;
    bob.goto(&server.at("/")).await?;
    bob.dev_sign_in("bob").await?;
    bob.click("[data-testid=queue-item] [data-action=approve]")
        .await?;
    wait_terminal_connected(alice).await?;
    alice
        .displayed_attr(
            "[data-testid=session-panel][data-state=Active] .panel-links a[href^='/sessions/']:not([href$='/recording'])",
            "href",
        )
        .await?
        .context("the panel links to the session page")
}

/// bob opens the session page and starts watching; waits until the view is served.
async fn start_watching(server: &WebServer, bob: &Browser, session: &str) -> anyhow::Result<()> {
    bob.goto(&server.at(session)).await?;
    bob.click("[data-testid=session-panel] [data-action=watch]")
        .await?;
    bob.wait_text("[data-testid=watch-status]", "Watching live")
        .await?;
    Ok(())
}

/// Runs `flow` on a Flight environment's session (its keys `env_keys`) with alice and bob in
/// their own browsers, printing the server's log when it fails.
async fn with_session(
    prefix: &str,
    env_keys: &str,
    reason: &str,
    flow: impl AsyncFnOnce(&WebServer, &Browser, &Browser, &str) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    // Flight, as every environment on the shared control plane in this binary: bob approves.
    let (server, ns, _dir) = if env_keys.is_empty() {
        server_with_pod("prod", "flight", prefix).await?
    } else {
        server_with_pod_and("prod", "flight", prefix, env_keys).await?
    };
    let result = async {
        let driver = ChromeDriver::start().await?;
        let alice = Browser::open(&driver, "alice", false).await?;
        let bob = Browser::open(&driver, "bob", false).await?;
        let session = approved_session(&server, &alice, &bob, ns.name(), reason).await?;
        flow(&server, &alice, &bob, &session).await?;
        for b in [alice, bob] {
            b.close().await?;
        }
        anyhow::Ok(())
    }
    .await;
    if result.is_err() {
        eprintln!("server log:\n{}", server.log_text());
    }
    ns.delete().await?;
    result
}

/// bob (an approver, group sre) watches alice's running session from its page: he sees her
/// output within seconds, her page names him, and what he types into his view never reaches
/// her terminal. He stops (her page no longer names him), watches again, and when alice ends
/// the session his view says so.
#[tokio::test(flavor = "multi_thread")]
async fn an_approver_watches_a_session_live() -> anyhow::Result<()> {
    with_session(
        "bg-watch",
        "",
        "the payment worker hangs on a lock, watched by a second pair of eyes",
        async |server, alice, bob, session| {
            start_watching(server, bob, session).await?;
            let label = bob
                .displayed_attr("[data-testid=watch-screen]", "aria-label")
                .await?;
            ensure!(
                label.as_deref() == Some("Live view of alice's terminal (read-only)"),
                "the live view is labelled {label:?}"
            );
            alice
                .wait_text("[data-testid=terminal-watchers]", "Watching: bob")
                .await?;
            bob.wait_text("[data-testid=watch-watchers]", "bob").await?;
            ensure!(
                absent(alice, "[data-testid=input-paused]").await?,
                "input is paused in an environment that is not moderated"
            );

            // bob unfolds the session's history; the output makes a new version of the
            // session, which rebuilds his panel, and the history stays unfolded.
            bob.click("details.events > summary").await?;
            let before = panel_version(bob).await?;
            type_in_terminal(alice, "echo watched-$((6*7))\n", "watched-42").await?;
            wait_row(bob, VIEW, "watched-42", LIVE).await?;
            wait_panel_newer(bob, before).await?;
            let open = bob
                .js("return document.querySelector('details.events').open")
                .await?;
            ensure!(
                open == serde_json::json!(true),
                "bob's unfolded event history folded itself when the session changed"
            );

            // Read-only: keys typed into the view reach nothing.
            bob.wait_present(&format!("{VIEW} textarea.xterm-helper-textarea"))
                .await?
                .send_keys("echo from-bob-$((2*3))\n")
                .await?;
            type_in_terminal(alice, "echo after-bob-$((3*3))\n", "after-bob-9").await?;
            wait_row(bob, VIEW, "after-bob-9", LIVE).await?;
            for (b, host) in [(alice, TERMINAL), (bob, VIEW)] {
                ensure!(
                    rows_with(b, host, "from-bob").await? == 0,
                    "{}: what bob typed into his view reached the terminal: {:?}",
                    b.name,
                    rows(b, host).await?
                );
            }
            bob.check_page("50-watching").await?;
            alice.check_page("51-watched-terminal").await?;

            bob.click("[data-testid=session-panel] [data-action=stop-watching]")
                .await?;
            bob.wait_gone("[data-testid=watch]").await?;
            alice.wait_gone("[data-testid=terminal-watchers]").await?;

            // Watching again draws the screen as it is now; the end of the session closes it.
            bob.click("[data-testid=session-panel] [data-action=watch]")
                .await?;
            wait_row(bob, VIEW, "after-bob-9", UI_WAIT).await?;
            alice
                .wait_text("[data-testid=terminal-watchers]", "bob")
                .await?;
            end_session(alice).await?;
            bob.wait_text("[data-testid=watch-status]", "session ended")
                .await?;
            ensure!(
                rows_with(bob, VIEW, "after-bob-9").await? > 0,
                "the ended live view keeps its last screen"
            );
            Ok(())
        },
    )
    .await
}

/// In a moderated environment alice's input waits for an approver watching: her page says so
/// (and her terminal, once per change), what she types meanwhile never runs, a command runs
/// once bob watches, and the pause is back when he stops.
#[tokio::test(flavor = "multi_thread")]
async fn a_moderated_session_waits_for_a_watching_approver() -> anyhow::Result<()> {
    with_session(
        "bg-moderated",
        "moderated = true\n",
        "the payment worker's queue, under an approver's eye",
        async |server, alice, bob, session| {
            alice
                .wait_text("[data-testid=input-paused]", "Input paused")
                .await?;
            wait_rows_with(alice, TERMINAL, "[break-glass] input paused", 1).await?;
            // Held back in the server, not queued: it never runs.
            alice
                .wait_present(&format!("{TERMINAL} textarea.xterm-helper-textarea"))
                .await?
                .send_keys("echo early-$((5*5))\n")
                .await?;
            alice.check_page("52-moderated-paused").await?;

            start_watching(server, bob, session).await?;
            alice.wait_gone("[data-testid=input-paused]").await?;
            wait_rows_with(alice, TERMINAL, "[break-glass] input resumed", 1).await?;
            alice
                .wait_text("[data-testid=terminal-watchers]", "bob")
                .await?;
            ensure!(
                absent(bob, "[data-testid=watch-paused]").await?,
                "bob's view says the input is paused while he, an approver, watches"
            );
            type_in_terminal(alice, "echo moderated-$((6*7))\n", "moderated-42").await?;
            wait_row(bob, VIEW, "moderated-42", LIVE).await?;
            ensure!(
                rows_with(alice, TERMINAL, "early-").await? == 0,
                "what alice typed while paused reached the pod: {:?}",
                rows(alice, TERMINAL).await?
            );

            bob.click("[data-testid=session-panel] [data-action=stop-watching]")
                .await?;
            alice
                .wait_text("[data-testid=input-paused]", "Input paused")
                .await?;
            wait_rows_with(alice, TERMINAL, "[break-glass] input paused", 2).await?;
            alice.wait_gone("[data-testid=terminal-watchers]").await?;
            Ok(())
        },
    )
    .await
}
