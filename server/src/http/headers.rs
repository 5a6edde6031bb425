//! The headers every response carries so the UI cannot be framed (one-click approve is
//! clickjackable otherwise), cannot run script the server did not ship, and does not leak
//! session URLs to other sites.
//!
//! The Content-Security-Policy allows script only from our origin, plus the inline scripts of
//! the built `index.html` (Trunk's wasm loader and the xterm.js loader) by their SHA-256,
//! computed when the server starts, so a rebuilt frontend never needs a config change.
//! `'wasm-unsafe-eval'` is what compiling the app's WebAssembly needs. Styles allow
//! `'unsafe-inline'`: xterm.js writes its theme into `<style>` elements at run time, which no
//! hash can cover, and a style cannot run code.

use std::path::Path;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use base64::Engine as _;
use sha2::{Digest, Sha256};

/// The header values, computed once.
#[derive(Debug, Clone)]
pub struct SecurityHeaders {
    csp: HeaderValue,
    /// Only over TLS: a browser ignores HSTS on plain HTTP, and sending it there would only
    /// mislead.
    hsts: Option<HeaderValue>,
}

impl SecurityHeaders {
    /// The headers for the frontend in `static_dir`; `tls` when the public URL is https.
    pub fn new(static_dir: &Path, tls: bool) -> SecurityHeaders {
        let hashes: String = std::fs::read_to_string(static_dir.join("index.html"))
            .map(|html| {
                inline_scripts(&html)
                    .map(|s| {
                        let digest = Sha256::digest(s.as_bytes());
                        format!(
                            " 'sha256-{}'",
                            base64::engine::general_purpose::STANDARD.encode(digest)
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let csp = format!(
            "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'{hashes}; \
             style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; \
             connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
             frame-ancestors 'none'"
        );
        SecurityHeaders {
            // Built only from our constants and base64: always a valid header value.
            csp: HeaderValue::from_str(&csp).unwrap_or_else(|_| {
                HeaderValue::from_static("default-src 'self'; frame-ancestors 'none'")
            }),
            hsts: tls.then(|| HeaderValue::from_static("max-age=31536000")),
        }
    }
}

/// The bodies of `<script>` elements without a `src`, exactly as the browser hashes them.
fn inline_scripts(html: &str) -> impl Iterator<Item = &str> {
    html.split("<script").skip(1).filter_map(|rest| {
        let (attrs, after) = rest.split_once('>')?;
        if attrs.contains("src=") {
            return None;
        }
        after.split_once("</script>").map(|(body, _)| body)
    })
}

/// Adds the headers to every response (API answers included: a JSON body framed or sniffed
/// as HTML is no better).
pub async fn add(State(h): State<SecurityHeaders>, req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let headers = res.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, h.csp.clone());
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if let Some(hsts) = &h.hsts {
        headers.insert(header::STRICT_TRANSPORT_SECURITY, hsts.clone());
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_inline_scripts_are_hashed_exactly_as_written() {
        let html = "<script type=\"module\">\nimport x;\n</script><script src=\"/a.js\"></script>\
                    <script>  var y = 1;\n</script>";
        let got: Vec<&str> = inline_scripts(html).collect();
        assert_eq!(got, ["\nimport x;\n", "  var y = 1;\n"]);
    }
}
