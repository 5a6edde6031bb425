//! Parts of the app that load on first use: each `#[wasm_split]` function is a split point,
//! and what only it reaches goes into its own wasm chunk, fetched the first time the function
//! runs. The first page then carries only what home, the queue strip and the Debug panel's
//! form need (BENCHMARKS.md, Player and first page). This module shows a chunk's states
//! (loading, failed, built); the split points are the terminal and the watch view in
//! `components/lazy.rs` and the pages in `pages/chunks.rs`.
//!
//! Every chunk is fallible: a chunk that cannot be fetched (the network dropped, a fetch
//! stalled past the loader's time limit, or a deploy replaced the files the page was built
//! with) shows an error with **Try again** instead of
//! aborting the whole app, and a retry loads it from scratch. The build that cuts the chunks
//! out is `frontend/wasm.mjs` (frontend/README.md, Size).

use leptos::prelude::*;
use leptos::wasm_split::SplitLoaderError;
use std::future::Future;

use crate::components::common::{dynv, Loading};

/// A chunk that could not be loaded.
#[derive(Debug, Clone, Copy)]
pub struct ChunkError;

impl From<SplitLoaderError> for ChunkError {
    fn from(_: SplitLoaderError) -> Self {
        ChunkError
    }
}

/// The view a split point returns: built inside its chunk, or why the chunk did not load.
pub type Chunk = Result<AnyView, ChunkError>;

/// A split point's view, built untracked: it is built in a reactive closure of
/// [`on_first_use`], which must rerun only when the chunk's state changes, not when something
/// the page reads first (its address, its query) does.
pub fn built<V: IntoView + 'static>(view: impl FnOnce() -> V) -> Chunk {
    Ok(untrack(|| view().into_any()))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Loading,
    Ready,
    Failed,
}

/// Shows what `build` builds once its chunk is there: a loading state while `preload` fetches
/// the chunk, and on a failed fetch an error with a **Try again** button that fetches it again.
///
/// `what` names the part for people ("the terminal", "this page"); `heading`, for a whole page,
/// is its level-one heading while it loads or when it failed. `preload` and `build` are
/// the preload function and the split function of one `#[wasm_split]`. The view is built in
/// the page's own reactive closure once the chunk is loaded (not inside the future that loads
/// it), so it is owned, and disposed of, like any other view of the page.
pub fn on_first_use<P, F>(
    what: &'static str,
    heading: Option<&'static str>,
    preload: fn() -> P,
    build: impl Fn() -> F + Send + Sync + 'static,
) -> AnyView
where
    P: Future<Output = Result<(), SplitLoaderError>> + 'static,
    F: Future<Output = Chunk> + 'static,
{
    let phase = RwSignal::new(Phase::Loading);
    let fetch = move || {
        phase.set(Phase::Loading);
        leptos::task::spawn_local(async move {
            let loaded = preload().await.is_ok();
            // The page may have been left while the chunk loaded.
            phase.try_set(if loaded { Phase::Ready } else { Phase::Failed });
        });
    };
    fetch();
    let failed = move || {
        view! {
            <div class="notice notice-error" role="alert" data-testid="chunk-error">
                {format!("Could not load {what}: the connection failed or stalled, or the app was updated since this page opened (then reload the page). ")}
                <button type="button" on:click=move |_| fetch()>"Try again"</button>
            </div>
        }
        .into_any()
    };
    let heading = move || heading.map(|h| view! { <h1 class="page-title">{h}</h1> });
    dynv(move || match phase.get() {
        Phase::Loading => {
            view! { {heading()} <Loading label=format!("Loading {what}…")/> }.into_any()
        }
        Phase::Ready => {
            ready_now(build()).unwrap_or_else(|| view! { {heading()} {failed()} }.into_any())
        }
        Phase::Failed => view! { {heading()} {failed()} }.into_any(),
    })
    .into_any()
}

/// The split function's answer once its chunk is loaded, which it gives on the first poll (it
/// only checks that the chunk is there, then calls into it); `None` if it did not.
fn ready_now(fut: impl Future<Output = Chunk>) -> Option<AnyView> {
    let mut fut = std::pin::pin!(fut);
    match fut
        .as_mut()
        .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
    {
        std::task::Poll::Ready(Ok(view)) => Some(view),
        _ => None,
    }
}
