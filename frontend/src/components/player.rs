//! The recording player: plays a session's asciicast in xterm.js with play/pause, speed,
//! a seek bar with markers, an idle-time cap, text search, download, an integrity badge and
//! keyboard shortcuts. Seeking uses the keyframes of [`crate::cast`].
//!
//! [`Player`] only lays the parts out: the state they share is [`PlayerState`], and each part
//! is a component of its own module.

mod integrity;
mod keys;
mod screen;
mod search;
mod state;
mod timeline;
mod transport;
pub mod watched;

use leptos::prelude::*;
use uuid::Uuid;

use crate::api;
use crate::fetch::fetch;

pub use integrity::EvidenceLink;
use integrity::{ChecksDetail, DownloadLink, IntegrityBadge};
use screen::{LoadStatus, Screen};
use search::{Search, SearchForm, SearchStatus};
use state::PlayerState;
use timeline::{MomentLink, SeekBar, TimeReadout};
use transport::{IdleCapSelect, PlayPause, SpeedSelect};

/// Default idle-time cap, seconds.
pub const DEFAULT_IDLE_CAP: f64 = 2.0;

/// The player of session `id`'s recording, starting at recording second `start`.
#[component]
pub fn Player(
    /// The session.
    id: Uuid,
    /// Where to start, in recording seconds (`?t=`).
    #[prop(optional)]
    start: Option<f64>,
) -> impl IntoView {
    let player = PlayerState::new(id);
    let search = Search::new(player);
    let verify = fetch(move || async move { api::verify_recording(id).await });
    keys::shortcuts(player, search);
    view! {
        <section class="player card" aria-labelledby="player-title" data-testid="player">
            <header class="player-head">
                <h2 id="player-title">"Player"</h2>
                <IntegrityBadge id=id verify=verify player=player/>
                <DownloadLink id=id/>
            </header>
            <LoadStatus player=player/>
            <Screen id=id start=start player=player/>
            <Show when=move || player.is_ready()>
                <div class="player-bar">
                    <PlayPause player=player/>
                    <SeekBar player=player/>
                    <TimeReadout player=player/>
                </div>
                <div class="player-controls">
                    <SpeedSelect player=player/>
                    <IdleCapSelect player=player/>
                    <SearchForm search=search/>
                    <MomentLink id=id player=player/>
                </div>
                <SearchStatus search=search/>
                <p class="muted small shortcuts">"Keys: space play/pause · ←/→ 5 s · / search"</p>
                <ChecksDetail verify=verify player=player/>
            </Show>
        </section>
    }
}
