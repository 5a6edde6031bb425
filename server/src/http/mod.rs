//! HTTP surface: the router and the small routes (whoami, environments, health, metrics,
//! OpenAPI). One module per noun below it. Only [`app`] sees the whole context; each handler
//! takes the parts it uses as `State` (the `FromRef` impls in `state.rs`).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use breakglass_shared::api::{ClusterStatus, EnvironmentInfo, UserInfo, WhoAmI};
use breakglass_shared::lock::{Lock, LockScope};
use breakglass_shared::{ErrorBody, ErrorCode};
use tower_http::services::{ServeDir, ServeFile};
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;

use crate::auth::{CurrentUser, MaybeUser};
use crate::cluster::Clusters;
use crate::config::Config;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::state::AppState;
use crate::store::Store;

pub mod clusters;
pub mod dev_login;
pub mod events;
pub mod export;
pub mod extensions;
pub mod extract;
pub mod headers;
pub mod host;
pub mod idle;
pub mod limits;
pub mod locks;
pub mod notifications;
pub mod recordings;
pub mod search;
pub mod sessions;
pub mod sign_in;
pub mod sockets;
pub mod step_up;
pub mod terminal;
pub mod watch;

/// The OpenAPI document of the whole API.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Break-glass API",
        description = "Time-boxed, recorded debug access to Kubernetes pods."
    ),
    paths(
        whoami,
        environments,
        dev_login::login,
        sign_in::logout,
        sign_in::oidc_login,
        sign_in::oidc_callback,
        sessions::create,
        sessions::list,
        sessions::get,
        sessions::approve,
        sessions::deny,
        sessions::break_glass,
        sessions::end,
        sessions::terminate,
        sessions::review,
        terminal::terminal,
        watch::watch,
        watch::replica_watch,
        extensions::extend,
        extensions::approve_extension,
        extensions::deny_extension,
        events::stream,
        recordings::recording,
        recordings::verify,
        recordings::evidence,
        recordings::retention,
        search::search,
        clusters::namespaces,
        clusters::pods,
        clusters::guardrails,
        locks::list,
        locks::lock_environment,
        locks::unlock_environment,
        locks::lock_user,
        locks::unlock_user,
        step_up::list_keys,
        step_up::key_options,
        step_up::register_key,
        step_up::remove_key,
        step_up::options,
        notifications::deliveries,
        notifications::schema,
        export::export,
    ),
    components(schemas(breakglass_shared::api::SessionEventRecord))
)]
pub struct ApiDoc;

