//! What the player's parts share: a few signals, what derives from them, and the actions on
//! them. The recording's timeline is a memo of the index and the idle cap; position, duration,
//! markers and the recording time of the position all derive from it.

use leptos::prelude::*;
use leptos::task::spawn_local;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use super::watched::{self, Watched};
use super::DEFAULT_IDLE_CAP;
use crate::api::ApiError;
use crate::cast::{CastIndex, Op, Timeline, KEYFRAME_BYTES};
use crate::xterm;

/// Where loading the recording is.
#[derive(Clone, Debug, PartialEq)]
pub enum Phase {
    /// Downloading the `.cast`.
    Fetching,
    /// Building the index; the share done, 0 to 1.
    Indexing(f64),
    /// Playable.
    Ready,
    /// It cannot be played; why.
    Failed(ApiError),
}

/// The terminal played on and how much of the recording it shows. Not reactive: xterm.js
/// keeps the screen itself.
struct Deck {
    term: xterm::Terminal,
    /// Events applied to the terminal.
    applied: usize,
}

impl Deck {
    /// Shows the screen after `events[..upto]`, from wherever it is.
    fn show(&mut self, index: &CastIndex, upto: usize) {
        // Close ahead: stepping forward is cheaper than restoring a keyframe.
        let ops = if upto >= self.applied
            && index.output_between(self.applied, upto) < KEYFRAME_BYTES / 4
        {
            index.step_ops(self.applied, upto)
        } else {
            index.seek_ops(upto)
        };
        apply(&self.term, ops);
        self.applied = upto;
    }

    /// Plays forward to `events[..upto]` (never back).
    fn advance(&mut self, index: &CastIndex, upto: usize) {
        if upto > self.applied {
            apply(&self.term, index.step_ops(self.applied, upto));
            self.applied = upto;
        }
    }
}

fn apply(term: &xterm::Terminal, ops: Vec<Op>) {
    for op in ops {
        match op {
            Op::Write(s) => term.write_str(&s),
            // After what is queued before it, not now: xterm parses asynchronously.
            Op::Resize(c, r) => {
                let t = term.clone();
                let cb = Closure::once_into_js(move || t.resize(c, r));
                term.write_then("", cb.unchecked_ref());
            }
        }
    }
}

/// Resolves once xterm has parsed everything written to `term` so far.
async fn parsed(term: &xterm::Terminal) {
    let promise = js_sys::Promise::new(&mut |resolve, _| term.write_then("", &resolve));
    let _ = JsFuture::from(promise).await;
}

/// Plays one seek on `term` (open, in the page) and clears it again, so that xterm.js's code
/// has run once before anyone seeks: the first seek after a load was the slowest by far
/// (58-81 ms on an idle machine, up to 260 ms on a loaded one, against a median of about
/// 15 ms), nearly all of it xterm parsing while the browser still ran its parser unoptimised;
/// a throwaway terminal fed output beforehand helped as well, and waiting did not
/// (BENCHMARKS.md, "Player and first page"). That cost moves here, into the load. The seek
/// played is the longest there is (a keyframe and a whole interval of output after it), so
/// the parser sees as much as any seek gives it; the screen is hidden meanwhile and left as a
/// new terminal of the recording's first size.
pub async fn prime(term: &xterm::Terminal, index: &CastIndex, screen: &web_sys::HtmlElement) {
    // A User Timing entry, `breakglass-player-prime`, says in the browser what this costs.
    let perf = web_sys::window().and_then(|w| w.performance());
    if let Some(p) = &perf {
        let _ = p.mark("breakglass-player-prime-start");
    }
    let style = screen.style();
    let _ = style.set_property("visibility", "hidden");
    apply(term, index.seek_ops(index.longest_seek()));
    parsed(term).await;
    // xterm renders in the first frame (it asked for it while parsing); the second gives the
    // browser's optimising compiler, which works beside the page, a moment more.
    next_frame().await;
    next_frame().await;
    term.reset();
    parsed(term).await;
    let (cols, rows) = index.initial_size();
    term.resize(cols, rows);
    let _ = style.remove_property("visibility");
    if let Some(p) = perf {
        let _ =
            p.measure_with_start_mark("breakglass-player-prime", "breakglass-player-prime-start");
    }
}

