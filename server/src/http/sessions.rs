//! `/sessions`: create, list, get, and every person-made change. The rules of each change are
//! the lifecycle's; a handler checks who may ask, builds the event and maps the answer.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use breakglass_shared::access::Action;
use breakglass_shared::api::{
    CreateSessionRequest, DenyRequest, EndRequest, ListQuery, ReviewRequest, SessionDetail,
    SessionPage, DEFAULT_PAGE, MAX_PAGE,
};
use breakglass_shared::session::NewSession;
use breakglass_shared::validate;
use breakglass_shared::{Actor, ErrorBody, PermissionSet, Session, SessionEvent, SessionState};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::auth::CurrentUser;
use crate::config::Config;
use crate::error::ApiError;
use crate::http::extract::{ApiJson, ApiQuery, OptionalJson, SessionId};
use crate::lifecycle::Lifecycle;
use crate::store::{ListFilter, Store};

fn actor(user: &CurrentUser, permissions: PermissionSet) -> Actor {
    Actor::User {
        name: user.name.clone(),
        permissions,
    }
}

/// Create a request. Ground requests are approved at once; Flight ones wait for a second person.
#[utoipa::path(post, path = "/api/breakglass/sessions", tag = "sessions",
    request_body = CreateSessionRequest,
    responses(
        (status = 201, description = "Created", body = Session),
        (status = 400, description = "A field is invalid; `field` names it", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "No request permission there, or CSRF", body = ErrorBody),
        (status = 423, description = "The environment or the requester is locked; the message gives the lock's reason", body = ErrorBody),
    ))]
pub async fn create(
    State(config): State<Arc<Config>>,
    State(lifecycle): State<Arc<Lifecycle>>,
    user: CurrentUser,
    ApiJson(req): ApiJson<CreateSessionRequest>,
) -> Result<(StatusCode, Json<Session>), ApiError> {
    // An environment the caller holds nothing in is answered as an unknown one: its name is
    // not theirs to learn.
    let env = config
        .environment(&req.environment)
        .filter(|e| e.permissions_of(&user.name, &user.groups).any())
        .ok_or_else(|| {
            ApiError::invalid(
                "environment",
                format!(
                    "unknown environment `{}`: pick one listed on the home page",
                    req.environment
                ),
            )
        })?;
    if !env.permissions_of(&user.name, &user.groups).request {
        return Err(ApiError::forbidden(format!(
            "you need the tower.breakglass.request permission in {}",
            env.name
        )));
    }
    let bounds = config.durations.for_tier(env.tier);
    req.validate(&bounds)?;
    if env.protected_namespaces.contains(&req.namespace) {
        return Err(ApiError::invalid(
            "namespace",
            format!(
                "namespace: `{}` is protected in {}: no session may touch it (protected there: {})",
                req.namespace,
                env.name,
                env.protected_namespaces.join(", ")
            ),
        ));
    }
    // This message has always gone out without the "recycle: " prefix other field errors carry.
    validate::recycle(env.tier, req.recycle).map_err(|e| ApiError::invalid(e.field, e.message))?;
    let new = NewSession {
        environment: env.name.clone(),
        tier: env.tier,
        namespace: req.namespace,
        pod: req.pod,
        target_container: req.target_container,
        mode: req.mode,
        reason: req.reason.trim().to_string(),
        ticket: req.ticket,
        duration_minutes: req.duration_minutes.unwrap_or(bounds.default_minutes),
        recycle: req.recycle,
        requester: user.name.clone(),
        quorum: env.quorum,
        extension_limits: bounds.extension_limits(),
    };
    let s = lifecycle.create(new, OffsetDateTime::now_utc()).await?;
    Ok((StatusCode::CREATED, Json(s)))
}

/// List sessions the caller may see, newest first.
#[utoipa::path(get, path = "/api/breakglass/sessions", tag = "sessions",
    params(ListQuery),
    responses(
        (status = 200, description = "A page of sessions", body = SessionPage),
        (status = 400, description = "A parameter is invalid; `field` names it", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
    ))]