/// The whole router: the API, health and metrics, and the built frontend.
pub fn app(state: AppState) -> Router {
    let api = Router::new()
        .route("/whoami", get(whoami))
        .route("/environments", get(environments))
        .route("/auth/dev-login", post(dev_login::login))
        .route("/auth/logout", post(sign_in::logout))
        .route("/auth/oidc/login", get(sign_in::oidc_login))
        .route("/auth/oidc/callback", get(sign_in::oidc_callback))
        .route("/sessions", post(sessions::create).get(sessions::list))
        .route("/sessions/{id}", get(sessions::get))
        .route("/sessions/{id}/approve", post(sessions::approve))
        .route("/sessions/{id}/deny", post(sessions::deny))
        .route("/sessions/{id}/break-glass", post(sessions::break_glass))
        .route("/sessions/{id}/end", post(sessions::end))
        .route("/sessions/{id}/terminate", post(sessions::terminate))
        .route("/sessions/{id}/review", post(sessions::review))
        .route("/sessions/{id}/extend", post(extensions::extend))
        .route(
            "/sessions/{id}/extension/approve",
            post(extensions::approve_extension),
        )
        .route(
            "/sessions/{id}/extension/deny",
            post(extensions::deny_extension),
        )
        .route("/events", get(events::stream))
        .route("/sessions/{id}/terminal", get(terminal::terminal))
        .route("/sessions/{id}/watch", get(watch::watch))
        .route("/replica/watch/{id}", get(watch::replica_watch))
        .route("/recordings/search", get(search::search))
        .route("/sessions/{id}/recording", get(recordings::recording))
        .route("/sessions/{id}/recording/verify", get(recordings::verify))
        .route("/sessions/{id}/evidence", get(recordings::evidence))
        .route(
            "/sessions/{id}/recording/retention",
            get(recordings::retention),
        )
        .route("/environments/{env}/namespaces", get(clusters::namespaces))
        .route(
            "/environments/{env}/namespaces/{ns}/pods",
            get(clusters::pods),
        )
        .route("/environments/{env}/guardrails", get(clusters::guardrails))
        .route("/locks", get(locks::list))
        .route("/environments/{env}/lock", post(locks::lock_environment))
        .route(
            "/environments/{env}/unlock",
            post(locks::unlock_environment),
        )
        .route("/users/{user}/lock", post(locks::lock_user))
        .route("/users/{user}/unlock", post(locks::unlock_user))
        .route(
            "/account/keys",
            get(step_up::list_keys).post(step_up::register_key),
        )
        .route("/account/keys/options", post(step_up::key_options))
        .route(
            "/account/keys/{key}",
            axum::routing::delete(step_up::remove_key),
        )
        .route("/step-up/options", post(step_up::options))
        .route("/notifications/deliveries", get(notifications::deliveries))
        .route("/notifications/schema.json", get(notifications::schema))
        .route("/export", get(export::export))
        .route("/openapi.json", get(openapi))
        // After the routes: it applies to those registered before it. Axum keeps `Allow`.
        .method_not_allowed_fallback(api_method_not_allowed)
        .fallback(api_not_found)
        .layer(axum::Extension(state.oidc.clone()))
        .layer(axum::Extension(events::Fanout::new(
            state.changes.clone(),
            state.missed.clone(),
            state.locks_changed.clone(),
        )))
        .layer(axum::Extension(limits::LiveStreams::new(
            state.config.limits.live_streams_per_user,
        )))
        .layer(middleware::from_fn_with_state(
            state.config.limits,
            limits::bound,
        ))
        // Every API answer is about a person (whoami with its CSRF token, sessions,
        // recordings): no browser or shared cache keeps it. The hashed static files are
        // outside this router and stay cacheable.
        .layer(tower_http::set_header::SetResponseHeaderLayer::overriding(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("no-store"),
        ));
    let index = state.config.static_dir.join("index.html");
    // The build writes a `.br` and a `.gz` beside each asset (frontend/precompress.mjs), so the
    // first page goes out at brotli's best ratio without compressing on every request; a
    // browser that accepts neither, or a file without them, gets the file as it is.
    let index = ServeFile::new(index)
        .precompressed_br()
        .precompressed_gzip();
    // Any other path is one of the app's addresses (a deep link), answered with its page; but
    // a file of the build that is not there is a 404, so a chunk a deploy removed fails its
    // fetch plainly (the page offers to try again) instead of arriving as HTML.
    let fallback = tower::service_fn(move |req: Request| {
        let index = index.clone();
        async move {
            if is_build_file(req.uri().path()) {
                return Ok::<_, std::convert::Infallible>(StatusCode::NOT_FOUND.into_response());
            }
            Ok(tower::ServiceExt::oneshot(index, req)
                .await?
                .into_response())
        }
    });
    let frontend = ServeDir::new(&state.config.static_dir)
        .precompressed_br()
        .precompressed_gzip()
        .fallback(fallback);
    // ServeDir does not say so itself: without it a shared cache could hand the brotli body
    // to a browser that asked for gzip.
    let frontend = tower_http::set_header::SetResponseHeader::appending(
        frontend,
        header::VARY,
        header::HeaderValue::from_static("accept-encoding"),
    );
    Router::new()
        .nest(breakglass_shared::api::API_PREFIX, api)
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .fallback_service(frontend)
        .layer(middleware::from_fn_with_state(
            headers::SecurityHeaders::new(
                &state.config.static_dir,
                crate::auth::is_https(&state.config),
            ),
            headers::add,
        ))
        .layer(middleware::from_fn_with_state(
            host::AllowedHosts::new(state.config.public_url.as_ref()),
            host::check,
        ))
        .layer(middleware::from_fn_with_state(
            state.metrics.requests.clone(),
            count_requests,
        ))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Whether `path` names a file of the frontend's build: a wasm, script, stylesheet or
/// compressed file at the root or under `vendor/` or `snippets/`. The app's own addresses have
/// more segments (a pod's name may hold a dot) or no extension.
fn is_build_file(path: &str) -> bool {
    let rest = path.trim_start_matches('/');
    let in_build_dir =
        !rest.contains('/') || rest.starts_with("vendor/") || rest.starts_with("snippets/");
    let extension = rest
        .rsplit('/')
        .next()
        .and_then(|name| name.rsplit_once('.'))
        .map(|(_, ext)| ext);
    in_build_dir
        && matches!(
            extension,
            Some("wasm" | "js" | "mjs" | "css" | "map" | "br" | "gz")
        )
}

async fn count_requests(
    State(requests): State<prometheus::IntCounterVec>,
    req: Request,
    next: Next,
) -> Response {
    let method = method_label(req.method());
    // Label by surface, not by path: paths carry session ids and would explode cardinality.
    let path = req.uri().path();
    let surface = if path.starts_with("/api/") {
        "api"
    } else if host::is_ops(path) {
        "ops"
    } else {
        "frontend"
    };
    let res = next.run(req).await;
    requests
        .with_label_values(&[method, surface, res.status().as_str()])
        .inc();
    res
}

/// The method as a metric label: the methods the server routes, and one `other` for any name
/// a client makes up (each new label value is a new series kept for the process's life).
fn method_label(m: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *m {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

async fn api_not_found() -> ApiError {
    ApiError::not_found("no such API route; see /api/breakglass/openapi.json")
}

async fn api_method_not_allowed(method: axum::http::Method) -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        format!(
            "this API route does not take {method}; the Allow header lists the methods it takes"
        ),
    )
}

/// What the UI needs to know about the caller; `clusters` say whether each environment's
/// cluster answers.
pub async fn whoami_for(
    config: &Config,
    clusters: Option<&Arc<Clusters>>,
    store: &dyn Store,
    user: Option<&CurrentUser>,
) -> Result<WhoAmI, ApiError> {
    let (environments, keys) = match user {
        Some(u) => {
            let locks = store.locks().await?;
            let keys = store.keys_of(&u.name).await?.len();
            let envs = environments_for(config, clusters, &locks, u).await;
            (envs, u32::try_from(keys).unwrap_or(u32::MAX))
        }
        None => (vec![], 0),
    };
    Ok(WhoAmI {
        user: user.map(|u| UserInfo {
            name: u.name.clone(),
            groups: u.groups.clone(),
            security_keys: keys,
        }),
        dev_mode: config.dev_login,
        dev_users: if config.dev_login {
            config.dev_users.iter().map(|u| u.name.clone()).collect()
        } else {
            vec![]
        },
        environments,
        csrf_token: user.map(|u| u.csrf_token.clone()),
        oidc_login: config.oidc.is_some(),
    })
}

/// The environments where `user` holds any permission, each with whether its cluster answers
/// (the probes run side by side and are cached, so a cluster that is down costs one bounded
/// wait at most, not one per page).
async fn environments_for(
    config: &Config,
    clusters: Option<&Arc<Clusters>>,
    locks: &[Lock],
    user: &CurrentUser,
) -> Vec<EnvironmentInfo> {
    let visible = config
        .environments
        .iter()
        .map(|e| (e, e.permissions_of(&user.name, &user.groups)))
        .filter(|(_, p)| p.any());
    futures::future::join_all(visible.map(|(e, permissions)| async move {
        EnvironmentInfo {
            name: e.name.clone(),
            tier: e.tier,
            permissions,
            durations: config.durations.for_tier(e.tier),
            // The server's file paths and the cluster's address are for those who run it.
            cluster: cluster_status(
                config,
                clusters,
                e,
                permissions.terminate || permissions.self_approve,
            )
            .await,
            lock: breakglass_shared::lock::find(locks, LockScope::Environment, &e.name).cloned(),
            step_up: e.step_up,
            moderated: e.moderated,
            auditors_watch: e.auditors_watch,
        }
    }))
    .await
}

/// The cluster status shown to a user; `admin` (terminate or break the glass there) sees how
/// the server reaches it and what its client said, everyone else what kind of credentials
/// they are and whom to ask.
async fn cluster_status(
    config: &Config,
    clusters: Option<&Arc<Clusters>>,
    e: &crate::config::Environment,
    admin: bool,
) -> ClusterStatus {
    let Some(creds) = &e.cluster else {
        return if config.no_clusters {
            ClusterStatus::ApiOnly
        } else {
            ClusterStatus::Missing {
                fix: crate::lifecycle::no_cluster(&e.name),
            }
        };
    };
    let reached_through = if admin {
        creds.describe()
    } else {
        creds.describe_briefly()
    };
    let problem = match clusters {
        Some(c) => c.unreachable(&e.name).await,
        None => None,
    };
    match problem {
        None => ClusterStatus::Configured { reached_through },
        Some(error) if admin => ClusterStatus::Unreachable {
            fix: format!(
                "check the cluster of environment `{}` in the server's configuration \
                 ([[environments]] name = \"{}\", reached through {reached_through}) and run \
                 `breakglass-server doctor --cluster {}`",
                e.name, e.name, e.name
            ),
            reached_through,
            error,
        },
        Some(_) => ClusterStatus::Unreachable {
            fix: format!(
                "ask an administrator of environment `{}` to check its cluster \
                 (`breakglass-server doctor --cluster {}` says what is wrong)",
                e.name, e.name
            ),
            reached_through,
            error: "the server could not reach its API server".into(),
        },
    }
}

/// The caller, the dev-mode flag, their environments and CSRF token. Never 401.
#[utoipa::path(get, path = "/api/breakglass/whoami", tag = "auth",
    responses((status = 200, description = "Who you are", body = WhoAmI)))]
