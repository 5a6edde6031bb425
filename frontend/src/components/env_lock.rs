//! An environment's lock, on every page of that environment: who locked it, why, and whether
//! an unlock waits for a second admin; and, for those who hold `terminate` there, the form that
//! locks or unlocks it (on the environment's own page). The server ends what runs there; this only says so and asks.

use breakglass_shared::lock::Lock;
use breakglass_shared::validate;
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::api;
use crate::auth::use_auth;
use crate::components::common::dynv;

/// "carol locked prod: INC-7 …": the banner's sentence.
fn locked_line(l: &Lock) -> String {
    let mut line = format!(
        "{} locked {}: {}. Nothing runs here until an admin unlocks it.",
        l.locked_by, l.target, l.reason
    );
    if let Some(u) = &l.unlock {
        line.push_str(&format!(
            " {} asked to unlock it ({}); a second admin must confirm.",
            u.by, u.reason
        ));
    }
    line
}

/// The lock of environment `env` (nothing when it is not locked), and the lock/unlock form for
/// its admins.
#[component]
pub fn EnvLock(
    /// The environment.
    env: String,
    /// Whether to offer its admins the lock/unlock form (the environment's own page), or only
    /// show the lock (the other pages of the environment).
    #[prop(optional)]
    controls: bool,
) -> impl IntoView {
    let auth = use_auth();
    let env = StoredValue::new(env);
    let info = Memo::new(move |_| auth.env(&env.read_value()));
    let lock = Memo::new(move |_| info.get().and_then(|i| i.lock));
    let admin = Memo::new(move |_| controls && info.get().is_some_and(|i| i.permissions.terminate));
    let reason = RwSignal::new(String::new());
    let busy = RwSignal::new(false);
    let error = RwSignal::new(None::<String>);
    let done = RwSignal::new(None::<String>);
    let submit = move || {
        let why = reason.get_untracked();
        if let Err(e) = validate::note("reason", &why, true) {
            error.set(Some(format!("A reason {}", e.message)));
            return;
        }
        error.set(None);
        busy.set(true);
        let env = env.get_value();
        let locked = lock.get_untracked().is_some();
        spawn_local(async move {
            let answer = if locked {
                api::unlock_environment(&env, why.trim())
                    .await
                    .map(|a| a.message)
            } else {
                api::lock_environment(&env, why.trim())
                    .await
                    .map(|l| format!("You locked {}.", l.target))
            };
            match answer {
                Ok(message) => {
                    reason.set(String::new());
                    done.set(Some(message));
                    // The banner follows the server's view of the environment.
                    if let Ok(me) = api::whoami().await {
                        auth.me.set(me);
                    }
                }
                Err(e) => error.set(Some(e.message)),
            }
            busy.set(false);
        });
    };
    view! {
        {dynv(move || lock.get().map(|l| view! {
            <div class="notice notice-error" role="alert" data-testid="env-lock">
                <strong>"Locked. "</strong>{locked_line(&l)}
            </div>
        }))}
        {dynv(move || admin.get().then(|| {
            let label = if lock.get().is_some() { "Unlock" } else { "Lock environment" };
            view! {
                <form class="lock-form row" data-testid="lock-form"
                    on:submit=move |ev| { ev.prevent_default(); submit() }>
                    <label for="bg-lock-reason">{if lock.get().is_some() { "Why unlock?" } else { "Why lock? (shown to everyone here)" }}</label>
                    <input id="bg-lock-reason" type="text"
                        aria-invalid=move || error.get().is_some().to_string()
                        aria-describedby="bg-lock-error"
                        prop:value=move || reason.get()
                        on:input=move |ev| { reason.set(event_target_value(&ev)); error.set(None); }/>
                    <button type="submit" class="danger" disabled=busy data-action="lock">{label}</button>
                    {dynv(move || error.get().map(|m| view! { <p class="field-error" id="bg-lock-error" role="alert">{m}</p> }))}
                    {dynv(move || done.get().map(|m| view! { <p class="muted" role="status">{m}</p> }))}
                </form>
            }
        }))}
    }
}