pub async fn list(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    user: CurrentUser,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<SessionPage>, ApiError> {
    let limit = q.limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(ApiError::invalid(
            "limit",
            format!("limit: must be between 1 and {MAX_PAGE}"),
        ));
    }
    // An empty `cursor=` (a form field left blank) means the first page.
    let before = match q.cursor.as_deref().filter(|c| !c.is_empty()) {
        Some(c) => Some(Uuid::parse_str(c).map_err(|_| {
            ApiError::invalid(
                "cursor",
                "cursor: pass the next_cursor of the previous page",
            )
        })?),
        None => None,
    };
    let mut filter = ListFilter {
        environment: q.environment.clone(),
        state: q.state,
        requester: q.requester.clone(),
        in_progress: q.in_progress == Some(true),
        review_due: q.review_due == Some(true),
        approver: q.approver.clone(),
        environments_in: Some(user.visible_environments(&config)),
        before,
        limit: limit + 1,
        ..Default::default()
    };
    if q.awaiting_me == Some(true) {
        if q.state.is_some_and(|s| s != SessionState::PendingApproval) {
            return Ok(Json(SessionPage {
                items: vec![],
                next_cursor: None,
            }));
        }
        filter.state = Some(SessionState::PendingApproval);
        filter.requester_not = Some(user.name.clone());
        filter.environments_in = Some(
            config
                .environments
                .iter()
                .filter(|e| e.permissions_of(&user.name, &user.groups).approve)
                .map(|e| e.name.clone())
                .collect(),
        );
    }
    let mut items = store.list(&filter).await?;
    let next_cursor = if items.len() > limit as usize {
        items.truncate(limit as usize);
        items.last().map(|s| s.id.to_string())
    } else {
        None
    };
    Ok(Json(SessionPage { items, next_cursor }))
}

/// One session with its events and, while it waits, who may approve it.
#[utoipa::path(get, path = "/api/breakglass/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Session id (UUID)")),
    responses(
        (status = 200, description = "The session", body = SessionDetail),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 404, description = "No such session (or not visible to you)", body = ErrorBody),
    ))]
pub async fn get(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    user: CurrentUser,
    SessionId(id): SessionId,
) -> Result<Json<SessionDetail>, ApiError> {
    // The events are read alongside the row, on another connection: one round trip to the
    // database on the way instead of two (BENCHMARKS.md, "A million sessions"). They are
    // dropped unread when the caller may not see the session.
    let (found, events) = tokio::join!(
        user.session(&config, store.as_ref(), id, Action::View),
        store.events(id)
    );
    let (session, _) = found?;
    // Read apart, the two may straddle a change.
    let events = crate::store::events_as_of(store.as_ref(), &session, events?).await?;
    let approvers = if session.state == SessionState::PendingApproval {
        approvers_of(&config, &session)
    } else {
        vec![]
    };
    Ok(Json(SessionDetail {
        session,
        events,
        approvers,
    }))
}

/// Who may approve `s`: configured users and groups holding `approve`, minus the requester.
fn approvers_of(config: &Config, s: &Session) -> Vec<String> {
    let Some(env) = config.environment(&s.environment) else {
        return vec![];
    };
    let Some(h) = env.permissions.get(&breakglass_shared::Permission::Approve) else {
        return vec![];
    };
    let mut out: Vec<String> = h
        .users
        .iter()
        .filter(|u| **u != s.requester)
        .cloned()
        .collect();
    // Demo users are known by name, so list them rather than their groups.
    for u in &config.dev_users {
        if config.dev_login
            && u.name != s.requester
            && u.groups.iter().any(|g| h.groups.contains(g))
            && !out.contains(&u.name)
        {
            out.push(u.name.clone());
        }
    }
    out.extend(h.groups.iter().map(|g| format!("group {g}")));
    out
}

