//! The pages that load on first use, each a split point (see `components/chunk.rs`, which
//! says why and how): a session's page, the Ops wall, the recording search, the recording
//! player's page, an environment's (or namespace's) page, and the admin pages (account,
//! deliveries); and the session panel of a pod's page. Home and the rest of a pod's page (the
//! Debug panel's form) are in the first load.

use leptos::prelude::*;
use leptos::wasm_split::wasm_split;

use crate::components::chunk::{built, on_first_use, Chunk};
use uuid::Uuid;

#[wasm_split(ops_wall, wasm_split_path = ::leptos::wasm_split, fallible, preload(ops_wall_preload))]
fn ops_wall_chunk() -> Chunk {
    built(|| view! { <super::OpsWall/> })
}

#[wasm_split(search, wasm_split_path = ::leptos::wasm_split, fallible, preload(search_preload))]
fn search_chunk() -> Chunk {
    built(|| view! { <super::SearchPage/> })
}

#[wasm_split(recording, wasm_split_path = ::leptos::wasm_split, fallible, preload(recording_preload))]
fn recording_chunk() -> Chunk {
    built(|| view! { <super::RecordingPage/> })
}

#[wasm_split(session, wasm_split_path = ::leptos::wasm_split, fallible, preload(session_preload))]
fn session_chunk() -> Chunk {
    built(|| view! { <super::SessionPage/> })
}

#[wasm_split(admin, wasm_split_path = ::leptos::wasm_split, fallible, preload(account_preload))]
fn account_chunk() -> Chunk {
    built(|| view! { <super::AccountPage/> })
}

#[wasm_split(admin, wasm_split_path = ::leptos::wasm_split, fallible, preload(deliveries_preload))]
fn deliveries_chunk() -> Chunk {
    built(|| view! { <super::DeliveriesPage/> })
}

#[wasm_split(environment, wasm_split_path = ::leptos::wasm_split, fallible, preload(environment_preload))]
fn environment_chunk() -> Chunk {
    built(|| view! { <super::EnvironmentPage/> })
}

/// The Ops wall, loaded on first use.
pub fn ops_wall() -> AnyView {
    on_first_use(
        "this page",
        Some("Ops wall"),
        ops_wall_preload,
        ops_wall_chunk,
    )
}

/// The recording search, loaded on first use.
pub fn search() -> AnyView {
    on_first_use(
        "this page",
        Some("Search recordings"),
        search_preload,
        search_chunk,
    )
}

/// A recording's page (the player), loaded on first use.
pub fn recording() -> AnyView {
    on_first_use(
        "the player",
        Some("Recording"),
        recording_preload,
        recording_chunk,
    )
}

/// A session's page, loaded on first use.
pub fn session() -> AnyView {
    on_first_use(
        "the session",
        Some("Session"),
        session_preload,
        session_chunk,
    )
}

/// The account page, loaded on first use.
pub fn account() -> AnyView {
    on_first_use(
        "this page",
        Some("Your account"),
        account_preload,
        account_chunk,
    )
}

/// The notification deliveries page, loaded on first use.
pub fn deliveries() -> AnyView {
    on_first_use(
        "this page",
        Some("Notification deliveries"),
        deliveries_preload,
        deliveries_chunk,
    )
}

/// An environment's (or namespace's) page, loaded on first use.
pub fn environment() -> AnyView {
    on_first_use(
        "this page",
        Some("Environment"),
        environment_preload,
        environment_chunk,
    )
}

#[wasm_split(session_panel, wasm_split_path = ::leptos::wasm_split, fallible, preload(session_panel_preload))]
fn session_panel_chunk(id: Uuid) -> Chunk {
    use crate::components::session_panel::SessionPanel;
    built(|| view! { <SessionPanel id=id with_events=true/> })
}

/// A session's panel with its event history (`components::session_panel::SessionPanel`), as
/// a pod's page shows it, loaded on first use: its state, actions, terminal and events.
#[component]
pub fn LazySessionPanel(
    /// The session.
    id: Uuid,
) -> impl IntoView {
    on_first_use("the session", None, session_panel_preload, move || {
        session_panel_chunk(id)
    })
}
