//! The queue strip: requests waiting for approval across environments (or one), oldest first,
//! with approve and deny inline for those allowed. Kept current by the live feed.

use breakglass_shared::api::{ListQuery, MAX_PAGE};
use breakglass_shared::{Session, SessionState};
use leptos::prelude::*;

use crate::api::{self, links, ApiError};
use crate::app::use_auth;
use crate::components::actions::SessionActions;
use crate::components::common::{dynv, Age, Empty, ErrorNotice, Loading, TierBadge};
use crate::fetch::fetch;
use crate::live::use_live;

/// Sessions matching `query` (fetched again whenever the live feed had a gap), merged with the
/// live feed and filtered by `keep`, newest first.
pub fn live_list(
    query: ListQuery,
    keep: impl Fn(&Session) -> bool + Send + Sync + 'static,
) -> Memo<Option<Result<Vec<Session>, ApiError>>> {
    let live = use_live();
    let res = fetch(move || {
        live.epoch.track();
        let q = query.clone();
        async move { api::list_sessions(&q).await }
    });
    Memo::new(move |_| {
        res.get()
            .map(|r| r.map(|page| live.merged(&page.items, &keep)))
    })
}

/// Renders the loading, error and empty states of a [`live_list`]; `children` shows the rest.
#[component]
pub fn ListStates(
    /// The list.
    list: Memo<Option<Result<Vec<Session>, ApiError>>>,
    /// What is loading.
    #[prop(into)]
    loading: String,
    /// The empty state's sentence.
    #[prop(into)]
    empty: String,
    /// The list itself (rendered while there are items).
    children: ChildrenFn,
) -> impl IntoView {
    move || match list.get() {
        None => view! { <Loading label=loading.clone()/> }.into_any(),
        Some(Err(e)) => view! { <ErrorNotice error=e/> }.into_any(),
        Some(Ok(v)) if v.is_empty() => view! { <Empty text=empty.clone()/> }.into_any(),
        Some(Ok(_)) => children().into_any(),
    }
}

/// Requests waiting for approval.
#[component]
pub fn QueueStrip(
    /// Only this environment (all visible ones when absent).
    #[prop(optional, into)]
    environment: Option<String>,
    /// Wall-display size.
    #[prop(optional)]
    big: bool,
    /// Heading level 2 text.
    #[prop(optional, into)]
    title: Option<String>,
) -> impl IntoView {
    let env = environment.clone();
    let list = live_list(
        ListQuery {
            environment: environment.clone(),
            state: Some(SessionState::PendingApproval),
            limit: Some(MAX_PAGE),
            ..Default::default()
        },
        move |s| {
            s.state == SessionState::PendingApproval
                && env.as_ref().is_none_or(|e| *e == s.environment)
        },
    );
    // The queue is served oldest first: the longest wait is the most urgent.
    let items = move || {
        let mut v = list.get().and_then(Result::ok).unwrap_or_default();
        v.reverse();
        v
    };
    let count = move || {
        list.get()
            .and_then(Result::ok)
            .map(|v| v.len())
            .filter(|n| *n > 0)
    };
    let heading_id = format!("queue-{}", environment.as_deref().unwrap_or("all"));
    let labelled_by = heading_id.clone();
    view! {
        <section
            class=if big { "queue-strip queue-strip-big" } else { "queue-strip card" }
            aria-labelledby=labelled_by
            data-testid="queue-strip"
        >
            <h2 id=heading_id>
                {title.unwrap_or_else(|| "Waiting for approval".into())}
                {dynv(move || count().map(|n| view! { <span class="count" aria-label=format!("{n} waiting")>{n}</span> }))}
            </h2>
            <ListStates list=list loading="Loading the queue…" empty="Nothing is waiting for approval.">
                <ul class="queue">
                    <For
                        each=items
                        key=|s| (s.id, s.version)
                        children=move |s| view! { <QueueItem session=s big=big/> }
                    />
                </ul>
            </ListStates>
        </section>
    }
}

/// One waiting request.
#[component]
fn QueueItem(
    /// The request.
    session: Session,
    /// Wall-display size.
    big: bool,
) -> impl IntoView {
    let auth = use_auth();
    let mine = auth.is_requester(&session);
    let s = session.clone();
    view! {
        <li class=if big { "queue-item queue-item-big" } else { "queue-item" }
            data-testid="queue-item" data-session=s.id.to_string()>
            <div class="qi-main">
                <div class="qi-where">
                    <TierBadge tier=s.tier/>
                    <strong>{s.environment.clone()}</strong>
                    <a href=links::session(s.id) class="qi-pod">{format!("{}/{}", s.namespace, s.pod)}</a>
                </div>
                <div class="qi-meta muted">
                    <span class="qi-requester">{s.requester.clone()}</span>
                    " · asked " <Age at=s.created_at/>
                    {format!(" · {} min · {}", s.duration_minutes, s.mode.as_str())}
                    {s.target_container.clone().map(|c| format!(" · sees {c}"))}
                </div>
                <p class="qi-reason">{s.reason.clone()}</p>
                {s.ticket.clone().map(|t| view! {
                    <a class="qi-ticket" href=t.clone() target="_blank" rel="noopener noreferrer">{t.clone()}</a>
                })}
            </div>
            <div class="qi-actions">
                {mine.then(|| view! { <span class="muted">"your request"</span> })}
                <SessionActions session=session with_end=false/>
            </div>
        </li>
    }
}
