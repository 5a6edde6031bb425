//! The browser app end to end: headless Chromium against the real server binary serving the
//! built frontend (`frontend/dist`; CI builds it with trunk before the tests).
//!
//! `request_and_approve_in_the_browser` needs no cluster: dev sign-in, deep links, the Debug
//! panel's form with its validation, a Flight request waiting for approval, the queue strip
//! updating live for the approver, one-click approval and inline denial, and the requester's
//! panel following each change without a reload (SSE).
//!
//! `terminal_and_recording_in_the_browser` runs against the test control plane: the approved
//! session activates, the terminal opens in the Debug panel, `echo hello` prints `hello`, End
//! closes it, and the recording player finds `hello` and shows the integrity badge.
//!
//! `two_replicas_one_queue_in_the_browser` runs two servers on one PostgreSQL database, each
//! at its own URL: a request made on one shows up live in the approver's queue on the other,
//! and the approval made there turns the requester's panel.
//!
//! `pages_left_behind_hold_no_stream` visits pages by address, more often than the browser has
//! connections to one site, and checks that only the current page holds a live stream.
//!
//! `watching.rs`: an approver watches a running session live and read-only while the
//! requester's page names him, and a moderated session's input waits for him.
//!
//! `chunks.rs`: home and a pod's page load only the main wasm module; a page in a chunk loads
//! it on first use, and a chunk that cannot be fetched says so and loads on **Try again**.
//!
//! `commands.rs`: a session's page lists the commands its marked prompt ran, each a link that
//! opens the player at its moment.
//!
//! Screenshots of every page go to `$BREAKGLASS_ARTIFACTS` (default `target/screenshots`).

use std::time::Duration;

use anyhow::{ensure, Context as _};
use breakglass_e2e::browser::{frontend_dist, Browser, ChromeDriver, WebServer};
use breakglass_e2e::flows::{
    absent, approve_first_in_queue, attr_of, end_session, find_in_player, panel_state,
    request_access, terminal_shows, type_in_terminal, wait_focus, wait_terminal_connected,
};

const POD_PATH: &str = "/env/prod/ns/shop/pod/web-1";

/// Marks the page so a later check can prove it was not reloaded.
async fn mark_page(b: &Browser) -> anyhow::Result<()> {
    b.js("window.__breakglassNoReload = 'still here'; return null")
        .await?;
    Ok(())
}

