//! The recording player in the browser: its clock, the seek bar, moment links, and pause and
//! play keeping the recording's time.

use anyhow::{ensure, Context as _};
use breakglass_e2e::browser::Browser;
use breakglass_e2e::flows::attr_of;

/// The player's position in whole seconds, and its length, as its clock says.
async fn player_clock(b: &Browser) -> anyhow::Result<(u64, u64)> {
    let v = b
        .js("const secs = t => t.trim().split(':').reduce((a, x) => a * 60 + Number(x), 0); \
             return document.querySelector('[data-testid=player-time]').textContent.split('/').map(secs)")
        .await?;
    Ok((
        v[0].as_u64().unwrap_or(u64::MAX),
        v[1].as_u64().unwrap_or(0),
    ))
}

/// The whole second a moment link's `t` names.
fn moment_of(link: &str) -> Option<u64> {
    let t: f64 = link.split_once("?t=")?.1.parse().ok()?;
    // Whole seconds of a recording a few seconds long: no truncation to worry about.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Some(t.floor() as u64)
}

/// Waits until the player's clock says `pos` of `len` (whole seconds), i.e. the recording is
/// loaded and there.
async fn wait_clock(b: &Browser, pos: u64, len: u64) -> anyhow::Result<()> {
    breakglass_e2e::wait_until(
        &format!("the player's clock at {pos} s of {len} s"),
        breakglass_e2e::browser::UI_WAIT,
        || async move { Ok((player_clock(b).await? == (pos, len)).then_some(())) },
    )
    .await
}

/// The seek bar moves the player (the browser's number of the bar, not a parse of its text),
/// and a `?t=` link opens the recording at its moment, or at the start when `t` is not plain
/// seconds. `alice` is on the player of a recording a few seconds long.
pub(crate) async fn seek_in_player(alice: &Browser) -> anyhow::Result<()> {
    let seek = |to: &str| {
        format!(
            "const bar = document.querySelector('.seek-bar'); bar.value = {to}; \
             bar.dispatchEvent(new Event('input', {{ bubbles: true }}))"
        )
    };
    let (_, len) = player_clock(alice).await?;
    ensure!(
        len >= 2,
        "the recording is {len} s long, too short to seek in"
    );
    alice.js(&seek("bar.max")).await?;
    wait_clock(alice, len, len)
        .await
        .context("seek to the end")?;
    alice.js(&seek("0")).await?;
    wait_clock(alice, 0, len)
        .await
        .context("seek to the start")?;
    // The middle of the bar. The moment link holds recording time, as the clock shows it:
    // its `t` is in the second the clock says, and opening it lands there again.
    alice.js(&seek("Number(bar.max) / 2")).await?;
    let (half, link) = breakglass_e2e::wait_until(
        "the clock and the moment link after a seek to the middle",
        breakglass_e2e::browser::UI_WAIT,
        || async move {
            let (pos, _) = player_clock(alice).await?;
            let link = attr_of(alice, "a.moment-link", "href").await?;
            Ok(link
                .filter(|l| pos > 0 && pos < len && moment_of(l) == Some(pos))
                .map(|l| (pos, l)))
        },
    )
    .await
    .context("seek to the middle: the clock and the link's `t` agree")?;
    // A click copies it (or, where the browser refuses the clipboard, puts it in the address
    // bar) and says which.
    alice.click("a.moment-link").await?;
    let note = breakglass_e2e::wait_until(
        "the moment link says what it did",
        breakglass_e2e::browser::UI_WAIT,
        || async move {
            let v = alice
                .js("return document.querySelector('[data-testid=moment-link-note]').textContent")
                .await?;
            Ok(v.as_str().filter(|t| !t.is_empty()).map(str::to_string))
        },
    )
    .await?;
    if note != "Link copied" {
        let at = alice.client.current_url().await?;
        ensure!(
            note.contains("address bar")
                && link.ends_with(&format!("{}?{}", at.path(), at.query().unwrap_or(""))),
            "after a click on the moment link the page says {note:?} and is at {at}"
        );
    }
    let page = alice.client.current_url().await?;
    alice.goto(page.join(&link)?.as_str()).await?;
    wait_clock(alice, half, len)
        .await
        .context("open the moment link")?;
    // A `t` that is not plain seconds plays from the start.
    alice
        .goto(page.join(&format!("{}?t=1e1", page.path()))?.as_str())
        .await?;
    wait_clock(alice, 0, len).await.context("open ?t=1e1")?;
    Ok(())
}

/// Pause then Play resumes where it paused: the clock stands still while paused and, once
/// playing again, goes on from there, at one speed and after a speed change while paused
/// (a player that kept its last frame's time across the pause jumped ahead by the time spent
/// paused, times the speed). Done in one script in the page, so the WebDriver's round trips do
/// not blur the frames measured. `alice` is on the player of a recording of at least 2 s.
pub(crate) async fn pause_and_resume_keep_time(alice: &Browser) -> anyhow::Result<()> {
    // The time spent paused: long enough that a jump by it stands out of a few frames' play.
    const PAUSED_MS: u64 = 1500;
    for (before, after) in [("1", "1"), ("0.5", "2")] {
        let script = format!(
            "const done = arguments[arguments.length - 1]; \
             const bar = document.querySelector('.seek-bar'); \
             const play = document.querySelector('button.play'); \
             const speed = [...document.querySelectorAll('[data-testid=player] label')] \
                 .find(l => l.textContent.trim().startsWith('Speed')).querySelector('select'); \
             const pick = v => {{ speed.value = v; speed.dispatchEvent(new Event('change', {{ bubbles: true }})); }}; \
             const frame = () => new Promise(r => requestAnimationFrame(r)); \
             const wait = ms => new Promise(r => setTimeout(r, ms)); \
             (async () => {{ \
               if (play.textContent.includes('Pause')) play.click(); \
               pick('{before}'); \
               bar.value = 0; bar.dispatchEvent(new Event('input', {{ bubbles: true }})); \
               await frame(); \
               play.click(); \
               while (bar.valueAsNumber < 0.2) await frame(); \
               play.click(); \
               await frame(); \
               const paused = bar.valueAsNumber; \
               await wait({PAUSED_MS}); \
               const still = bar.valueAsNumber; \
               pick('{after}'); \
               play.click(); \
               for (let i = 0; i < 3; i++) await frame(); \
               const resumed = bar.valueAsNumber; \
               if (document.querySelector('button.play').textContent.includes('Pause')) play.click(); \
               done([paused, still, resumed, Number(bar.max)]); \
             }})().catch(e => done(String(e)));"
        );
        let v = alice.client.execute_async(&script, vec![]).await?;
        let at = |i: usize| v[i].as_f64().with_context(|| format!("the page said {v}"));
        let (paused, still, resumed, len) = (at(0)?, at(1)?, at(2)?, at(3)?);
        ensure!(
            len - paused > 1.0,
            "the recording ({len} s) is too short to tell a resume from a jump"
        );
        ensure!(
            still == paused,
            "at speed {before}, the clock moved while paused: {paused} s, then {still} s"
        );
        // Three frames of play at speed 2 are about 0.1 s; the jump would be 1.5 s times the
        // speed (or to the end).
        ensure!(
            resumed >= paused && resumed - paused < 0.5,
            "paused at {paused} s for {PAUSED_MS} ms (speed {before}, then {after}); three \
             frames after Play the clock says {resumed} s"
        );
    }
    Ok(())
}
