//! Where in the recording the player is: the seek bar with its markers, the clock, and a link
//! to the moment.

use leptos::prelude::*;
use leptos::task::spawn_local;
use uuid::Uuid;

use super::state::PlayerState;
use crate::api::links;
use crate::components::common::dynv;
use crate::format;

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

/// The seek bar, with a button under it for each (group of) marker(s).
#[component]
pub fn SeekBar(
    /// The player it moves.
    player: PlayerState,
) -> impl IntoView {
    // The maximum first, then the position, in one step: a position set while the old maximum
    // holds is clamped to it, and the thumb would disagree with the clock.
    let bar = NodeRef::<leptos::html::Input>::new();
    Effect::new(move |_| {
        let (d, pos) = (player.duration(), player.pos());
        if let Some(el) = bar.get() {
            // The number itself: the browser writes it out, so Rust's float formatting (its
            // Grisu and Dragon tables) stays out of the wasm.
            let _ = js_sys::Reflect::set(&el, &"max".into(), &d.into());
            el.set_value_as_number(pos);
        }
    });
    view! {
        <div class="seek">
            <input type="range" class="seek-bar" min="0" step="any" node_ref=bar
                aria-label="Position"
                aria-valuetext=move || format::clock(player.raw_pos())
                on:input=move |ev| {
                    // The browser's number, not a parse of the value's text (no float parser
                    // in the wasm); NaN, which it never gives for a range, would seek to 0.
                    player.seek(event_target::<web_sys::HtmlInputElement>(&ev).value_as_number());
                }/>
            <div class="markers">
                {dynv(move || {
                    let d = player.duration().max(0.001);
                    group_markers(&player.markers(), d).into_iter().map(|(t, label)| {
                        let pct = t / d * 100.0;
                        let class = if pct < 8.0 { "marker marker-start" } else if pct > 92.0 { "marker marker-end" } else { "marker" };
                        view! {
                            <button class=class style=format!("left: {}%", format::tenths(pct))
                                title=format!("{label} at {}", format::clock(t))
                                aria-label=format!("Jump to {label} at {}", format::clock(t))
                                on:click=move |_| player.seek(t)>
                                <span class="marker-label">{label.clone()}</span>
                            </button>
                        }
                    }).collect_view()
                })}
            </div>
        </div>
    }
}

/// `position / length` in recording time (the time a moment link holds), the wall-clock time
/// in UTC of that moment (what a reviewer matches against logs), and, when the idle cap
/// shortens the timeline, how long it plays.
#[component]
pub fn TimeReadout(
    /// The player timed.
    player: PlayerState,
) -> impl IntoView {
    let wall = move || {
        player.started_at().map(|at| {
            let at = at + time::Duration::seconds_f64(player.raw_pos());
            view! {
                <time class="time-utc muted small" data-testid="player-utc" datetime=format::timestamp(at)
                    title="The moment's wall-clock time">{format::timestamp(at)}</time>
            }
        })
    };
    let capped = move || {
        let (plays, lasts) = (player.duration(), player.raw_duration());
        (lasts - plays >= 1.0).then(|| {
            view! {
                <span class="muted small" data-testid="player-capped"
                    title="Pauses longer than the idle cap play as the cap">
                    {format!("plays in {} with the idle cap", format::clock(plays))}
                </span>
            }
        })
    };
    view! {
        <span class="time" data-testid="player-time">
            {dynv(move || format!("{} / {}", format::clock(player.raw_pos()), format::clock(player.raw_duration())))}
        </span>
        {dynv(wall)}
        {dynv(capped)}
    }
}

/// A link that opens the recording at the current moment (in recording time, so it holds
/// whatever the idle cap). A click copies it and says so; where the browser refuses the
/// clipboard, the address bar is set to it instead, and the note says that.
#[component]
pub fn MomentLink(
    /// The session.
    id: Uuid,
    /// The player whose moment it links.
    player: PlayerState,
) -> impl IntoView {
    let note = RwSignal::new(None::<&'static str>);
    let href = move || links::recording(id, Some(player.raw_pos()));
    let copy = move |ev: leptos::ev::MouseEvent| {
        // A new tab or window (middle click, Ctrl or Meta) opens the link as links do.
        if ev.button() != 0 || ev.ctrl_key() || ev.meta_key() || ev.shift_key() {
            return;
        }
        ev.prevent_default();
        let Some(window) = web_sys::window() else {
            return;
        };
        let path = untrack(href);
        let full = window
            .location()
            .origin()
            .map(|o| format!("{o}{path}"))
            .unwrap_or_else(|_| path.clone());
        let promise = window.navigator().clipboard().write_text(&full);
        spawn_local(async move {
            let copied = wasm_bindgen_futures::JsFuture::from(promise).await.is_ok();
            if !copied {
                if let Ok(history) = window.history() {
                    let _ = history.replace_state_with_url(
                        &wasm_bindgen::JsValue::NULL,
                        "",
                        Some(&path),
                    );
                }
            }
            note.set(Some(if copied {
                "Link copied"
            } else {
                "The browser refused the clipboard: the address bar holds the link"
            }));
        });
    };
    view! {
        <a href=href class="moment-link" on:click=copy
            title="Copies a link that opens the recording at this moment">"Link to this moment"</a>
        <span class="muted small" role="status" data-testid="moment-link-note">{move || note.get()}</span>
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
}