/// The caller as the actor of `action` on session `id`, if [`Session::may`] lets them do it:
/// the state machine applies the same rule to the event, but a refusal here comes before the
/// write, and a session they may not see answers 404.
pub(crate) async fn actor_for(
    config: &Config,
    store: &dyn Store,
    user: &CurrentUser,
    id: Uuid,
    action: Action,
) -> Result<Actor, ApiError> {
    let (_, perms) = user.session(config, store, id, action).await?;
    Ok(actor(user, perms))
}

macro_rules! transition_doc {
    ($name:ident, $path:literal, $summary:literal) => {
        #[doc = $summary]
        #[utoipa::path(post, path = $path, tag = "sessions",
            params(("id" = String, Path, description = "Session id (UUID)")),
            responses(
                (status = 200, description = "The session after the change", body = Session),
                (status = 401, description = "Not signed in", body = ErrorBody),
                (status = 403, description = "Not allowed for you (or CSRF); or, where the environment asks for a security key (approve, break the glass, terminate), no fresh assertion for this action on this session in the `breakglass-step-up` header (`step_up_required`)", body = ErrorBody),
                (status = 404, description = "No such session", body = ErrorBody),
                (status = 409, description = "Wrong state (`state` names it) or a lost race", body = ErrorBody),
                (status = 423, description = "Locked (approve, break the glass): the message gives the lock's reason", body = ErrorBody),
            ))]
        pub async fn $name(
            State(config): State<Arc<Config>>,
            State(store): State<Arc<dyn Store>>,
            State(lifecycle): State<Arc<Lifecycle>>,
            State(step_up): State<Arc<crate::step_up::StepUp>>,
            user: CurrentUser,
            SessionId(id): SessionId,
            headers: axum::http::HeaderMap,
        ) -> Result<Json<Session>, ApiError> {
            let action = transition_doc!(@action $name);
            let (session, perms) = crate::http::step_up::confirmed_session(
                &config, store.as_ref(), &step_up, &user, id, action, &headers,
            )
            .await?;
            let by = actor(&user, perms);
            // The groups an approval can count through, for a quorum of distinct groups.
            let groups = config
                .environment(&session.environment)
                .map(|e| e.approving_groups(&user.groups))
                .unwrap_or_default();
            let next = lifecycle.act(id, transition_doc!(@event $name, by, groups)).await?;
            Ok(Json(next))
        }
    };
    (@event approve, $by:ident, $groups:ident) => { SessionEvent::Approve { by: $by, groups: $groups } };
    (@event break_glass, $by:ident, $groups:ident) => {{ drop($groups); SessionEvent::BreakGlass { by: $by } }};
    (@event terminate, $by:ident, $groups:ident) => {{ drop($groups); SessionEvent::Terminate { by: $by } }};
    (@action approve) => { Action::Approve };
    (@action break_glass) => { Action::BreakGlass };
    (@action terminate) => { Action::Terminate };
}

transition_doc!(
    approve,
    "/api/breakglass/sessions/{id}/approve",
    "Approve someone else's Flight request (needs `approve`)."
);
transition_doc!(
    break_glass,
    "/api/breakglass/sessions/{id}/break-glass",
    "Activate a Flight request without a second person (needs `self`)."
);
/// End (or, before activation, withdraw) your own session; with `{"recycle": true}` its pod
/// is recycled at the end by the recycle rule (live mode, on Ground).
#[utoipa::path(post, path = "/api/breakglass/sessions/{id}/end", tag = "sessions",
    params(("id" = String, Path, description = "Session id (UUID)")),
    request_body(content = Option<EndRequest>, description = "Optional; without it nothing is recycled"),
    responses(
        (status = 200, description = "The session after the change", body = Session),
        (status = 400, description = "Recycling asked where it cannot be (`field`: `recycle`)", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Not yours (or CSRF)", body = ErrorBody),
        (status = 404, description = "No such session", body = ErrorBody),
        (status = 409, description = "Wrong state (`state` names it) or a lost race", body = ErrorBody),
    ))]
