//! `/sessions/:id/recording?t=SECONDS`: the recording player.

use crate::router::{use_location, use_params};
use breakglass_shared::session::short_id;
use leptos::prelude::*;
use uuid::Uuid;

use crate::api::links;
use crate::components::breadcrumb::{steps_to_pod, Breadcrumb, Crumb};
use crate::components::common::dynv;
use crate::components::player::Player;
use crate::components::session_panel::live_detail;
use crate::format::session_label;
use crate::title::set_title;

/// A recording's page.
#[component]
pub fn RecordingPage() -> impl IntoView {
    let params = use_params();
    let id = Memo::new(move |_| params.get("id").and_then(|s| Uuid::parse_str(&s).ok()));
    // Read once: the player updates the URL's moment link itself, without reloading.
    let start = use_location()
        .query_untracked("t")
        .and_then(|t| crate::format::parse_seconds(&t));
    move || {
        match id.get() {
        Some(id) => view! { <RecordingView id=id start=start/> }.into_any(),
        None => view! {
            <p class="notice notice-error" role="alert">"This is not a session address (session ids are UUIDs)."</p>
        }
        .into_any(),
    }
    }
}

#[component]
fn RecordingView(id: Uuid, start: Option<f64>) -> impl IntoView {
    set_title(&format!("Recording {}", short_id(&id)));
    let (_, session) = live_detail(id);
    // A memo, so the player is not rebuilt on every live update of the session.
    let nothing =
        Memo::new(move |_| session.with(|s| s.as_ref().and_then(crate::format::nothing_recorded)));
    view! {
        <Breadcrumb
            steps=Signal::derive(move || {
                let mut steps = session.with(|s| steps_to_pod(s.as_ref()));
                steps.push(Crumb::new(links::session(id), session_label(id)));
                steps
            })
            current="recording"/>
        <h1 class="page-title">
            "Recording"
            {dynv(move || session.get().map(|s| format!(" of {}/{} in {}", s.namespace, s.pod, s.environment)))}
        </h1>
        {dynv(move || session.get().map(|s| view! {
            <p class="muted">{format!("{} — {}", s.requester, s.reason)}</p>
        }))}
        {move || match nothing.get() {
            Some(why) => view! { <p class="notice" data-testid="nothing-recorded">{why}</p> }.into_any(),
            None => view! { <Player id=id start=start.unwrap_or_default()/> }.into_any(),
        }}
    }
}
