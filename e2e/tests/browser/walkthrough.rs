//! The long flow in Chromium: alice and bob, each in a browser of their own, step by step through the pages.

use super::*;

pub(crate) async fn flow(server: &WebServer) -> anyhow::Result<()> {
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

    // alice may not break the glass: the form does not offer it.
    ensure!(
        absent(&alice, "[data-testid=break-glass-hint]").await?,
        "the form tells alice she may break the glass"
    );
    // A valid request: Flight, so it waits for a second person, who is named.
    request_access(&alice, "orders stuck in the payment worker since 09:10").await?;
    panel_state(&alice, "PendingApproval").await?;
    alice
        .wait_text(
            "[data-testid=session-headline]",
            "Your request is waiting for approval",
        )
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
            "[data-testid=session-panel] .panel-links a[href^='/sessions/']",
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
    // Opened again later, the pod page says why the last request went nowhere, above a fresh
    // form.
    alice
        .goto(&server.at("/env/prod/ns/shop/pod/web-2"))
        .await?;
    alice
        .wait_text(
            "[data-testid=last-refused]",
            "not during the release freeze",
        )
        .await?;
    alice.wait_for("[data-testid=debug-form]").await?;
    alice.check_page("09c-last-refused").await?;

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
    bob.wait_for("[data-testid=guardrails-unavailable], [data-testid=passing-checks]")
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
    // She may break the glass: the form says so before she sends anything.
    carol
        .wait_text("[data-testid=break-glass-hint]", "You may break the glass")
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
    wait_focus(
        &carol,
        "[data-testid=session-panel] [data-action=cancel-confirm]",
    )
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
