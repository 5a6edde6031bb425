//! The components that load on first use (see `chunk.rs`, which says why and how): the live
//! terminal (xterm's bindings and the terminal socket) and the live view of someone else's
//! terminal.

use leptos::prelude::*;
use leptos::wasm_split::wasm_split;
use uuid::Uuid;

use crate::components::chunk::{built, on_first_use, Chunk};

#[wasm_split(terminal, wasm_split_path = ::leptos::wasm_split, fallible, preload(terminal_preload))]
fn terminal_chunk(session_id: Uuid, active: Signal<bool>, ended: Signal<Option<String>>) -> Chunk {
    use crate::components::terminal::Terminal;
    built(|| view! { <Terminal session_id=session_id active=active ended=ended/> })
}

#[wasm_split(watch, wasm_split_path = ::leptos::wasm_split, fallible, preload(watch_preload))]
fn watch_chunk(session_id: Uuid, requester: String, active: Signal<bool>) -> Chunk {
    use crate::components::watch::Watch;
    built(|| view! { <Watch session_id=session_id requester=requester active=active/> })
}

/// The live terminal (`components::terminal::Terminal`, whose props these are), loaded on
/// first use.
pub fn terminal(session_id: Uuid, active: Signal<bool>, ended: Signal<Option<String>>) -> AnyView {
    on_first_use("the terminal", None, terminal_preload, move || {
        terminal_chunk(session_id, active, ended)
    })
}

/// The live view of someone else's terminal (`components::watch::Watch`, whose props these
/// are), loaded on first use.
pub fn watch(session_id: Uuid, requester: String, active: Signal<bool>) -> AnyView {
    on_first_use("the live view", None, watch_preload, move || {
        watch_chunk(session_id, requester.clone(), active)
    })
}
