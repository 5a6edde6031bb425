//! The environment's Break-glass card: pending approvals, sessions in progress (time left, End
//! and Terminate), reviews due, the history, and guardrail health.

use breakglass_shared::access::Action;
use breakglass_shared::api::{ListQuery, MAX_PAGE};
use breakglass_shared::session::REVIEW_WITHIN;
use breakglass_shared::Session;
use leptos::prelude::*;

use crate::auth::use_auth;
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

/// Glass-broken sessions that finished without a review, soonest deadline first: in one
/// environment (its card) or in all the user sees (home, the Ops wall).
#[component]
pub fn ReviewsDue(
    /// Only this environment.
    #[prop(optional, into)]
    environment: Option<String>,
    /// Leave the section out while nothing is due (pages where it is not the main thing).
    #[prop(optional)]
    hide_empty: bool,
    /// Names of the environments on each row (lists across environments).
    #[prop(optional)]
    show_env: bool,
    /// Only the reviews the signed-in user may make (their home).
    #[prop(optional)]
    for_me: bool,
    /// A card of its own (beside other cards), not a part of one.
    #[prop(optional)]
    card: bool,
) -> impl IntoView {
    let auth = use_auth();
    let env = environment.clone();
    let list = live_list(
        ListQuery {
            environment,
            review_due: Some(true),
            limit: Some(MAX_PAGE),
            ..Default::default()
        },
        move |s| env.as_ref().is_none_or(|e| *e == s.environment) && s.review_due(),
    );
    let items = move || {
        let mut v = list.get().and_then(Result::ok).unwrap_or_default();
        v.retain(|s| !for_me || auth.may(s, Action::Review));
        v.sort_by_key(Session::review_deadline);
        v
    };
    let shown = move || !hide_empty || !items().is_empty();
    view! {
        <Show when=shown>
            <section class=if card { "card reviews-due" } else { "reviews-due" } aria-labelledby="reviews-due" data-testid="reviews-due">
                <h3 id="reviews-due">"Reviews due"</h3>
                <p class="muted small">{format!(
                    "Glass-broken sessions that ended without a review: each is due {} days after its end.",
                    REVIEW_WITHIN.whole_days()
                )}</p>
                <ListStates list=list loading="Loading reviews…" empty="No review is due.">
                    <SessionRows items=Signal::derive(items) show_env=show_env/>
                </ListStates>
            </section>
        </Show>
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
