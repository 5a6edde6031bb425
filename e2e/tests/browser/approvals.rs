//! An approval whose session then fails to start is told to its approver, on their home page,
//! live: here the pod goes away between the request and the approval. And what an approver reads
//! before approving: the spec (`approver_reads_the_spec`, from the terminal test).

use std::time::Duration;

use anyhow::ensure;
use breakglass_e2e::browser::{Browser, ChromeDriver, UI_WAIT};
use breakglass_e2e::flows::{absent, panel_state, request_access};
use breakglass_e2e::{wait_until, ControlPlane, Identity};
use k8s_openapi::api::core::v1::Pod;
use kube::api::DeleteParams;
use kube::Api;

use super::terminal_screen::server_with_pod;

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_that_fails_to_start_is_told_to_its_approver() -> anyhow::Result<()> {
    let (server, ns, _dir) = server_with_pod("prod", "flight", "bg-approval-fails").await?;
    let result = async {
        let driver = ChromeDriver::start().await?;
        let alice = Browser::open(&driver, "alice", false).await?;
        let bob = Browser::open(&driver, "bob", false).await?;
        alice.goto(&server.at("/")).await?;
        alice.dev_sign_in("alice").await?;
        alice
            .goto(&server.at(&format!("/env/prod/ns/{}/pod/web-1", ns.name())))
            .await?;
        request_access(&alice, "the worker pod restarts every few minutes").await?;
        panel_state(&alice, "PendingApproval").await?;

        // The pod is replaced before anyone decides.
        let cp = ControlPlane::shared().await?;
        let pods: Api<Pod> = Api::namespaced(cp.client(Identity::Admin).await?, ns.name());
        pods.delete(
            "web-1",
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            },
        )
        .await?;
        wait_until("pod web-1 to be gone", UI_WAIT, || {
            let pods = pods.clone();
            async move { Ok(pods.get_opt("web-1").await?.is_none().then_some(())) }
        })
        .await?;

        bob.goto(&server.at("/")).await?;
        bob.dev_sign_in("bob").await?;
        // His decisions are loaded (none yet), and with them no failure is shown.
        bob.wait_text("[data-testid=my-decisions]", "not approved or denied")
            .await?;
        ensure!(
            absent(&bob, "[data-testid=approval-failed]").await?,
            "a failure is shown before anything failed"
        );
        bob.click("[data-testid=queue-item] [data-action=approve]")
            .await?;
        // Told where he is, without a reload.
        bob.wait_for_within("[data-testid=approval-failed]", Duration::from_secs(90))
            .await?;
        let text = bob.text_of("[data-testid=approval-failed]").await?;
        ensure!(
            text.contains("The session you approved for alice did not start")
                && text.contains("web-1"),
            "the approver's notice says {text:?}"
        );
        bob.check_page("32-approval-failed").await?;
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

/// The approver opens the waiting request from the queue strip and reads what activation will
/// create: the cluster's dry-run verdict, the pinned image, the hash, the objects as YAML.
pub(crate) async fn approver_reads_the_spec(bob: &Browser) -> anyhow::Result<()> {
    // The queue strip says what approving approves, in one line.
    bob.wait_text("[data-testid=queue-spec]", "the cluster would admit it")
        .await?;
    bob.click("[data-testid=queue-item] a.qi-pod").await?;
    bob.wait_text("[data-testid=spec-verdict]", "would admit")
        .await?;
    let sha = bob.text_of("[data-testid=spec-sha256]").await?;
    ensure!(
        sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()),
        "the spec's hash reads {sha:?}"
    );
    bob.click("[data-testid=session-spec] details > summary")
        .await?;
    let yaml = bob
        .wait_text("[data-testid=spec-yaml]", "kind: RoleBinding")
        .await?
        .text()
        .await?;
    ensure!(
        yaml.contains("EphemeralContainer") && yaml.contains("@sha256:"),
        "the YAML shows the debug container and its pinned image: {yaml}"
    );
    bob.check_page("23a-approver-reads-the-spec").await?;
    Ok(())
}
