//! A real OpenID provider for the login tests: ORY Hydra (built and started by
//! `scripts/hydra.sh`, one per test binary, on PostgreSQL), with the login, consent and logout
//! app Hydra needs, written here and run in this process so each test scripts who signs in.
//!
//! Each test registers its own OAuth client at Hydra ([`Provider::register_client`]) and tells
//! the app, per client, who signs in with which groups and whether they consent
//! ([`Provider::script`]); so tests running side by side never see each other's logins.
//!
//! Browsers reach Hydra's public API through a small forwarding proxy in front of it (Hydra's
//! issuer is the proxy's URL). It forwards everything unchanged, except that for a client
//! scripted with `tamper_id_token` it alters the ID token in the token endpoint's answer, the
//! one place a test can play someone between the server and the provider. It also notes every
//! call of the token endpoint ([`Provider::token_calls`]), so a test can see which PKCE
//! verifier the server sent and how often it spent a refresh token.
//!
//! Hydra takes an ID token's claims from the consent once, at sign-in; its refresh-token hook
//! (`oauth2.refresh_token_hook`, served by the same app) gives a refreshed ID token the
//! persona scripted now, so a test can change someone's groups at the provider.

use std::collections::HashMap;
use std::net::TcpListener as StdListener;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{anyhow, bail, Context as _};
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::uri::PathAndQuery;
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Json;
use axum::Router;
use base64::Engine as _;
use serde_json::{json, Value};

/// Who signs in for one client, and how the provider treats them.
#[derive(Debug, Clone, Default)]
pub struct Persona {
    /// User name (`preferred_username`, and `sub` unless [`Persona::subject`] says otherwise;
    /// `email` is `USER@example.test`).
    pub user: String,
    /// The `groups` claim.
    pub groups: Vec<String>,
    /// The person declines consent.
    pub deny_consent: bool,
    /// The ID token in the token endpoint's answer is altered (its signature no longer fits).
    pub tamper_id_token: bool,
    /// The `sub` when it is not the user name (another account carrying the same name).
    pub subject: Option<String>,
    /// The provider does not vouch for the email address (`email_verified: false`).
    pub email_unverified: bool,
}

impl Persona {
    /// `user` in `groups`, consenting.
    pub fn new(user: &str, groups: &[&str]) -> Persona {
        Persona {
            user: user.into(),
            groups: groups.iter().map(ToString::to_string).collect(),
            ..Persona::default()
        }
    }
}

/// A client registered at the provider.
#[derive(Debug, Clone)]
pub struct OAuthClient {
    /// Client id.
    pub id: String,
    /// Client secret.
    pub secret: String,
}

/// One call of the token endpoint by a client, as the forwarding proxy saw it.
#[derive(Debug, Clone)]
pub struct TokenCall {
    /// `authorization_code` or `refresh_token`.
    pub grant_type: String,
    /// The PKCE verifier sent with a code.
    pub code_verifier: Option<String>,
    /// The refresh token spent.
    pub refresh_token: Option<String>,
    /// Hydra's answer (400 for a refused verifier or a reused refresh token).
    pub status: u16,
}

#[derive(Default)]
struct Scripts {
    personas: HashMap<String, Persona>,
    logouts: HashMap<String, usize>,
    token_calls: HashMap<String, Vec<TokenCall>>,
}

#[derive(Clone)]
struct AppState {
    admin: String,
    public: String,
    http: reqwest::Client,
    scripts: Arc<Mutex<Scripts>>,
}

/// The running provider.
pub struct Provider {
    /// The issuer browsers and the server use (the forwarding proxy's URL, with a trailing
    /// slash, as Hydra names it).
    pub issuer: String,
    /// Hydra's own public URL (its discovery document names [`Provider::issuer`], not this).
    pub direct_public: String,
    /// Hydra's admin URL.
    pub admin: String,
    state: AppState,
    _stop_on_exit: Mutex<ChildStdin>,
}

static SHARED: OnceLock<Result<Provider, String>> = OnceLock::new();