async fn assert_not_reloaded(b: &Browser) -> anyhow::Result<()> {
    let v = b.js("return window.__breakglassNoReload || null").await?;
    ensure!(
        v.as_str() == Some("still here"),
        "{}: the page was reloaded (the change should have arrived over SSE)",
        b.name
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn request_and_approve_in_the_browser() -> anyhow::Result<()> {
    let dist = frontend_dist()?;
    // The demo environments have no cluster: requests wait in `Approved` (`--no-clusters`).
    let server = WebServer::start(&dist, &["--no-clusters"]).await?;
    let result = flow(&server).await;
    if result.is_err() {
        eprintln!("server log:\n{}", server.log_text());
    }
    result
}

/// Two replicas on one PostgreSQL database behind nothing but their two URLs: alice's request
/// on A shows up live in bob's queue strip on B, and bob's approval on B turns alice's panel on
/// A; neither page reloads (the change crosses replicas through the database's notifications).
#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_one_queue_in_the_browser() -> anyhow::Result<()> {
    let dist = frontend_dist()?;
    let db = breakglass_e2e::postgres::fresh_database().await?;
    let args = ["--no-clusters", "--database-url", db.as_str()];
    let a = WebServer::start(&dist, &args).await?;
    let b = WebServer::start(&dist, &args).await?;
    let result = async {
        let driver = ChromeDriver::start().await?;
        let alice = Browser::open(&driver, "alice", false).await?;
        let bob = Browser::open(&driver, "bob", false).await?;
        bob.goto(&b.at("/")).await?;
        bob.dev_sign_in("bob").await?;
        bob.wait_text("[data-testid=queue-strip]", "Nothing is waiting")
            .await?;
        mark_page(&bob).await?;

        alice.goto(&a.at("/")).await?;
        alice.dev_sign_in("alice").await?;
        alice.goto(&a.at(POD_PATH)).await?;
        request_access(&alice, "orders stuck in the payment worker since 09:10").await?;
        panel_state(&alice, "PendingApproval").await?;
        mark_page(&alice).await?;

        bob.wait_text("[data-testid=queue-item]", "shop/web-1")
            .await?;
        assert_not_reloaded(&bob).await?;
        bob.check_page("30-replica-b-queue-live").await?;
        bob.click("[data-testid=queue-item] [data-action=approve]")
            .await?;
        panel_state(&alice, "Approved").await?;
        alice
            .wait_text("[data-testid=session-headline]", "approved by bob")
            .await?;
        assert_not_reloaded(&alice).await?;
        alice.check_page("31-replica-a-approved-live").await?;
        for br in [alice, bob] {
            br.close().await?;
        }
        anyhow::Ok(())
    }
    .await;
    if result.is_err() {
        eprintln!(
            "replica A log:\n{}\nreplica B log:\n{}",
            a.log_text(),
            b.log_text()
        );
    }
    result
}

/// The server's count of open live-update streams (its `/metrics`).
async fn open_streams(server: &WebServer) -> anyhow::Result<u64> {
    let text = reqwest::get(server.at("/metrics")).await?.text().await?;
    text.lines()
        .find_map(|l| l.strip_prefix("breakglass_sse_streams_open "))
        .context("/metrics has breakglass_sse_streams_open")?
        .trim()
        .parse()
        .context("the stream count is a number")
}

/// Waits until the server counts `n` open live-update streams.
async fn wait_open_streams(server: &WebServer, n: u64) -> anyhow::Result<()> {
    let last = std::cell::Cell::new(None);
    let last = &last;
    let waited = breakglass_e2e::wait_until(
        &format!("the server to count {n} open live-update stream(s)"),
        breakglass_e2e::browser::UI_WAIT,
        || async move {
            let found = open_streams(server).await?;
            last.set(Some(found));
            Ok((found == n).then_some(()))
        },
    )
    .await;
    waited.with_context(|| format!("last count: {:?}", last.get()))
}

/// Pages left by address stay in the browser's back/forward cache, and a cached page's stream
/// would stay open with it: after a few such visits the browser's six connections to the site
/// are all streams nobody reads, and the current page's requests wait. The app closes its
/// stream when its page is hidden, and opens it again when the page comes back.
#[tokio::test(flavor = "multi_thread")]
async fn pages_left_behind_hold_no_stream() -> anyhow::Result<()> {
    let dist = frontend_dist()?;
    let server = WebServer::start(&dist, &["--no-clusters"]).await?;
    let driver = ChromeDriver::start().await?;
    let bob = Browser::open(&driver, "bob", false).await?;
    bob.goto(&server.at("/")).await?;
    bob.dev_sign_in("bob").await?;
    bob.wait_for(".live-dot.live-on").await?;
    // More visits than the browser has connections to one site.
    for path in [
        "/env/prod",
        "/ops-wall",
        "/",
        "/env/prod",
        "/ops-wall",
        "/",
        "/ops-wall",
    ] {
        bob.goto(&server.at(path)).await?;
        bob.wait_for(".live-dot.live-on").await?;
        wait_open_streams(&server, 1).await?;
    }
    // Back: the page comes out of the cache live again, its lists fetched afresh.
    bob.client.back().await?;
    bob.wait_for("[data-testid=queue-strip]").await?;
    bob.wait_for(".live-dot.live-on").await?;
    wait_open_streams(&server, 1).await?;
    bob.close().await?;
    Ok(())
}

/// The requester's flow once the session is approved: it turns `Active`, the terminal opens in
/// the Debug panel, `echo hello` prints `hello`, End closes it, and the recording player finds
/// `hello` and says the recording is verified. `alice` is on the Debug panel.
async fn activation_terminal_and_recording(alice: &Browser) -> anyhow::Result<()> {
    alice
        .wait_for_within(
            "[data-testid=session-panel][data-state=Active]",
            Duration::from_secs(60),
        )
        .await?;
    alice.wait_for("[data-testid=time-left]").await?;
    alice
        .wait_text(".terminal-status", "Connected")
        .await
        .context("the terminal connects")?;
    type_in_terminal(alice, "echo hello\n", "hello").await?;
    // At a 1280x760 viewport most of the terminal is above the fold.
    let chrome = alice
        .js("return window.outerHeight - window.innerHeight")
        .await?
        .as_u64()
        .unwrap_or(0);
    alice
        .client
        .set_window_size(1280, 760 + u32::try_from(chrome)?)
        .await?;
    let shown = alice
        .js(
            "const r = document.querySelector('.term-box').getBoundingClientRect(); \
             return (Math.min(r.bottom, window.innerHeight) - Math.max(r.top, 0)) / r.height",
        )
        .await?;
    ensure!(
        shown.as_f64().is_some_and(|f| f > 0.5),
        "only {shown} of the terminal is above the fold at 1280x760"
    );
    alice.check_page("20-terminal").await?;
    alice.client.set_window_size(1280, 900).await?;
    end_session(alice).await?;
    // The terminal keeps its screen under a note that says why it ended and links to the
    // recording.
    alice
        .wait_text("[data-testid=terminal-ended]", "alice ended it")
        .await?;
    alice.wait_for(".term-box").await?;
    ensure!(
        terminal_shows(alice, "hello").await?,
        "the ended terminal still shows its screen"
    );
    alice.check_page("21-ended").await?;
    alice.click("[data-testid=terminal-ended] a").await?;
    alice.wait_for("[data-testid=player] .player-bar").await?;
    find_in_player(alice, "hello").await?;
    alice
        .wait_text("[data-testid=integrity]", "Verified")
        .await?;
    // The seek bar's thumb and the clock next to it say the same moment, the clock in
    // recording time (what a moment link holds), with that moment's time in UTC beside it.
    let at = alice
        .js("const bar = document.querySelector('.seek-bar'); \
             const clock = document.querySelector('[data-testid=player-time]').textContent.split('/')[0].trim(); \
             return [bar.getAttribute('aria-valuetext'), clock, \
                     document.querySelector('[data-testid=player-utc]')?.textContent ?? '']")
        .await?;
    ensure!(
        at[0] == at[1],
        "the seek bar says {} and the clock {}",
        at[0],
        at[1]
    );
    ensure!(
        at[2].as_str().is_some_and(|t| t.ends_with(" UTC")),
        "no wall-clock time in UTC beside the clock: {at}"
    );
    alice.check_page("22-recording").await?;
    player::seek_in_player(alice).await?;
    player::pause_and_resume_keep_time(alice).await?;
    Ok(())
}

/// carol (neither the requester nor its approver) reviews the session alice just ended, from
/// its page: no verdict is picked for her, submitting without one or a concern without notes
/// is refused next to the field, then a review is recorded, and focus lands on it rather than
/// on `<body>` when the form goes away. `alice` is on the session's recording page.
async fn review_the_ended_session(
    carol: &Browser,
    server: &WebServer,
    alice: &Browser,
) -> anyhow::Result<()> {
    let at = alice.client.current_url().await?;
    let session_path = at.path().trim_end_matches("/recording").to_string();
    carol.goto(&server.at(&session_path)).await?;
    carol.wait_for("form.review-form").await?;
    // When it ran, in UTC, and how much of its time it used.
    for (fact, ends) in [
        ("session-started", " UTC"),
        ("session-ended", " UTC"),
        ("session-time-used", " min"),
    ] {
        let text = carol.text_of(&format!("[data-testid={fact}]")).await?;
        ensure!(text.ends_with(ends), "{fact} says {text:?}");
    }
    // The evidence bundle, for whoever may read the recording (its contents: tests/evidence.rs).
    let href = carol
        .displayed_attr("[data-testid=evidence-download]", "href")
        .await?
        .unwrap_or_default();
    ensure!(
        href.ends_with(&format!("/api/breakglass{session_path}/evidence")),
        "the evidence link goes to {href:?}"
    );
    // How the store keeps the recording, as it reports it.
    let kept = carol
        .wait_text("[data-testid=recording-retention]", "ock")
        .await?
        .text()
        .await?;
    // This server records to a bucket with Object Lock or, where the test reads stored files
    // itself, to a local directory (tests/evidence.rs checks the figures of both).
    ensure!(
        kept.starts_with("Locked (GOVERNANCE) until ")
            || kept.starts_with("Not locked: the recordings are in a local directory"),
        "the session page says {kept:?}"
    );
    carol.check_page("24-review-form").await?;
    // She has not watched it: the form says so. Then she plays some of it, and it says how
    // much.
    carol
        .wait_text("[data-testid=review-watched]", "not played the recording")
        .await?;
    let id = session_path.trim_start_matches("/sessions/").to_string();
    carol
        .goto(&server.at(&format!("{session_path}/recording")))
        .await?;
    carol
        .click("[data-testid=player] .player-bar .play")
        .await?;
    breakglass_e2e::wait_until(
        "the player to keep what carol played",
        breakglass_e2e::browser::UI_WAIT,
        || async {
            let kept = carol
                .js(&format!(
                    "return localStorage.getItem('breakglass-watched-{id}')"
                ))
                .await?;
            Ok(kept.is_string().then_some(()))
        },
    )
    .await?;
    carol.goto(&server.at(&session_path)).await?;
    let said = carol
        .wait_text("[data-testid=review-watched]", "You have played")
        .await?
        .text()
        .await?;
    ensure!(
        said.contains("% of the recording"),
        "the form says {said:?}"
    );
    let picked = carol
        .js("return [...document.querySelectorAll('form.review-form input[name=verdict]')].filter(i => i.checked).length")
        .await?;
    ensure!(picked == 0, "{picked} verdicts are preselected");
    carol.click("form.review-form button[type=submit]").await?;
    carol
        .wait_text("#review-verdict-error", "Choose a verdict")
        .await?;
    carol
        .click("form.review-form input[name=verdict][value=concern]")
        .await?;
    carol.click("form.review-form button[type=submit]").await?;
    carol
        .wait_text("#review-notes-error", "required for a concern")
        .await?;
    carol.assert_accessible("review-form-refused").await?;
    ensure!(
        !absent(carol, "form.review-form").await?,
        "a refused review keeps its form"
    );
    carol
        .click("form.review-form input[name=verdict][value=ok]")
        .await?;
    carol
        .fill("#review-notes", "the shell only read the worker's logs")
        .await?;
    carol.click("form.review-form button[type=submit]").await?;
    carol
        .wait_text("[data-testid=session-review]", "carol saw no concerns")
        .await?;
    wait_focus(carol, "[data-testid=session-review]").await?;
    ensure!(
        absent(carol, "form.review-form").await?,
        "the form goes away once the session is reviewed"
    );
    carol.check_page("25-reviewed").await?;
    Ok(())
}

/// A second session of alice's, glass broken by carol (an admin), is terminated by carol from
/// its page while alice's terminal is open: the confirmation passes the checks, and alice's
/// terminal keeps its screen under a note saying carol ended it, which she can put away. The
/// glass-broken session then needs a review: bob, who may make it, finds it due, with its
/// deadline, on his home page, on the Ops wall and on the session's page.
async fn terminated_by_an_admin(
    server: &WebServer,
    alice: &Browser,
    bob: &Browser,
    carol: &Browser,
    ns: &str,
) -> anyhow::Result<()> {
    alice
        .goto(&server.at(&format!("/env/prod/ns/{ns}/pod/web-1")))
        .await?;
    alice.wait_for("select#bg-target").await?;
    request_access(alice, "second look at the payment worker's queue").await?;
    panel_state(alice, "PendingApproval").await?;
    carol.goto(&server.at("/")).await?;
    carol
        .click("[data-testid=queue-item] [data-action=break-glass]")
        .await?;
    carol
        .click("[data-testid=queue-item] [data-action=confirm]")
        .await?;
    wait_terminal_connected(alice).await?;
    type_in_terminal(alice, "echo still-here\n", "still-here").await?;
    let href = alice
        .displayed_attr(
            "[data-testid=session-panel][data-state=Active] .panel-links a[href^='/sessions/']:not([href$='/recording'])",
            "href",
        )
        .await?
        .context("the panel links to the session page")?;
    // The wall shows the session in progress with its time left and its reason.
    bob.goto(&server.at("/ops-wall")).await?;
    let row = "[data-testid=ops-wall] .session-row[data-state=Active]";
    bob.wait_text(
        &format!("{row} .sr-reason"),
        "second look at the payment worker",
    )
    .await?;
    bob.wait_text(&format!("{row} [data-testid=time-left]"), "left")
        .await?;
    bob.check_page("28-ops-wall-in-progress").await?;
    carol.goto(&server.at(&href)).await?;
    carol
        .click("[data-testid=session-panel] [data-action=terminate]")
        .await?;
    carol
        .wait_text(
            "[data-testid=session-panel] .confirm",
            "Terminate this session now?",
        )
        .await?;
    wait_focus(
        carol,
        "[data-testid=session-panel] [data-action=cancel-confirm]",
    )
    .await?;
    carol.check_page("26-terminate-confirm").await?;
    carol
        .click("[data-testid=session-panel] [data-action=confirm]")
        .await?;
    alice
        .wait_text("[data-testid=terminal-ended]", "carol terminated it")
        .await?;
    ensure!(
        terminal_shows(alice, "still-here").await?,
        "the terminated terminal still shows its screen"
    );
    alice.check_page("27-terminated").await?;
    alice
        .click("[data-testid=terminal-ended] .overlay-close")
        .await?;
    alice.wait_gone("[data-testid=terminal-ended]").await?;
    ensure!(
        !absent(alice, ".term-box .xterm-rows").await?,
        "putting the note away leaves the terminal"
    );
    for (page, css) in [
        (
            "/",
            "[data-testid=reviews-due] [data-testid=review-deadline]",
        ),
        (
            "/ops-wall",
            "[data-testid=reviews-due] [data-testid=review-deadline]",
        ),
        (
            href.as_str(),
            "[data-testid=session-panel] [data-testid=review-deadline]",
        ),
    ] {
        bob.goto(&server.at(page)).await?;
        let deadline = bob.wait_text(css, "review due by").await?.text().await?;
        ensure!(
            deadline.ends_with(" UTC"),
            "{page}: the review's deadline says {deadline:?}"
        );
    }
    bob.check_page("29-review-due").await?;
    Ok(())
}

/// Against the test control plane: a Flight environment with a real pod, the server's
/// guardrails installed, the relay and the recording store on.
#[tokio::test(flavor = "multi_thread")]
async fn terminal_and_recording_in_the_browser() -> anyhow::Result<()> {
    let (server, ns, _dir) =
        terminal_screen::server_with_pod("prod", "flight", "bg-browser").await?;
    let result = async {
        let driver = ChromeDriver::start().await?;
        let alice = Browser::open(&driver, "alice", false).await?;
        let bob = Browser::open(&driver, "bob", false).await?;
        alice.goto(&server.at("/")).await?;
        alice.dev_sign_in("alice").await?;
        // A pod the cluster does not list: the page says so, with no form to request it.
        alice
            .goto(&server.at(&format!("/env/prod/ns/{}/pod/web-9", ns.name())))
            .await?;
        alice
            .wait_text("[data-testid=pod-not-found]", "Pod not found")
            .await?;
        alice.check_page("19-pod-not-found").await?;
        ensure!(
            absent(&alice, "[data-testid=debug-form]").await?,
            "no request form for a pod the cluster does not list"
        );
        alice
            .goto(&server.at(&format!("/env/prod/ns/{}/pod/web-1", ns.name())))
            .await?;
        // The cluster lists the pod: its containers fill the target select.
        alice
            .wait_text("[data-testid=pod-status]", "Running")
            .await?;
        alice.wait_for("select#bg-target").await?;
        request_access(&alice, "orders stuck in the payment worker since 09:10").await?;
        panel_state(&alice, "PendingApproval").await?;
        bob.goto(&server.at("/")).await?;
        bob.dev_sign_in("bob").await?;
        approvals::approver_reads_the_spec(&bob).await?;
        bob.goto(&server.at("/")).await?;
        approve_first_in_queue(&bob).await?;
        bob.goto(&server.at("/env/prod")).await?;
        // The checks all pass: folded under their summary.
        let summary = bob
            .wait_text("[data-testid=passing-checks] > summary", "checks pass")
            .await?
            .text()
            .await?;
        ensure!(
            summary.starts_with("All "),
            "the guardrails' summary says {summary:?}"
        );
        ensure!(
            absent(&bob, "[data-testid=passing-checks][open]").await?
                && absent(&bob, "[data-testid=failing-checks]").await?,
            "the passing checks are not folded away"
        );
        bob.check_page("23-environment-with-cluster").await?;
        // Its pods, in a table that fits a phone too.
        bob.goto(&server.at(&format!("/env/prod/ns/{}", ns.name())))
            .await?;
        bob.wait_text(".pod-table", "web-1").await?;
        bob.check_page("23b-namespace-pods").await?;
        activation_terminal_and_recording(&alice).await?;
        let carol = Browser::open(&driver, "carol", false).await?;
        carol.goto(&server.at("/")).await?;
        carol.dev_sign_in("carol").await?;
        review_the_ended_session(&carol, &server, &alice).await?;
        terminated_by_an_admin(&server, &alice, &bob, &carol, ns.name()).await?;
        for b in [alice, bob, carol] {
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

mod approvals;
mod chunks;
mod commands;
mod locks;
mod notifications;
mod player;
mod search;
mod stalls;
mod step_up;
mod terminal_screen;
mod walkthrough;
mod watching;
use walkthrough::flow;