/// The next animation frame's timestamp.
async fn next_frame() -> f64 {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Some(w) = web_sys::window() {
            let _ = w.request_animation_frame(&resolve);
        }
    });
    JsFuture::from(promise)
        .await
        .ok()
        .and_then(|v| v.as_f64())
        .unwrap_or(0.0)
}

/// The player's shared state (a `Copy` handle). Reads are tracked unless they say otherwise;
/// changes go through its methods, which keep the terminal and the signals in step.
#[derive(Clone, Copy)]
pub struct PlayerState {
    phase: RwSignal<Phase>,
    /// SHA-256 of the downloaded bytes (None: not yet, or the browser cannot hash).
    played_hash: RwSignal<Option<String>>,
    /// Set once, when loaded.
    index: RwSignal<Option<CastIndex>>,
    /// Idle cap in seconds (0: off).
    cap: RwSignal<f64>,
    timeline: Memo<Option<Timeline>>,
    /// Player time (idle-capped seconds).
    pos: RwSignal<f64>,
    playing: RwSignal<bool>,
    speed: RwSignal<f64>,
    deck: StoredValue<Option<Deck>, LocalStorage>,
    /// Bumped to stop the running play loop.
    loop_gen: StoredValue<u64>,
    /// The session, whose watched parts are kept for its review form.
    id: uuid::Uuid,
    /// What was played of it (also in earlier visits), and the recording second last saved.
    watched: StoredValue<(Watched, f64)>,
}

impl PlayerState {
    /// A player of session `id`'s recording with nothing loaded; its terminal is freed with
    /// the current owner.
    pub fn new(id: uuid::Uuid) -> PlayerState {
        let index = RwSignal::new(None::<CastIndex>);
        let cap = RwSignal::new(DEFAULT_IDLE_CAP);
        let timeline = Memo::new(move |_| {
            let cap = cap.get();
            index.with(|i| {
                i.as_ref()
                    .map(|i| Timeline::new(i.events(), (cap > 0.0).then_some(cap)))
            })
        });
        let state = PlayerState {
            phase: RwSignal::new(Phase::Fetching),
            played_hash: RwSignal::new(None),
            index,
            cap,
            timeline,
            pos: RwSignal::new(0.0),
            playing: RwSignal::new(false),
            speed: RwSignal::new(1.0),
            deck: StoredValue::new_local(None),
            loop_gen: StoredValue::new(0),
            id,
            watched: StoredValue::new((watched::load(id).unwrap_or_default(), 0.0)),
        };
        on_cleanup(move || {
            state.loop_gen.try_update_value(|g| *g += 1);
            if let Some(d) = state.deck.try_update_value(Option::take).flatten() {
                d.term.dispose();
            }
        });
        state
    }

    /// Where loading is.
    pub fn phase(&self) -> Phase {
        self.phase.get()
    }

    /// Loaded and playable.
    pub fn is_ready(&self) -> bool {
        self.phase.with(|p| *p == Phase::Ready)
    }

    /// Ready, untracked (for event handlers).
    pub fn is_ready_untracked(&self) -> bool {
        self.phase.with_untracked(|p| *p == Phase::Ready)
    }

    /// Playing (not paused).
    pub fn playing(&self) -> bool {
        self.playing.get()
    }

    /// The position, in player seconds.
    pub fn pos(&self) -> f64 {
        self.pos.get()
    }

    /// Player length in seconds (0 until loaded).
    pub fn duration(&self) -> f64 {
        self.timeline
            .with(|tl| tl.as_ref().map_or(0.0, Timeline::duration))
    }

    /// The recording's length in recording time (the idle cap does not shorten it).
    pub fn raw_duration(&self) -> f64 {
        let d = self.duration();
        self.timeline
            .with(|tl| tl.as_ref().map_or(0.0, |tl| tl.raw_time(d)))
    }

    /// When the recording started, from its header (whole seconds; `None` when it has none).
    pub fn started_at(&self) -> Option<time::OffsetDateTime> {
        self.index.with(|i| {
            let at = i.as_ref()?.header().timestamp?;
            time::OffsetDateTime::from_unix_timestamp(at).ok()
        })
    }

