//! A browser without JavaScript for the login tests: it keeps cookies and follows redirects
//! one hop at a time, so a test can stop at a given URL (the OIDC callback, say), look at it,
//! replay it, or send it from another agent.

use std::net::IpAddr;
use std::sync::Arc;

use anyhow::{anyhow, bail};
use reqwest::cookie::{CookieStore, Jar};
use reqwest::header::{HeaderMap, LOCATION, SET_COOKIE};
use reqwest::{StatusCode, Url};
use serde_json::Value;

/// Where a walk ended.
#[derive(Debug)]
pub enum Walk {
    /// A redirect pointed at a URL the caller wanted to stop at; not requested.
    Stopped(Url),
    /// A response that is not a redirect, from `url`.
    Done {
        /// The URL that answered.
        url: Url,
        /// Its status.
        status: StatusCode,
        /// Its headers.
        headers: HeaderMap,
        /// Its body.
        body: String,
    },
}

/// A cookie-keeping client that never follows redirects by itself.
#[derive(Clone)]
pub struct Agent {
    /// The client (no redirects, cookies from [`Agent::jar`]).
    pub http: reqwest::Client,
    /// Its cookies.
    pub jar: Arc<Jar>,
}

impl Agent {
    /// A new agent with no cookies.
    pub fn new() -> anyhow::Result<Agent> {
        Agent::build(None)
    }

    /// A new agent whose connections come from `local` (e.g. `127.0.0.2`, an address outside
    /// a server's `trusted_proxies` on the same machine).
    pub fn from_address(local: IpAddr) -> anyhow::Result<Agent> {
        Agent::build(Some(local))
    }

    fn build(local: Option<IpAddr>) -> anyhow::Result<Agent> {
        let jar = Arc::new(Jar::default());
        let http = reqwest::Client::builder()
            .cookie_provider(jar.clone())
            .redirect(reqwest::redirect::Policy::none())
            .local_address(local)
            .build()?;
        Ok(Agent { http, jar })
    }

    /// GETs `url` and follows redirects (at most 20) until one points at a URL for which
    /// `stop` holds, or a response is not a redirect.
    pub async fn walk(&self, url: &str, stop: impl Fn(&Url) -> bool) -> anyhow::Result<Walk> {
        let mut url = Url::parse(url)?;
        for _ in 0..20 {
            let r = self.http.get(url.clone()).send().await?;
            let status = r.status();
            if status.is_redirection() {
                let location = r
                    .headers()
                    .get(LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| anyhow!("{status} without Location from {url}"))?;
                let next = url.join(location)?;
                if stop(&next) {
                    return Ok(Walk::Stopped(next));
                }
                url = next;
                continue;
            }
            let headers = r.headers().clone();
            let body = r.text().await?;
            return Ok(Walk::Done {
                url,
                status,
                headers,
                body,
            });
        }
        bail!("more than 20 redirects from {url}")
    }

    /// The `Cookie` header this agent sends to `url`.
    pub fn cookies_for(&self, url: &str) -> String {
        Url::parse(url)
            .ok()
            .and_then(|u| self.jar.cookies(&u))
            .and_then(|v| v.to_str().ok().map(String::from))
            .unwrap_or_default()
    }

    /// The value of cookie `name` this agent sends to `url`, as it goes over the wire (still
    /// percent-encoded).
    pub fn cookie(&self, url: &str, name: &str) -> Option<String> {
        self.cookies_for(url)
            .split("; ")
            .find_map(|c| c.strip_prefix(name)?.strip_prefix('=').map(String::from))
    }

    /// Keeps `set_cookie` (a `Set-Cookie` value, `NAME=VALUE; Path=...`) as if `url` had set
    /// it, in place of a cookie of the same name and path: a test playing someone who copied or
    /// altered a cookie.
    pub fn set_cookie(&self, url: &str, set_cookie: &str) -> anyhow::Result<()> {
        self.jar.add_cookie_str(set_cookie, &Url::parse(url)?);
        Ok(())
    }

    /// GETs JSON from `url`; status and body.
    pub async fn get_json(&self, url: &str) -> anyhow::Result<(u16, Value)> {
        let r = self.http.get(url).send().await?;
        let status = r.status().as_u16();
        Ok((status, r.json().await.unwrap_or(Value::Null)))
    }

    /// POSTs JSON `body` to `url` with the CSRF token `csrf`; status and body.
    pub async fn post_json(
        &self,
        url: &str,
        csrf: &str,
        body: &Value,
    ) -> anyhow::Result<(u16, Value)> {
        let r = self
            .http
            .post(url)
            .header("x-csrf-token", csrf)
            .json(body)
            .send()
            .await?;
        let status = r.status().as_u16();
        Ok((status, r.json().await.unwrap_or(Value::Null)))
    }
}

/// Whether `headers` set a non-empty cookie called `name` (a removal is not setting it).
pub fn sets_cookie(headers: &HeaderMap, name: &str) -> bool {
    headers.get_all(SET_COOKIE).iter().any(|v| {
        v.to_str().ok().is_some_and(|c| {
            c.strip_prefix(name)
                .and_then(|rest| rest.strip_prefix('='))
                .is_some_and(|rest| {
                    !rest.starts_with(';') && !rest.is_empty() && !c.contains("Max-Age=0")
                })
        })
    })
}
