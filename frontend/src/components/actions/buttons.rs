//! The first step: a button for each change the signed-in user may make.

use breakglass_shared::SessionState;
use leptos::prelude::*;

use super::{Ctx, DenyDrafts, PendingConfirms};
use crate::api::Action;

/// Which buttons to show (what the shared rules allow the user now).
#[derive(Clone, Copy)]
pub(super) struct Allowed {
    pub approve: bool,
    pub break_glass: bool,
    pub end: bool,
    pub terminate: bool,
}

/// Approve and deny, break the glass, end or withdraw, terminate: those allowed.
#[component]
pub(super) fn Buttons(
    ctx: Ctx,
    allowed: Allowed,
    /// The session's state (ending before activation takes the request back).
    state: SessionState,
    drafts: DenyDrafts,
    confirms: PendingConfirms,
) -> impl IntoView {
    let Ctx { id, busy, .. } = ctx;
    // Before the debug container exists, ending takes the request back.
    let end_label = if matches!(
        state,
        SessionState::PendingApproval | SessionState::Approved
    ) {
        "Withdraw request"
    } else {
        "End session"
    };
    view! {
        {allowed.approve.then(|| view! {
            <button class="primary" disabled=busy data-action="approve"
                on:click=move |_| ctx.run(Action::Approve)>
                "Approve"
            </button>
            <button disabled=busy data-action="deny" on:click=move |_| drafts.set(id, String::new())>
                "Deny…"
            </button>
        })}
        {allowed.break_glass.then(|| view! {
            <button class="danger" disabled=busy data-action="break-glass"
                title="Activate without a second person (recorded, review required)"
                on:click=move |_| confirms.ask(id, Action::BreakGlass)>
                "Break the glass…"
            </button>
        })}
        {allowed.end.then(|| view! {
            <button disabled=busy data-action="end" on:click=move |_| ctx.run(Action::End)>
                {end_label}
            </button>
        })}
        {allowed.terminate.then(|| view! {
            <button class="danger" disabled=busy data-action="terminate"
                on:click=move |_| confirms.ask(id, Action::Terminate)>
                "Terminate…"
            </button>
        })}
    }
}
