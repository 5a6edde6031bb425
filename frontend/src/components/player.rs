//! The recording player: plays a session's asciicast in xterm.js with play/pause, speed,
//! a seek bar with markers, an idle-time cap, text search, download, an integrity badge and
//! keyboard shortcuts. Seeking uses the keyframes of [`crate::cast`].

use std::cell::RefCell;
use std::rc::Rc;

use breakglass_shared::recording;
use leptos::ev;
use leptos::html::{Div, Input};
use leptos::prelude::*;
use leptos::task::spawn_local;
use send_wrapper::SendWrapper;
use uuid::Uuid;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use crate::api::{self, links};
use crate::cast::{CastIndex, IndexBuilder, Op, Timeline, KEYFRAME_BYTES};
use crate::components::common::{dynv, ErrorNotice, Loading};
use crate::components::session_panel::live_detail;
use crate::fetch::fetch;
use crate::format;
use crate::xterm;

/// Default idle-time cap, seconds.
pub const DEFAULT_IDLE_CAP: f64 = 2.0;
/// Seconds the arrow keys seek.
const ARROW_SEEK: f64 = 5.0;
/// Output bytes indexed between two yields to the browser.
const INDEX_SLICE: usize = 1 << 20;
/// Playback speeds offered (value, label).
const SPEEDS: [(f64, &str); 6] = [
    (0.5, "0.5"),
    (1.0, "1"),
    (1.5, "1.5"),
    (2.0, "2"),
    (3.0, "3"),
    (4.0, "4"),
];
/// Idle caps offered (seconds, label; 0 = off).
const CAPS: [(f64, &str); 5] = [
    (0.5, "0.5 s"),
    (1.0, "1 s"),
    (2.0, "2 s"),
    (5.0, "5 s"),
    (0.0, "off"),
];

/// What the integrity badge says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Integrity {
    /// The bytes played hash to the hash on record, and the server's checks pass.
    Verified,
    /// Something differs; what.
    Mismatch(String),
    /// The session is still running: the recording grows.
    InProgress,
    /// Cannot tell; why.
    Unknown(String),
}

/// Decides the badge from the hash of the played bytes, the hash on the session row, whether
/// the session is finished, and the server's verification (`Ok(passed)`, or why it is missing).
pub fn integrity(
    played: Option<&str>,
    on_record: Option<&str>,
    finished: bool,
    server: Option<Result<bool, String>>,
) -> Integrity {
    if !finished {
        return Integrity::InProgress;
    }
    if let Some(Ok(false)) = server {
        return Integrity::Mismatch("the server's integrity checks failed".into());
    }
    match (played, on_record) {
        (Some(p), Some(r)) if p.eq_ignore_ascii_case(r) => match server {
            Some(Err(why)) => Integrity::Unknown(format!(
                "the hash matches the record, but the server's checks are unavailable: {why}"
            )),
            _ => Integrity::Verified,
        },
        (Some(_), Some(_)) => {
            Integrity::Mismatch("what you are watching differs from the hash on record".into())
        }
        (_, None) => Integrity::Unknown("no hash is on record for this session".into()),
        (None, _) => Integrity::Unknown("this browser could not hash the recording".into()),
    }
}

/// Markers closer than a tenth of the timeline share one button (`approved · active`), so
/// their labels never overlap.
pub fn group_markers(markers: &[(f64, String)], duration: f64) -> Vec<(f64, String)> {
    let mut out: Vec<(f64, String)> = Vec::new();
    for (t, label) in markers {
        match out.last_mut() {
            Some((t0, l0)) if (t - *t0) < duration * 0.1 => {
                l0.push_str(" · ");
                l0.push_str(label);
            }
            _ => out.push((*t, label.clone())),
        }
    }
    out
}

/// Loading phases.
#[derive(Clone, Debug, PartialEq)]
enum Phase {
    Fetching,
    Indexing(f64),
    Ready,
    Failed(api::ApiError),
}

