//! Accessibility checks of the browser tests: axe-core (fetched by `scripts/axe.sh`, never
//! committed) injected into the page and run with the WCAG 2 A/AA rules and axe's best
//! practices, in the light and in the dark colour scheme. Any violation fails the test with
//! the rule, the nodes' selectors and axe's message.

use std::path::PathBuf;
use std::sync::OnceLock;

use anyhow::{anyhow, bail, Context as _};
use serde_json::{json, Value};

use crate::browser::{Browser, ChromeCommand};

/// The axe-core version `scripts/axe.sh` installs.
pub const AXE_VERSION: &str = "4.14.1";

/// Where axe.min.js is: `$BREAKGLASS_AXE_JS`, else the cache `scripts/axe.sh install` fills.
pub fn axe_path() -> PathBuf {
    if let Ok(p) = std::env::var("BREAKGLASS_AXE_JS") {
        return PathBuf::from(p);
    }
    let cache =
        std::env::var("BREAKGLASS_CACHE").unwrap_or_else(|_| "/var/cache/breakglass".into());
    PathBuf::from(cache)
        .join(format!("axe-core-{AXE_VERSION}"))
        .join("axe.min.js")
}

/// axe-core's source, read once per test binary.
fn axe_source() -> anyhow::Result<&'static str> {
    static SOURCE: OnceLock<String> = OnceLock::new();
    if let Some(s) = SOURCE.get() {
        return Ok(s);
    }
    let path = axe_path();
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "{} is missing: run `scripts/axe.sh install` (scripts/test.sh does) or point \
             BREAKGLASS_AXE_JS at axe.min.js",
            path.display()
        )
    })?;
    Ok(SOURCE.get_or_init(|| text))
}

/// The rules: WCAG 2.0–2.2 A and AA, axe's best practices (landmarks, heading order), and the
/// accessible name that must contain the visible label (an experimental rule, so named).
const RUN_AXE: &str = r#"
const done = arguments[arguments.length - 1];
axe.run(document, {
  runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice'] },
  rules: { 'label-content-name-mismatch': { enabled: true } },
  resultTypes: ['violations'],
}).then(r => done({ violations: r.violations.map(v => ({
  rule: v.id,
  help: v.help,
  nodes: v.nodes.map(n => ({ target: n.target.join(' '), summary: n.failureSummary || '' })),
})) }), e => done({ error: String(e) }));
"#;

/// The widths every checked page must fit: a phone, a small laptop, a desktop, a wall display.
pub const WIDTHS: [u32; 4] = [390, 1000, 1440, 1920];

/// `null` when the document is no wider than the window; else how much wider, and the
/// outermost elements that reach past the window's right edge (inside no scrolling box).
const OVERFLOW: &str = r#"
const root = document.documentElement;
const over = root.scrollWidth - root.clientWidth;
if (over <= 0) return null;
const clips = el => { for (let p = el.parentElement; p && p !== root; p = p.parentElement) {
  const o = getComputedStyle(p).overflowX; if (o !== 'visible') return true; } return false; };
const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
  (el.classList.length ? '.' + [...el.classList].join('.') : '');
const out = [...document.body.querySelectorAll('*')].filter(el =>
  el.getBoundingClientRect().right > root.clientWidth + 0.5 && !clips(el) &&
  !(el.parentElement && el.parentElement.getBoundingClientRect().right > root.clientWidth + 0.5 && !clips(el.parentElement)));
return `${over} px too wide; sticking out: ${out.slice(0, 6).map(name).join(', ')}`;
"#;

/// The page states README.md's UI section shows (as `docs/images/ui-<name>.png`).
pub const DOC_STATES: [&str; 9] = [
    "04-form-errors",
    "08b-decided-elsewhere",
    "09b-withdrawn",
    "13b-ops-wall-1920",
    "14b-break-glass-confirm",
    "24-review-form",
    "27-terminated",
    "13e-ops-wall-waiting-long",
    "23a-approver-reads-the-spec",
];

impl Browser {
    /// Makes the page see `prefers-color-scheme: scheme` (`None`: the browser's own again).
    pub async fn emulate_scheme(&self, scheme: Option<&str>) -> anyhow::Result<()> {
        self.client
            .issue_cmd(ChromeCommand {
                // chromedriver's CDP passthrough, for what WebDriver has no command for.
                path: "goog/cdp/execute",
                body: json!({
                    "cmd": "Emulation.setEmulatedMedia",
                    "params": { "features": [
                        { "name": "prefers-color-scheme", "value": scheme.unwrap_or_default() }
                    ] },
                }),
            })
            .await
            .with_context(|| format!("{}: emulating the colour scheme {scheme:?}", self.name))?;
        Ok(())
    }

