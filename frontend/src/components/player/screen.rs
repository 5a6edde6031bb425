//! The xterm.js host: downloads, hashes, parses and indexes the recording, then opens the
//! terminal it plays on. Also what the player shows while that happens.

use breakglass_shared::recording;
use leptos::html::Div;
use leptos::prelude::*;
use leptos::task::spawn_local;
use uuid::Uuid;

use super::integrity::sha256_hex;
use super::state::{prime, Phase, PlayerState};
use crate::api::{self, ApiError};
use crate::cast::IndexBuilder;
use crate::components::common::{dynv, ErrorNotice, Loading};
use crate::xterm;

/// Output bytes indexed between two yields to the browser.
const INDEX_SLICE: usize = 1 << 20;

/// The terminal the recording plays on; a click plays or pauses. Loading starts once it is in
/// the page.
#[component]
pub fn Screen(
    /// The session.
    id: Uuid,
    /// Where to start, in recording seconds.
    start: Option<f64>,
    /// The player it loads into.
    player: PlayerState,
) -> impl IntoView {
    let host = NodeRef::<Div>::new();
    host.on_load(move |el| {
        spawn_local(async move {
            if let Err(e) = load(id, start, player, &el).await {
                player.set_phase(Phase::Failed(e));
            }
        });
    });
    view! {
        <div class="player-screen" node_ref=host
            hidden=move || matches!(player.phase(), Phase::Failed(_))
            on:click=move |_| player.toggle()></div>
    }
}

/// Loading progress, or why the recording cannot be played; nothing once it plays.
#[component]
pub fn LoadStatus(
    /// The player loading.
    player: PlayerState,
) -> impl IntoView {
    dynv(move || match player.phase() {
        Phase::Fetching => view! { <Loading label="Loading the recording…"/> }.into_any(),
        Phase::Indexing(p) => {
            view! { <Loading label=format!("Indexing the recording… {}%", (p * 100.0) as u32)/> }
                .into_any()
        }
        Phase::Failed(e) => {
            view! { <ErrorNotice error=e context="The recording cannot be played"/> }.into_any()
        }
        Phase::Ready => ().into_any(),
    })
}

/// Fetches and indexes session `id`'s recording and opens a terminal for it in `el`.
async fn load(
    id: Uuid,
    start: Option<f64>,
    player: PlayerState,
    el: &web_sys::HtmlElement,
) -> Result<(), ApiError> {
    let bytes = api::recording(id).await?;
    player.set_played_hash(sha256_hex(&bytes).await);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    drop(bytes);
    let (header, events) = recording::parse(&text).map_err(|e| local_error(e.to_string()))?;
    drop(text);
    let mut builder = IndexBuilder::new(header, events);
    while !builder.step(INDEX_SLICE) {
        player.set_phase(Phase::Indexing(builder.progress()));
        gloo_timers::future::TimeoutFuture::new(0).await;
    }
    let index = builder.finish();
    xterm::load().await.map_err(local_error)?;
    let term = xterm::Terminal::create(&xterm::Options {
        read_only: true,
        size: Some(index.initial_size()),
        scrollback: 1000,
    });
    term.open(el);
    prime(&term, &index, el).await;
    player.ready(index, term, start);
    Ok(())
}

/// A failure in this browser rather than of a call.
fn local_error(message: String) -> ApiError {
    ApiError {
        status: None,
        code: None,
        message,
        field: None,
    }
}
