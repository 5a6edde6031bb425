//! Lists of sessions: one row per session, and the filtered, paged history.

use breakglass_shared::api::ListQuery;
use breakglass_shared::{Session, SessionState};
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::api::{self, links, ApiError};
use crate::components::actions::SessionActions;
use crate::components::common::{dynv, Age, Empty, ErrorNotice, Loading, StateBadge, TimeLeft};
use crate::fetch::fetch;
use crate::live::use_live;

/// Page size of the history.
const HISTORY_PAGE: u32 = 20;

/// One session in a list: state, pod, requester, age, time left, links and actions.
#[component]
pub fn SessionRow(
    /// The session.
    session: Session,
    /// Show the environment name (lists across environments).
    #[prop(optional)]
    show_env: bool,
    /// Show the action buttons.
    #[prop(optional)]
    actions: bool,
    /// Show the reason (the wall, where nobody clicks through).
    #[prop(optional)]
    with_reason: bool,
) -> impl IntoView {
    let s = session.clone();
    let recorded = s.active_at.is_some();
    view! {
        <li class="session-row" data-session=s.id.to_string() data-state=s.state.as_str()>
            <div class="sr-main">
                <StateBadge state=s.state/>
                {show_env.then(|| view! { <strong class="sr-env">{s.environment.clone()}</strong> })}
                <a href=links::session(s.id) class="sr-pod">{format!("{}/{}", s.namespace, s.pod)}</a>
                <span class="sr-requester">{s.requester.clone()}</span>
                <span class="muted"><Age at=s.created_at/></span>
                {(s.state == SessionState::Active)
                    .then_some(s.expires_at)
                    .flatten()
                    .map(|until| view! { <TimeLeft until=until/> })}
                {s.glass_broken_by.clone().map(|by| view! {
                    <span class="glass" title=format!("glass broken by {by}")>"glass broken"</span>
                })}
                {s.review_deadline().map(|by| view! { <ReviewDeadline by=by/> })}
                {s.review.as_ref().map(|r| view! {
                    <span class="muted" title=r.notes.clone()>{format!("reviewed: {}", crate::format::verdict_label(r.verdict))}</span>
                })}
                {recorded.then(|| view! {
                    <a class="sr-recording" href=links::recording(s.id, None)>"recording"</a>
                })}
            </div>
            {with_reason.then(|| view! { <p class="sr-reason">{s.reason.clone()}</p> })}
            {actions.then(|| view! { <SessionActions session=session with_end=true/> })}
        </li>
    }
}

/// When a session's review is due, in UTC, marked once it is overdue.
#[component]
pub fn ReviewDeadline(
    /// The deadline ([`Session::review_deadline`]).
    by: time::OffsetDateTime,
) -> impl IntoView {
    let overdue = by.unix_timestamp() < (js_sys::Date::now() / 1000.0) as i64;
    let stamp = crate::format::timestamp(by);
    view! {
        <span class=if overdue { "review-deadline overdue" } else { "review-deadline" } data-testid="review-deadline">
            {if overdue { "review overdue since " } else { "review due by " }}
            <time datetime=stamp.clone()>{stamp.clone()}</time>
        </span>
    }
}

/// Sessions as rows, keyed by id and version: a row is rebuilt only when its session changes
/// (so an open confirmation survives changes to other rows). Every session list uses this one
/// component, which keeps the keyed-list code in the wasm once.
#[component]
pub fn SessionRows(
    /// The sessions, in display order.
    #[prop(into)]
    items: Signal<Vec<Session>>,
    /// Show environment names.
    #[prop(optional)]
    show_env: bool,
    /// Show action buttons.
    #[prop(optional)]
    actions: bool,
    /// Show each session's reason.
    #[prop(optional)]
    with_reason: bool,
) -> impl IntoView {
    view! {
        <ul class="session-list">
            <For
                each=move || items.get()
                key=|s| (s.id, s.version)
                children=move |s| view! { <SessionRow session=s show_env=show_env actions=actions with_reason=with_reason/> }
            />
        </ul>
    }
}

