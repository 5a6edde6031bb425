//! Steps of the browser flows that more than one test walks (the requester's form, the
//! session panel, the terminal), so each test says what it checks and not how to click.

use anyhow::Context as _;

use crate::browser::{Browser, UI_WAIT};
use crate::wait_until;

/// Fills and submits the Debug panel's form with a valid request (target container `app`:
/// a select when the cluster listing answered, else a text field).
pub async fn request_access(b: &Browser, reason: &str) -> anyhow::Result<()> {
    b.wait_for("#bg-target").await?;
    let tag = b
        .js("return document.getElementById('bg-target').tagName")
        .await?;
    if tag
        .as_str()
        .is_some_and(|t| t.eq_ignore_ascii_case("select"))
    {
        b.js(
            "const s = document.getElementById('bg-target'); s.value = 'app'; \
              s.dispatchEvent(new Event('change', { bubbles: true })); return null",
        )
        .await?;
    } else {
        b.fill("#bg-target", "app").await?;
    }
    b.fill("#bg-reason", reason).await?;
    b.fill("#bg-ticket", "https://tracker.example.com/INC-4711")
        .await?;
    b.fill("#bg-duration", "30").await?;
    b.click("[data-testid=request-access]").await
}

/// Approves the first request in `b`'s queue strip and waits for the strip's note of the
/// decision, which shows once the server has answered: closing the browser or leaving the page
/// right after the click would cancel an approval still in flight.
pub async fn approve_first_in_queue(b: &Browser) -> anyhow::Result<()> {
    b.click("[data-testid=queue-item] [data-action=approve]")
        .await?;
    b.wait_for("[data-testid=decision-note]").await.map(|_| ())
}

/// Waits until the requester's session panel shows `state`.
pub async fn panel_state(b: &Browser, state: &str) -> anyhow::Result<()> {
    b.wait_for(&format!("[data-testid=session-panel][data-state={state}]"))
        .await
        .map(|_| ())
}

/// Waits until the Debug panel's session is `Active` and its terminal says it is connected.
pub async fn wait_terminal_connected(b: &Browser) -> anyhow::Result<()> {
    b.wait_for_within(
        "[data-testid=session-panel][data-state=Active]",
        std::time::Duration::from_secs(60),
    )
    .await?;
    b.wait_text(".terminal-status", "Connected").await?;
    Ok(())
}

/// Whether one of the Debug panel terminal's rows reads `line` (trailing blanks aside): what
/// xterm.js painted, not what the socket carried.
pub async fn terminal_shows(b: &Browser, line: &str) -> anyhow::Result<bool> {
    let rows = b
        .js("return [...document.querySelectorAll('.term-box .xterm-rows > div')].map(d => d.textContent)")
        .await?;
    Ok(rows.as_array().is_some_and(|r| {
        r.iter()
            .any(|l| l.as_str().is_some_and(|l| row_reads(l, line)))
    }))
}

/// Whether a terminal row reads `line`: alone, or after the shell's prompt, where output lands
/// when its command was typed before the shell printed its first prompt (the terminal echoes
/// type-ahead at once, the shell's prompt comes after it).
pub fn row_reads(row: &str, line: &str) -> bool {
    let row = row.trim_end();
    row == line
        || row
            .strip_suffix(line)
            .is_some_and(|before| before.ends_with("$ ") || before.ends_with("# "))
}

/// Types `keys` into the Debug panel's terminal and waits until one of its rows reads `line`.
pub async fn type_in_terminal(b: &Browser, keys: &str, line: &str) -> anyhow::Result<()> {
    let textarea = b
        .wait_present(".term-box textarea.xterm-helper-textarea")
        .await?;
    textarea.send_keys(keys).await?;
    wait_until(&format!("the terminal shows {line:?}"), UI_WAIT, || async {
        Ok(terminal_shows(b, line).await?.then_some(()))
    })
    .await
}

/// Ends the session from the requester's panel and waits until it shows `Ended`.
pub async fn end_session(b: &Browser) -> anyhow::Result<()> {
    b.click("[data-testid=session-panel] [data-action=end]")
        .await?;
    // Ending a live session asks first, with focus on Cancel.
    b.wait_text(
        "[data-testid=session-panel] .confirm",
        "End this session now?",
    )
    .await?;
    // Focus moves into it as it opens (an effect, a moment after it is shown).
    wait_focus(
        b,
        "[data-testid=session-panel] [data-action=cancel-confirm]",
    )
    .await
    .map_err(|e| e.context("the End confirmation does not take the focus onto Cancel"))?;
    b.assert_accessible("end-confirmation").await?;
    b.click("[data-testid=session-panel] [data-action=confirm]")
        .await?;
    b.wait_for_within(
        "[data-testid=session-panel][data-state=Ended]",
        std::time::Duration::from_secs(60),
    )
    .await
    .map(|_| ())
}

/// Searches the recording player for `needle` and waits until it says where it found it.
pub async fn find_in_player(b: &Browser, needle: &str) -> anyhow::Result<()> {
    b.fill("#player-search", needle).await?;
    b.client
        .find(fantoccini::Locator::Css("#player-search"))
        .await?
        .send_keys("\n")
        .await?;
    b.wait_text("[role=status]", "found at").await.map(|_| ())
}

/// Waits until keyboard focus is on an element matching `css` (never on `<body>` after a
/// change the user made).
pub async fn wait_focus(b: &Browser, css: &str) -> anyhow::Result<()> {
    let script = format!(
        "const a = document.activeElement; return !!a && a.matches({})",
        serde_json::to_string(css)?
    );
    let script = &script;
    wait_until(
        &format!("{}: focus on `{css}`", b.name),
        UI_WAIT,
        || async move { Ok((b.js(script).await?.as_bool() == Some(true)).then_some(())) },
    )
    .await
}

/// The value of `attr` on the first element matching `css`, displayed or not, read where it
/// is found (a re-render in between is read again).
pub async fn attr_of(b: &Browser, css: &str, attr: &str) -> anyhow::Result<Option<String>> {
    let script = format!(
        "const e = document.querySelector({}); return e ? [e.getAttribute({})] : null",
        serde_json::to_string(css)?,
        serde_json::to_string(attr)?
    );
    let script = &script;
    let found = wait_until(
        &format!("{}: `{css}` to exist", b.name),
        UI_WAIT,
        || async move {
            Ok(match b.js(script).await? {
                serde_json::Value::Array(v) => Some(
                    v.into_iter()
                        .next()
                        .and_then(|a| a.as_str().map(String::from)),
                ),
                _ => None,
            })
        },
    )
    .await;
    b.explain(found).await
}

/// Whether no element matches `css` at all (displayed or not), now.
pub async fn absent(b: &Browser, css: &str) -> anyhow::Result<bool> {
    Ok(b.client
        .find_all(fantoccini::Locator::Css(css))
        .await?
        .is_empty())
}

/// The version of the session that `b`'s session panel shows.
pub async fn panel_version(b: &Browser) -> anyhow::Result<u64> {
    b.js("return Number(document.querySelector('[data-testid=session-panel]').dataset.version)")
        .await?
        .as_u64()
        .context("the panel's data-version")
}

/// Waits until `b`'s session panel shows a version of the session newer than `than` (a live
/// update rebuilt it).
pub async fn wait_panel_newer(b: &Browser, than: u64) -> anyhow::Result<()> {
    wait_until(
        &format!("{}: a version of the session newer than {than}", b.name),
        UI_WAIT,
        || async { Ok((panel_version(b).await? > than).then_some(())) },
    )
    .await
}