    /// The page's axe-core violations in the current colour scheme, one line each.
    pub async fn axe_violations(&self) -> anyhow::Result<Vec<String>> {
        let loaded = self.js("return typeof window.axe === 'object'").await?;
        if loaded != Value::Bool(true) {
            // Run as the script itself (not eval'd), so the page's CSP does not apply.
            self.client
                .execute(&format!("{}\n;return null", axe_source()?), vec![])
                .await
                .with_context(|| format!("{}: injecting axe-core", self.name))?;
        }
        let out = self.client.execute_async(RUN_AXE, vec![]).await?;
        if let Some(e) = out.get("error") {
            bail!("{}: axe-core failed: {e}", self.name);
        }
        let list = out
            .get("violations")
            .and_then(Value::as_array)
            .ok_or_else(|| anyhow!("{}: axe-core answered {out}", self.name))?;
        let mut lines = Vec::new();
        for v in list {
            let rule = v["rule"].as_str().unwrap_or_default();
            let help = v["help"].as_str().unwrap_or_default();
            for n in v["nodes"].as_array().into_iter().flatten() {
                let target = n["target"].as_str().unwrap_or_default();
                let summary = n["summary"].as_str().unwrap_or_default().replace('\n', " ");
                lines.push(format!("{rule} at `{target}`: {help}. {summary}"));
            }
        }
        Ok(lines)
    }

    /// Fails unless axe-core finds nothing on the page, in the light and in the dark scheme.
    pub async fn assert_accessible(&self, page: &str) -> anyhow::Result<()> {
        let mut found = Vec::new();
        for scheme in ["light", "dark"] {
            self.emulate_scheme(Some(scheme)).await?;
            let result = self.axe_violations().await;
            found.extend(result?.into_iter().map(|l| format!("[{scheme}] {l}")));
        }
        self.emulate_scheme(None).await?;
        if !found.is_empty() {
            bail!(
                "{}: page {page:?} has {} accessibility violation(s) (axe-core {AXE_VERSION}):\n  {}",
                self.name,
                found.len(),
                found.join("\n  ")
            );
        }
        Ok(())
    }

    /// Sends a CDP command through chromedriver (to the page's target).
    pub async fn cdp(&self, cmd: &str, params: Value) -> anyhow::Result<Value> {
        self.client
            .issue_cmd(ChromeCommand {
                path: "goog/cdp/execute",
                body: json!({ "cmd": cmd, "params": params }),
            })
            .await
            .with_context(|| format!("{}: {cmd}", self.name))
    }

    /// Fails when the page is wider than the window at any of [`WIDTHS`] (a phone, a small
    /// laptop, a desktop, a wall), naming the elements that stick out. The page is laid out
    /// at each width through the browser's device emulation, then given its own size back.
    pub async fn assert_fits_widths(&self, page: &str) -> anyhow::Result<()> {
        let height = self.js("return window.innerHeight").await?;
        let mut found = Vec::new();
        for width in WIDTHS {
            self.cdp(
                "Emulation.setDeviceMetricsOverride",
                json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 500 }),
            )
            .await?;
            let out = self.js(OVERFLOW).await;
            match out {
                Ok(Value::Null) => {}
                Ok(v) => found.push(format!("at {width} px: {v}")),
                Err(e) => found.push(format!("at {width} px: {e}")),
            }
        }
        self.cdp("Emulation.clearDeviceMetricsOverride", json!({}))
            .await?;
        if !found.is_empty() {
            bail!(
                "{}: page {page:?} is wider than the window:\n  {}",
                self.name,
                found.join("\n  ")
            );
        }
        Ok(())
    }

    /// A page state worth keeping: checked with axe-core in both schemes, then a screenshot.
    /// With `BREAKGLASS_UPDATE_DOCS` set, the states the README shows ([`DOC_STATES`]) are
    /// copied to `docs/images/ui-<name>.png`, so the pictures come from the tests' own run.
    pub async fn check_page(&self, name: &str) -> anyhow::Result<PathBuf> {
        self.assert_accessible(name).await?;
        self.assert_fits_widths(name).await?;
        let png = self.screenshot(name).await?;
        if DOC_STATES.contains(&name) && std::env::var_os("BREAKGLASS_UPDATE_DOCS").is_some() {
            let images = crate::browser::workspace_root().join("docs/images");
            std::fs::create_dir_all(&images)?;
            std::fs::copy(&png, images.join(format!("ui-{name}.png")))?;
        }
        Ok(png)
    }
}
