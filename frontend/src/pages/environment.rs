//! `/env/:env` and `/env/:env/ns/:ns`: the environment's namespaces and pods, and its
//! Break-glass card.

use crate::router::{use_location, use_params};
use breakglass_shared::validate;
use leptos::prelude::*;

use breakglass_shared::listing::PodInfo;

use crate::api::{self, links};
use crate::auth::use_auth;
use crate::components::breadcrumb::Breadcrumb;
use crate::components::common::{dynv, focus_soon, ClusterLine, Empty, Loading, TierBadge};
use crate::components::env_lock::EnvLock;
use crate::components::session_card::SessionCard;
use crate::fetch::fetch;
use crate::title::set_title;

/// An environment's page.
#[component]
pub fn EnvironmentPage() -> impl IntoView {
    let params = use_params();
    let env = Memo::new(move |_| params.get("env").unwrap_or_default());
    let ns = Memo::new(move |_| params.get("ns"));
    move || {
        let env = env.get();
        view! { <EnvView env=env ns=ns/> }
    }
}

#[component]
fn EnvView(env: String, ns: Memo<Option<String>>) -> impl IntoView {
    set_title(&env);
    let auth = use_auth();
    let Some(info) = auth.env(&env) else {
        return view! {
            <section class="card">
                <h1>{env.clone()}</h1>
                <p class="notice notice-error" role="alert">
                    "There is no environment called “" {env.clone()} "”, or you hold no permission in it. "
                    <a href=links::home()>"See your environments"</a>"."
                </p>
            </section>
        }
        .into_any();
    };
    let e2 = env.clone();
    view! {
        <Breadcrumb steps=Vec::new() current=env.clone()/>
        <header class="page-head">
            <h1>{env.clone()}</h1>
            <TierBadge tier=info.tier/>
        </header>
        <ClusterLine cluster=info.cluster.clone()/>
        <EnvLock env=env.clone() controls=true/>
        <div class="grid-env">
            <Workloads env=env.clone() ns=ns/>
            <SessionCard environment=e2/>
        </div>
    }
    .into_any()
}

/// Namespaces, and the pods of the selected one.
#[component]
fn Workloads(env: String, ns: Memo<Option<String>>) -> impl IntoView {
    let e = env.clone();
    let namespaces = fetch(move || {
        let e = e.clone();
        async move { api::namespaces(&e).await }
    });
    let env_for_list = env.clone();
    let env_for_pods = env.clone();
    view! {
        <section class="card workloads" aria-labelledby="workloads-title" data-testid="workloads">
            <h2 id="workloads-title">"Namespaces and pods"</h2>
            {dynv(move || match namespaces.get() {
                None => view! { <Loading label="Listing namespaces…"/> }.into_any(),
                Some(Err(err)) => view! {
                    <ListingsUnavailable message=err.message/>
                    <OpenPod env=env_for_list.clone() ns=ns.get_untracked().unwrap_or_default()/>
                }
                    .into_any(),
                Some(Ok(list)) if list.is_empty() => view! { <Empty text="This cluster has no namespace you may see."/> }.into_any(),
                Some(Ok(list)) => {
                    let env = env_for_list.clone();
                    view! {
                        <nav class="ns-list" aria-label="Namespaces">
                            <ul>
                                {list.into_iter().map(|n| {
                                    let name = n.name.clone();
                                    let current = move || ns.get().as_deref() == Some(name.as_str());
                                    view! {
                                        <li>
                                            <a href=links::namespace(&env, &n.name)
                                                class={let c = current.clone(); move || if c() { "ns current" } else { "ns" }}
                                                aria-current=move || current().then_some("page")>
                                                {n.name.clone()}
                                                {n.protected.then(|| view! { <span class="ns-protected" title="Protected: break-glass sessions are refused here">" protected"</span> })}
                                            </a>
                                        </li>
                                    }
                                }).collect_view()}
                            </ul>
                        </nav>
                    }
                        .into_any()
                }
            })}
            {dynv(move || {
                let env = env_for_pods.clone();
                match ns.get() {
                    Some(n) => view! { <Pods env=env ns=n/> }.into_any(),
                    None => view! { <p class="muted">"Pick a namespace to see its pods."</p> }.into_any(),
                }
            })}
        </section>
    }
}

/// The listings failed: say so, with the server's reason.
#[component]
fn ListingsUnavailable(
    /// The server's message.
    message: String,
) -> impl IntoView {
    view! {
        <div class="notice" role="status" data-testid="listings-unavailable">
            <strong>"Cluster listings unavailable. "</strong>
            {message}
            <br/>
            <span class="muted small">"You can still open a pod's Debug panel by name below."</span>
        </div>
    }
}

