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

/// Whether End, in `state`, ends a session that has (or is getting) its debug container,
/// rather than taking a request back.
pub(super) fn ends_a_live_session(state: SessionState) -> bool {
    !matches!(
        state,
        SessionState::PendingApproval | SessionState::Approved
    )
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
    // Before the debug container exists, ending takes the request back (nothing to lose);
    // ending a live session closes a terminal someone may be typing in, so it asks first.
    let live = ends_a_live_session(state);
    let end_label = if live {
        "End session…"
    } else {
        "Withdraw request"
    };
    let end = move |_| {
        if live {
            confirms.ask(id, Action::End);
        } else {
            ctx.run(Action::End);
        }
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
            <button disabled=busy data-action="end" on:click=end>
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