pub async fn whoami(
    State(config): State<Arc<Config>>,
    State(clusters): State<Option<Arc<Clusters>>>,
    State(store): State<Arc<dyn Store>>,
    MaybeUser(user): MaybeUser,
) -> Result<Json<WhoAmI>, ApiError> {
    Ok(Json(
        whoami_for(&config, clusters.as_ref(), store.as_ref(), user.as_ref()).await?,
    ))
}

/// Environments where the caller holds any permission.
#[utoipa::path(get, path = "/api/breakglass/environments", tag = "environments",
    responses(
        (status = 200, description = "Environments", body = Vec<EnvironmentInfo>),
        (status = 401, description = "Not signed in", body = ErrorBody),
    ))]
pub async fn environments(
    State(config): State<Arc<Config>>,
    State(clusters): State<Option<Arc<Clusters>>>,
    State(store): State<Arc<dyn Store>>,
    user: CurrentUser,
) -> Result<Json<Vec<EnvironmentInfo>>, ApiError> {
    let locks = store.locks().await?;
    Ok(Json(
        environments_for(&config, clusters.as_ref(), &locks, &user).await,
    ))
}

async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(store): State<Arc<dyn Store>>) -> Response {
    match tokio::time::timeout(Duration::from_secs(3), store.ping()).await {
        Ok(Ok(())) => (StatusCode::OK, "ready").into_response(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness: database unreachable");
            (StatusCode::SERVICE_UNAVAILABLE, "database unreachable").into_response()
        }
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "database did not answer in 3 s",
        )
            .into_response(),
    }
}

async fn metrics(State(metrics): State<Metrics>) -> Response {
    let mut buf = String::new();
    let families = metrics.registry.gather();
    match prometheus::TextEncoder::new().encode_utf8(&families, &mut buf) {
        Ok(()) => ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], buf).into_response(),
        Err(e) => ApiError::internal(e).into_response(),
    }
}
