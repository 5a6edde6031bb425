//! Recordings searched like text, in the browser: once alice's session has ended, the search
//! page (`pages/search.rs`) finds the command her shell ran among the recordings she may read,
//! its link opens the player at that moment with the command on the screen, and the player's
//! own search lists the screen lines that hold a text, a click on one seeking there.

use anyhow::{ensure, Context as _};
use breakglass_e2e::browser::{Browser, WebServer, UI_WAIT};
use breakglass_e2e::wait_until;
use std::time::Duration;

use super::commands::{player_rows, seconds};

/// One session's results on the search page.
fn session_results(id: &str) -> String {
    format!("#recording-search-results li.recsearch-session[data-session=\"{id}\"]")
}

/// alice searches for `query` until the indexed recording of session `id` (its page's path is
/// `session`) shows, opens its first moment, a command `command`, and checks the player is at
/// its moment `listed_at` (seconds) with the command on its screen; then searches the player
/// for `output`, a line the command printed.
pub async fn found_and_opened(
    server: &WebServer,
    alice: &Browser,
    session: &str,
    query: &str,
    command: &str,
    output: &str,
) -> anyhow::Result<()> {
    let id = session.trim_start_matches("/sessions/");
    alice.goto(&server.at("/")).await?;
    alice
        .click("nav[aria-label=Main] a[href='/recordings/search']")
        .await?;
    alice
        .wait_for("form[role=search] #recording-search")
        .await?;
    // The recording is indexed in the background after the end: the search is asked again
    // until it is there.
    let first_hit = format!(
        "{} ul.recsearch-hits > li:first-child > a.recsearch-hit",
        session_results(id)
    );
    wait_until("the search to find the ended session", Duration::from_secs(60), || async {
        alice.fill("#recording-search", query).await?;
        alice.click("form[role=search] button[type=submit]").await?;
        alice
            .wait_text("[data-testid=recording-search-status]", query)
            .await?;
        let busy = alice
            .js("return document.querySelector('#recording-search-results')?.getAttribute('aria-busy')")
            .await?;
        if busy.as_str() == Some("true") {
            return Ok(None);
        }
        let found = alice
            .js(&format!(
                "return !!document.querySelector({})",
                serde_json::to_string(&first_hit)?
            ))
            .await?;
        Ok(found.as_bool().unwrap_or(false).then_some(()))
    })
    .await?;
    let url = alice.client.current_url().await?;
    ensure!(
        url.path() == "/recordings/search" && url.query().is_some_and(|q| q.contains("q=")),
        "the search is in the address: {url}"
    );
    let kind = alice.displayed_attr(&first_hit, "data-kind").await?;
    ensure!(
        kind.as_deref() == Some("command"),
        "the first moment is a {kind:?}"
    );
    let line = alice
        .text_of(&format!("{first_hit} code.recsearch-line"))
        .await?;
    ensure!(line == command, "the first moment shows {line:?}");
    let marked = alice
        .js(&format!(
            "return [...document.querySelectorAll({})].map(m => m.textContent.toLowerCase())",
            serde_json::to_string(&format!("{first_hit} mark"))?
        ))
        .await?;
    ensure!(
        marked.as_array().is_some_and(|m| !m.is_empty()),
        "the words found are marked: {marked}"
    );
    let time = alice
        .text_of(&format!("{first_hit} .recsearch-time"))
        .await?;
    let href = alice
        .displayed_attr(&first_hit, "href")
        .await?
        .context("the moment is a link")?;
    ensure!(
        href.starts_with(&format!("{session}/recording?t=")),
        "the moment links to {href}"
    );
    alice.check_page("55-recording-search").await?;

    alice.click(&first_hit).await?;
    wait_until("the player at the found moment", UI_WAIT, || async {
        let at = alice.client.current_url().await?;
        Ok((at.path() == format!("{session}/recording")).then_some(()))
    })
    .await?;
    alice.wait_for("[data-testid=player] .player-bar").await?;
    let clock = wait_until(
        "the player's screen to show the command",
        UI_WAIT,
        || async {
            let rows = player_rows(alice).await?;
            let shown = command.trim_start_matches("$ ");
            if !rows.iter().any(|r| r.contains(shown)) {
                return Ok(None);
            }
            Ok(Some(alice.text_of("[data-testid=player-time]").await?))
        },
    )
    .await?;
    let pos = clock
        .split('/')
        .next()
        .and_then(seconds)
        .with_context(|| format!("the player's clock says {clock:?}"))?;
    let listed = seconds(&time).with_context(|| format!("{time:?} is not a time"))?;
    ensure!(
        pos.abs_diff(listed) <= 1,
        "{href} opens the player at {clock:?}; the search said {time}"
    );

    // The player's search: over what the screen showed, every line listed with its time.
    alice.fill("#player-search", output).await?;
    alice
        .click("[data-testid=player] form[role=search] button[type=submit]")
        .await?;
    let result = "[data-testid=player] ol.search-results li button.search-result";
    alice.wait_text(result, output).await?;
    alice.click(result).await?;
    alice
        .wait_for(&format!("{result}[aria-current=true]"))
        .await?;
    wait_until("the player to show the line found", UI_WAIT, || async {
        let rows = player_rows(alice).await?;
        Ok(rows.iter().any(|r| r.trim() == output).then_some(()))
    })
    .await?;
    alice.check_page("56-player-search").await?;
    Ok(())
}
