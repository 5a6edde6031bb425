//! Live state shared by every view: the session changes from the server's event stream, and a
//! clock that ticks once a second for countdowns and ages.
//!
//! Lists are fetched once and then kept current by merging them with [`Live`]'s map of the
//! latest copy of every session seen on the stream ([`merge`]); when the stream reports a gap
//! (`lagged`, or a reconnect) [`Live::epoch`] moves and lists fetch again.

use std::collections::HashMap;
use std::time::Duration;

use breakglass_shared::Session;
use leptos::ev;
use leptos::prelude::*;
use uuid::Uuid;

use crate::api::{self, StreamEvent};

/// Connection state of the live stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamStatus {
    /// Not signed in: no stream.
    Off,
    /// Opening or reconnecting.
    Connecting,
    /// Receiving events.
    Open,
}

/// The live session feed (a context, see [`provide_live`]).
#[derive(Clone, Copy)]
pub struct Live {
    sessions: RwSignal<HashMap<Uuid, Session>>,
    /// Moves whenever lists must be fetched again (gap in the stream, reconnect, new user).
    pub epoch: RwSignal<u64>,
    /// Whether the stream is connected.
    pub status: RwSignal<StreamStatus>,
    /// Moves whenever the locks in force changed (the shell reads the environments again).
    pub locks: RwSignal<u64>,
}

impl Live {
    /// Records a newer copy of a session (from the stream or from an action's response).
    pub fn upsert(&self, s: Session) {
        let newer = self
            .sessions
            .with_untracked(|m| m.get(&s.id).is_none_or(|old| old.version < s.version));
        if newer {
            self.sessions.update(|m| {
                m.insert(s.id, s);
            });
        }
    }

    /// The latest copy of session `id` seen live (tracked).
    pub fn get(&self, id: Uuid) -> Option<Session> {
        self.sessions.with(|m| m.get(&id).cloned())
    }

    /// `fetched` updated with live copies, plus live sessions `keep` accepts (tracked).
    pub fn merged(&self, fetched: &[Session], keep: impl Fn(&Session) -> bool) -> Vec<Session> {
        self.sessions.with(|m| merge(fetched, m, keep))
    }

    fn reload(&self) {
        self.epoch.update(|e| *e += 1);
    }
}

/// Merges a fetched list with live copies: each session in its newest version, live-only
/// sessions added, then only those `keep` accepts, newest first.
pub fn merge(
    fetched: &[Session],
    live: &HashMap<Uuid, Session>,
    keep: impl Fn(&Session) -> bool,
) -> Vec<Session> {
    let mut out: Vec<Session> = fetched
        .iter()
        .map(|s| match live.get(&s.id) {
            Some(l) if l.version > s.version => l.clone(),
            _ => s.clone(),
        })
        .collect();
    for (id, s) in live {
        if !fetched.iter().any(|f| f.id == *id) {
            out.push(s.clone());
        }
    }
    out.retain(|s| keep(s));
    // Newest first. Lists are short (one page) and nearly sorted: an insertion sort keeps the
    // wasm free of a general sort's code.
    for i in 1..out.len() {
        let mut j = i;
        while j > 0 && newer(&out[j], &out[j - 1]) {
            out.swap(j, j - 1);
            j -= 1;
        }
    }
    out
}

fn newer(a: &Session, b: &Session) -> bool {
    (a.created_at, a.id) > (b.created_at, b.id)
}

/// Wall-clock time in milliseconds since the Unix epoch, ticking once a second (a context).
#[derive(Clone, Copy)]
pub struct Clock(pub RwSignal<f64>);

impl Clock {
    /// Now, in Unix seconds (tracked: re-runs every second).
    pub fn now_secs(&self) -> i64 {
        (self.0.get() / 1000.0) as i64
    }
}

/// Now in milliseconds since the Unix epoch.
pub fn now_ms() -> f64 {
    js_sys::Date::now()
}

