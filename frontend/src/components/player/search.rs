//! Text search in the recording's output: the form, and what the last search found.

use leptos::html::Input;
use leptos::prelude::*;

use super::state::PlayerState;
use crate::components::common::dynv;
use crate::format;

/// The search's state (a `Copy` handle): the query, the last hit and what it said.
#[derive(Clone, Copy)]
pub struct Search {
    player: PlayerState,
    query: RwSignal<String>,
    /// What the last search found, for people.
    message: RwSignal<Option<String>>,
    /// Text offset of the last hit; the next search starts after it.
    last_hit: StoredValue<Option<usize>>,
    input: NodeRef<Input>,
}

impl Search {
    /// A search in what `player` plays.
    pub fn new(player: PlayerState) -> Search {
        Search {
            player,
            query: RwSignal::new(String::new()),
            message: RwSignal::new(None),
            last_hit: StoredValue::new(None),
            input: NodeRef::new(),
        }
    }

    /// Moves the keyboard focus to the search field.
    pub fn focus(&self) {
        if let Some(input) = self.input.get_untracked() {
            let _ = input.focus();
        }
    }

    /// Finds the query (after the last hit when `next`, else from the start, wrapping around)
    /// and seeks there, paused.
    fn find(&self, next: bool) {
        let q = self.query.get_untracked();
        if q.trim().is_empty() {
            self.message.set(None);
            return;
        }
        let from = match (next, self.last_hit.get_value()) {
            (true, Some(o)) => o + 1,
            _ => 0,
        };
        let found = self
            .player
            .with_index_untracked(|i| (i.search(&q, from), i.count(&q)));
        match found {
            Some((Some(hit), count)) => {
                self.player.pause();
                self.last_hit.set_value(Some(hit.offset));
                let t = self.player.time_of_untracked(hit.event);
                self.player.seek(t);
                self.message.set(Some(format!(
                    "found at {} ({count} match{})",
                    format::clock(t),
                    if count == 1 { "" } else { "es" }
                )));
            }
            Some((None, _)) => {
                self.last_hit.set_value(None);
                self.message
                    .set(Some(format!("“{q}” does not appear in the output")));
            }
            None => {}
        }
    }
}

/// The search form: Enter or Find searches on from the last hit (from the start after an
/// edit), Next always searches on.
#[component]
pub fn SearchForm(
    /// The search it edits.
    search: Search,
) -> impl IntoView {
    view! {
        <form class="search" role="search" on:submit=move |ev| { ev.prevent_default(); search.find(search.last_hit.get_value().is_some()) }>
            <label for="player-search">"Find in output "</label>
            <input id="player-search" type="search" node_ref=search.input placeholder="press / to search"
                bind:value=search.query on:input=move |_| search.last_hit.set_value(None)/>
            <button type="submit">"Find"</button>
            <button type="button" on:click=move |_| search.find(true)>"Next"</button>
        </form>
    }
}

/// What the last search found, announced to screen readers.
#[component]
pub fn SearchStatus(
    /// The search reported.
    search: Search,
) -> impl IntoView {
    dynv(move || {
        search
            .message
            .get()
            .map(|m| view! { <p class="muted small" role="status">{m}</p> })
    })
}
