//! Notifications in the browser. An approver who clicked "Notify me" (the permission granted
//! through CDP `Browser.grantPermissions`, as a person's click on the browser's prompt would)
//! is told of a request that starts waiting for them while the tab is in the background; the
//! tab's title counts it. The page is made to look hidden and the `Notification` constructor
//! is recorded in the page (headless Chromium shows no desktop to read a notification from);
//! everything else is the real app and server. An admin's deliveries page lists what was sent
//! to the real webhook receiver, and passes the page checks (axe, widths).

use anyhow::ensure;
use breakglass_e2e::browser::{frontend_dist, Browser, ChromeDriver, WebServer};
use breakglass_e2e::receivers::{Receivers, SECRET};
use breakglass_e2e::server::ApiClient;
use serde_json::json;

/// Records each notification the page makes, and says the tab is out of sight.
const BACKGROUND_TAB: &str = r#"
window.__told = [];
window.Notification = class {
  constructor(title, options) { window.__told.push([title, options.body, options.tag]); }
  static get permission() { return 'granted'; }
  static requestPermission() { return Promise.resolve('granted'); }
};
Object.defineProperty(document, 'hidden', { configurable: true, get: () => true });
return null;
"#;

#[tokio::test(flavor = "multi_thread")]
async fn an_approver_in_a_background_tab_is_told_and_admins_see_the_deliveries(
) -> anyhow::Result<()> {
    let rx = Receivers::start();
    let dist = frontend_dist()?;
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("server.toml");
    std::fs::write(
        &config,
        format!(
            "[notifications]\n[[notifications.webhooks]]\nname = \"siem\"\n\
             url = \"http://127.0.0.1:{}/webhook\"\nsecret = \"{SECRET}\"\n\
             [[environments]]\nname = \"prod\"\ntier = \"flight\"\nnotify = [\"siem\"]\n\
             [environments.permissions]\n\
             \"tower.breakglass.request\" = {{ groups = [\"engineers\", \"sre\", \"admins\"] }}\n\
             \"tower.breakglass.approve\" = {{ groups = [\"sre\", \"admins\"] }}\n\
             \"tower.breakglass.terminate\" = {{ groups = [\"admins\"] }}\n",
            rx.http
        ),
    )?;
    let config = config.display().to_string();
    let server = WebServer::start(&dist, &["--no-clusters", "--config", &config]).await?;
    let result = async {
        let driver = ChromeDriver::start().await?;
        let bob = Browser::open(&driver, "bob", false).await?;
        bob.goto(&server.at("/")).await?;
        bob.dev_sign_in("bob").await?;
        // Not asked yet: the button; granted: it says so.
        bob.wait_for("[data-testid=notify-me]").await?;
        let origin = server.at("").trim_end_matches('/').to_string();
        bob.cdp(
            "Browser.grantPermissions",
            json!({ "origin": origin, "permissions": ["notifications"] }),
        )
        .await?;
        bob.goto(&server.at("/")).await?;
        bob.wait_for("[data-testid=notify-on]").await?;
        bob.wait_text("main", "Nothing is waiting").await?;
        bob.js(BACKGROUND_TAB).await?;

        let alice = ApiClient::login(&server.url, "alice").await?;
        let id = alice
            .create(json!({
                "environment": "prod", "namespace": "shop", "pod": "web-1", "mode": "live",
                "reason": "orders stuck in the payment worker since 09:10",
            }))
            .await?;
        let mut told = json!([]);
        for _ in 0..100 {
            told = bob.js("return window.__told").await?;
            if told.as_array().is_some_and(|t| !t.is_empty()) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        ensure!(
            told == json!([[
                "alice asks to debug prod/web-1",
                "orders stuck in the payment worker since 09:10",
                id
            ]]),
            "the background tab was told {told}"
        );
        let title = bob.js("return document.title").await?;
        ensure!(
            title.as_str().is_some_and(|t| t.starts_with("(1) ")),
            "title {title}"
        );

        // The admin's log of what went to the receiver.
        let carol = Browser::open(&driver, "carol", true).await?;
        carol.goto(&server.at("/deliveries")).await?;
        carol.dev_sign_in("carol").await?;
        carol
            .wait_text("[data-testid=deliveries]", "requested")
            .await?;
        carol.wait_text("[data-testid=deliveries]", "sent").await?;
        carol.check_page("40-deliveries").await?;
        ensure!(
            breakglass_e2e::flows::absent(&bob, "nav a[href='/deliveries']").await?,
            "an approver without terminate is offered the deliveries page"
        );
        for b in [bob, carol] {
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
