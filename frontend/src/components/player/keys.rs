//! Keyboard shortcuts: space plays or pauses, the arrows seek, `/` goes to the search field.

use leptos::ev;
use leptos::prelude::*;
use wasm_bindgen::JsCast;

use super::search::Search;
use super::state::PlayerState;

/// Seconds the arrow keys seek.
const ARROW_SEEK: f64 = 5.0;

/// Listens for the shortcuts on the window until the current owner is cleaned up. Keys typed
/// into a field or on a button are theirs, as are those with Ctrl, Meta or Alt.
pub fn shortcuts(player: PlayerState, search: Search) {
    let listener = window_event_listener(ev::keydown, move |e: web_sys::KeyboardEvent| {
        if !player.is_ready_untracked() || e.ctrl_key() || e.meta_key() || e.alt_key() {
            return;
        }
        let in_field = e
            .target()
            .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
            .is_some_and(|el| {
                matches!(
                    el.tag_name().as_str(),
                    "INPUT" | "TEXTAREA" | "SELECT" | "BUTTON"
                )
            });
        if in_field {
            return;
        }
        match e.key().as_str() {
            "/" => search.focus(),
            " " => player.toggle(),
            "ArrowLeft" => player.seek(player.pos_untracked() - ARROW_SEEK),
            "ArrowRight" => player.seek(player.pos_untracked() + ARROW_SEEK),
            _ => return,
        }
        e.prevent_default();
    });
    on_cleanup(move || listener.remove());
}
