//! Guardrail health of an environment's cluster: policies, RBAC and the debug image pin.

use leptos::prelude::*;

use crate::api::{self, ItemStatus};
use crate::components::common::{dynv, Loading};
use crate::fetch::fetch;

/// Whether the cluster's guardrails are in place (from the server's `doctor` checks).
#[component]
pub fn Guardrails(
    /// The environment.
    #[prop(into)]
    environment: String,
) -> impl IntoView {
    let env = environment.clone();
    let report = fetch(move || {
        let env = env.clone();
        async move { api::guardrails(&env).await }
    });
    view! {
        <section class="guardrails" aria-labelledby="guardrails-title" data-testid="guardrails">
            <h3 id="guardrails-title">"Guardrail health"</h3>
            {dynv(move || match report.get() {
                None => view! { <Loading label="Checking the cluster's guardrails…"/> }.into_any(),
                Some(Err(e)) => view! {
                    <p class="notice" data-testid="guardrails-unavailable">
                        <strong>"Guardrail health unavailable. "</strong>
                        {e.message}
                    </p>
                }
                    .into_any(),
                Some(Ok(r)) => view! {
                    <p class=if r.ok { "health health-ok" } else { "health health-bad" }>
                        {if r.ok { "All guardrails in place" } else { "Guardrails missing: sessions are not safe here" }}
                    </p>
                    {r.identity.map(|i| view! { <p class="muted small">"Server identity in the cluster: " <code>{i}</code></p> })}
                    {Some(r.fix).filter(|_| !r.ok).map(|f| view! { <p class="small">"To install or repair everything: " <code>{f}</code></p> })}
                    <CheckList items=r.items/>
                }
                    .into_any(),
            })}
        </section>
    }
}

/// One check as a list item.
fn check_item(item: breakglass_shared::listing::GuardrailItem) -> impl IntoView {
    let ok = item.status == ItemStatus::Ok;
    view! {
        <li class=if ok { "check check-ok" } else { "check check-bad" }>
            <span class="check-icon" aria-hidden="true">{if ok { "✓" } else { "✗" }}</span>
            <span class="check-name">{item.name}</span>
            <span class="check-status">{item.status.as_str()}</span>
            {Some(item.detail).filter(|d| !d.is_empty()).map(|d| view! { <span class="muted small check-detail">{d}</span> })}
            {item.fix.map(|f| view! { <span class="check-fix">"Fix: " <code>{f}</code></span> })}
        </li>
    }
}

/// The checks: the failing ones in the open, the passing ones folded under a summary (a
/// cluster has a score of them, and what passes needs no reading).
#[component]
fn CheckList(
    /// The doctor's checks, in its order.
    items: Vec<breakglass_shared::listing::GuardrailItem>,
) -> impl IntoView {
    let total = items.len();
    let (ok, bad): (Vec<_>, Vec<_>) = items.into_iter().partition(|i| i.status == ItemStatus::Ok);
    let summary = if bad.is_empty() {
        format!("All {total} checks pass")
    } else {
        format!("{} of {total} checks pass", ok.len())
    };
    view! {
        {(!bad.is_empty()).then(|| view! {
            <ul class="checks checks-failing" data-testid="failing-checks">
                {bad.into_iter().map(check_item).collect_view()}
            </ul>
        })}
        <details class="checks-detail" data-testid="passing-checks">
            <summary>{summary}</summary>
            <ul class="checks">{ok.into_iter().map(check_item).collect_view()}</ul>
        </details>
    }
}
