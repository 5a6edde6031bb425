//! `/`: the queue strip, the environments, and the user's own recent sessions.

use breakglass_shared::api::ListQuery;
use leptos::prelude::*;

use crate::api::links;
use crate::auth::use_auth;
use crate::components::common::{dynv, ClusterLine, Empty, TierBadge};
use crate::components::queue_strip::{live_list, ListStates, QueueStrip};
use crate::components::session_list::SessionRows;
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
        {if approver {
            view! { <QueueStrip for_me=true title="Needs my decision"/> }.into_any()
        } else {
            view! { <QueueStrip/> }.into_any()
        }}
        <div class="grid-2">
            <Environments/>
            <MySessions/>
        </div>
        {approver.then(|| view! { <MyDecisions/> })}
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
