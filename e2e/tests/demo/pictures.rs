//! The demo in a browser: the README's try-this steps, and the docs' pictures as this test's screenshots.

use super::*;

/// The pictures of the README and the user guide, in the order the flow takes them. They are
/// this test's screenshots: `BREAKGLASS_UPDATE_DOCS=1` copies them into `docs/images/`.
const DOC_SHOTS: [&str; 6] = [
    "demo-1-sign-in",
    "demo-2-home",
    "demo-3-waiting-for-approval",
    "demo-4-queue-strip",
    "demo-5-terminal",
    "demo-6-recording",
];

/// Each page the demo visits is checked with axe-core (light and dark) before its picture.
async fn shot(b: &Browser, name: &str) -> anyhow::Result<()> {
    assert!(DOC_SHOTS.contains(&name), "{name} is not in DOC_SHOTS");
    b.assert_accessible(name).await?;
    let png = b.screenshot(name).await?;
    if std::env::var_os("BREAKGLASS_UPDATE_DOCS").is_some() {
        let images = root().join("docs/images");
        std::fs::create_dir_all(&images)?;
        std::fs::copy(&png, images.join(format!("{name}.png")))?;
    }
    Ok(())
}

pub(crate) async fn try_this_in_the_browser(url: &str) -> anyhow::Result<()> {
    let driver = ChromeDriver::start().await?;
    let alice = Browser::open(&driver, "alice", false).await?;
    let bob = Browser::open(&driver, "bob", false).await?;

    alice.goto(&format!("{url}/")).await?;
    alice
        .wait_for("button.user-choice[data-user='alice']")
        .await?;
    shot(&alice, "demo-1-sign-in").await?;
    alice.dev_sign_in("alice").await?;
    alice.wait_for("[data-testid=environments]").await?;
    alice.wait_for("[data-testid=env-cluster]").await?;
    shot(&alice, "demo-2-home").await?;

    alice
        .goto(&format!("{url}/env/prod/ns/shop/pod/checkout"))
        .await?;
    alice
        .wait_text("[data-testid=pod-status]", "Running")
        .await?;
    alice.wait_for("select#bg-target").await?;
    request_access(
        &alice,
        "checkout returns 502 since 09:10, need to look at app",
    )
    .await?;
    panel_state(&alice, "PendingApproval").await?;
    shot(&alice, "demo-3-waiting-for-approval").await?;

    bob.goto(&format!("{url}/")).await?;
    bob.dev_sign_in("bob").await?;
    bob.wait_for("[data-testid=queue-item]").await?;
    shot(&bob, "demo-4-queue-strip").await?;
    bob.click("[data-testid=queue-item] [data-action=approve]")
        .await?;

    wait_terminal_connected(&alice).await?;
    type_in_terminal(&alice, "echo checked-$((6*7))\n", "checked-42").await?;
    shot(&alice, "demo-5-terminal").await?;
    end_session(&alice).await?;
    let recording = attr_of(
        &alice,
        "[data-testid=session-panel] .panel-links a[href$='/recording']",
        "href",
    )
    .await?
    .ok_or_else(|| anyhow::anyhow!("the recording link has no href"))?;

    let recording = if recording.starts_with("http") {
        recording
    } else {
        format!("{url}{recording}")
    };
    bob.goto(&recording).await?;
    bob.wait_for("[data-testid=player] .player-bar").await?;
    bob.wait_text("[data-testid=integrity]", "Verified").await?;
    // Search shows the player at the moment the output appeared.
    find_in_player(&bob, "checked-42").await?;
    shot(&bob, "demo-6-recording").await?;
    for b in [alice, bob] {
        b.close().await?;
    }
    eprintln!("screenshots in {}", artifacts_dir().display());
    Ok(())
}

/// The README and the user guide show only pictures this test takes, and each is there.
#[test]
fn the_docs_pictures_are_the_demo_tests_screenshots() {
    for doc in ["README.md", "docs/user-guide.md"] {
        let text = std::fs::read_to_string(root().join(doc)).unwrap();
        let base = root().join(doc).parent().unwrap().to_path_buf();
        let pictures: Vec<&str> = text
            .match_indices("](")
            .filter_map(|(i, _)| text[i + 2..].split(')').next())
            .filter(|link| link.ends_with(".png"))
            .collect();
        assert!(!pictures.is_empty(), "{doc} shows no picture");
        for link in pictures {
            let name = Path::new(link).file_stem().unwrap().to_string_lossy();
            // The demo's pictures, or the browser tests' page states (`ui-<state>`).
            let taken = DOC_SHOTS.contains(&&*name)
                || name
                    .strip_prefix("ui-")
                    .is_some_and(|state| breakglass_e2e::browser_a11y::DOC_STATES.contains(&state));
            assert!(
                taken,
                "{doc} shows {link}, which no test takes (DOC_SHOTS in e2e/tests/demo/, \
                 DOC_STATES in e2e/src/browser_a11y.rs)"
            );
            assert!(base.join(link).is_file(), "{doc}: {link} is missing");
        }
    }
}
