//! `/`: the queue strip, the environments, and the user's own recent sessions.

use breakglass_shared::api::ListQuery;
use breakglass_shared::{Session, SessionState};
use leptos::prelude::*;

use crate::api::links;
use crate::auth::use_auth;
use crate::components::common::{dynv, ClusterLine, Empty, TierBadge};
use crate::components::queue_strip::{live_list, ListStates, QueueStrip};
use crate::components::session_card::ReviewsDue;
use crate::components::session_list::SessionRows;
use crate::format;
use crate::title::set_title;

/// The start page.
#[component]
pub fn Home() -> impl IntoView {
    set_title("");
    let auth = use_auth();
    // An approver's queue is what they may decide; everyone else sees what is waiting.
    let approver = auth
        .me
        .with_untracked(|m| m.environments.iter().any(|e| e.permissions.approve));
    view! {
        <h1 class="sr-only">"Break-glass"</h1>
        {approver.then(|| view! { <ApprovalsThatFailed/> })}
        {if approver {
            view! { <QueueStrip for_me=true title="Needs my decision"/> }.into_any()
        } else {
            view! { <QueueStrip/> }.into_any()
        }}
        <div class="grid-2">
            <Environments/>
            <MySessions/>
        </div>
        {approver.then(|| view! { <ReviewsDue for_me=true show_env=true hide_empty=true card=true/> })}
        {approver.then(|| view! { <MyDecisions/> })}
    }
}

/// The sessions the signed-in user approved that then failed to start, from the last day: the
/// approver is told (the requester may be waiting on a terminal that will not come, and the
/// failure may need someone with access to the cluster). Live: a failure shows up as it
/// happens.
#[component]
fn ApprovalsThatFailed() -> impl IntoView {
    let auth = use_auth();
    let me = auth.user();
    // Failed, or expired after the approval (the debug container did not start in time).
    let did_not_start =
        |s: &Session| matches!(s.state, SessionState::Failed | SessionState::Expired);
    let list = live_list(
        ListQuery {
            approver: me.clone(),
            limit: Some(20),
            ..Default::default()
        },
        move |s| did_not_start(s) && me.is_some() && s.approver == me,
    );
    let since = (js_sys::Date::now() / 1000.0) as i64 - 24 * 3600;
    let items = move || {
        let mut v: Vec<_> = list
            .get()
            .and_then(Result::ok)
            .unwrap_or_default()
            .into_iter()
            .filter(|s| s.decided_at.is_some() && s.approver.is_some() && did_not_start(s))
            .filter(|s| s.finished_at.is_some_and(|at| at.unix_timestamp() > since))
            .collect();
        v.sort_by_key(|s| std::cmp::Reverse(s.finished_at));
        v
    };
    view! {
        <For each=items key=|s| (s.id, s.version) let:s>
            <p class="notice notice-error" data-testid="approval-failed" data-session=s.id.to_string()>
                <strong>{format!("The session you approved for {} did not start. ", s.requester)}</strong>
                {format!("{}/{} in {} ({}): ", s.namespace, s.pod, s.environment, format::session_label(s.id))}
                {format::outcome(&s)} " "
                <a href=links::session(s.id)>"Open it"</a>
            </p>
        </For>
    }
}

/// The requests the signed-in user approved or denied lately, newest decision first.
#[component]
fn MyDecisions() -> impl IntoView {
    let auth = use_auth();
    let me = auth.user();
    let list = live_list(
        ListQuery {
            approver: me.clone(),
            limit: Some(10),
            ..Default::default()
        },
        move |s| s.decided_at.is_some() && me.is_some() && s.approver == me,
    );
    let items = move || {
        let mut v = list.get().and_then(Result::ok).unwrap_or_default();
        v.sort_by_key(|s| std::cmp::Reverse(s.decided_at));
        v.truncate(10);
        v
    };
    view! {
        <section class="card" aria-labelledby="decisions-title" data-testid="my-decisions">
            <h2 id="decisions-title">"My recent decisions"</h2>
            <ListStates list=list loading="Loading your decisions…"
                empty="You have not approved or denied a request yet.">
                <SessionRows items=Signal::derive(items) show_env=true/>
            </ListStates>
        </section>
    }
}

#[component]
fn Environments() -> impl IntoView {
    let auth = use_auth();
    let envs = move || auth.me.with(|m| m.environments.clone());
    view! {
        <section class="card" aria-labelledby="envs-title" data-testid="environments">
            <h2 id="envs-title">"Environments"</h2>
            {dynv(move || {
                let list = envs();
                if list.is_empty() {
                    view! { <Empty text="You hold no break-glass permission in any environment. Ask your platform team."/> }.into_any()
                } else {
                    view! {
                        <ul class="env-list">
                            {list.into_iter().map(|e| {
                                let p = e.permissions;
                                let rights: Vec<&str> = [
                                    (p.request, "request"),
                                    (p.approve, "approve"),
                                    (p.terminate, "terminate"),
                                    (p.self_approve, "break the glass"),
                                ]
                                .into_iter()
                                .filter_map(|(has, name)| has.then_some(name))
                                .collect();
                                view! {
                                    <li class="env-item">
                                        <a href=links::environment(&e.name) class="env-name">{e.name.clone()}</a>
                                        <TierBadge tier=e.tier/>
                                        <ClusterLine cluster=e.cluster.clone()/>
                                        <span class="muted small">{format!("you may {}", rights.join(", "))}</span>
                                        <span class="muted small">{format!("{}–{} min", e.durations.min_minutes, e.durations.max_minutes)}</span>
                                    </li>
                                }
                            }).collect_view()}
                        </ul>
                    }
                        .into_any()
                }
            })}
        </section>
    }
}

#[component]
fn MySessions() -> impl IntoView {
    let auth = use_auth();
    let me = auth.user();
    let who = me.clone();
    let list = live_list(
        ListQuery {
            requester: me,
            limit: Some(10),
            ..Default::default()
        },
        move |s| who.as_ref() == Some(&s.requester),
    );
    let items = move || {
        let mut v = list.get().and_then(Result::ok).unwrap_or_default();
        v.truncate(10);
        v
    };
    view! {
        <section class="card" aria-labelledby="mine-title" data-testid="my-sessions">
            <h2 id="mine-title">"Your recent sessions"</h2>
            <ListStates list=list loading="Loading your sessions…"
                empty="You have not asked for access yet. Open an environment, pick a pod, and use its Debug panel.">
                <SessionRows items=Signal::derive(items) show_env=true actions=true/>
            </ListStates>
        </section>
    }
}