/// Provides [`Live`] and [`Clock`]; the stream is open while `user` is signed in, reopened when
/// the user changes, and retried with a growing delay when the browser gives up on it.
pub fn provide_live(user: Signal<Option<String>>) -> Live {
    let live = Live {
        sessions: RwSignal::new(HashMap::new()),
        epoch: RwSignal::new(0),
        status: RwSignal::new(StreamStatus::Off),
        locks: RwSignal::new(0),
    };
    provide_context(live);

    let clock = Clock(RwSignal::new(now_ms()));
    set_interval(move || clock.0.set(now_ms()), Duration::from_secs(1));
    provide_context(clock);

    // The stream lives here; replacing it closes the old one (Drop).
    let stream = StoredValue::new_local(None::<api::EventStream>);
    // Bumped on every (re)open, so a stale retry timer does nothing.
    let generation = StoredValue::new(0u64);

    fn open(
        live: Live,
        stream: StoredValue<Option<api::EventStream>, LocalStorage>,
        generation: StoredValue<u64>,
        attempt: u32,
    ) {
        let gen = generation.get_value();
        live.status.set(StreamStatus::Connecting);
        let opened = api::open_events(move |ev| match ev {
            StreamEvent::Open => {
                live.status.set(StreamStatus::Open);
                // Whatever happened while we were away is only in the lists.
                live.reload();
            }
            StreamEvent::Session(change) => live.upsert(change.session),
            StreamEvent::Lagged => live.reload(),
            StreamEvent::Locks => live.locks.update(|n| *n += 1),
            StreamEvent::Error { closed } => {
                live.status.set(StreamStatus::Connecting);
                if closed {
                    retry(live, stream, generation, gen, attempt + 1);
                }
            }
        });
        match opened {
            Ok(s) => stream.set_value(Some(s)),
            Err(_) => retry(live, stream, generation, gen, attempt + 1),
        }
    }

    fn retry(
        live: Live,
        stream: StoredValue<Option<api::EventStream>, LocalStorage>,
        generation: StoredValue<u64>,
        gen: u64,
        attempt: u32,
    ) {
        let delay = backoff(attempt);
        set_timeout(
            move || {
                if generation.try_get_value() == Some(gen) {
                    open(live, stream, generation, attempt);
                }
            },
            delay,
        );
    }

    Effect::new(move |_| {
        let who = user.get();
        generation.update_value(|g| *g += 1);
        stream.set_value(None);
        live.sessions.set(HashMap::new());
        if who.is_some() {
            open(live, stream, generation, 0);
        } else {
            live.status.set(StreamStatus::Off);
        }
    });

    // A page the browser keeps for Back and Forward keeps its stream open too, and a browser
    // gives one site six connections over HTTP/1.1: a few visits by address would leave the
    // current page's requests queued behind streams nobody reads (measured: a fetch waited
    // 20 s after five). So the stream closes when the page is hidden, and opens again (its
    // `Open` reloads the lists) if the page is shown from that cache.
    let hidden = window_event_listener(ev::pagehide, move |_| {
        generation.update_value(|g| *g += 1);
        stream.set_value(None);
        live.status.set(StreamStatus::Connecting);
    });
    let shown = window_event_listener(ev::pageshow, move |e: web_sys::PageTransitionEvent| {
        if e.persisted() && user.get_untracked().is_some() {
            generation.update_value(|g| *g += 1);
            open(live, stream, generation, 0);
        }
    });
    on_cleanup(move || {
        hidden.remove();
        shown.remove();
    });
    live
}

/// Delay before reconnect attempt `attempt` (1-based): 0.5 s doubling up to 15 s.
pub fn backoff(attempt: u32) -> Duration {
    let ms = 500u64.saturating_mul(1 << attempt.saturating_sub(1).min(5));
    Duration::from_millis(ms.min(15_000))
}

/// The live feed (panics outside [`provide_live`], a programming error).
pub fn use_live() -> Live {
    expect_context::<Live>()
}

/// The ticking clock.
pub fn use_clock() -> Clock {
    expect_context::<Clock>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::session;
    use breakglass_shared::SessionState;

    #[test]
    fn merge_prefers_newer_and_adds_live_only() {
        let fetched = vec![
            session(1, SessionState::PendingApproval, 1),
            session(2, SessionState::PendingApproval, 3),
        ];
        let mut live = HashMap::new();
        // 1 was approved since the fetch: it leaves the pending list.
        live.insert(Uuid::from_u128(1), session(1, SessionState::Approved, 2));
        // An older live copy of 2 does not win.
        live.insert(Uuid::from_u128(2), session(2, SessionState::Denied, 2));
        // 3 is new.
        live.insert(
            Uuid::from_u128(3),
            session(3, SessionState::PendingApproval, 1),
        );
        let out = merge(&fetched, &live, |s| {
            s.state == SessionState::PendingApproval
        });
        let ids: Vec<u128> = out.iter().map(|s| s.id.as_u128()).collect();
        assert_eq!(ids, vec![3, 2], "newest first, approved one gone");
    }

    #[test]
    fn backoff_grows_and_caps() {
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(2), Duration::from_millis(1000));
        assert_eq!(backoff(4), Duration::from_millis(4000));
        assert_eq!(backoff(50), Duration::from_millis(15_000));
    }
}
