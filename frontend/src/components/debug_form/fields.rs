//! The request form's fields, each with its hint and its error, reading and editing the one
//! [`Form`] state.

use breakglass_shared::listing::ContainerInfo;
use breakglass_shared::validate::{self, DurationBounds};
use leptos::prelude::*;

use super::Form;
use crate::components::common::dynv;

/// Live or copy.
#[component]
pub(super) fn ModeField(form: Form) -> impl IntoView {
    view! {
        <fieldset class="field">
            <legend>"Mode"</legend>
            <label class="choice">
                <input type="radio" name="mode" value="live" checked=true
                    on:change=move |_| form.edit(|i| i.mode = "live".into())/>
                <span><strong>"Live"</strong>" — a debug container added to the running pod"</span>
            </label>
            <label class="choice">
                <input type="radio" name="mode" value="copy"
                    on:change=move |_| form.edit(|i| i.mode = "copy".into())/>
                <span><strong>"Copy"</strong>" — a hardened copy of the pod, out of traffic"</span>
            </label>
        </fieldset>
    }
}

/// The container whose processes the debug container may see: a select of the pod's
/// containers when the listing answered, else a text input.
#[component]
pub(super) fn TargetField(
    form: Form,
    containers: Signal<Option<Vec<ContainerInfo>>>,
) -> impl IntoView {
    let invalid = form.invalid("target_container");
    let target = move || form.value(|i| &i.target);
    view! {
        <div class="field">
            <label for="bg-target">"Process access to container " <span class="muted">"(optional)"</span></label>
            {dynv(move || match containers.get() {
                Some(list) if list.iter().any(|c| !c.ephemeral) => view! {
                    <select id="bg-target" name="target_container"
                        aria-invalid=invalid
                        aria-describedby="bg-target-error bg-target-hint"
                        on:change=move |ev| form.edit(|i| i.target = event_target_value(&ev))>
                        <option value="" selected=move || target().is_empty()>"none: network and filesystem of the debug container only"</option>
                        {list.into_iter().filter(|c| !c.ephemeral).map(|c| {
                            let name = c.name.clone();
                            let selected = move || target() == name;
                            view! { <option value=c.name.clone() selected=selected>{c.name.clone()}</option> }
                        }).collect_view()}
                    </select>
                }
                    .into_any(),
                _ => view! {
                    <input id="bg-target" name="target_container" type="text" placeholder="e.g. app"
                        autocomplete="off" spellcheck="false"
                        aria-invalid=invalid
                        aria-describedby="bg-target-error bg-target-hint"
                        prop:value=target
                        on:input=move |ev| form.edit(|i| i.target = event_target_value(&ev))/>
                }
                    .into_any(),
            })}
            <p class="hint" id="bg-target-hint">"The debug container can see this container's processes (ps, strace, /proc)."</p>
            <FieldError id="bg-target-error" message=form.error_of("target_container")/>
        </div>
    }
}

/// Why access is needed, with its length against the bounds.
#[component]
pub(super) fn ReasonField(form: Form) -> impl IntoView {
    let reason_len = move || form.input.with(|i| i.reason.trim().chars().count());
    view! {
        <div class="field">
            <label for="bg-reason">"Reason"</label>
            <textarea id="bg-reason" name="reason" rows="3" required
                placeholder="What do you need to look at, and why?"
                aria-invalid=form.invalid("reason")
                aria-describedby="bg-reason-error bg-reason-hint"
                prop:value=move || form.value(|i| &i.reason)
                on:input=move |ev| form.edit(|i| i.reason = event_target_value(&ev))></textarea>
            <p class="hint" id="bg-reason-hint">
                {dynv(move || format!("{} / {} characters (at least {})", reason_len(), validate::REASON_MAX, validate::REASON_MIN))}
            </p>
            <FieldError id="bg-reason-error" message=form.error_of("reason")/>
        </div>
    }
}

/// The ticket or incident link.
#[component]
pub(super) fn TicketField(form: Form) -> impl IntoView {
    view! {
        <div class="field">
            <label for="bg-ticket">"Ticket or incident link " <span class="muted">"(optional)"</span></label>
            <input id="bg-ticket" name="ticket" type="url" inputmode="url" placeholder="https://tracker.example.com/INC-42"
                aria-invalid=form.invalid("ticket") aria-describedby="bg-ticket-error"
                prop:value=move || form.value(|i| &i.ticket)
                on:input=move |ev| form.edit(|i| i.ticket = event_target_value(&ev))/>
            <FieldError id="bg-ticket-error" message=form.error_of("ticket")/>
        </div>
    }
}

/// Minutes, within the environment's bounds.
#[component]
pub(super) fn DurationField(form: Form, bounds: DurationBounds) -> impl IntoView {
    view! {
        <div class="field">
            <label for="bg-duration">"Duration (minutes)"</label>
            <input id="bg-duration" name="duration_minutes" type="number" inputmode="numeric"
                min=bounds.min_minutes max=bounds.max_minutes step="1"
                aria-invalid=form.invalid("duration_minutes")
                aria-describedby="bg-duration-error bg-duration-hint"
                prop:value=move || form.value(|i| &i.duration)
                on:input=move |ev| form.edit(|i| i.duration = event_target_value(&ev))/>
            <p class="hint" id="bg-duration-hint">
                {format!("Between {} and {} minutes here; access ends by itself after that.", bounds.min_minutes, bounds.max_minutes)}
            </p>
            <FieldError id="bg-duration-error" message=form.error_of("duration_minutes")/>
        </div>
    }
}

/// Recycle the pod at the end (offered only where the tier allows it).
#[component]
pub(super) fn RecycleField(form: Form) -> impl IntoView {
    view! {
        <div class="field">
            <label class="choice">
                <input type="checkbox" name="recycle" aria-describedby="bg-recycle-hint"
                    prop:checked=move || form.input.with(|i| i.recycle)
                    on:change=move |ev| form.edit(|i| i.recycle = event_target_checked(&ev))/>
                <span>"Recycle the pod at the end if it is the workload's last ready pod"</span>
            </label>
            <p class="hint" id="bg-recycle-hint">"Ground only: a debugged pod is otherwise left running."</p>
            <FieldError id="bg-recycle-error" message=form.error_of("recycle")/>
        </div>
    }
}

/// A field's error message, announced when it appears.
#[component]
fn FieldError(
    /// Element id (the field's `aria-describedby` points here).
    id: &'static str,
    /// The message, if any.
    message: Signal<Option<String>>,
) -> impl IntoView {
    view! {
        <p class="field-error" id=id role="alert" hidden=move || message.with(Option::is_none)>
            {dynv(move || message.get())}
        </p>
    }
}
