//! `/env/:env/ns/:ns/pod/:pod`: the pod's Debug panel — the request form, then the session's
//! live state and its terminal.

use crate::router::use_params;
use breakglass_shared::api::ListQuery;
use breakglass_shared::{Session, SessionState};
use leptos::prelude::*;
use uuid::Uuid;

use crate::api::{self, links};
use crate::auth::use_auth;
use crate::components::breadcrumb::{Breadcrumb, Crumb};
use crate::components::common::{dynv, Loading, TierBadge};
use crate::components::debug_form::DebugForm;
use crate::components::env_lock::EnvLock;
use crate::fetch::fetch;
use crate::format;
use crate::live::use_live;
use crate::pages::chunks::LazySessionPanel;
use crate::title::set_title;

/// A pod's page.
#[component]
pub fn PodPage() -> impl IntoView {
    let params = use_params();
    let key = Memo::new(move |_| {
        (
            params.get("env").unwrap_or_default(),
            params.get("ns").unwrap_or_default(),
            params.get("pod").unwrap_or_default(),
        )
    });
    move || {
        let (env, ns, pod) = key.get();
        view! { <PodView env=env ns=ns pod=pod/> }
    }
}

#[component]
fn PodView(env: String, ns: String, pod: String) -> impl IntoView {
    set_title(&format!("{pod} · {ns}"));
    let auth = use_auth();
    let live = use_live();
    let info = auth.env(&env);

    // The pod as the cluster listing sees it (containers for the form, status).
    let (e, n, p) = (env.clone(), ns.clone(), pod.clone());
    let listing = fetch(move || {
        let (e, n, p) = (e.clone(), n.clone(), p.clone());
        async move {
            api::pods(&e, &n)
                .await
                .map(|pods| pods.into_iter().find(|x| x.name == p))
        }
    });
    let containers = Signal::derive(move || {
        listing
            .get()
            .and_then(Result::ok)
            .flatten()
            .map(|p| p.containers)
    });

    // The user's unfinished session on this pod, if any (also after a reload).
    let current = RwSignal::new(None::<Uuid>);
    let looked_up = RwSignal::new(false);
    let (e, n, p) = (env.clone(), ns.clone(), pod.clone());
    let me = auth.user();
    let ongoing = move |s: &Session| {
        s.environment == e
            && s.namespace == n
            && s.pod == p
            && !s.state.is_final()
            && me.as_ref() == Some(&s.requester)
    };
    let lookup = fetch({
        let env = env.clone();
        let me = auth.user();
        move || {
            let q = ListQuery {
                environment: Some(env.clone()),
                requester: me.clone(),
                limit: Some(50),
                ..Default::default()
            };
            async move { api::list_sessions(&q).await }
        }
    });
    let ongoing2 = ongoing.clone();
    Effect::new(move |_| {
        if let Some(r) = lookup.get() {
            if !looked_up.get_untracked() {
                looked_up.set(true);
                let found = r
                    .ok()
                    .and_then(|page| live.merged(&page.items, &ongoing2).into_iter().next());
                if current.get_untracked().is_none() {
                    current.set(found.map(|s| s.id));
                }
            }
        }
    });
    // A request made elsewhere (another tab) shows up here too.
    Effect::new(move |_| {
        if current.get().is_none() && looked_up.get() {
            if let Some(s) = live.merged(&[], &ongoing).into_iter().next() {
                current.set(Some(s.id));
            }
        }
    });

    // The user's latest request on this pod, when it was refused or failed: opening the pod
    // again says why, above a fresh form, rather than a form as if nothing had happened.
    let (e, n, p) = (env.clone(), ns.clone(), pod.clone());
    let me = auth.user();
    let refused = Memo::new(move |_| {
        let fetched = lookup.get().and_then(Result::ok).map(|page| page.items)?;
        let on_this_pod = |s: &Session| {
            s.environment == e
                && s.namespace == n
                && s.pod == p
                && me.as_ref() == Some(&s.requester)
        };
        live.merged(&fetched, on_this_pod)
            .into_iter()
            .next()
            .filter(|s| {
                matches!(
                    s.state,
                    SessionState::Denied | SessionState::Failed | SessionState::Expired
                )
            })
    });

    let on_created = Callback::new(move |s: Session| current.set(Some(s.id)));
    let (env2, ns2, pod2) = (env.clone(), ns.clone(), pod.clone());
    view! {
        <Breadcrumb
            steps=vec![
                Crumb::new(links::environment(&env), env.clone()),
                Crumb::new(links::namespace(&env, &ns), ns.clone()),
            ]
            current=pod.clone()/>
        <header class="page-head">
            <h1>{pod.clone()}</h1>
            {info.as_ref().map(|i| view! { <TierBadge tier=i.tier/> })}
            <span class="muted">{format!("namespace {ns} in {env}")}</span>
        </header>
        <EnvLock env=env.clone()/>
        <p class="pod-status muted small" data-testid="pod-status">
            {dynv(move || match listing.get() {
                None => "Looking the pod up…".to_string(),
                Some(Err(e)) => format!("Cluster listings unavailable ({}); the pod's containers are not known here.", e.message),
                Some(Ok(None)) => "The cluster does not list this pod (it may be gone, or the name is wrong).".to_string(),
                Some(Ok(Some(p))) => format!(
                    "{}{}; containers: {}{}",
                    p.phase,
                    if p.ready { ", ready" } else { ", not ready" },
                    p.containers.iter().map(|c| c.name.clone()).collect::<Vec<_>>().join(", "),
                    p.owner.map(|o| format!("; owned by {} {}", o.kind, o.name)).unwrap_or_default()
                ),
            })}
        </p>
        <section class="debug-panel" aria-labelledby="debug-title" data-testid="debug-panel">
            <h2 id="debug-title">"Debug panel"</h2>
            {dynv(move || {
                let Some(info) = info.clone() else {
                    return view! {
                        <p class="notice notice-error" role="alert">
                            "There is no environment called “" {env2.clone()} "”, or you hold no permission in it."
                        </p>
                    }
                        .into_any();
                };
                if !looked_up.get() {
                    return view! { <Loading label="Checking for an ongoing session…"/> }.into_any();
                }
                match current.get() {
                    Some(id) => view! {
                        <LazySessionPanel id=id/>
                        <NewRequest id=id current=current/>
                    }
                        .into_any(),
                    // The cluster answered and lists no such pod: nothing to request (the
                    // server would refuse it); a listing that failed leaves that to the server.
                    None if matches!(listing.get(), Some(Ok(None))) => view! {
                        <p class="notice notice-error" role="alert" data-testid="pod-not-found">
                            "Pod not found: the cluster lists no pod “" {pod2.clone()} "” in namespace " {ns2.clone()}
                            ". It may have been replaced; pick it again from "
                            <a href=links::namespace(&env2, &ns2)>"the namespace's pods"</a> "."
                        </p>
                    }
                        .into_any(),
                    None if info.permissions.request => view! {
                        {move || refused.get().map(|s| view! {
                            <p class="notice notice-error" data-testid="last-refused">
                                {format!("Your last request here ({}) was {}. ", format::session_label(s.id), format::state_label(s.state))}
                                {format::outcome(&s)} " "
                                <a href=links::session(s.id)>"Open it"</a>
                            </p>
                        })}
                        <DebugForm env=info namespace=ns2.clone() pod=pod2.clone()
                            containers=containers on_created=on_created/>
                    }
                        .into_any(),
                    None => view! {
                        <p class="notice">"You may not request access in " {env2.clone()} ". Ask an administrator of this environment for request rights."</p>
                    }
                        .into_any(),
                }
            })}
        </section>
    }
}

/// Once the shown session is over, offers a fresh form.
#[component]
fn NewRequest(id: Uuid, current: RwSignal<Option<Uuid>>) -> impl IntoView {
    let live = use_live();
    let over = move || live.get(id).is_some_and(|s| s.state.is_final());
    view! {
        <Show when=over>
            <button class="primary" on:click=move |_| current.set(None) data-testid="new-request">"New request"</button>
        </Show>
    }
}
