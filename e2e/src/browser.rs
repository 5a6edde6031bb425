//! Browser end-to-end harness: the real server binary serving the built frontend
//! (`frontend/dist`), Debian's `chromedriver` on a free port, and headless Chromium sessions
//! (each with its own fresh profile, so each is its own signed-in user) driven with
//! `fantoccini`. Screenshots go to `$BREAKGLASS_ARTIFACTS` (default `target/screenshots`).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::wait_until;
use fantoccini::wd::WebDriverCompatibleCommand;

/// How long UI waits last by default (the test machines are shared and slow).
pub const UI_WAIT: Duration = Duration::from_secs(20);

pub use crate::workspace_root;

/// The built frontend, or a clear error telling how to build it.
pub fn frontend_dist() -> anyhow::Result<PathBuf> {
    let dist = std::env::var("BREAKGLASS_STATIC_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace_root().join("frontend/dist"));
    if !dist.join("index.html").is_file() {
        bail!(
            "{} is missing: build the frontend first (scripts/install-tools.sh; source scripts/env.sh; \
             trunk build --release), as CI does before the tests",
            dist.join("index.html").display()
        );
    }
    Ok(dist)
}

/// Where screenshots go: `$BREAKGLASS_ARTIFACTS`, else `target/screenshots` in the workspace.
pub fn artifacts_dir() -> PathBuf {
    std::env::var("BREAKGLASS_ARTIFACTS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace_root().join("target/screenshots"))
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The server binary in dev mode, serving the built frontend.
pub struct WebServer {
    _child: Child,
    _data: tempfile::TempDir,
    /// Base URL, e.g. `http://127.0.0.1:40123`.
    pub url: String,
    /// Its log (stderr).
    pub log: PathBuf,
}

impl WebServer {
    /// Starts `breakglass-server --dev` with a fresh data dir, serving `static_dir`; `extra`
    /// arguments are appended (e.g. `--config FILE`).
    pub async fn start(static_dir: &Path, extra: &[&str]) -> anyhow::Result<WebServer> {
        let bin = crate::server::server_binary()?;
        let data = tempfile::tempdir()?;
        let log = data.path().join("server.log");
        let log_file = std::fs::File::create(&log)?;
        let mut cmd = Command::new(&bin);
        for k in crate::server::leaked_env() {
            cmd.env_remove(k);
        }
        let mut child = cmd
            .arg("--dev")
            .arg("--data-dir")
            .arg(data.path())
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--static-dir")
            .arg(static_dir)
            .args(extra)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
        let mut lines = BufReader::new(stdout).lines();
        let url = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await? {
                if let Some(rest) = line.strip_prefix("break-glass is listening: open ") {
                    return Ok::<_, anyhow::Error>(rest.trim().trim_end_matches('/').to_string());
                }
            }
            bail!("the server exited before listening")
        })
        .await
        .map_err(|_| anyhow!("the server did not listen within 60 s"))?
        .with_context(|| {
            format!(
                "server log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        })?;
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(WebServer {
            _child: child,
            _data: data,
            url,
            log,
        })
    }

    /// `url` + `path`.
    pub fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// The server's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// A running `chromedriver`, in its own process group with the browsers it starts: dropping
/// it kills them all, so a failing test leaves no Chromium behind.
pub struct ChromeDriver {
    child: Child,
    /// WebDriver URL.
    pub url: String,
}

impl Drop for ChromeDriver {
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl ChromeDriver {
    /// Starts `$CHROMEDRIVER` (default `/usr/bin/chromedriver`) on a free port.
    pub async fn start() -> anyhow::Result<ChromeDriver> {
        let bin = std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "/usr/bin/chromedriver".into());
        let port = free_port()?;
        let child = Command::new(&bin)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| {
                format!("starting {bin} (Debian: apt-get install chromium chromium-driver)")
            })?;
        wait_until(
            "chromedriver to accept connections",
            Duration::from_secs(20),
            || async move {
                Ok(tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .ok()
                    .map(|_| ()))
            },
        )
        .await?;
        Ok(ChromeDriver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        })
    }
}

/// One headless Chromium with its own fresh profile.
pub struct Browser {
    /// The WebDriver client.
    pub client: Client,
    /// Name used in screenshot file names.
    pub name: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Opens a browser; `dark` asks pages for the dark colour scheme.
    pub async fn open(driver: &ChromeDriver, name: &str, dark: bool) -> anyhow::Result<Browser> {
        let profile = tempfile::tempdir()?;
        let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
        let mut args = vec![
            "--headless".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--no-first-run".into(),
            "--window-size=1280,900".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        if dark {
            args.push("--force-dark-mode".into());
            args.push("--blink-settings=preferredColorScheme=0".into());
        }
        let caps: serde_json::Map<String, Value> = serde_json::from_value(json!({
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": chromium, "args": args },
            "goog:loggingPrefs": { "browser": "ALL" },
        }))?;
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&driver.url)
            .await
            .with_context(|| format!("opening Chromium ({chromium}) through chromedriver"))?;
        Ok(Browser {
            client,
            name: name.into(),
            _profile: profile,
        })
    }

    /// Navigates to `url`.
    pub async fn goto(&self, url: &str) -> anyhow::Result<()> {
        self.client
            .goto(url)
            .await
            .with_context(|| format!("{}: goto {url}", self.name))
    }

    /// Waits for an element matching `css` that is displayed.
    pub async fn wait_for(&self, css: &str) -> anyhow::Result<Element> {
        self.wait_for_within(css, UI_WAIT).await
    }

    /// [`Browser::wait_for`] with a timeout.
    pub async fn wait_for_within(&self, css: &str, timeout: Duration) -> anyhow::Result<Element> {
        let what = format!("{}: `{css}` to appear", self.name);
        let client = &self.client;
        let found = wait_until(&what, timeout, || async move {
            for el in client.find_all(Locator::Css(css)).await? {
                if el.is_displayed().await.unwrap_or(false) {
                    return Ok(Some(el));
                }
            }
            Ok(None)
        })
        .await;
        self.explain(found).await
    }

    /// Waits for an element matching `css` to exist, displayed or not (e.g. xterm's input
    /// textarea, which is kept out of sight).
    pub async fn wait_present(&self, css: &str) -> anyhow::Result<Element> {
        let what = format!("{}: `{css}` to exist", self.name);
        let client = &self.client;
        let found = wait_until(&what, UI_WAIT, || async move {
            Ok(client.find_all(Locator::Css(css)).await?.into_iter().next())
        })
        .await;
        self.explain(found).await
    }

    /// Waits until the rendered text of a displayed `css` element contains `text`, ignoring
    /// case (CSS `text-transform` changes what WebDriver reads).
    pub async fn wait_text(&self, css: &str, text: &str) -> anyhow::Result<Element> {
        let what = format!("{}: `{css}` to contain {text:?}", self.name);
        let client = &self.client;
        let found = wait_until(&what, UI_WAIT, || async move {
            for el in client.find_all(Locator::Css(css)).await? {
                if el.is_displayed().await.unwrap_or(false)
                    && el
                        .text()
                        .await?
                        .to_lowercase()
                        .contains(&text.to_lowercase())
                {
                    return Ok(Some(el));
                }
            }
            Ok(None)
        })
        .await;
        self.explain(found).await
    }

    /// Waits until no displayed element matches `css`.
    pub async fn wait_gone(&self, css: &str) -> anyhow::Result<()> {
        let what = format!("{}: `{css}` to disappear", self.name);
        let client = &self.client;
        let found = wait_until(&what, UI_WAIT, || async move {
            for el in client.find_all(Locator::Css(css)).await? {
                if el.is_displayed().await.unwrap_or(false) {
                    return Ok(None);
                }
            }
            Ok(Some(()))
        })
        .await;
        self.explain(found).await
    }

    /// Runs `act` on the first displayed element matching `css`, in the same step that finds
    /// it: a live update may re-render the page between finding an element and using it, and
    /// an act that finds its element gone is tried again on the new one, within the wait.
    async fn on_displayed<T, F, Fut>(&self, doing: &str, css: &str, act: F) -> anyhow::Result<T>
    where
        F: Fn(Element) -> Fut,
        Fut: std::future::Future<Output = Result<T, fantoccini::error::CmdError>>,
    {
        let what = format!("{}: `{css}` to {doing}", self.name);
        let client = &self.client;
        let act = &act;
        let done = wait_until(&what, UI_WAIT, || async move {
            for el in client.find_all(Locator::Css(css)).await? {
                if el.is_displayed().await.unwrap_or(false) {
                    return Ok(Some(act(el).await?));
                }
            }
            Ok(None)
        })
        .await;
        self.explain(done).await
    }

    /// The rendered text of the first displayed element matching `css`.
    pub async fn text_of(&self, css: &str) -> anyhow::Result<String> {
        self.on_displayed("be read", css, |el| async move { el.text().await })
            .await
    }

    /// The `attr` attribute of the first displayed element matching `css`.
    pub async fn displayed_attr(&self, css: &str, attr: &str) -> anyhow::Result<Option<String>> {
        self.on_displayed("be read", css, |el| async move { el.attr(attr).await })
            .await
    }

    /// Clicks the element matching `css` once it is displayed.
    pub async fn click(&self, css: &str) -> anyhow::Result<()> {
        self.on_displayed("take a click", css, |el| async move { el.click().await })
            .await
    }

    /// Replaces the value of the field matching `css` by typing `text`.
    pub async fn fill(&self, css: &str, text: &str) -> anyhow::Result<()> {
        self.on_displayed(&format!("take {text:?}"), css, |el| async move {
            el.clear().await?;
            el.send_keys(text).await
        })
        .await
    }

    /// `result`, or its error with what the page showed and logged: a timed-out wait alone
    /// does not say whether the page was stuck loading, showed an error, or crashed.
    pub async fn explain<T>(&self, result: anyhow::Result<T>) -> anyhow::Result<T> {
        match result {
            Ok(v) => Ok(v),
            Err(e) => Err(e.context(self.page_report().await)),
        }
    }

    /// The page's address, the browser console's warnings and errors, and the start of the
    /// page's text, for a failure message.
    pub async fn page_report(&self) -> String {
        let url = match self.client.current_url().await {
            Ok(u) => u.to_string(),
            Err(e) => format!("(no URL: {e})"),
        };
        let text = match self
            .js("return document.body ? document.body.innerText.slice(0, 2000) : '(no body)'")
            .await
        {
            Ok(Value::String(t)) => t,
            Ok(other) => other.to_string(),
            Err(e) => format!("(no text: {e})"),
        };
        // chromedriver's log of the browser console (`goog:loggingPrefs` asks it to keep the
        // entries); each read returns what came since the last.
        let log = ChromeCommand {
            path: "se/log",
            body: json!({ "type": "browser" }),
        };
        let console = match self.client.issue_cmd(log).await {
            Ok(Value::Array(entries)) => entries
                .iter()
                .filter(|e| e["level"] != "INFO" && e["level"] != "DEBUG")
                .map(|e| format!("  [{}] {}", e["level"], e["message"]))
                .collect::<Vec<_>>()
                .join("\n"),
            Ok(other) => other.to_string(),
            Err(e) => format!("(no console log: {e})"),
        };
        format!(
            "{} was at {url}\nconsole warnings and errors since the last report:\n{console}\npage text:\n{text}",
            self.name
        )
    }

    /// Runs `script` in the page.
    pub async fn js(&self, script: &str) -> anyhow::Result<Value> {
        Ok(self.client.execute(script, vec![]).await?)
    }

    /// Signs in with the dev-login picker as `user` and waits for the top bar to say so.
    pub async fn dev_sign_in(&self, user: &str) -> anyhow::Result<()> {
        self.click(&format!("button.user-choice[data-user='{user}']"))
            .await?;
        self.wait_for("[data-testid=user-switcher]").await?;
        wait_until(
            &format!("{}: signed in as {user}", self.name),
            UI_WAIT,
            || async move {
                let v = self
                    .js("return document.querySelector('[data-testid=user-switcher]').value")
                    .await?;
                Ok((v.as_str() == Some(user)).then_some(()))
            },
        )
        .await
    }

    /// Saves a PNG screenshot as `<artifacts>/<name>.png`; returns its path.
    pub async fn screenshot(&self, name: &str) -> anyhow::Result<PathBuf> {
        // Let fonts, transitions and the live clock settle.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let png = self.client.screenshot().await?;
        let dir = artifacts_dir();
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png)?;
        Ok(path)
    }

    /// Closes the browser.
    pub async fn close(self) -> anyhow::Result<()> {
        self.client.close().await?;
        Ok(())
    }
}

/// A command of chromedriver's own, beyond WebDriver: `POST session/{id}/{path}` with `body`
/// (fantoccini's custom-command trait speaks these types).
#[derive(Debug)]
pub(crate) struct ChromeCommand {
    /// After the session's URL, e.g. `goog/cdp/execute`.
    pub path: &'static str,
    /// The JSON body.
    pub body: Value,
}

impl WebDriverCompatibleCommand for ChromeCommand {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/{}",
            session_id.unwrap_or_default(),
            self.path
        ))
    }

    fn method_and_body(&self, _request_url: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(self.body.to_string()))
    }
}
