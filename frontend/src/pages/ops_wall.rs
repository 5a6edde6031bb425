//! `/ops-wall`: a wall display — the queue strip and sessions in progress, large, live.

use leptos::prelude::*;

use crate::api::links;
use crate::auth::use_auth;
use crate::components::common::dynv;
use crate::components::queue_strip::QueueStrip;
use crate::components::session_card::{ActiveSessions, ReviewsDue};
use crate::live::{use_clock, use_live, StreamStatus};
use crate::title::set_title;

/// The wall display.
#[component]
pub fn OpsWall() -> impl IntoView {
    set_title("Ops wall");
    let clock = use_clock();
    let live = use_live();
    let auth = use_auth();
    let time = move || {
        let d = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(clock.0.get()));
        format!("{:02}:{:02}", d.get_hours(), d.get_minutes())
    };
    view! {
        <div class="wall-page" data-testid="ops-wall">
            <header class="wall-head">
                <a href=links::home() class="wall-home">"Break-glass"</a>
                <h1>"Ops wall"</h1>
                <span class=move || if live.status.get() == StreamStatus::Open { "live-dot live-on" } else { "live-dot live-wait" }>
                    {dynv(move || if live.status.get() == StreamStatus::Open { "live" } else { "reconnecting…" })}
                </span>
                <span class="wall-user" data-testid="wall-user">
                    {auth.user().map(|u| format!("signed in as {u}"))}
                </span>
                <time class="wall-clock">{time}</time>
            </header>
            <div class="wall-grid">
                <QueueStrip big=true/>
                <ActiveSessions show_env=true big=true title="In progress"/>
                <ReviewsDue show_env=true hide_empty=true/>
            </div>
        </div>
    }
}
