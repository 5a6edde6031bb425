//! The environment lock in the browser: an admin locks `prod` from its page with a reason;
//! every page of the environment says so (the requester's Debug panel too, open since before
//! the lock, without a reload), and the admin's unlock on Flight waits, saying so, for a
//! second admin.

use anyhow::ensure;
use breakglass_e2e::browser::{frontend_dist, Browser, ChromeDriver, WebServer};

#[tokio::test(flavor = "multi_thread")]
async fn an_admin_locks_an_environment_from_its_page() -> anyhow::Result<()> {
    let dist = frontend_dist()?;
    let server = WebServer::start(&dist, &["--no-clusters"]).await?;
    let result = async {
        let driver = ChromeDriver::start().await?;
        let carol = Browser::open(&driver, "carol", false).await?;
        let alice = Browser::open(&driver, "alice", true).await?;
        // alice has the Debug panel of a prod pod open before the lock: it says so without a
        // reload (the live stream tells the page).
        alice
            .goto(&server.at("/env/prod/ns/shop/pod/web-1"))
            .await?;
        alice.dev_sign_in("alice").await?;
        carol.goto(&server.at("/env/prod")).await?;
        carol.dev_sign_in("carol").await?;
        carol.wait_for("[data-testid=lock-form]").await?;
        // A reason is required, said at the field.
        carol
            .click("[data-testid=lock-form] [data-action=lock]")
            .await?;
        carol.wait_text("#bg-lock-error", "reason").await?;
        carol
            .fill("#bg-lock-reason", "INC-7 credential leak")
            .await?;
        carol
            .click("[data-testid=lock-form] [data-action=lock]")
            .await?;
        carol
            .wait_text(
                "[data-testid=env-lock]",
                "carol locked prod: INC-7 credential leak",
            )
            .await?;
        carol.check_page("33-environment-locked").await?;

        // The requester's Debug panel in prod, open since before, says it too; alice has no
        // lock form.
        alice
            .wait_text("[data-testid=env-lock]", "INC-7 credential leak")
            .await?;
        alice.goto(&server.at("/env/prod")).await?;
        alice.wait_for("[data-testid=env-lock]").await?;
        ensure!(
            breakglass_e2e::flows::absent(&alice, "[data-testid=lock-form]").await?,
            "a requester is offered the lock form"
        );

        // Flight: carol's unlock is recorded and waits for a second admin.
        carol.fill("#bg-lock-reason", "contained").await?;
        carol
            .click("[data-testid=lock-form] [data-action=lock]")
            .await?;
        carol
            .wait_text(
                "[data-testid=lock-form] [role=status]",
                "a second admin must confirm",
            )
            .await?;
        carol
            .wait_text("[data-testid=env-lock]", "carol asked to unlock it")
            .await?;
        for b in [carol, alice] {
            b.close().await?;
        }
        anyhow::Ok(())
    }
    .await;
    if result.is_err() {
        eprintln!("server log:\n{}", server.log_text());
    }
    result
}
