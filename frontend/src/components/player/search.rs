//! Text search in what the recording showed (its screen lines, [`crate::cast`]): the form,
//! what the last search found, and the lines found, each a button to its moment.

use leptos::html::Input;
use leptos::prelude::*;

use super::state::PlayerState;
use crate::cast::Hit;
use crate::components::common::dynv;
use crate::format;

/// Lines listed at most: a search for a common word would list most of a long recording,
/// thousands of buttons nobody reads; the count says how many there are, Next reaches them.
const LISTED: usize = 200;

/// Characters of a line kept on each side of its match in the list (joined wrapped lines can
/// be thousands long).
const CONTEXT: usize = 60;

/// The lines holding the query of the last search.
#[derive(Clone, Debug)]
struct Found {
    query: String,
    /// The first [`LISTED`] of them.
    hits: Vec<Hit>,
    total: usize,
}

/// The search's state (a `Copy` handle): the query, what it found and what it said.
#[derive(Clone, Copy)]
pub struct Search {
    player: PlayerState,
    query: RwSignal<String>,
    /// What the last search found, for people.
    message: RwSignal<Option<String>>,
    /// The line shown last (found or picked from the list); the next search starts after it.
    /// A signal: the list marks it.
    last_hit: RwSignal<Option<usize>>,
    found: RwSignal<Option<Found>>,
    input: NodeRef<Input>,
}

impl Search {
    /// A search in what `player` plays.
    pub fn new(player: PlayerState) -> Search {
        Search {
            player,
            query: RwSignal::new(String::new()),
            message: RwSignal::new(None),
            last_hit: RwSignal::new(None),
            found: RwSignal::new(None),
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
    /// and shows that line's moment, paused; lists the lines holding it unless they are listed.
    fn find(&self, next: bool) {
        let q = self.query.get_untracked();
        if q.trim().is_empty() {
            self.message.set(None);
            self.found.set(None);
            self.last_hit.set(None);
            return;
        }
        let from = match (next, self.last_hit.get_untracked()) {
            (true, Some(line)) => line + 1,
            _ => 0,
        };
        let listed = self
            .found
            .with_untracked(|f| f.as_ref().is_some_and(|f| f.query == q));
        let result = self.player.with_index_untracked(|i| {
            let list = (!listed).then(|| i.matches(&q, LISTED));
            (i.search(&q, from), list)
        });
        let Some((hit, list)) = result else { return };
        if let Some((hits, total)) = list {
            self.found.set(Some(Found {
                query: q.clone(),
                hits,
                total,
            }));
        }
        let Some(hit) = hit else {
            self.last_hit.set(None);
            self.message
                .set(Some(format!("“{q}” does not appear in the output")));
            return;
        };
        self.show(hit.line, hit.event);
        let count = self
            .found
            .with_untracked(|f| f.as_ref().map_or(0, |f| f.total));
        self.message.set(Some(format!(
            "found at {} ({count} match{})",
            format::clock(self.player.raw_time_of_untracked(hit.event)),
            if count == 1 { "" } else { "es" }
        )));
    }

    /// Shows line `line`, which showed during event `event`, paused; Next goes on after it.
    fn show(&self, line: usize, event: usize) {
        self.player.pause();
        self.last_hit.set(Some(line));
        self.player.seek(self.player.time_of_untracked(event));
    }

    /// Forgets the last hit: an edited query searches from the start.
    fn edited(&self) {
        // Only on a change: the list's current mark would be redrawn at every keystroke.
        if self.last_hit.get_untracked().is_some() {
            self.last_hit.set(None);
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
        <form class="search" role="search" on:submit=move |ev| { ev.prevent_default(); search.find(search.last_hit.get_untracked().is_some()) }>
            <label for="player-search">"Find in output "</label>
            <input id="player-search" type="search" node_ref=search.input placeholder="press / to search"
                bind:value=search.query on:input=move |_| search.edited()/>
            <button type="submit">"Find"</button>
            <button type="button" on:click=move |_| search.find(true)>"Next"</button>
        </form>
    }
}

/// What the last search found: a message announced to screen readers, and the lines found.
#[component]
pub fn SearchStatus(
    /// The search reported.
    search: Search,
) -> impl IntoView {
    view! {
        {dynv(move || {
            search
                .message
                .get()
                .map(|m| view! { <p class="muted small" role="status">{m}</p> })
        })}
        <SearchResults search=search/>
    }
}

/// The lines the last search found, in order, each a button to its moment; the first
/// [`LISTED`] only, saying so when there are more.
#[component]
fn SearchResults(
    /// The search whose lines are listed.
    search: Search,
) -> impl IntoView {
    dynv(move || {
        // A copy, not a borrow: nothing is held while the items are built.
        let found = search.found.get().filter(|f| !f.hits.is_empty())?;
        let note = (found.total > found.hits.len()).then(|| {
            view! {
                <p class="muted small search-results-note">
                    {format!("first {} of {} matches", found.hits.len(), found.total)}
                </p>
            }
        });
        let items = found
            .hits
            .into_iter()
            .map(|hit| view! { <SearchResult search=search hit=hit/> })
            .collect::<Vec<_>>();
        Some(view! {
            {note}
            <ol class="search-results" aria-label="Matches">{items}</ol>
        })
    })
}

/// One line found: its moment (recording time, as the clock shows it) and its text with the
/// match marked. A click shows that moment, paused.
#[component]
fn SearchResult(
    /// The search it belongs to (it marks the line shown last).
    search: Search,
    /// The line.
    hit: Hit,
) -> impl IntoView {
    let (before, mark, after) = hit.excerpt(CONTEXT);
    let mark = mark.to_owned();
    let time = format::clock(search.player.raw_time_of_untracked(hit.event));
    let (line, event) = (hit.line, hit.event);
    let current = move || (search.last_hit.get() == Some(line)).then_some("true");
    view! {
        <li>
            <button type="button" class="search-result" aria-current=current
                on:click=move |_| search.show(line, event)>
                <span class="time">{time}</span>
                <span class="search-line">{before}<mark>{mark}</mark>{after}</span>
            </button>
        </li>
    }
}