// One extractor an argument, as axum handlers have them.
#[allow(clippy::too_many_arguments)]
pub async fn end(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    State(lifecycle): State<Arc<Lifecycle>>,
    State(step_up): State<Arc<crate::step_up::StepUp>>,
    user: CurrentUser,
    SessionId(id): SessionId,
    headers: axum::http::HeaderMap,
    OptionalJson(req): OptionalJson<EndRequest>,
) -> Result<Json<Session>, ApiError> {
    let (_, perms) = crate::http::step_up::confirmed_session(
        &config,
        store.as_ref(),
        &step_up,
        &user,
        id,
        Action::End,
        &headers,
    )
    .await?;
    let by = actor(&user, perms);
    let event = SessionEvent::End {
        by,
        recycle: req.recycle,
    };
    Ok(Json(lifecycle.act(id, event).await?))
}
transition_doc!(
    terminate,
    "/api/breakglass/sessions/{id}/terminate",
    "End anyone's session (needs `terminate`)."
);

/// Deny someone else's Flight request, with a reason for the requester.
#[utoipa::path(post, path = "/api/breakglass/sessions/{id}/deny", tag = "sessions",
    params(("id" = String, Path, description = "Session id (UUID)")),
    request_body = DenyRequest,
    responses(
        (status = 200, description = "Denied", body = Session),
        (status = 400, description = "Missing reason", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Not allowed for you (or CSRF)", body = ErrorBody),
        (status = 404, description = "No such session", body = ErrorBody),
        (status = 409, description = "Wrong state or a lost race", body = ErrorBody),
    ))]
pub async fn deny(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    State(lifecycle): State<Arc<Lifecycle>>,
    user: CurrentUser,
    SessionId(id): SessionId,
    ApiJson(req): ApiJson<DenyRequest>,
) -> Result<Json<Session>, ApiError> {
    let deny = |by, reason| SessionEvent::Deny { by, reason };
    refuse(
        &config,
        store.as_ref(),
        &lifecycle,
        &user,
        id,
        &req,
        Action::Deny,
        deny,
    )
    .await
}

/// A refusal with a reason for the requester (`action` by `user` on session `id`), as `event`
/// makes it of the caller and the trimmed reason: a request's, or more time's.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn refuse(
    config: &Config,
    store: &dyn Store,
    lifecycle: &Lifecycle,
    user: &CurrentUser,
    id: Uuid,
    req: &DenyRequest,
    action: Action,
    event: impl FnOnce(Actor, String) -> SessionEvent,
) -> Result<Json<Session>, ApiError> {
    validate::note("reason", &req.reason, true)?;
    let by = actor_for(config, store, user, id, action).await?;
    let next = lifecycle
        .act(id, event(by, req.reason.trim().to_string()))
        .await?;
    Ok(Json(next))
}

/// Record a review of a finished session (needs `approve`; not your own).
#[utoipa::path(post, path = "/api/breakglass/sessions/{id}/review", tag = "sessions",
    params(("id" = String, Path, description = "Session id (UUID)")),
    request_body = ReviewRequest,
    responses(
        (status = 200, description = "Reviewed", body = Session),
        (status = 400, description = "A field is invalid", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Not allowed for you (or CSRF)", body = ErrorBody),
        (status = 404, description = "No such session", body = ErrorBody),
        (status = 409, description = "Not finished, or already reviewed", body = ErrorBody),
    ))]
pub async fn review(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    State(lifecycle): State<Arc<Lifecycle>>,
    user: CurrentUser,
    SessionId(id): SessionId,
    ApiJson(req): ApiJson<ReviewRequest>,
) -> Result<Json<Session>, ApiError> {
    validate::review_notes(req.verdict, &req.notes)?;
    let (_, perms) = user
        .session(&config, store.as_ref(), id, Action::Review)
        .await?;
    let notes = req.notes.trim();
    let next = lifecycle
        .review(id, &user.name, &perms, req.verdict, notes)
        .await?;
    Ok(Json(next))
}