/// The history of an environment, filterable by state and requester, newest first, paged.
#[component]
pub fn History(
    /// The environment.
    #[prop(into)]
    environment: String,
) -> impl IntoView {
    let live = use_live();
    let state_filter = RwSignal::new(None::<SessionState>);
    let requester_input = RwSignal::new(String::new());
    let requester_filter = RwSignal::new(None::<String>);
    let older = RwSignal::new(Vec::<Session>::new());
    // The cursor after the last older page loaded; `None` until one is.
    let older_cursor = RwSignal::new(None::<Option<String>>);
    let more_error = RwSignal::new(None::<ApiError>);
    let loading_more = RwSignal::new(false);

    let env = environment.clone();
    let query = move || ListQuery {
        environment: Some(env.clone()),
        state: state_filter.get(),
        requester: requester_filter.get(),
        limit: Some(HISTORY_PAGE),
        ..Default::default()
    };
    let first = fetch({
        let query = query.clone();
        move || {
            live.epoch.track();
            let q = query();
            older.set(vec![]);
            older_cursor.set(None);
            async move { api::list_sessions(&q).await }
        }
    });
    let next_cursor = Memo::new(move |_| match older_cursor.get() {
        Some(after_older) => after_older,
        None => first.get().and_then(Result::ok).and_then(|p| p.next_cursor),
    });
    let env = environment.clone();
    let keep = move |s: &Session| {
        s.environment == env
            && state_filter.with(|f| f.is_none_or(|st| st == s.state))
            && requester_filter.with(|r| r.as_ref().is_none_or(|r| *r == s.requester))
    };
    let items = Memo::new(move |_| {
        first.get().map(|r| {
            r.map(|page| {
                let mut all = page.items;
                all.extend(older.get());
                live.merged(&all, &keep)
            })
        })
    });
    let load_more = move |_| {
        let Some(cursor) = next_cursor.get_untracked() else {
            return;
        };
        let mut q = query();
        q.cursor = Some(cursor);
        loading_more.set(true);
        spawn_local(async move {
            match api::list_sessions(&q).await {
                // The list may have been left meanwhile: only `try_` writes after the await.
                Ok(page) => {
                    older.try_update(|o| o.extend(page.items));
                    older_cursor.try_set(Some(page.next_cursor));
                    more_error.try_set(None);
                }
                Err(e) => {
                    more_error.try_set(Some(e));
                }
            }
            loading_more.try_set(false);
        });
    };
    let apply_requester = move || {
        let r = requester_input.get_untracked().trim().to_string();
        requester_filter.set((!r.is_empty()).then_some(r));
    };
    let id = format!("history-{environment}");

    view! {
        <section class="history" aria-labelledby=id.clone()>
            <h3 id=id.clone()>"History"</h3>
            <form class="filters" role="search" aria-label="Filter the history"
                on:submit=move |ev| { ev.prevent_default(); apply_requester() }>
                <label>
                    "State "
                    <select on:change=move |ev| state_filter.set(SessionState::parse(&event_target_value(&ev)))>
                        <option value="">"any"</option>
                        {SessionState::ALL
                            .into_iter()
                            .map(|s| view! { <option value=s.as_str()>{crate::format::state_label(s)}</option> })
                            .collect_view()}
                    </select>
                </label>
                <label>
                    "Requester "
                    <input type="search" placeholder="user name" bind:value=requester_input
                        on:change=move |_| apply_requester()/>
                </label>
                <button type="submit">"Filter"</button>
            </form>
            {dynv(move || match items.get() {
                None => view! { <Loading label="Loading the history…"/> }.into_any(),
                Some(Err(e)) => view! { <ErrorNotice error=e/> }.into_any(),
                Some(Ok(v)) if v.is_empty() => view! { <Empty text="No sessions match."/> }.into_any(),
                Some(Ok(_)) => view! {
                    <SessionRows items=Signal::derive(move || items.get().and_then(Result::ok).unwrap_or_default())/>
                }
                    .into_any(),
            })}
            {dynv(move || next_cursor.get().map(|_| {
                let load_more = load_more.clone();
                view! { <button on:click=load_more disabled=loading_more>"Older sessions"</button> }
            }))}
            {dynv(move || more_error.get().map(|e| view! { <ErrorNotice error=e/> }))}
        </section>
    }
}
