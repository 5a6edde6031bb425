//! Small building blocks every view uses: loading, error and empty states, badges, ticking
//! ages and countdowns.

use std::sync::{Arc, Mutex};

use breakglass_shared::{SessionState, Tier};
use leptos::prelude::*;
use time::OffsetDateTime;

use crate::api::ApiError;
use crate::format;
use crate::live::use_clock;

/// A reactive section of a view with its closure type erased. Leptos instantiates its
/// rendering machinery once per closure type; routing every dynamic section through this one
/// type keeps that code in the wasm once (what Leptos' `--cfg erase_components` does
/// globally). Use as `{dynv(move || ...)}`.
pub fn dynv<V: IntoView + 'static>(
    f: impl Fn() -> V + Send + 'static,
) -> Arc<Mutex<dyn FnMut() -> AnyView + Send>> {
    Arc::new(Mutex::new(move || f().into_any()))
}

/// A loading state, announced politely to screen readers.
#[component]
pub fn Loading(
    /// What is loading, e.g. "Loading sessions…".
    #[prop(into)]
    label: String,
) -> impl IntoView {
    view! {
        <p class="loading" role="status" aria-live="polite">
            <span class="spinner" aria-hidden="true"></span>
            {label}
        </p>
    }
}

/// An error state: the server's own message.
#[component]
pub fn ErrorNotice(
    /// The failed call.
    error: ApiError,
    /// Optional words before the message, e.g. "Could not load the sessions".
    #[prop(optional, into)]
    context: Option<String>,
) -> impl IntoView {
    view! {
        <div class="notice notice-error" role="alert">
            {context.map(|c| view! { <strong>{c}": "</strong> })}
            {error.message}
        </div>
    }
}

/// An empty state.
#[component]
pub fn Empty(
    /// What is not there, as a sentence.
    #[prop(into)]
    text: String,
) -> impl IntoView {
    view! { <p class="empty">{text}</p> }
}

/// A session state badge.
#[component]
pub fn StateBadge(
    /// The state.
    state: SessionState,
) -> impl IntoView {
    view! {
        <span class=format::state_class(state) data-state=state.as_str()>
            {format::state_label(state)}
        </span>
    }
}

/// The cluster behind an environment: how it is reached, or, without one, what happens to
/// requests there and what fixes it.
#[component]
pub fn ClusterLine(
    /// The environment's cluster status.
    cluster: breakglass_shared::api::ClusterStatus,
) -> impl IntoView {
    use breakglass_shared::api::ClusterStatus;
    match cluster {
        ClusterStatus::Configured { reached_through } => view! {
            <span class="muted small" data-testid="env-cluster">"cluster: " {reached_through}</span>
        }
        .into_any(),
        ClusterStatus::Unreachable {
            reached_through,
            error,
            fix,
        } => view! {
            <div class="notice notice-error small" data-testid="env-cluster-unreachable">
                <p>"The cluster does not answer (" {reached_through} "): " {error}</p>
                <p>{fix}</p>
            </div>
        }
        .into_any(),
        ClusterStatus::Missing { fix } => view! {
            <p class="notice notice-error small" data-testid="env-no-cluster">
                {fix}
            </p>
        }
        .into_any(),
        ClusterStatus::ApiOnly => view! {
            <span class="notice small" data-testid="env-api-only">
                "This server runs without clusters: requests can be made and approved, but no terminal opens."
            </span>
        }
        .into_any(),
    }
}

/// A tier badge: Ground or Flight.
#[component]
pub fn TierBadge(
    /// The tier.
    tier: Tier,
) -> impl IntoView {
    let (class, text, title) = match tier {
        Tier::Ground => (
            "tier tier-ground",
            "Ground",
            "Ground (dev, staging): requests are approved automatically",
        ),
        Tier::Flight => (
            "tier tier-flight",
            "Flight",
            "Flight (production): a second person approves",
        ),
    };
    view! { <span class=class title=title>{text}</span> }
}

/// "5 min ago", ticking; the exact time in a tooltip.
#[component]
pub fn Age(
    /// When.
    at: OffsetDateTime,
) -> impl IntoView {
    let clock = use_clock();
    view! {
        <time datetime=format::timestamp(at) title=format::timestamp(at)>
            {dynv(move || format::ago(format::age_secs(at, clock.now_secs())))}
        </time>
    }
}

/// Time left until `until`, ticking every second.
#[component]
pub fn TimeLeft(
    /// When access ends.
    until: OffsetDateTime,
) -> impl IntoView {
    let clock = use_clock();
    let left = move || until.unix_timestamp() - clock.now_secs();
    view! {
        <span
            class=move || if left() < 120 { "time-left time-left-low" } else { "time-left" }
            title=format!("until {}", format::timestamp(until))
            data-testid="time-left"
        >
            {dynv(move || format::time_left(left()))}
            " left"
        </span>
    }
}

/// Once the view has caught up (the next animation frames), moves keyboard focus to the first
/// element matching one of `selectors`, so a control that went away with the change it made
/// does not drop focus onto `<body>`. Tries for a few frames: the replacement may render late.
pub fn focus_soon(selectors: Vec<String>) {
    focus_within_frames(selectors, 30, false);
}

/// Like [`focus_soon`], but gives way when something else took the focus in the meantime
/// (a question that opened again in the rebuilt view focuses its own button first).
pub fn refocus_if_lost(selectors: Vec<String>) {
    focus_within_frames(selectors, 30, true);
}

fn focus_within_frames(selectors: Vec<String>, frames: u32, only_if_lost: bool) {
    use wasm_bindgen::JsCast;
    request_animation_frame(move || {
        let Some(doc) = web_sys::window().and_then(|w| w.document()) else {
            return;
        };
        if only_if_lost && !focus_lost() {
            return;
        }
        for sel in &selectors {
            if let Some(el) = doc
                .query_selector(sel)
                .ok()
                .flatten()
                .and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok())
            {
                let _ = el.focus();
                return;
            }
        }
        if frames > 0 {
            focus_within_frames(selectors, frames - 1, only_if_lost);
        }
    });
}

/// Whether keyboard focus is nowhere (on `<body>` or no element), e.g. after the focused
/// control was removed.
pub fn focus_lost() -> bool {
    web_sys::window()
        .and_then(|w| w.document())
        .map(|d| {
            d.active_element()
                .is_none_or(|e| e.tag_name().eq_ignore_ascii_case("body"))
        })
        .unwrap_or(false)
}
