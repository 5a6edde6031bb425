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
//! Screenshots of every page go to `$BREAKGLASS_ARTIFACTS` (default `target/screenshots`).

use std::time::Duration;

use anyhow::{ensure, Context as _};
use breakglass_e2e::browser::{frontend_dist, Browser, ChromeDriver, WebServer};
use breakglass_e2e::flows::{
    end_session, find_in_player, panel_state, request_access, type_in_terminal,
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
        bob.screenshot("30-replica-b-queue-live").await?;
        bob.click("[data-testid=queue-item] [data-action=approve]")
            .await?;
        panel_state(&alice, "Approved").await?;
        alice
            .wait_text("[data-testid=session-outcome]", "approved by bob")
            .await?;
        assert_not_reloaded(&alice).await?;
        alice.screenshot("31-replica-a-approved-live").await?;
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
    alice.screenshot("01-sign-in").await?;
    alice.dev_sign_in("alice").await?;
    alice.wait_for("[data-testid=environments]").await?;
    alice.screenshot("02-home-alice").await?;

    // A deep link, loaded from scratch: the Debug panel of a production pod.
    alice.goto(&server.at(POD_PATH)).await?;
    alice.wait_for("[data-testid=debug-form]").await?;
    alice.wait_for("[data-testid=pod-status]").await?;
    alice.screenshot("03-debug-panel").await?;

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
    alice.screenshot("04-form-errors").await?;

    // A valid request: Flight, so it waits for a second person, who is named.
    request_access(&alice, "orders stuck in the payment worker since 09:10").await?;
    panel_state(&alice, "PendingApproval").await?;
    alice
        .wait_text("[data-testid=session-headline]", "Waiting for approval")
        .await?;
    alice.wait_text("[data-testid=approvers]", "bob").await?;
    let session_href = alice
        .wait_for("[data-testid=session-panel] .panel-actions a[href^='/sessions/']")
        .await?
        .attr("href")
        .await?
        .context("the panel links to the session page")?;
    mark_page(&alice).await?;
    alice.screenshot("05-waiting-for-approval").await?;

    // bob signs in on his own browser; the request is in his queue strip.
    bob.goto(&server.at("/")).await?;
    bob.dev_sign_in("bob").await?;
    let item = bob
        .wait_text("[data-testid=queue-item]", "shop/web-1")
        .await?;
    ensure!(
        item.text()
            .await?
            .contains("orders stuck in the payment worker"),
        "the queue shows the reason"
    );
    bob.screenshot("06-queue-strip").await?;
    mark_page(&bob).await?;

    // One click approves it; the queue empties.
    bob.click("[data-testid=queue-item] [data-action=approve]")
        .await?;
    bob.wait_gone("[data-testid=queue-item]").await?;
    bob.wait_text("[data-testid=queue-strip]", "Nothing is waiting")
        .await?;

    // alice's panel turns to approved by itself.
    panel_state(&alice, "Approved").await?;
    alice
        .wait_text("[data-testid=session-headline]", "Approved")
        .await?;
    alice
        .wait_text("[data-testid=session-outcome]", "approved by bob")
        .await?;
    assert_not_reloaded(&alice).await?;
    alice.screenshot("07-approved-live").await?;

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
    bob.screenshot("08-deny-inline").await?;
    bob.click("[data-action=confirm-deny]").await?;
    bob.wait_gone("[data-testid=queue-item]").await?;
    panel_state(&alice, "Denied").await?;
    alice
        .wait_text(
            "[data-testid=session-outcome]",
            "not during the release freeze",
        )
        .await?;
    assert_not_reloaded(&alice).await?;
    alice.screenshot("09-denied-live").await?;

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
    bob.screenshot("10-environment").await?;

    bob.goto(&server.at(&session_href)).await?;
    panel_state(&bob, "Approved").await?;
    bob.screenshot("11-session-page").await?;

    bob.goto(&server.at(&format!("{session_href}/recording?t=3")))
        .await?;
    bob.wait_for("[data-testid=player] .notice-error, [data-testid=player] .player-bar")
        .await?;
    bob.screenshot("12-recording-page").await?;

    bob.goto(&server.at("/ops-wall")).await?;
    bob.wait_text("[data-testid=active-sessions]", "shop/web-1")
        .await?;
    bob.screenshot("13-ops-wall").await?;

    // Dark colour scheme (prefers-color-scheme), as carol, who may break the glass.
    let carol = Browser::open(&driver, "carol", true).await?;
    carol.goto(&server.at("/")).await?;
    carol.dev_sign_in("carol").await?;
    carol.wait_for("[data-testid=my-sessions]").await?;
    carol
        .goto(&server.at("/env/prod/ns/shop/pod/web-3"))
        .await?;
    request_access(&carol, "carol checks the web-3 pod's caches").await?;
    panel_state(&carol, "PendingApproval").await?;
    carol
        .wait_for("[data-testid=session-panel] [data-action=break-glass]")
        .await?;
    carol.screenshot("14-dark-break-glass").await?;

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
    alice.screenshot("20-terminal").await?;
    end_session(alice).await?;
    // The terminal goes away with the session.
    alice.wait_gone(".term-box").await?;
    alice.screenshot("21-ended").await?;
    alice
        .click("[data-testid=session-panel] .panel-actions a[href$='/recording']")
        .await?;
    alice.wait_for("[data-testid=player] .player-bar").await?;
    find_in_player(alice, "hello").await?;
    alice
        .wait_text("[data-testid=integrity]", "Verified")
        .await?;
    alice.screenshot("22-recording").await?;
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
        bob.screenshot("23-environment-with-cluster").await?;
        activation_terminal_and_recording(&alice).await?;
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
