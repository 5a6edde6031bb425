//! Where in the recording the player is: the seek bar with its markers, the clock, and a link
//! to the moment.

use leptos::prelude::*;
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
                aria-valuetext=move || format::clock(player.pos())
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

/// `position / length`.
#[component]
pub fn TimeReadout(
    /// The player timed.
    player: PlayerState,
) -> impl IntoView {
    view! {
        <span class="time" data-testid="player-time">
            {dynv(move || format!("{} / {}", format::clock(player.pos()), format::clock(player.duration())))}
        </span>
    }
}

/// A link that opens the recording at the current moment (in recording time, so it holds
/// whatever the idle cap).
#[component]
pub fn MomentLink(
    /// The session.
    id: Uuid,
    /// The player whose moment it links.
    player: PlayerState,
) -> impl IntoView {
    view! {
        <a href=move || links::recording(id, Some(player.raw_pos())) class="moment-link"
            title="A link that opens the recording at this moment">"Link to this moment"</a>
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