/// A port nobody listens on right now.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(StdListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Provider {
    /// The provider of this test binary, started on first use (stopped, and its database
    /// dropped, when the binary exits).
    pub fn shared() -> anyhow::Result<&'static Provider> {
        SHARED
            .get_or_init(|| Provider::start().map_err(|e| format!("{e:#}")))
            .as_ref()
            .map_err(|e| anyhow!("{e}"))
    }

    fn start() -> anyhow::Result<Provider> {
        let app_listener = StdListener::bind("127.0.0.1:0")?;
        let front_listener = StdListener::bind("127.0.0.1:0")?;
        let app_url = format!("http://{}", app_listener.local_addr()?);
        let issuer = format!("http://{}/", front_listener.local_addr()?);
        let (public_port, admin_port) = (free_port()?, free_port()?);
        let direct_public = format!("http://127.0.0.1:{public_port}");
        let admin = format!("http://127.0.0.1:{admin_port}");
        let dir = tempfile::Builder::new()
            .prefix("breakglass-hydra-")
            .tempdir()?
            .keep();
        let script = crate::script("hydra.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg("start")
            .arg(&dir)
            .arg(public_port.to_string())
            .arg(admin_port.to_string())
            .env("HYDRA_ISSUER_URL", &issuer)
            .env("HYDRA_LOGIN_URL", format!("{app_url}/login"))
            .env("HYDRA_CONSENT_URL", format!("{app_url}/consent"))
            .env("HYDRA_LOGOUT_URL", format!("{app_url}/logout"))
            // Hydra's own configuration from the environment (scripts/hydra.sh passes it on).
            .env(
                "OAUTH2_REFRESH_TOKEN_HOOK_URL",
                format!("{app_url}/refresh-hook"),
            )
            .output()
            .with_context(|| format!("running {}", script.display()))?;
        if !out.status.success() {
            bail!(
                "scripts/hydra.sh start failed (install it with `scripts/hydra.sh install`):\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // Stops Hydra and drops its database once this process exits and the pipe closes.
        let mut watchdog = Command::new("bash")
            .arg("-c")
            .arg("read -r _ || true; exec bash \"$0\" stop \"$1\" >/dev/null 2>&1")
            .arg(&script)
            .arg(&dir)
            .stdin(Stdio::piped())
            .spawn()?;
        let stdin = watchdog
            .stdin
            .take()
            .ok_or_else(|| anyhow!("no stdin for the watchdog"))?;
        let state = AppState {
            admin: admin.clone(),
            public: direct_public.clone(),
            // A fresh connection per call: Hydra closes idle ones, and a request sent on one
            // it was closing failed a login accept ("error sending request") in a CI run.
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .pool_max_idle_per_host(0)
                .build()?,
            scripts: Arc::default(),
        };
        let app = Router::new()
            .route("/login", get(login))
            .route("/consent", get(consent))
            .route("/logout", get(logout))
            .route("/refresh-hook", post(refresh_hook))
            .with_state(state.clone());
        let front = Router::new().fallback(forward).with_state(state.clone());
        app_listener.set_nonblocking(true)?;
        front_listener.set_nonblocking(true)?;
        std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                let (Ok(a), Ok(f)) = (
                    tokio::net::TcpListener::from_std(app_listener),
                    tokio::net::TcpListener::from_std(front_listener),
                ) else {
                    return;
                };
                let _ = tokio::join!(axum::serve(a, app), axum::serve(f, front));
            });
        });
        Ok(Provider {
            issuer,
            direct_public,
            admin,
            state,
            _stop_on_exit: Mutex::new(stdin),
        })
    }

    /// Registers a confidential client (secret sent as HTTP Basic) redirecting to
    /// `redirect_uri`, with `post_logout` as its post-logout redirect.
    pub async fn register_client(
        &self,
        redirect_uri: &str,
        post_logout: &str,
    ) -> anyhow::Result<OAuthClient> {
        let secret = format!("secret-{}", uuid_like());
        let r = self
            .state
            .http
            .post(format!("{}/admin/clients", self.admin))
            .json(&json!({
                "client_name": "breakglass-test",
                "client_secret": secret,
                "redirect_uris": [redirect_uri],
                "post_logout_redirect_uris": [post_logout],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "scope": "openid profile email offline_access",
                "token_endpoint_auth_method": "client_secret_basic",
            }))
            .send()
            .await?;
        let status = r.status();
        let body: Value = r.json().await?;
        if !status.is_success() {
            bail!("creating a Hydra client: {status} {body}");
        }
        let id = body["client_id"]
            .as_str()
            .ok_or_else(|| anyhow!("no client_id in {body}"))?
            .to_string();
        Ok(OAuthClient { id, secret })
    }

    /// From now on, `persona` signs in (and consents, or not) for `client`.
    pub fn script(&self, client: &OAuthClient, persona: Persona) {
        if let Ok(mut s) = self.state.scripts.lock() {
            s.personas.insert(client.id.clone(), persona);
        }
    }

    /// How many logouts the provider completed for `client` (RP-initiated logouts that reached
    /// the logout app).
    pub fn logouts(&self, client: &OAuthClient) -> usize {
        self.state
            .scripts
            .lock()
            .map(|s| s.logouts.get(&client.id).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    /// Every call of the token endpoint `client` made so far, oldest first.
    pub fn token_calls(&self, client: &OAuthClient) -> Vec<TokenCall> {
        self.state
            .scripts
            .lock()
            .map(|s| s.token_calls.get(&client.id).cloned().unwrap_or_default())
            .unwrap_or_default()
    }

    /// The refresh tokens `client` spent so far (successfully or not), oldest first.
    pub fn refreshes(&self, client: &OAuthClient) -> Vec<TokenCall> {
        self.token_calls(client)
            .into_iter()
            .filter(|c| c.grant_type == "refresh_token")
            .collect()
    }

    /// Adds a new signing key for ID tokens; Hydra signs with it from now on, so a relying
    /// party holding only the old key set must fetch the new one.
    pub async fn rotate_id_token_key(&self) -> anyhow::Result<String> {
        let kid = format!("rotated-{}", uuid_like());
        let r = self
            .state
            .http
            .post(format!("{}/admin/keys/hydra.openid.id-token", self.admin))
            .json(&json!({ "alg": "RS256", "use": "sig", "kid": kid }))
            .send()
            .await?;
        if !r.status().is_success() {
            bail!(
                "rotating the ID token key: {} {}",
                r.status(),
                r.text().await?
            );
        }
        Ok(kid)
    }
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{}-{nanos:x}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

type AppResult = Result<Response, (StatusCode, String)>;

fn fail(e: impl std::fmt::Display) -> (StatusCode, String) {
    (StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
}

impl AppState {
    async fn admin_get(&self, path: &str) -> Result<Value, (StatusCode, String)> {
        let r = self
            .http
            .get(format!("{}{path}", self.admin))
            .send()
            .await
            .map_err(fail)?;
        r.json().await.map_err(fail)
    }

    /// PUTs `body` to an admin path and redirects the browser where Hydra says.
    async fn admin_put_redirect(&self, path: &str, body: Value) -> AppResult {
        let r = self
            .http
            .put(format!("{}{path}", self.admin))
            .json(&body)
            .send()
            .await
            .map_err(fail)?;
        let v: Value = r.json().await.map_err(fail)?;
        let to = v["redirect_to"]
            .as_str()
            .ok_or_else(|| fail(format!("no redirect_to in {v}")))?;
        Ok(Redirect::to(to).into_response())
    }

    fn persona(&self, client_id: &str) -> Option<Persona> {
        self.scripts
            .lock()
            .ok()
            .and_then(|s| s.personas.get(client_id).cloned())
    }
}

fn challenge(q: &HashMap<String, String>, name: &str) -> Result<String, (StatusCode, String)> {
    q.get(name)
        .cloned()
        .ok_or((StatusCode::BAD_REQUEST, format!("no {name}")))
}

async fn login(State(s): State<AppState>, Query(q): Query<HashMap<String, String>>) -> AppResult {
    let c = challenge(&q, "login_challenge")?;
    let req = s
        .admin_get(&format!(
            "/admin/oauth2/auth/requests/login?login_challenge={c}"
        ))
        .await?;
    let client = req["client"]["client_id"].as_str().unwrap_or_default();
    let path = format!("/admin/oauth2/auth/requests/login/{{}}?login_challenge={c}");
    match s.persona(client) {
        Some(p) => {
            s.admin_put_redirect(
                &path.replace("{}", "accept"),
                // Remembered, so the provider holds a session an RP-initiated logout can end.
                json!({ "subject": p.subject.as_ref().unwrap_or(&p.user), "remember": true, "remember_for": 3600 }),
            )
            .await
        }
        None => {
            s.admin_put_redirect(
                &path.replace("{}", "reject"),
                json!({ "error": "login_required", "error_description": "no persona scripted for this client" }),
            )
            .await
        }
    }
}

async fn consent(State(s): State<AppState>, Query(q): Query<HashMap<String, String>>) -> AppResult {
    let c = challenge(&q, "consent_challenge")?;
    let req = s
        .admin_get(&format!(
            "/admin/oauth2/auth/requests/consent?consent_challenge={c}"
        ))
        .await?;
    let client = req["client"]["client_id"].as_str().unwrap_or_default();
    let path = format!("/admin/oauth2/auth/requests/consent/{{}}?consent_challenge={c}");
    match s.persona(client) {
        Some(p) if !p.deny_consent => {
            s.admin_put_redirect(
                &path.replace("{}", "accept"),
                json!({
                    "grant_scope": req["requested_scope"],
                    "grant_access_token_audience": req["requested_access_token_audience"],
                    "remember": false,
                    "session": { "id_token": {
                        "preferred_username": p.user,
                        "email": format!("{}@example.test", p.user),
                        "email_verified": !p.email_unverified,
                        "groups": p.groups,
                    }},
                }),
            )
            .await
        }
        _ => {
            s.admin_put_redirect(
                &path.replace("{}", "reject"),
                json!({ "error": "access_denied", "error_description": "The resource owner denied the request" }),
            )
            .await
        }
    }
}

async fn logout(State(s): State<AppState>, Query(q): Query<HashMap<String, String>>) -> AppResult {
    let c = challenge(&q, "logout_challenge")?;
    let req = s
        .admin_get(&format!(
            "/admin/oauth2/auth/requests/logout?logout_challenge={c}"
        ))
        .await?;
    if let (Some(client), Ok(mut scripts)) = (req["client"]["client_id"].as_str(), s.scripts.lock())
    {
        *scripts.logouts.entry(client.to_string()).or_default() += 1;
    }
    s.admin_put_redirect(
        &format!("/admin/oauth2/auth/requests/logout/accept?logout_challenge={c}"),
        json!({}),
    )
    .await
}

/// Hydra's refresh-token hook: the refreshed ID token names the persona scripted for the
/// client now (its groups may have changed since the consent); the other claims Hydra holds
/// (`sid`...) are kept. Unscripted clients keep what they had.
async fn refresh_hook(State(s): State<AppState>, Json(req): Json<Value>) -> Response {
    let Some(p) = req["client_id"].as_str().and_then(|c| s.persona(c)) else {
        return StatusCode::NO_CONTENT.into_response();
    };
    let mut id_token = match &req["session"]["id_token"]["id_token_claims"]["ext"] {
        Value::Object(claims) => claims.clone(),
        _ => serde_json::Map::new(),
    };
    id_token.insert("preferred_username".into(), json!(p.user));
    id_token.insert("email".into(), json!(format!("{}@example.test", p.user)));
    id_token.insert("groups".into(), json!(p.groups));
    Json(json!({ "session": {
        "id_token": id_token,
        "access_token": req["session"]["extra"],
    }}))
    .into_response()
}

/// The client id of a token request authenticated with HTTP Basic.
fn basic_client_id(headers: &HeaderMap) -> Option<String> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(v.strip_prefix("Basic ")?)
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    // Hydra's client ids are UUIDs: nothing in them is form-encoded.
    text.split(':').next().map(String::from)
}

/// An ID token with its payload changed (the user becomes `mallory`, in `admins`), the
/// signature kept: what a party between server and provider would hand over.
fn tampered(id_token: &str) -> Option<String> {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut parts = id_token.split('.');
    let (h, p, sig) = (parts.next()?, parts.next()?, parts.next()?);
    let mut claims: Value = serde_json::from_slice(&b64.decode(p).ok()?).ok()?;
    claims["preferred_username"] = json!("mallory");
    claims["groups"] = json!(["admins"]);
    Some(format!(
        "{h}.{}.{sig}",
        b64.encode(serde_json::to_vec(&claims).ok()?)
    ))
}

/// What a token request's form says (its status is filled in once Hydra answered).
fn token_call(form: &[u8]) -> TokenCall {
    let field = |name: &str| {
        url::form_urlencoded::parse(form)
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    TokenCall {
        grant_type: field("grant_type").unwrap_or_default(),
        code_verifier: field("code_verifier"),
        refresh_token: field("refresh_token"),
        status: 0,
    }
}

async fn forward(
    State(s): State<AppState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> AppResult {
    let path = uri
        .path_and_query()
        .map(PathAndQuery::as_str)
        .unwrap_or("/");
    let tamper = uri.path() == "/oauth2/token"
        && basic_client_id(&headers)
            .and_then(|id| s.persona(&id))
            .is_some_and(|p| p.tamper_id_token);
    let mut req = s.http.request(method, format!("{}{path}", s.public));
    for (name, value) in &headers {
        if name != header::HOST && name != header::CONTENT_LENGTH {
            req = req.header(name, value);
        }
    }
    let call = (uri.path() == "/oauth2/token").then(|| token_call(&body));
    let r = req.body(body).send().await.map_err(fail)?;
    let status = r.status();
    if let (Some(mut call), Some(id), Ok(mut scripts)) =
        (call, basic_client_id(&headers), s.scripts.lock())
    {
        call.status = status.as_u16();
        scripts.token_calls.entry(id).or_default().push(call);
    }
    let mut out_headers = HeaderMap::new();
    for (name, value) in r.headers() {
        if name != header::CONTENT_LENGTH && name != header::TRANSFER_ENCODING {
            out_headers.append(name, value.clone());
        }
    }
    let mut bytes = r.bytes().await.map_err(fail)?.to_vec();
    if tamper && status.is_success() {
        let mut v: Value = serde_json::from_slice(&bytes).map_err(fail)?;
        if let Some(t) = v["id_token"].as_str().and_then(tampered) {
            v["id_token"] = json!(t);
        }
        bytes = serde_json::to_vec(&v).map_err(fail)?;
    }
    Ok((status, out_headers, Body::from(bytes)).into_response())
}