/// Pods of one namespace.
#[component]
fn Pods(env: String, ns: String) -> impl IntoView {
    let (e, n) = (env.clone(), ns.clone());
    let pods = fetch(move || {
        let (e, n) = (e.clone(), n.clone());
        async move { api::pods(&e, &n).await }
    });
    view! {
        <section class="pods" aria-labelledby="pods-title">
            <h3 id="pods-title">"Pods in " {ns.clone()}</h3>
            {dynv(move || match pods.get() {
                None => view! { <Loading label="Listing pods…"/> }.into_any(),
                Some(Err(err)) => view! {
                    <ListingsUnavailable message=err.message/>
                    <OpenPod env=env.clone() ns=ns.clone()/>
                }
                    .into_any(),
                Some(Ok(list)) if list.is_empty() => view! { <Empty text="No pods in this namespace."/> }.into_any(),
                Some(Ok(list)) => view! { <PodTable env=env.clone() ns=ns.clone() pods=list/> }.into_any(),
            })}
        </section>
    }
}

#[component]
fn PodTable(env: String, ns: String, pods: Vec<PodInfo>) -> impl IntoView {
    view! {
        <table class="pod-table">
            <caption class="sr-only">"Pods"</caption>
            <thead>
                <tr><th scope="col">"Pod"</th><th scope="col">"Status"</th><th scope="col">"Containers"</th><th scope="col">"Owner"</th></tr>
            </thead>
            <tbody>
                {pods.into_iter().map(|p| {
                    let ready = p.containers.iter().filter(|c| c.ready).count();
                    let total = p.containers.len();
                    view! {
                        <tr>
                            <th scope="row">
                                <a href=links::pod(&env, &ns, &p.name)>{p.name.clone()}</a>
                                {p.breakglass_copy.then(|| view! { " " <span class="glass">"break-glass copy"</span> })}
                            </th>
                            <td>
                                <span class=if p.ready { "ready ready-yes" } else { "ready ready-no" }>
                                    {p.phase.clone()}
                                    {if p.ready { ", ready" } else { ", not ready" }}
                                </span>
                            </td>
                            <td>
                                <span class="muted small">{format!("{ready}/{total} ready: ")}</span>
                                {p.containers.iter().map(|c| if c.ephemeral { format!("{} (debug)", c.name) } else { c.name.clone() }).collect::<Vec<_>>().join(", ")}
                            </td>
                            <td>{p.owner.map(|o| format!("{} {}", o.kind, o.name)).unwrap_or_else(|| "—".into())}</td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
}

/// Opens a pod's Debug panel by name (when listings are unavailable). Each field's error sits
/// at the field and goes as soon as the field is valid.
#[component]
fn OpenPod(env: String, ns: String) -> impl IntoView {
    let location = use_location();
    let ns_value = RwSignal::new(ns);
    let pod_value = RwSignal::new(String::new());
    let ns_error = RwSignal::new(None::<String>);
    let pod_error = RwSignal::new(None::<String>);
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let (n, p) = (
            namespace_problem(&ns_value.get_untracked()),
            pod_problem(&pod_value.get_untracked()),
        );
        ns_error.set(n.clone());
        pod_error.set(p.clone());
        match (n, p) {
            (None, None) => {
                let (n, p) = (ns_value.get_untracked(), pod_value.get_untracked());
                location.navigate(&links::pod(&env, n.trim(), p.trim()));
            }
            (Some(_), _) => focus_soon(vec!["#open-ns".into()]),
            (None, Some(_)) => focus_soon(vec!["#open-pod".into()]),
        }
    };
    view! {
        <form class="open-pod" on:submit=submit aria-label="Open a pod by name" novalidate>
            <NameField id="open-ns" label="Namespace" value=ns_value error=ns_error problem=namespace_problem/>
            <NameField id="open-pod" label="Pod" value=pod_value error=pod_error problem=pod_problem/>
            <button type="submit">"Open Debug panel"</button>
        </form>
    }
}

/// What is wrong with `value` as a namespace name, if anything.
fn namespace_problem(value: &str) -> Option<String> {
    validate::dns_label("namespace", value.trim())
        .err()
        .map(|e| format!("The namespace {}", e.message))
}

/// What is wrong with `value` as a pod name, if anything.
fn pod_problem(value: &str) -> Option<String> {
    validate::dns_subdomain("pod", value.trim())
        .err()
        .map(|e| format!("The pod name {}", e.message))
}

/// A name field with its error at the field (`aria-invalid` while there is one). The error,
/// set on submit, goes with the edit that makes the value valid.
#[component]
fn NameField(
    id: &'static str,
    label: &'static str,
    value: RwSignal<String>,
    error: RwSignal<Option<String>>,
    problem: fn(&str) -> Option<String>,
) -> impl IntoView {
    let error_id = format!("{id}-error");
    view! {
        <div class="field">
            <label for=id>{label}</label>
            <input id=id type="text" required spellcheck="false" autocomplete="off"
                prop:value=move || value.get()
                on:input=move |ev| {
                    let typed = event_target_value(&ev);
                    if error.with_untracked(Option::is_some) && problem(&typed).is_none() {
                        error.set(None);
                    }
                    value.set(typed);
                }
                aria-invalid=move || error.with(Option::is_some).to_string() aria-describedby=error_id.clone()/>
            <p class="field-error" id=error_id role="alert" hidden=move || error.with(Option::is_none)>
                {move || error.get()}
            </p>
        </div>
    }
}
