//! The environment's Break-glass card: pending approvals, sessions in progress (time left, End
//! and Terminate), reviews due, the history, and guardrail health.

use breakglass_shared::api::{ListQuery, MAX_PAGE};
use leptos::prelude::*;

use crate::components::guardrails::Guardrails;
use crate::components::queue_strip::{live_list, ListStates, QueueStrip};
use crate::components::session_list::{History, SessionRows};

/// Sessions in progress, live (one environment, or all).
#[component]
pub fn ActiveSessions(
    /// Only this environment.
    #[prop(optional, into)]
    environment: Option<String>,
    /// Show environment names (lists across environments).
    #[prop(optional)]
    show_env: bool,
    /// Heading text.
    #[prop(into)]
    title: String,
    /// Wall-display size.
    #[prop(optional)]
    big: bool,
) -> impl IntoView {
    let env = environment.clone();
    let list = live_list(
        ListQuery {
            environment,
            in_progress: Some(true),
            limit: Some(MAX_PAGE),
            ..Default::default()
        },
        move |s| s.state.is_in_progress() && env.as_ref().is_none_or(|e| *e == s.environment),
    );
    let items = move || list.get().and_then(Result::ok).unwrap_or_default();
    // The titles are ASCII words.
    let id = format!("active-{}", title.replace(' ', "-").to_ascii_lowercase());
    view! {
        <section class=if big { "active-sessions active-big" } else { "active-sessions" }
            aria-labelledby=id.clone() data-testid="active-sessions">
            <h3 id=id.clone()>{title}</h3>
            <ListStates list=list loading="Loading sessions…" empty="No session is in progress.">
                <SessionRows items=Signal::derive(items) show_env=show_env actions=!big with_reason=big/>
            </ListStates>
        </section>
    }
}

/// Glass-broken sessions that finished without a review.
#[component]
fn ReviewsDue(
    /// The environment.
    environment: String,
) -> impl IntoView {
    let env = environment.clone();
    let list = live_list(
        ListQuery {
            environment: Some(environment),
            review_due: Some(true),
            limit: Some(MAX_PAGE),
            ..Default::default()
        },
        move |s| s.environment == env && s.review_due(),
    );
    let items = move || list.get().and_then(Result::ok).unwrap_or_default();
    view! {
        <section class="reviews-due" aria-labelledby="reviews-due">
            <h3 id="reviews-due">"Reviews due"</h3>
            <p class="muted small">"Glass-broken sessions that ended without a review."</p>
            <ListStates list=list loading="Loading reviews…" empty="No review is due.">
                <SessionRows items=Signal::derive(items)/>
            </ListStates>
        </section>
    }
}

/// The Break-glass card of one environment.
#[component]
pub fn SessionCard(
    /// The environment.
    #[prop(into)]
    environment: String,
) -> impl IntoView {
    view! {
        <section class="card breakglass-card" aria-labelledby="bg-card-title" data-testid="breakglass-card">
            <h2 id="bg-card-title">"Break-glass"</h2>
            <QueueStrip environment=environment.clone() title="Pending approvals"/>
            <ActiveSessions environment=environment.clone() title="In progress"/>
            <ReviewsDue environment=environment.clone()/>
            <History environment=environment.clone()/>
            <Guardrails environment=environment/>
        </section>
    }
}
