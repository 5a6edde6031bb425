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
//! Screenshots of every page go to `$BREAKGLASS_ARTIFACTS` (default `target/screenshots`).

use std::time::Duration;

use anyhow::{ensure, Context as _};
use breakglass_e2e::browser::{frontend_dist, Browser, ChromeDriver, WebServer};
use breakglass_e2e::flows::{
    absent, attr_of, end_session, find_in_player, panel_state, request_access, terminal_shows,
    type_in_terminal, wait_focus, wait_terminal_connected,
};
use breakglass_e2e::server::{config_toml, install_guardrails};
use breakglass_e2e::{wait_for_pod_running, ControlPlane, Identity};
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::Api;
use serde_json::json;

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

async fn flow(server: &WebServer) -> anyhow::Result<()> {
    let driver = ChromeDriver::start().await?;
    let alice = Browser::open(&driver, "alice", false).await?;
    let bob = Browser::open(&driver, "bob", false).await?;

    // alice signs in with the dev switcher (the dev banner says loudly what this is).
    alice.goto(&server.at("/")).await?;
    alice
        .wait_text("[data-testid=dev-banner]", "Dev mode")
        .await?;
    alice
        .wait_for("button.user-choice[data-user='alice']")
        .await?;
    alice.check_page("01-sign-in").await?;
    alice.dev_sign_in("alice").await?;
    alice.wait_for("[data-testid=environments]").await?;
    alice.check_page("02-home-alice").await?;

    // A deep link, loaded from scratch: the Debug panel of a production pod.
    alice.goto(&server.at(POD_PATH)).await?;
    alice.wait_for("[data-testid=debug-form]").await?;
    alice.wait_for("[data-testid=pod-status]").await?;
    alice.check_page("03-debug-panel").await?;

    // The shared validation rules run before anything is sent, each error next to its field.
    alice.fill("#bg-reason", "too short").await?;
    alice.fill("#bg-ticket", "INC-4711").await?;
    alice.fill("#bg-duration", "600").await?;
    alice.click("[data-testid=request-access]").await?;
    alice.wait_text("#bg-reason-error", "at least 10").await?;
    alice.wait_text("#bg-ticket-error", "https://").await?;
    alice.wait_text("#bg-duration-error", "between").await?;
    let focused = alice
        .js("return document.activeElement && document.activeElement.id")
        .await?;
    ensure!(
        focused.as_str() == Some("bg-reason"),
        "focus should move to the first bad field, got {focused}"
    );
    alice.check_page("04-form-errors").await?;
    // Each error goes, with its aria-invalid, as soon as the field is valid.
    alice
        .fill("#bg-reason", "orders stuck in the payment worker")
        .await?;
    alice.wait_gone("#bg-reason-error").await?;
    ensure!(
        attr_of(&alice, "#bg-reason", "aria-invalid")
            .await?
            .as_deref()
            == Some("false"),
        "a valid reason is no longer marked invalid"
    );
    alice.wait_for("#bg-ticket-error").await?;

    // A valid request: Flight, so it waits for a second person, who is named.
    request_access(&alice, "orders stuck in the payment worker since 09:10").await?;
    panel_state(&alice, "PendingApproval").await?;
    alice
        .wait_text("[data-testid=session-headline]", "Waiting for approval")
        .await?;
    // The form went away with the submit: focus is on what replaced it.
    wait_focus(&alice, "[data-testid=session-headline]").await?;
    alice.wait_text("[data-testid=approvers]", "bob").await?;
    ensure!(
        !alice
            .text_of("[data-testid=approvers]")
            .await?
            .contains("alice"),
        "the requester is never offered as an approver"
    );
    alice
        .wait_text(
            "[data-testid=session-panel] [data-action=end]",
            "Withdraw request",
        )
        .await?;
    let session_href = alice
        .displayed_attr(
            "[data-testid=session-panel] .panel-actions a[href^='/sessions/']",
            "href",
        )
        .await?
        .context("the panel links to the session page")?;
    mark_page(&alice).await?;
    alice.check_page("05-waiting-for-approval").await?;

    // bob signs in on his own browser; the request is in his queue strip.
    bob.goto(&server.at("/")).await?;
    bob.dev_sign_in("bob").await?;
    bob.wait_text("[data-testid=queue-item]", "shop/web-1")
        .await?;
    // The reason is on the same row (one request waits).
    bob.wait_text(
        "[data-testid=queue-item] .qi-reason",
        "orders stuck in the payment worker",
    )
    .await?;
    bob.check_page("06-queue-strip").await?;
    // A background tab says there is work for him.
    let title = bob.client.title().await?;
    ensure!(
        title.starts_with("(1) "),
        "bob's title counts the request waiting for his decision, got {title:?}"
    );
    mark_page(&bob).await?;

    // One click approves it; the queue empties.
    bob.click("[data-testid=queue-item] [data-action=approve]")
        .await?;
    bob.wait_gone("[data-testid=queue-item]").await?;
    bob.wait_text("[data-testid=queue-strip]", "Nothing is waiting")
        .await?;
    // The item went away: bob hears what he did, with a link to it, and focus is there.
    bob.wait_text(
        "[data-testid=decision-note]",
        "You approved alice's request for shop/web-1",
    )
    .await?;
    wait_focus(&bob, "[data-testid=decision-note]").await?;
    ensure!(
        attr_of(&bob, "[data-testid=decision-note] a", "href")
            .await?
            .as_deref()
            == Some(session_href.as_str()),
        "the note links to the approved request"
    );
    bob.check_page("06b-approved-note").await?;

    // alice's panel turns to approved by itself, and a screen reader hears it.
    panel_state(&alice, "Approved").await?;
    alice
        .wait_text("[data-testid=session-headline]", "Approved by bob")
        .await?;
    let said = alice
        .js("return document.querySelector('[data-testid=panel-announcement]').textContent")
        .await?;
    ensure!(
        said.as_str().is_some_and(|t| t.contains("Approved by bob")),
        "the live region announces the change, got {said}"
    );
    ensure!(
        attr_of(&alice, "[data-testid=panel-announcement]", "aria-live")
            .await?
            .as_deref()
            == Some("polite"),
        "the announcement is a live region"
    );
    assert_not_reloaded(&alice).await?;
    alice.check_page("07-approved-live").await?;

    // A second request appears in bob's queue live, and bob denies it with a reason.
    alice
        .goto(&server.at("/env/prod/ns/shop/pod/web-2"))
        .await?;
    alice.wait_for("[data-testid=debug-form]").await?;
    request_access(&alice, "second look at the payment worker's sidecar").await?;
    panel_state(&alice, "PendingApproval").await?;
    mark_page(&alice).await?;
    bob.wait_text("[data-testid=queue-item]", "shop/web-2")
        .await?;
    assert_not_reloaded(&bob).await?;
    bob.click("[data-testid=queue-item] [data-action=deny]")
        .await?;
    bob.click("[data-action=confirm-deny]").await?;
    bob.wait_text(".deny-form .field-error", "required").await?;
    bob.fill(".deny-form textarea", "not during the release freeze")
        .await?;
    bob.check_page("08-deny-inline").await?;
    bob.click("[data-action=confirm-deny]").await?;
    bob.wait_gone("[data-testid=queue-item]").await?;
    bob.wait_text(
        "[data-testid=decision-note]",
        "You denied alice's request for shop/web-2",
    )
    .await?;
    wait_focus(&bob, "[data-testid=decision-note]").await?;
    panel_state(&alice, "Denied").await?;
    alice
        .wait_text(
            "[data-testid=session-outcome]",
            "not during the release freeze",
        )
        .await?;
    assert_not_reloaded(&alice).await?;
    alice.check_page("09-denied-live").await?;

    // bob types a deny reason while carol approves the same request: his form stays, says who
    // decided and when, and keeps his text.
    let carol = Browser::open(&driver, "carol", true).await?;
    carol.goto(&server.at("/")).await?;
    carol.dev_sign_in("carol").await?;
    alice
        .goto(&server.at("/env/prod/ns/shop/pod/web-4"))
        .await?;
    request_access(&alice, "third look: the web-4 pod drops connections").await?;
    panel_state(&alice, "PendingApproval").await?;
    bob.wait_text("[data-testid=queue-item]", "shop/web-4")
        .await?;
    bob.click("[data-testid=queue-item] [data-action=deny]")
        .await?;
    bob.fill(".deny-form textarea", "let us wait for the release")
        .await?;
    carol
        .click("[data-testid=queue-item] [data-action=approve]")
        .await?;
    bob.wait_text("[data-testid=decided-elsewhere]", "carol approved this at")
        .await?;
    let kept = bob
        .js("return document.querySelector('.deny-form textarea').value")
        .await?;
    ensure!(
        kept.as_str() == Some("let us wait for the release"),
        "bob's reason is kept, got {kept}"
    );
    ensure!(
        absent(&bob, "[data-action=confirm-deny]").await?,
        "a decided request cannot be denied from the stale form"
    );
    bob.check_page("08b-decided-elsewhere").await?;
    bob.click("[data-action=cancel-deny]").await?;
    bob.wait_gone("[data-testid=queue-item]").await?;

    // alice withdraws the approved request from the keyboard's point of view: focus stays on
    // the panel's new state.
    panel_state(&alice, "Approved").await?;
    alice
        .click("[data-testid=session-panel] [data-action=end]")
        .await?;
    panel_state(&alice, "Withdrawn").await?;
    wait_focus(&alice, "[data-testid=session-headline]").await?;
    alice
        .wait_text("[data-testid=session-outcome]", "took the request back")
        .await?;
    alice.check_page("09b-withdrawn").await?;

    // The other pages, for the record (no cluster here: listings and guardrails are unavailable
    // and must say so).
    bob.goto(&server.at("/env/prod")).await?;
    bob.wait_for("[data-testid=breakglass-card]").await?;
    bob.wait_for("[data-testid=listings-unavailable], .ns-list")
        .await?;
    bob.wait_for("[data-testid=guardrails-unavailable], [data-testid=guardrails] .checks")
        .await?;
    bob.wait_text("[data-testid=active-sessions]", "shop/web-1")
        .await?;
    bob.check_page("10-environment").await?;
    // Opening a pod by name: every error at its field, each gone once its field is valid.
    bob.click("form.open-pod button[type=submit]").await?;
    bob.wait_text("#open-ns-error", "required").await?;
    bob.wait_text("#open-pod-error", "required").await?;
    wait_focus(&bob, "#open-ns").await?;
    bob.check_page("10b-open-pod-errors").await?;
    bob.fill("#open-ns", "shop").await?;
    bob.wait_gone("#open-ns-error").await?;
    ensure!(
        attr_of(&bob, "#open-ns", "aria-invalid").await?.as_deref() == Some("false"),
        "a valid namespace is no longer marked invalid"
    );
    bob.wait_for("#open-pod-error").await?;

    bob.goto(&server.at(&session_href)).await?;
    panel_state(&bob, "Approved").await?;
    bob.check_page("11-session-page").await?;

    bob.goto(&server.at(&format!("{session_href}/recording?t=3")))
        .await?;
    // The session has not run: the page says so instead of a player with nothing to play,
    // and offers nothing to download.
    bob.wait_text("[data-testid=nothing-recorded]", "has not started yet")
        .await?;
    ensure!(
        absent(&bob, "[data-testid=player]").await? && absent(&bob, "a[download]").await?,
        "no player and no download where nothing was recorded"
    );
    bob.check_page("12-recording-page").await?;

    bob.goto(&server.at("/ops-wall")).await?;
    bob.wait_text("[data-testid=active-sessions]", "shop/web-1")
        .await?;
    bob.wait_text("[data-testid=wall-user]", "signed in as bob")
        .await?;
    bob.check_page("13-ops-wall").await?;
    bob.client.set_window_size(1920, 1080).await?;
    bob.check_page("13b-ops-wall-1920").await?;
    // A phone: no sideways scrolling, and the dev banner on one line.
    bob.client.set_window_size(390, 844).await?;
    let fits = bob
        .js("return document.documentElement.scrollWidth <= window.innerWidth")
        .await?;
    if fits.as_bool() != Some(true) {
        // Name what sticks out, so the failure says where to look.
        let wide = bob
            .js("return [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right)).slice(0, 12).join(' | ') + ' iw=' + window.innerWidth")
            .await?;
        anyhow::bail!("the ops wall scrolls sideways at 390 px: {wide}");
    }
    let lines = bob
        .js("const r = document.createRange(); \
             r.selectNodeContents(document.querySelector('[data-testid=dev-banner] .dev-short')); \
             return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size")
        .await?;
    ensure!(
        lines.as_u64() == Some(1),
        "the dev banner takes {lines} lines at 390 px"
    );
    bob.check_page("13c-ops-wall-390").await?;
    bob.client.set_window_size(1280, 900).await?;

    // A session that does not exist: the error, and no empty history under it.
    bob.goto(&server.at("/sessions/00000000-0000-4000-8000-000000000000"))
        .await?;
    bob.wait_for("[data-testid=session-panel] .notice-error")
        .await?;
    ensure!(
        absent(&bob, "details.events").await?,
        "no event history under a session that was not found"
    );
    bob.check_page("15-session-not-found").await?;
    bob.goto(&server.at("/no/such/page")).await?;
    bob.wait_text("h1", "Page not found").await?;
    bob.check_page("16-page-not-found").await?;

    // Dark colour scheme (prefers-color-scheme), as carol, who may break the glass.
    carol.goto(&server.at("/")).await?;
    carol.wait_for("[data-testid=my-sessions]").await?;
    carol
        .goto(&server.at("/env/prod/ns/shop/pod/web-3"))
        .await?;
    request_access(&carol, "carol checks the web-3 pod's caches").await?;
    panel_state(&carol, "PendingApproval").await?;
    carol
        .wait_for("[data-testid=session-panel] [data-action=break-glass]")
        .await?;
    carol.check_page("14-dark-break-glass").await?;
    // The inline confirmation passes the checks too; cancelling it changes nothing.
    carol
        .click("[data-testid=session-panel] [data-action=break-glass]")
        .await?;
    carol
        .wait_text("[data-testid=session-panel] .confirm", "Break the glass?")
        .await?;
    carol.check_page("14b-break-glass-confirm").await?;
    carol
        .click("[data-testid=session-panel] [data-action=cancel-confirm]")
        .await?;
    carol
        .wait_for("[data-testid=session-panel] [data-action=break-glass]")
        .await?;
    panel_state(&carol, "PendingApproval").await?;

    // The wall makes a request louder as it waits: fresh, then amber, then red (the page's
    // clock is moved 6, then 16 minutes on, as if nobody had decided for that long).
    bob.goto(&server.at("/ops-wall")).await?;
    let row = "[data-testid=queue-item] .qi-reason";
    bob.wait_text(row, "web-3 pod's caches").await?;
    let class = attr_of(&bob, "[data-testid=queue-item]", "class").await?;
    ensure!(
        class.as_deref().is_some_and(|c| !c.contains("qi-wait")),
        "a fresh request is not marked as waiting long: {class:?}"
    );
    bob.js(
        "window.shiftMs = 6 * 60 * 1000; const real = Date.now.bind(Date); \
            Date.now = () => real() + window.shiftMs",
    )
    .await?;
    bob.wait_for("[data-testid=queue-item].qi-wait-long")
        .await?;
    bob.check_page("13d-ops-wall-waiting").await?;
    bob.js("window.shiftMs = 16 * 60 * 1000").await?;
    bob.wait_for("[data-testid=queue-item].qi-wait-urgent")
        .await?;
    bob.check_page("13e-ops-wall-waiting-long").await?;
    // Its buttons sit side by side, not wrapped under one another.
    let tops = bob
        .js("return new Set([...document.querySelectorAll('[data-testid=queue-item] .qi-actions button')].map(b => Math.round(b.getBoundingClientRect().top))).size")
        .await?;
    ensure!(
        tops.as_u64() == Some(1),
        "the request's buttons take {tops} rows"
    );

    // carol breaks the glass after all: the wall's row marks it with a chip, not a bar. (The
    // wall is loaded afresh, with the page's own clock: live updates are checked above.)
    carol
        .click("[data-testid=session-panel] [data-action=break-glass]")
        .await?;
    carol
        .click("[data-testid=session-panel] [data-action=confirm]")
        .await?;
    carol
        .wait_text("[data-testid=session-headline]", "Glass broken by carol")
        .await?;
    let chip = "[data-testid=active-sessions] .session-row .glass";
    bob.goto(&server.at("/ops-wall")).await?;
    bob.wait_for(chip).await?;
    let share = bob
        .js(&format!(
            "const c = document.querySelector('{chip}'); \
             return c.getBoundingClientRect().width / c.closest('.session-row').getBoundingClientRect().width"
        ))
        .await?;
    ensure!(
        share.as_f64().is_some_and(|f| f < 0.3),
        "the glass-broken chip spans {share} of its row"
    );
    bob.check_page("13f-ops-wall-glass-broken").await?;

    // Sign out returns to the sign-in picker.
    alice.click("[data-testid=sign-out]").await?;
    alice
        .wait_for("button.user-choice[data-user='alice']")
        .await?;

    for b in [alice, bob, carol] {
        b.close().await?;
    }
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
    // The seek bar's thumb and the clock next to it say the same moment.
    let at = alice
        .js("const bar = document.querySelector('.seek-bar'); \
             const secs = t => t.trim().split(':').reduce((a, x) => a * 60 + Number(x), 0); \
             const [pos, len] = document.querySelector('[data-testid=player-time]').textContent.split('/').map(secs); \
             return [Math.floor(bar.valueAsNumber), Math.floor(Number(bar.max)), pos, len]")
        .await?;
    ensure!(
        at[0] == at[2] && at[1] == at[3],
        "the seek bar [value, max] and the clock [pos, length] disagree: {at}"
    );
    alice.check_page("22-recording").await?;
    seek_in_player(alice).await?;
    Ok(())
}

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
async fn seek_in_player(alice: &Browser) -> anyhow::Result<()> {
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
    // Half a second into a second, so the tenths a moment link keeps land in the same one.
    let half = len / 2;
    alice.js(&seek(&format!("{half}.5"))).await?;
    wait_clock(alice, half, len)
        .await
        .context("seek to the middle")?;
    // "Link to this moment" names it in recording time; opening the link lands there again.
    let link = attr_of(alice, "a.moment-link", "href")
        .await?
        .context("the moment link has an address")?;
    ensure!(
        link.contains("?t="),
        "the moment link names no moment: {link}"
    );
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

/// carol (neither the requester nor its approver) reviews the session alice just ended, from
/// its page: the form passes the checks, a review is recorded, and focus lands on it rather
/// than on `<body>` when the form goes away. `alice` is on the session's recording page.
async fn review_the_ended_session(
    carol: &Browser,
    server: &WebServer,
    alice: &Browser,
) -> anyhow::Result<()> {
    let at = alice.client.current_url().await?;
    let session_path = at.path().trim_end_matches("/recording").to_string();
    carol.goto(&server.at(&session_path)).await?;
    carol.wait_for("form.review-form").await?;
    carol.check_page("24-review-form").await?;
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

/// A second session of alice's, approved by bob, is terminated by carol (an admin) from its
/// page while alice's terminal is open: the confirmation passes the checks, and alice's
/// terminal keeps its screen under a note saying carol ended it, which she can put away.
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
    bob.goto(&server.at("/")).await?;
    bob.click("[data-testid=queue-item] [data-action=approve]")
        .await?;
    wait_terminal_connected(alice).await?;
    type_in_terminal(alice, "echo still-here\n", "still-here").await?;
    let href = alice
        .displayed_attr(
            "[data-testid=session-panel][data-state=Active] .panel-actions a[href^='/sessions/']:not([href$='/recording'])",
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
    Ok(())
}

/// Against the test control plane: a Flight environment with a real pod, the server's
/// guardrails installed, the relay and the recording store on.
#[tokio::test(flavor = "multi_thread")]
async fn terminal_and_recording_in_the_browser() -> anyhow::Result<()> {
    let dist = frontend_dist()?;
    let cp = ControlPlane::shared().await?;
    let dir = tempfile::tempdir()?;
    let cfg = dir.path().join("server.toml");
    let kubeconfig = cp.kubeconfig_path(Identity::BreakglassSa)?;
    std::fs::write(&cfg, config_toml(&[("prod", "flight", kubeconfig)], ""))?;
    install_guardrails(cp, &cfg, "prod", cp.username(Identity::BreakglassSa)?).await?;
    let ns = cp.namespace("bg-browser").await?;
    let pods: Api<Pod> = Api::namespaced(cp.client(Identity::Admin).await?, ns.name());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "web-1", "labels": { "app": "web" } },
        "spec": { "containers": [{ "name": "app", "image": "registry.example/app:1" }] }
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    wait_for_pod_running(&pods, "web-1", Duration::from_secs(30)).await?;

    let cfg = cfg.to_string_lossy().into_owned();
    let server = WebServer::start(&dist, &["--config", &cfg]).await?;
    let result = async {
        let driver = ChromeDriver::start().await?;
        let alice = Browser::open(&driver, "alice", false).await?;
        let bob = Browser::open(&driver, "bob", false).await?;
        alice.goto(&server.at("/")).await?;
        alice.dev_sign_in("alice").await?;
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
        bob.click("[data-testid=queue-item] [data-action=approve]")
            .await?;
        bob.goto(&server.at("/env/prod")).await?;
        bob.wait_for("[data-testid=guardrails] .checks").await?;
        bob.check_page("23-environment-with-cluster").await?;
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
