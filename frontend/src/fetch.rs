//! A small stand-in for Leptos' resources: a signal holding the last answer of an API call,
//! fetched again whenever the signals its fetcher reads change (or on [`Fetch::refetch`]).
//!
//! Why not `LocalResource`: each resource type instantiates Leptos' whole async-derived
//! machinery (about 6 KB of wasm per type); this is a plain signal plus an effect, and keeps the
//! previous answer on screen while a new one loads (no flicker on live reloads).

use std::future::Future;

use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::api::ApiError;

/// The state of one fetch: `None` until the first answer.
pub type Answer<T> = Option<Result<T, ApiError>>;

/// The last answer of an API call (a `Copy` handle).
pub struct Fetch<T: Send + Sync + 'static> {
    value: RwSignal<Answer<T>>,
    again: RwSignal<u64>,
}

impl<T: Send + Sync + 'static> Clone for Fetch<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Send + Sync + 'static> Copy for Fetch<T> {}

impl<T: Clone + Send + Sync + 'static> Fetch<T> {
    /// The last answer (tracked).
    pub fn get(&self) -> Answer<T> {
        self.value.get()
    }

    /// The last answer (untracked).
    pub fn get_untracked(&self) -> Answer<T> {
        self.value.get_untracked()
    }

    /// Fetches again now.
    pub fn refetch(&self) {
        self.again.update(|n| *n += 1);
    }
}

/// Calls `fetcher` now and again whenever a signal it reads (synchronously) changes; only the
/// latest call's answer is kept.
pub fn fetch<T, Fut>(fetcher: impl Fn() -> Fut + 'static) -> Fetch<T>
where
    T: Send + Sync + 'static,
    Fut: Future<Output = Result<T, ApiError>> + 'static,
{
    let value = RwSignal::new(None);
    let again = RwSignal::new(0u64);
    let latest = StoredValue::new(0u64);
    Effect::new(move |_| {
        again.track();
        let fut = fetcher();
        latest.update_value(|n| *n += 1);
        let mine = latest.get_value();
        spawn_local(async move {
            let answer = fut.await;
            if latest.try_get_value() == Some(mine) {
                value.try_set(Some(answer));
            }
        });
    });
    Fetch { value, again }
}