    /// The recording time of the position (what `?t=` links hold, and what the clock shows).
    pub fn raw_pos(&self) -> f64 {
        let pos = self.pos.get();
        self.timeline
            .with(|tl| tl.as_ref().map_or(0.0, |tl| tl.raw_time(pos)))
    }

    /// The markers of the timeline, as (player time, label), in order. Resizes are left out:
    /// a terminal fitting its window marks one at every open, crowding the moments people jump
    /// to (the recording keeps them).
    pub fn markers(&self) -> Vec<(f64, String)> {
        self.index.with(|i| {
            self.timeline.with(|tl| match (i, tl) {
                (Some(i), Some(tl)) => i
                    .markers()
                    .iter()
                    .filter(|m| !m.label.starts_with("resized: "))
                    .map(|m| (tl.time_of(m.event), crate::format::marker_label(&m.label)))
                    .collect(),
                _ => Vec::new(),
            })
        })
    }

    /// Player time of event `event`, untracked (0 until loaded).
    pub fn time_of_untracked(&self, event: usize) -> f64 {
        self.timeline
            .with_untracked(|tl| tl.as_ref().map_or(0.0, |tl| tl.time_of(event)))
    }

    /// Recording time of event `event` (what the clock shows once there, whatever the idle
    /// cap), untracked (0 until loaded).
    pub fn raw_time_of_untracked(&self, event: usize) -> f64 {
        self.timeline
            .with_untracked(|tl| tl.as_ref().map_or(0.0, |tl| tl.raw_time(tl.time_of(event))))
    }

    /// `f` of the index, once loaded.
    pub fn with_index<R>(&self, f: impl FnOnce(&CastIndex) -> R) -> Option<R> {
        self.index.with(|i| i.as_ref().map(f))
    }

    /// The same, untracked.
    pub fn with_index_untracked<R>(&self, f: impl FnOnce(&CastIndex) -> R) -> Option<R> {
        self.index.with_untracked(|i| i.as_ref().map(f))
    }

    /// SHA-256 of what is played, in hex.
    pub fn played_hash(&self) -> Option<String> {
        self.played_hash.get()
    }

    /// Records the hash of the downloaded bytes.
    pub fn set_played_hash(&self, hash: Option<String>) {
        self.played_hash.set(hash);
    }

    /// Reports loading progress or failure.
    pub fn set_phase(&self, phase: Phase) {
        self.phase.set(phase);
    }

    /// Plays `index` on `term` (already open), from recording second `start`.
    pub fn ready(&self, index: CastIndex, term: xterm::Terminal, start: Option<f64>) {
        self.index.set(Some(index));
        let deck = Deck { term, applied: 0 };
        // Gone already (the page was left while loading, or while priming): reading the
        // timeline would panic, and nothing else would free the terminal.
        if let Some(unset) = self.deck.try_set_value(Some(deck)) {
            if let Some(d) = unset {
                d.term.dispose();
            }
            return;
        }
        let t0 = start.map_or(0.0, |raw| {
            self.timeline
                .with_untracked(|tl| tl.as_ref().map_or(0.0, |tl| tl.player_time(raw)))
        });
        let total = self.duration_untracked();
        let total = self
            .timeline
            .with_untracked(|tl| tl.as_ref().map_or(0.0, |tl| tl.raw_time(total)));
        self.watched.update_value(|(w, _)| w.total = total);
        self.phase.set(Phase::Ready);
        self.seek(t0);
    }

    /// Jumps to player time `t` (clamped to the recording; NaN is the start).
    pub fn seek(&self, t: f64) {
        let target = self.timeline.with_untracked(|tl| {
            tl.as_ref().map(|tl| {
                let t = tl.within(t);
                (t, tl.upto(t))
            })
        });
        let Some((t, upto)) = target else { return };
        let shown = self.on_deck(|deck, index| deck.show(index, upto));
        if shown.is_some() {
            self.pos.set(t);
        }
    }

