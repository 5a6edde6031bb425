//! The one place that knows the server's URLs and talks to it (fetch today; SSE and the
//! terminal WebSocket later). Components call these functions; they never build URLs.

use gloo_net::http::Request;
use serde::Deserialize;
use web_sys::RequestCredentials;

/// Every endpoint lives under this prefix, on the origin that served the page.
const API_BASE: &str = "/api/breakglass";

/// Who the server thinks we are. Local stand-in until `breakglass-shared` provides the DTO.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct WhoAmI {
    /// The signed-in user, if any.
    pub user: Option<String>,
    /// The server runs with demo users (no real identity provider).
    #[serde(default)]
    pub dev_mode: bool,
}

/// A failed API call: the HTTP status (if the server answered) and a human sentence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub status: Option<u16>,
    pub message: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

fn url(path: &str) -> String {
    format!("{API_BASE}{path}")
}

/// GET `path` (relative to [`API_BASE`]) with the session cookie and decode the JSON body.
async fn get_json<T: for<'de> Deserialize<'de>>(path: &str) -> Result<T, ApiError> {
    let url = url(path);
    let response = Request::get(&url)
        .credentials(RequestCredentials::Include)
        .header("Accept", "application/json")
        .send()
        .await
        .map_err(|e| ApiError {
            status: None,
            message: format!("GET {url}: {e}"),
        })?;
    let status = response.status();
    if !response.ok() {
        return Err(ApiError {
            status: Some(status),
            message: format!("GET {url}: HTTP {status} {}", response.status_text()),
        });
    }
    response.json::<T>().await.map_err(|e| ApiError {
        status: Some(status),
        message: format!("GET {url}: bad JSON: {e}"),
    })
}

/// `GET /api/breakglass/whoami`. A 401 means "not signed in", not a failure.
pub async fn whoami() -> Result<WhoAmI, ApiError> {
    match get_json("/whoami").await {
        Err(ApiError {
            status: Some(401), ..
        }) => Ok(WhoAmI {
            user: None,
            dev_mode: false,
        }),
        other => other,
    }
}
