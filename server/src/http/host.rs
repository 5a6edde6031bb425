//! Which names the server answers to. A page on a rebinding domain (a name whose DNS answer
//! first points at the attacker's server, then at 127.0.0.1 or at an address inside a network)
//! is same-origin with whatever it reaches next, so the browser lets it drive a local demo's
//! dev login or read a server's API. What the browser cannot hide is the name it asked for: the
//! `Host` (HTTP/1.1) or `:authority` (HTTP/2) still carries the rebinding domain. So every
//! route, the terminal's and the live updates' included, answers only when the request names
//! this server: the configured `public_url`'s host and port or, without one, a loopback name or
//! address (the demo's case); anything else gets 421 Misdirected Request.
//!
//! Two exceptions, each with its reason. The ops routes (`/healthz`, `/readyz`, `/metrics`)
//! are asked by probes and scrapers by the pod's address, and answer no personal data. A
//! request that names no host at all is not one a browser sends (HTTP/1.1 requires `Host`), so
//! it cannot come from a rebinding page; in-process callers (tests, the bench) send those.

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use breakglass_shared::ErrorCode;

use crate::config::{is_loopback_host, PublicUrl};
use crate::error::ApiError;

/// The names this server answers to, decided once from the configuration.
#[derive(Debug, Clone)]
pub enum AllowedHosts {
    /// Exactly this host (lowercase, IPv6 in brackets) on this port.
    Public {
        /// Host as a browser writes it in `Host`.
        host: String,
        /// The port, the scheme's default when the URL names none.
        port: u16,
        /// The public origin, for the error's sentence.
        origin: String,
    },
    /// No public URL: loopback names and addresses, any port.
    Loopback,
}

impl AllowedHosts {
    /// The public URL's host and port, or loopback only without one.
    pub fn new(public_url: Option<&PublicUrl>) -> AllowedHosts {
        let Some(p) = public_url else {
            return AllowedHosts::Loopback;
        };
        // The origin was parsed at start; an origin that does not parse again would be a bug
        // in `PublicUrl::parse`, and answering to nobody is the safe reading of it.
        match url::Url::parse(&p.origin) {
            Ok(u) => AllowedHosts::Public {
                host: u.host_str().unwrap_or_default().to_ascii_lowercase(),
                port: u.port_or_known_default().unwrap_or(0),
                origin: p.origin.clone(),
            },
            Err(_) => AllowedHosts::Public {
                host: String::new(),
                port: 0,
                origin: p.origin.clone(),
            },
        }
    }

    /// Whether a request naming `authority` (a `Host` value) is for this server.
    pub fn allows(&self, authority: &str) -> bool {
        let Some((host, port)) = split_authority(authority) else {
            return false;
        };
        match self {
            AllowedHosts::Public {
                host: ours,
                port: our_port,
                origin,
            } => {
                let default = if origin.starts_with("https://") {
                    443
                } else {
                    80
                };
                host == *ours && port.unwrap_or(default) == *our_port
            }
            AllowedHosts::Loopback => is_loopback_name(&host),
        }
    }
}

/// A `Host` value as its lowercase host (IPv6 in brackets) and its port, or `None` for
/// anything a browser would not send: user info, an empty or non-numeric port, characters no
/// host name has.
fn split_authority(authority: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = match authority.strip_prefix('[') {
        Some(rest) => {
            let (inner, after) = rest.split_once(']')?;
            inner.parse::<std::net::Ipv6Addr>().ok()?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':')?),
            };
            (format!("[{inner}]"), port)
        }
        None => match authority.split_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        },
    };
    let named = !host.is_empty()
        && (host.starts_with('[')
            || host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_')));
    let port = match port {
        None => None,
        Some(p) if !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => {
            Some(p.parse::<u16>().ok()?)
        }
        Some(_) => return None,
    };
    named.then(|| (host.to_ascii_lowercase(), port))
}

/// A `Host` value's host (see [`split_authority`]) that names this machine.
fn is_loopback_name(host: &str) -> bool {
    url::Host::parse(host.trim_end_matches('.')).is_ok_and(|h| is_loopback_host(&h))
}

/// The ops routes: asked by probes and scrapers (under any name), counted apart from the API
/// and the frontend.
pub fn is_ops(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/metrics")
}

/// Refuses, with 421, a request that names a host other than this server's.
pub async fn check(State(allowed): State<AllowedHosts>, req: Request, next: Next) -> Response {
    if is_ops(req.uri().path()) {
        return next.run(req).await;
    }
    // HTTP/2 carries the name in `:authority` (the URI's authority here); HTTP/1.1 in `Host`.
    // Both are checked when both are present, so neither can smuggle the other.
    let named = req
        .uri()
        .authority()
        .map(|a| a.as_str().to_owned())
        .into_iter()
        .chain(
            req.headers()
                .get_all(header::HOST)
                .iter()
                .map(|h| h.to_str().unwrap_or("\u{0}").to_owned()),
        )
        .collect::<Vec<_>>();
    match named.iter().find(|n| !allowed.allows(n)) {
        None => next.run(req).await,
        Some(wrong) => misdirected(&allowed, wrong, req.uri().path()),
    }
}

fn misdirected(allowed: &AllowedHosts, wrong: &str, path: &str) -> Response {
    let wrong: String = wrong
        .chars()
        .filter(|c| !c.is_control())
        .take(100)
        .collect();
    let message = match allowed {
        AllowedHosts::Public { origin, .. } => {
            format!("this server answers only as {origin}, not as {wrong}; open {origin} instead")
        }
        AllowedHosts::Loopback => format!(
            "this server has no public_url, so it answers only as localhost or a loopback \
             address, not as {wrong}; open it as http://localhost:PORT, or set public_url"
        ),
    };
    if path.starts_with(breakglass_shared::api::API_PREFIX) {
        ApiError::new(ErrorCode::MisdirectedRequest, message).into_response()
    } else {
        (StatusCode::MISDIRECTED_REQUEST, message).into_response()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn public(url: &str) -> AllowedHosts {
        AllowedHosts::new(Some(&PublicUrl::parse(url).unwrap()))
    }

    #[test]
    fn the_public_host_and_port_only() {
        let a = public("https://BG.example/");
        for ok in ["bg.example", "BG.EXAMPLE", "bg.example:443"] {
            assert!(a.allows(ok), "{ok}");
        }
        for bad in [
            "bg.example:8443",
            "evil.example",
            "bg.example.evil.example",
            "127.0.0.1",
            "localhost",
            "user@bg.example",
            "",
            "bg.example:x",
        ] {
            assert!(!a.allows(bad), "{bad}");
        }
        let a = public("http://10.1.2.3:8080");
        assert!(a.allows("10.1.2.3:8080"));
        assert!(!a.allows("10.1.2.3"));
        let a = public("http://[::1]:8080");
        assert!(a.allows("[::1]:8080"));
    }

    #[test]
    fn without_a_public_url_loopback_only() {
        let a = AllowedHosts::new(None);
        for ok in [
            "localhost",
            "localhost:8080",
            "LOCALHOST.",
            "app.localhost:1",
            "127.0.0.1:8080",
            "127.9.9.9",
            "[::1]:8080",
        ] {
            assert!(a.allows(ok), "{ok}");
        }
        for bad in [
            "rebind.example:8080",
            "localhost.example",
            "10.0.0.1:8080",
            "192.168.1.10",
            "[::2]:80",
            "0.0.0.0:8080",
            "[::ffff:10.0.0.1]",
        ] {
            assert!(!a.allows(bad), "{bad}");
        }
    }
}
