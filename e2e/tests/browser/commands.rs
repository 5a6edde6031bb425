//! The commands a session's shell ran, on its page (`components/commands.rs`): alice marks her
//! prompt with the OSC 133 marks (as the debug image's profile does), runs a command and ends
//! her session; her session page lists the command with its moment in the recording, and its
//! link opens the player at that moment, the command on its screen. Then the recording search
//! finds it (`search.rs`, on the same session).

use anyhow::{ensure, Context as _};
use breakglass_e2e::browser::{Browser, ChromeDriver, WebServer, UI_WAIT};
use breakglass_e2e::flows::{
    approve_first_in_queue, end_session, panel_state, request_access, type_in_terminal,
    wait_terminal_connected,
};
use breakglass_e2e::wait_until;
use serde::Deserialize;

use super::terminal_screen::server_with_pod;

/// What alice types to mark her prompt: an A mark before it, a B mark after it.
const MARKED_PROMPT: &str =
    r#"PS1="$(printf '\033]133;A\007')debug \$ $(printf '\033]133;B\007')""#;

/// The command she runs, as the list shows it.
const COMMAND: &str = "$ echo listed-$((6*7))";

/// The session page's list of commands.
const LIST: &str = "[data-testid=commands] .command-list";

/// One row of the list, as the page shows it.
#[derive(Debug, Deserialize)]
struct Row {
    /// Its moment in the recording (`0:07`).
    time: String,
    /// The command line, `$ ` first.
    line: String,
    /// Where its link goes.
    href: String,
}

/// The rows of the session page's list of commands.
async fn listed(b: &Browser) -> anyhow::Result<Vec<Row>> {
    let rows = b
        .js(&format!(
            "return [...document.querySelectorAll({})].map(a => ({{ \
               time: a.querySelector('.command-time').textContent, \
               line: a.querySelector('.command-line').textContent, \
               href: a.getAttribute('href') }}))",
            serde_json::to_string(&format!("{LIST} a"))?
        ))
        .await?;
    serde_json::from_value(rows).context("the list's rows")
}

/// Seconds of a clock's `m:ss` or `h:mm:ss`.
pub(super) fn seconds(clock: &str) -> Option<u64> {
    clock
        .trim()
        .split(':')
        .try_fold(0u64, |acc, part| Some(acc * 60 + part.parse::<u64>().ok()?))
}

/// The rows the player's screen shows, as text (its no-break spaces as spaces).
pub(super) async fn player_rows(b: &Browser) -> anyhow::Result<Vec<String>> {
    let rows = b
        .js("return [...document.querySelectorAll('[data-testid=player] .player-screen .xterm-rows > div')] \
               .map(d => d.textContent.replace(/\\u00a0/g, ' '))")
        .await?;
    serde_json::from_value(rows).context("the player's rows as strings")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_commands_the_shell_ran_are_listed_and_found_by_search() -> anyhow::Result<()> {
    let (server, ns, _dir) = server_with_pod("prod", "flight", "bg-commands").await?;
    let result = async {
        let driver = ChromeDriver::start().await?;
        let alice = Browser::open(&driver, "alice", false).await?;
        let bob = Browser::open(&driver, "bob", false).await?;
        alice.goto(&server.at("/")).await?;
        alice.dev_sign_in("alice").await?;
        alice
            .goto(&server.at(&format!("/env/prod/ns/{}/pod/web-1", ns.name())))
            .await?;
        request_access(&alice, "which commands ran against the payment worker").await?;
        panel_state(&alice, "PendingApproval").await?;
        // Flight, as every environment on the shared control plane in this binary: bob
        // approves.
        bob.goto(&server.at("/")).await?;
        bob.dev_sign_in("bob").await?;
        approve_first_in_queue(&bob).await?;
        bob.close().await?;
        wait_terminal_connected(&alice).await?;
        let session = alice
            .displayed_attr(
                "[data-testid=session-panel][data-state=Active] .panel-links a[href^='/sessions/']:not([href$='/recording'])",
                "href",
            )
            .await?
            .context("the panel links to the session page")?;
        let checked = commands_listed(&server, &alice, &session).await;
        alice.explain(checked).await?;
        let found = super::search::found_and_opened(
            &server,
            &alice,
            &session,
            "echo listed",
            COMMAND,
            "listed-42",
        )
        .await;
        alice.explain(found).await?;
        alice.close().await
    }
    .await;
    if result.is_err() {
        eprintln!("server log:\n{}", server.log_text());
    }
    ns.delete().await?;
    result
}

/// alice, at her running session's terminal, marks her prompt, runs [`COMMAND`] and ends the
/// session; then checks its page's list and where its link goes. `session` is the session
/// page's path.
async fn commands_listed(server: &WebServer, alice: &Browser, session: &str) -> anyhow::Result<()> {
    type_in_terminal(alice, &format!("{MARKED_PROMPT}\n"), "debug $").await?;
    type_in_terminal(alice, "echo listed-$((6*7))\n", "listed-42").await?;
    end_session(alice).await?;

    alice.goto(&server.at(session)).await?;
    alice.wait_text(LIST, COMMAND).await?;
    let rows = listed(alice).await?;
    // What ran before the prompt was marked is not listed (or, where the image's own prompt
    // is marked already, comes first): her command is the last one.
    let row = rows.last().context("the list has rows")?;
    ensure!(
        row.line == COMMAND,
        "the last command listed is {row:?}; all: {rows:?}"
    );
    let listed_at = seconds(&row.time)
        .with_context(|| format!("{:?} is not a time in the recording", row.time))?;
    ensure!(
        row.href.starts_with(&format!("{session}/recording?t=")),
        "the command links to {:?}",
        row.href
    );
    alice.check_page("54-session-commands").await?;

    // The link opens the player at the command's moment: the clock says the listed time
    // (within a second: the player reads the link's moment back through its timeline, which
    // may land a hair before a whole second), and the screen shows the command line.
    alice
        .click(&format!(
            "{LIST} a[href={}]",
            serde_json::to_string(&row.href)?
        ))
        .await?;
    let at = wait_until(
        "the recording page at the command's moment",
        UI_WAIT,
        || async {
            let at = alice.client.current_url().await?;
            let there = at.path() == format!("{session}/recording")
                && at.query().is_some_and(|q| q.starts_with("t="));
            Ok(there.then_some(at))
        },
    )
    .await?;
    alice.wait_for("[data-testid=player] .player-bar").await?;
    let clock = wait_until(
        "the player's screen to show the command",
        UI_WAIT,
        || async {
            let rows = player_rows(alice).await?;
            if !rows.iter().any(|r| r.contains("echo listed-$((6*7))")) {
                return Ok(None);
            }
            let clock = alice.text_of("[data-testid=player-time]").await?;
            Ok(Some(clock))
        },
    )
    .await?;
    let pos = clock
        .split('/')
        .next()
        .and_then(seconds)
        .with_context(|| format!("the player's clock says {clock:?}"))?;
    ensure!(
        pos.abs_diff(listed_at) <= 1,
        "{at} opens the player at {clock:?}; the list says {}",
        row.time
    );
    Ok(())
}
