//! The question before a change that cannot wait for a second person or takes the terminal
//! away: breaking the glass, terminating.

use leptos::prelude::*;

use super::{Ctx, PendingConfirms};
use crate::api::Action;

/// "Break the glass?" or "Terminate this session now?", with yes and cancel.
#[component]
pub(super) fn Confirm(ctx: Ctx, action: Action, confirms: PendingConfirms) -> impl IntoView {
    let Ctx { id, busy, .. } = ctx;
    let question = match action {
        Action::BreakGlass => "Break the glass? You activate this without a second person; a review becomes mandatory.",
        _ => "Terminate this session now? The terminal closes for its requester.",
    };
    view! {
        <span class="confirm" role="alert">{question}</span>
        <button class="danger" disabled=busy data-action="confirm"
            on:click=move |_| { confirms.remove(id); ctx.run(action) }>
            "Yes, " {action.verb()}
        </button>
        <button disabled=busy data-action="cancel-confirm" on:click=move |_| confirms.remove(id)>"Cancel"</button>
    }
}
