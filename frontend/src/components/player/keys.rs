//! Keyboard shortcuts: space plays or pauses, the arrows seek, `/` goes to the search field.

use leptos::ev;
use leptos::prelude::*;
use wasm_bindgen::JsCast;

use super::search::Search;
use super::state::PlayerState;

/// Seconds of recording time the arrow keys seek (the hint under the player says so).
const ARROW_SEEK: f64 = 5.0;

/// Whether keys typed on `el` are its own: text fields and pickers, where a space or an arrow
/// edits what is in them. Buttons and the seek bar are not: after a click on Play or on the
/// bar, the shortcuts must go on working (the key's own action on them is prevented, so
/// space does not both toggle and click).
fn takes_keys(el: &web_sys::Element) -> bool {
    match el.tag_name().as_str() {
        "TEXTAREA" | "SELECT" => true,
        "INPUT" => !matches!(
            el.get_attribute("type")
                .unwrap_or_default()
                .to_ascii_lowercase()
                .as_str(),
            "range" | "button" | "submit" | "reset" | "checkbox" | "radio"
        ),
        _ => el
            .dyn_ref::<web_sys::HtmlElement>()
            .is_some_and(web_sys::HtmlElement::is_content_editable),
    }
}

/// Listens for the shortcuts on the window until the current owner is cleaned up. Keys typed
/// into a text field or a picker are theirs, as are those with Ctrl, Meta or Alt.
pub fn shortcuts(player: PlayerState, search: Search) {
    let listener = window_event_listener(ev::keydown, move |e: web_sys::KeyboardEvent| {
        if !player.is_ready_untracked() || e.ctrl_key() || e.meta_key() || e.alt_key() {
            return;
        }
        let in_field = e
            .target()
            .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
            .is_some_and(|el| takes_keys(&el));
        if in_field {
            return;
        }
        match e.key().as_str() {
            "/" => search.focus(),
            " " => player.toggle(),
            "ArrowLeft" => player.seek_by(-ARROW_SEEK),
            "ArrowRight" => player.seek_by(ARROW_SEEK),
            _ => return,
        }
        e.prevent_default();
    });
    on_cleanup(move || listener.remove());
}