    /// Moves by `delta` seconds of recording time (what the clock shows), so a step of 5 s is
    /// 5 s on the clock whatever the idle cap.
    pub fn seek_by(&self, delta: f64) {
        let raw = untrack(|| self.raw_pos()) + delta;
        let t = self
            .timeline
            .with_untracked(|tl| tl.as_ref().map(|tl| tl.player_time(raw.max(0.0))));
        if let Some(t) = t {
            self.seek(t);
        }
    }

    /// Plays from the position, or from the start when at the end.
    pub fn play(&self) {
        if self.playing.get_untracked() {
            return;
        }
        if self.pos.get_untracked() >= self.duration_untracked() {
            self.seek(0.0);
        }
        self.playing.set(true);
        self.loop_gen.update_value(|g| *g += 1);
        let gen = self.loop_gen.get_value();
        let this = *self;
        spawn_local(async move {
            // The clock belongs to this run of frames: time spent paused (or with the tab
            // hidden before a pause) never counts, whatever the speed.
            let mut last: Option<f64> = None;
            loop {
                let ts = next_frame().await;
                if this.loop_gen.try_get_value() != Some(gen) {
                    break;
                }
                let dt = last.map_or(0.0, |l| (ts - l).max(0.0) / 1000.0);
                last = Some(ts);
                if !this.tick(dt) {
                    this.playing.set(false);
                    break;
                }
            }
        });
    }

    /// Stops where it is.
    pub fn pause(&self) {
        self.playing.set(false);
        self.loop_gen.update_value(|g| *g += 1);
        self.save_watched();
    }

    /// Keeps what was played for the review form.
    fn save_watched(&self) {
        let id = self.id;
        self.watched.try_update_value(|(w, saved)| {
            watched::save(id, w);
            *saved = w.seconds();
        });
    }

    /// Play or pause, whichever it is not doing.
    pub fn toggle(&self) {
        if self.playing.get_untracked() {
            self.pause();
        } else {
            self.play();
        }
    }

    /// Playback speed (1: real time).
    pub fn set_speed(&self, speed: f64) {
        self.speed.set(speed);
    }

    /// Changes the idle cap (seconds, 0: off), keeping the same moment of the recording.
    pub fn set_cap(&self, cap: f64) {
        let raw = untrack(|| self.raw_pos());
        self.cap.set(cap);
        let pos = self
            .timeline
            .with_untracked(|tl| tl.as_ref().map(|tl| tl.player_time(raw).min(tl.duration())));
        let Some(pos) = pos else { return };
        self.pos.set(pos);
    }

    fn duration_untracked(&self) -> f64 {
        untrack(|| self.duration())
    }

    /// `f` of the terminal and the index, once both are there.
    fn on_deck<R>(&self, f: impl FnOnce(&mut Deck, &CastIndex) -> R) -> Option<R> {
        self.index.with_untracked(|index| {
            let index = index.as_ref()?;
            self.deck
                .try_update_value(|d| d.as_mut().map(|d| f(d, index)))
                .flatten()
        })
    }

    /// Advances by `dt` seconds of wall time (times the speed); true while there is more to
    /// play.
    fn tick(&self, dt: f64) -> bool {
        if self.deck.try_with_value(Option::is_some) != Some(true) {
            return false;
        }
        let duration = self.duration_untracked();
        let pos = (self.pos.get_untracked() + dt * self.speed.get_untracked()).min(duration);
        let upto = self
            .timeline
            .with_untracked(|tl| tl.as_ref().map_or(0, |tl| tl.upto(pos)));
        self.on_deck(|deck, index| deck.advance(index, upto));
        let before = self.pos.get_untracked();
        self.pos.set(pos);
        let raw = self.timeline.with_untracked(|tl| {
            tl.as_ref()
                .map(|tl| (tl.raw_time(before), tl.raw_time(pos)))
        });
        if let Some((from, to)) = raw {
            // Saved about once a second of recording played, and at the end.
            let due = self
                .watched
                .try_update_value(|(w, saved)| {
                    w.add(from, to);
                    w.seconds() - *saved >= 1.0 || pos >= duration
                })
                .unwrap_or(false);
            if due {
                self.save_watched();
            }
        }
        pos < duration
    }
}