/// The playing state (not reactive; the UI mirrors it in signals).
struct Core {
    index: CastIndex,
    timeline: Timeline,
    term: xterm::Terminal,
    /// Events applied to the terminal.
    applied: usize,
    /// Player time (idle-capped seconds).
    pos: f64,
    /// Timestamp of the last animation frame while playing.
    last_frame: Option<f64>,
}

type Handle = SendWrapper<Rc<RefCell<Option<Core>>>>;

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

impl Core {
    fn duration(&self) -> f64 {
        self.timeline.duration()
    }

    fn seek(&mut self, t: f64) {
        let t = t.clamp(0.0, self.duration());
        let upto = self.timeline.upto(t);
        // Close ahead: stepping forward is cheaper than restoring a keyframe.
        if upto >= self.applied
            && self.index.output_between(self.applied, upto) < KEYFRAME_BYTES / 4
        {
            apply(&self.term, self.index.step_ops(self.applied, upto));
        } else {
            apply(&self.term, self.index.seek_ops(upto));
        }
        self.applied = upto;
        self.pos = t;
        self.last_frame = None;
    }

    /// Advances to the frame at `ts`; true while there is more to play.
    fn tick(&mut self, ts: f64, speed: f64) -> bool {
        let dt = self.last_frame.map_or(0.0, |l| (ts - l).max(0.0) / 1000.0);
        self.last_frame = Some(ts);
        self.pos = (self.pos + dt * speed).min(self.duration());
        let upto = self.timeline.upto(self.pos);
        if upto > self.applied {
            apply(&self.term, self.index.step_ops(self.applied, upto));
            self.applied = upto;
        }
        self.pos < self.duration()
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

/// SHA-256 of `bytes` in hex, by the browser (None where SubtleCrypto is unavailable).
async fn sha256_hex(bytes: &[u8]) -> Option<String> {
    let subtle = web_sys::window()?.crypto().ok()?.subtle();
    let promise = subtle.digest_with_str_and_u8_array("SHA-256", bytes).ok()?;
    let digest = JsFuture::from(promise).await.ok()?;
    let digest = js_sys::Uint8Array::new(&digest).to_vec();
    Some(digest.iter().map(|b| format!("{b:02x}")).collect())
}

/// The player of session `id`'s recording, starting at recording second `start`.
#[component]
pub fn Player(
    /// The session.
    id: Uuid,
    /// Where to start, in recording seconds (`?t=`).
    #[prop(optional)]
    start: Option<f64>,
) -> impl IntoView {
    let (_, session) = live_detail(id);
    let verify = fetch(move || async move { api::verify_recording(id).await });
    let phase = RwSignal::new(Phase::Fetching);
    let played_hash = RwSignal::new(None::<String>);
    let pos = RwSignal::new(0.0f64);
    let duration = RwSignal::new(0.0f64);
    let playing = RwSignal::new(false);
    let speed = RwSignal::new(1.0f64);
    let cap = RwSignal::new(DEFAULT_IDLE_CAP);
    let markers = RwSignal::new(Vec::<(f64, String)>::new());
    let query = RwSignal::new(String::new());
    let search_msg = RwSignal::new(None::<String>);
    let last_hit = StoredValue::new(None::<usize>);
    let raw_pos = RwSignal::new(0.0f64);
    let stats = RwSignal::new(None::<String>);
    let loop_gen = StoredValue::new(0u64);
    let handle: Handle = SendWrapper::new(Rc::new(RefCell::new(None)));
    let screen = NodeRef::<Div>::new();
    let search_box = NodeRef::<Input>::new();

    let sync = {
        let handle = handle.clone();
        move || {
            if let Some(c) = handle.borrow().as_ref() {
                pos.set(c.pos);
                raw_pos.set(c.timeline.raw_time(c.pos));
            }
        }
    };

    let refresh_markers = {
        let handle = handle.clone();
        move || {
            if let Some(c) = handle.borrow().as_ref() {
                markers.set(
                    c.index
                        .markers()
                        .iter()
                        .map(|m| (c.timeline.time_of(m.event), m.label.clone()))
                        .collect(),
                );
                duration.set(c.duration());
            }
        }
    };

    let seek = {
        let handle = handle.clone();
        let sync = sync.clone();
        move |t: f64| {
            if let Some(c) = handle.borrow_mut().as_mut() {
                c.seek(t);
            }
            sync();
        }
    };

    let pause = move || {
        playing.set(false);
        loop_gen.update_value(|g| *g += 1);
    };

    let play = {
        let handle = handle.clone();
        let sync = sync.clone();
        let seek = seek.clone();
        move || {
            if playing.get_untracked() {
                return;
            }
            let at_end = handle
                .borrow()
                .as_ref()
                .is_some_and(|c| c.pos >= c.duration());
            if at_end {
                seek(0.0);
            }
            playing.set(true);
            loop_gen.update_value(|g| *g += 1);
            let gen = loop_gen.get_value();
            let handle = handle.clone();
            let sync = sync.clone();
            spawn_local(async move {
                loop {
                    let ts = next_frame().await;
                    if loop_gen.try_get_value() != Some(gen) {
                        break;
                    }
                    let more = match handle.borrow_mut().as_mut() {
                        Some(c) => c.tick(ts, speed.get_untracked()),
                        None => false,
                    };
                    sync();
                    if !more {
                        playing.set(false);
                        break;
                    }
                }
            });
        }
    };

    let toggle = {
        let play = play.clone();
        move || {
            if playing.get_untracked() {
                pause();
            } else {
                play();
            }
        }
    };

    let find = {
        let handle = handle.clone();
        let seek = seek.clone();
        move |next: bool| {
            let q = query.get_untracked();
            if q.trim().is_empty() {
                search_msg.set(None);
                return;
            }
            let from = match (next, last_hit.get_value()) {
                (true, Some(o)) => o + 1,
                _ => 0,
            };
            let found = handle
                .borrow()
                .as_ref()
                .map(|c| (c.index.search(&q, from), c.index.count(&q)));
            match found {
                Some((Some(hit), count)) => {
                    pause();
                    last_hit.set_value(Some(hit.offset));
                    let t = handle
                        .borrow()
                        .as_ref()
                        .map(|c| c.timeline.time_of(hit.event))
                        .unwrap_or(0.0);
                    seek(t);
                    search_msg.set(Some(format!(
                        "found at {} ({count} match{})",
                        format::clock(t),
                        if count == 1 { "" } else { "es" }
                    )));
                }
                Some((None, _)) => {
                    last_hit.set_value(None);
                    search_msg.set(Some(format!("“{q}” does not appear in the output")));
                }
                None => {}
            }
        }
    };

    // Load, index, and open the terminal once the screen element exists.
    {
        let handle = handle.clone();
        let seek = seek.clone();
        let refresh_markers = refresh_markers.clone();
        screen.on_load(move |el| {
            spawn_local(async move {
                let bytes = match api::recording(id).await {
                    Ok(b) => b,
                    Err(e) => {
                        phase.set(Phase::Failed(e));
                        return;
                    }
                };
                played_hash.set(sha256_hex(&bytes).await);
                let text = String::from_utf8_lossy(&bytes).into_owned();
                drop(bytes);
                let (header, events) = match recording::parse(&text) {
                    Ok(p) => p,
                    Err(e) => {
                        phase.set(Phase::Failed(api::ApiError {
                            status: None,
                            code: None,
                            message: e.to_string(),
                            field: None,
                        }));
                        return;
                    }
                };
                drop(text);
                let mut builder = IndexBuilder::new(header, events);
                while !builder.step(INDEX_SLICE) {
                    phase.set(Phase::Indexing(builder.progress()));
                    gloo_timers::future::TimeoutFuture::new(0).await;
                }
                let index = builder.finish();
                stats.set(Some(format!(
                    "{}{} events, {} KB of output, {} keyframes (seeks replay at most {} KB).",
                    index
                        .header()
                        .title
                        .as_ref()
                        .map(|t| format!("“{t}”: "))
                        .unwrap_or_default(),
                    index.events().len(),
                    index.output_bytes() / 1024,
                    index.keyframe_count(),
                    KEYFRAME_BYTES / 1024
                )));
                if let Err(e) = xterm::load().await {
                    phase.set(Phase::Failed(api::ApiError {
                        status: None,
                        code: None,
                        message: e,
                        field: None,
                    }));
                    return;
                }
                let term = xterm::Terminal::create(&xterm::Options {
                    read_only: true,
                    size: Some(index.initial_size()),
                    scrollback: 1000,
                });
                term.open(&el);
                let timeline = Timeline::new(index.events(), Some(DEFAULT_IDLE_CAP));
                let t0 = start.map(|raw| timeline.player_time(raw)).unwrap_or(0.0);
                *handle.borrow_mut() = Some(Core {
                    index,
                    timeline,
                    term,
                    applied: 0,
                    pos: 0.0,
                    last_frame: None,
                });
                refresh_markers();
                phase.set(Phase::Ready);
                seek(t0);
            });
        });
    }

    // Changing the idle cap keeps the same moment of the recording.
    {
        let handle = handle.clone();
        let refresh_markers = refresh_markers.clone();
        let sync = sync.clone();
        Effect::new(move |prev: Option<()>| {
            let c = cap.get();
            if prev.is_none() {
                return;
            }
            if let Some(core) = handle.borrow_mut().as_mut() {
                let raw = core.timeline.raw_time(core.pos);
                core.timeline = Timeline::new(core.index.events(), (c > 0.0).then_some(c));
                core.pos = core.timeline.player_time(raw).min(core.timeline.duration());
                core.last_frame = None;
            }
            refresh_markers();
            sync();
        });
    }

    // Keyboard: space play/pause, arrows seek, "/" search.
    {
        let toggle = toggle.clone();
        let seek = seek.clone();
        let key_handle = window_event_listener(ev::keydown, move |e: web_sys::KeyboardEvent| {
            if phase.get_untracked() != Phase::Ready || e.ctrl_key() || e.meta_key() || e.alt_key()
            {
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
            match e.key().as_str() {
                "/" if !in_field => {
                    e.prevent_default();
                    if let Some(input) = search_box.get_untracked() {
                        let _ = input.focus();
                    }
                }
                " " if !in_field => {
                    e.prevent_default();
                    toggle();
                }
                "ArrowLeft" if !in_field => {
                    e.prevent_default();
                    seek(pos.get_untracked() - ARROW_SEEK);
                }
                "ArrowRight" if !in_field => {
                    e.prevent_default();
                    seek(pos.get_untracked() + ARROW_SEEK);
                }
                _ => {}
            }
        });
        let handle = handle.clone();
        on_cleanup(move || {
            key_handle.remove();
            loop_gen.update_value(|g| *g += 1);
            if let Some(c) = handle.borrow_mut().take() {
                c.term.dispose();
            }
        });
    }

    let badge = move || {
        let s = session.get();
        let finished = s.as_ref().is_some_and(|s| s.state.is_final());
        let on_record = s
            .as_ref()
            .and_then(|s| s.recording.as_ref().map(|r| r.sha256.clone()));
        let server = verify.get().map(|r| r.map(|v| v.ok).map_err(|e| e.message));
        integrity(
            played_hash.get().as_deref(),
            on_record.as_deref(),
            finished,
            server,
        )
    };
    let checks = move || {
        verify
            .get()
            .and_then(Result::ok)
            .map(|v| v.checks)
            .unwrap_or_default()
    };

    let toggle_click = toggle.clone();
    let seek_input = seek.clone();
    let find_submit = find.clone();
    let find_next = find.clone();
    let marker_seek = seek.clone();
    view! {
        <section class="player card" aria-labelledby="player-title" data-testid="player">
            <header class="player-head">
                <h2 id="player-title">"Player"</h2>
                {dynv(move || {
                    let (class, text, title) = match badge() {
                        Integrity::Verified => ("badge badge-ok", "Verified".to_string(), "The bytes played hash to the SHA-256 on record and the server's checks pass.".to_string()),
                        Integrity::Mismatch(why) => ("badge badge-bad", "Not verified".to_string(), why),
                        Integrity::InProgress => ("badge", "In progress".to_string(), "The session is still running: the recording grows until it ends.".to_string()),
                        Integrity::Unknown(why) => ("badge", "Unverified".to_string(), why),
                    };
                    let spoken = title.clone();
                    view! { <span class=class title=title data-testid="integrity">{text}<span class="sr-only">": " {spoken}</span></span> }
                })}
                <a class="button-link" href=api::recording_download_url(id) download=format!("session-{id}.cast")>"Download .cast"</a>
            </header>
            {dynv(move || match phase.get() {
                Phase::Fetching => view! { <Loading label="Loading the recording…"/> }.into_any(),
                Phase::Indexing(p) => view! { <Loading label=format!("Indexing the recording… {}%", (p * 100.0) as u32)/> }.into_any(),
                Phase::Failed(e) => view! { <ErrorNotice error=e context="The recording cannot be played"/> }.into_any(),
                Phase::Ready => ().into_any(),
            })}
            <div class="player-screen" node_ref=screen
                hidden=move || matches!(phase.get(), Phase::Failed(_))
                on:click=move |_| toggle_click()></div>
            <Show when=move || phase.get() == Phase::Ready>
                <div class="player-bar">
                    <button class="primary play" on:click={let t = toggle.clone(); move |_| t()}
                        aria-label=move || if playing.get() { "Pause (space)" } else { "Play (space)" }>
                        {dynv(move || if playing.get() { "❚❚ Pause" } else { "▶ Play" })}
                    </button>
                    <div class="seek">
                        <input type="range" class="seek-bar" min="0" step="0.1"
                            aria-label="Position"
                            prop:max=move || duration.get()
                            prop:value=move || pos.get()
                            aria-valuetext=move || format::clock(pos.get())
                            on:input={let seek = seek_input.clone(); move |ev| {
                                if let Ok(t) = event_target_value(&ev).parse::<f64>() { seek(t) }
                            }}/>
                        <div class="markers">
                            {let marker_seek = marker_seek.clone(); move || {
                                let d = duration.get().max(0.001);
                                group_markers(&markers.get(), d).into_iter().map(|(t, label)| {
                                    let seek = marker_seek.clone();
                                    let pct = t / d * 100.0;
                                    let class = if pct < 8.0 { "marker marker-start" } else if pct > 92.0 { "marker marker-end" } else { "marker" };
                                    view! {
                                        <button class=class style=format!("left: {}%", format::tenths(pct))
                                            title=format!("{label} at {}", format::clock(t))
                                            aria-label=format!("Jump to {label} at {}", format::clock(t))
                                            on:click=move |_| seek(t)>
                                            <span class="marker-label">{label.clone()}</span>
                                        </button>
                                    }
                                }).collect_view()
                            }}
                        </div>
                    </div>
                    <span class="time" data-testid="player-time">
                        {dynv(move || format!("{} / {}", format::clock(pos.get()), format::clock(duration.get())))}
                    </span>
                </div>
                <div class="player-controls">
                    <label>"Speed "
                        <select on:change=move |ev| if let Some((v, _)) = SPEEDS.iter().find(|(_, l)| *l == event_target_value(&ev)) { speed.set(*v) }>
                            {SPEEDS.iter().map(|(v, l)| view! {
                                <option value=*l selected=*v == 1.0>{*l}"×"</option>
                            }).collect_view()}
                        </select>
                    </label>
                    <label>"Idle cap "
                        <select on:change=move |ev| if let Some((v, _)) = CAPS.iter().find(|(_, l)| *l == event_target_value(&ev)) { cap.set(*v) }>
                            {CAPS.iter().map(|(v, l)| view! {
                                <option value=*l selected=*v == DEFAULT_IDLE_CAP>{*l}</option>
                            }).collect_view()}
                        </select>
                    </label>
                    <form class="search" role="search" on:submit={let f = find_submit.clone(); move |ev| { ev.prevent_default(); f(last_hit.get_value().is_some()) }}>
                        <label for="player-search">"Find in output "</label>
                        <input id="player-search" type="search" node_ref=search_box placeholder="press / to search"
                            bind:value=query on:input=move |_| last_hit.set_value(None)/>
                        <button type="submit">"Find"</button>
                        <button type="button" on:click={let f = find_next.clone(); move |_| f(true)}>"Next"</button>
                    </form>
                    <a href=move || links::recording(id, Some(raw_pos.get())) class="moment-link"
                        title="A link that opens the recording at this moment">"Link to this moment"</a>
                </div>
                {dynv(move || search_msg.get().map(|m| view! { <p class="muted small" role="status">{m}</p> }))}
                <p class="muted small shortcuts">"Keys: space play/pause · ←/→ 5 s · / search"</p>
                <details class="checks-detail">
                    <summary>"Integrity checks"</summary>
                    <ul class="checks">
                        {dynv(move || checks().into_iter().map(|c| {
                            let (class, icon) = match c.outcome.as_str() {
                                "pass" => ("check check-ok", "✓"),
                                "fail" => ("check check-bad", "✗"),
                                _ => ("check", "–"),
                            };
                            view! {
                                <li class=class>
                                    <span class="check-icon" aria-hidden="true">{icon}</span>
                                    <span class="check-name">{c.name}</span>
                                    <span class="check-status">{c.outcome}</span>
                                    <span class="muted small">{c.detail}</span>
                                </li>
                            }
                        }).collect_view())}
                    </ul>
                    {dynv(move || verify.get().and_then(Result::err).map(|e| view! {
                        <p class="muted small">"Server verification unavailable: " {e.message}</p>
                    }))}
                    {dynv(move || stats.get().map(|s| view! { <p class="muted small">{s}</p> }))}
                    {dynv(move || played_hash.get().map(|h| view! {
                        <p class="muted small">"SHA-256 of what you are watching: " <code>{h}</code></p>
                    }))}
                </details>
            </Show>
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_markers_share_a_button() {
        let m = vec![
            (0.0, "approved".to_string()),
            (0.2, "active".into()),
            (50.0, "ended".into()),
        ];
        assert_eq!(
            group_markers(&m, 60.0),
            vec![
                (0.0, "approved · active".to_string()),
                (50.0, "ended".to_string())
            ]
        );
    }

    #[test]
    fn integrity_badge() {
        let server_ok = Some(Ok(true));
        assert_eq!(
            integrity(Some("AB"), Some("ab"), true, server_ok.clone()),
            Integrity::Verified
        );
        assert_eq!(
            integrity(Some("ab"), Some("ab"), false, server_ok.clone()),
            Integrity::InProgress
        );
        assert!(matches!(
            integrity(Some("ab"), Some("cd"), true, server_ok),
            Integrity::Mismatch(_)
        ));
        assert!(matches!(
            integrity(Some("ab"), Some("ab"), true, Some(Ok(false))),
            Integrity::Mismatch(_)
        ));
        assert!(matches!(
            integrity(Some("ab"), Some("ab"), true, Some(Err("404".into()))),
            Integrity::Unknown(_)
        ));
        assert!(matches!(
            integrity(None, Some("ab"), true, None),
            Integrity::Unknown(_)
        ));
        assert!(matches!(
            integrity(Some("ab"), None, true, None),
            Integrity::Unknown(_)
        ));
    }
}
