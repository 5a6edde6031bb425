//! The question before a change that cannot wait for a second person or takes the terminal
//! away: breaking the glass, ending a live session, terminating.

use leptos::prelude::*;

use super::{Ctx, PendingConfirms};
use crate::api::Action;

/// "Break the glass?" or "Terminate this session now?", with yes and cancel.
#[component]
pub(super) fn Confirm(ctx: Ctx, action: Action, confirms: PendingConfirms) -> impl IntoView {
    let Ctx { id, busy, .. } = ctx;
    let question = match action {
        Action::BreakGlass => "Break the glass? You activate this without a second person; a review becomes mandatory.",
        Action::End => "End this session now? The terminal closes and the recording is finished.",
        _ => "Terminate this session now? The terminal closes for its requester.",
    };
    // Focus moves into the question as it opens, onto Cancel: a stray Enter changes nothing.
    let cancel = NodeRef::<leptos::html::Button>::new();
    Effect::new(move |_| {
        if let Some(b) = cancel.get() {
            let _ = b.focus();
        }
    });
    // End on Ground offers what the tier allows: replacing the pod, with whatever the session
    // left in it (a process started in the app's container through process access).
    let recycle = (action == Action::End && ctx.recycle_offered).then(|| {
        let ticked = ctx.recycle;
        view! {
            <label class="confirm-option">
                <input type="checkbox" data-testid="end-recycle" aria-describedby="bg-end-recycle-hint"
                    prop:checked=move || ticked.get()
                    on:change=move |ev| ticked.set(event_target_checked(&ev))/>
                " Recycle the pod as it ends"
            </label>
            <span class="hint" id="bg-end-recycle-hint">
                "It is deleted for its owner to replace (a pod without an owner never is), and with it anything the session left running in it, such as a process started through process access."
            </span>
        }
    });
    view! {
        <span class="confirm" role="alert">{question}</span>
        {recycle}
        <button class="danger" disabled=busy data-action="confirm"
            on:click=move |_| { confirms.remove(id); ctx.run(action) }>
            "Yes, " {action.verb()}
        </button>
        <button disabled=busy data-action="cancel-confirm" node_ref=cancel on:click=move |_| confirms.remove(id)>"Cancel"</button>
    }
}
