//! The transport controls: play/pause, playback speed and the idle-time cap.

use leptos::prelude::*;

use super::state::PlayerState;
use super::DEFAULT_IDLE_CAP;
use crate::components::common::dynv;

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

/// The play/pause button (the space bar does the same).
#[component]
pub fn PlayPause(
    /// The player it drives.
    player: PlayerState,
) -> impl IntoView {
    view! {
        <button class="primary play" on:click=move |_| player.toggle()
            aria-label=move || if player.playing() { "Pause (space)" } else { "Play (space)" }>
            {dynv(move || if player.playing() { "❚❚ Pause" } else { "▶ Play" })}
        </button>
    }
}

/// The playback speed picker.
#[component]
pub fn SpeedSelect(
    /// The player it drives.
    player: PlayerState,
) -> impl IntoView {
    view! {
        <Choice label="Speed " options=&SPEEDS selected=1.0 suffix="×"
            on_pick=move |v| player.set_speed(v)/>
    }
}

/// The idle-time cap picker: pauses longer than the cap play as the cap.
#[component]
pub fn IdleCapSelect(
    /// The player it drives.
    player: PlayerState,
) -> impl IntoView {
    view! {
        <Choice label="Idle cap " options=&CAPS selected=DEFAULT_IDLE_CAP suffix=""
            on_pick=move |v| player.set_cap(v)/>
    }
}

/// A labelled select of numbers, each option shown by its label.
#[component]
fn Choice(
    /// Text before the select.
    label: &'static str,
    /// (value, label) of each option, in order.
    options: &'static [(f64, &'static str)],
    /// The value selected at first.
    selected: f64,
    /// Shown after each option's label (a unit).
    suffix: &'static str,
    /// Called with the value picked.
    #[prop(into)]
    on_pick: Callback<f64>,
) -> impl IntoView {
    let pick = move |ev: leptos::ev::Event| {
        let picked = event_target_value(&ev);
        if let Some((v, _)) = options.iter().find(|(_, l)| *l == picked) {
            on_pick.run(*v);
        }
    };
    view! {
        <label>{label}
            <select on:change=pick>
                {options.iter().map(|(v, l)| view! {
                    <option value=*l selected=*v == selected>{format!("{l}{suffix}")}</option>
                }).collect_view()}
            </select>
        </label>
    }
}
