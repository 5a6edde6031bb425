//! The signed-in person's account page: their security keys, which confirm approving,
//! breaking the glass and terminating where an environment asks for one. A key is added with
//! a name and a touch, and removed with one click.

use breakglass_shared::step_up::{self, SecurityKeyInfo};
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::api;
use crate::auth::use_auth;
use crate::components::common::{dynv, ErrorNotice, Loading};
use crate::fetch::fetch;
use crate::format;
use crate::title::set_title;

/// The account page.
#[component]
pub fn AccountPage() -> impl IntoView {
    set_title("Your account");
    let auth = use_auth();
    let keys = fetch(move || async move { api::keys().await });
    // The count in `whoami` follows what changed here (the buttons read it).
    let refresh = move || {
        keys.refetch();
        spawn_local(async move {
            if let Ok(me) = api::whoami().await {
                auth.me.set(me);
            }
        });
    };
    let asking: Vec<String> = auth.me.with_untracked(|m| {
        m.environments
            .iter()
            .filter(|e| e.step_up)
            .map(|e| e.name.clone())
            .collect()
    });
    view! {
        <section class="card account">
            <h1>"Your account"</h1>
            <p>{format!("Signed in as {}.", auth.user().unwrap_or_default())}</p>
            <h2>"Security keys"</h2>
            <p class="muted">
                {if asking.is_empty() {
                    "No environment of yours asks for a security key now; one added here is ready when one does.".to_string()
                } else {
                    format!("In {}, approving, breaking the glass and terminating ask for a touch of one of these keys.", asking.join(", "))
                }}
            </p>
            {dynv(move || match keys.get() {
                None => view! { <Loading label="Loading your keys…"/> }.into_any(),
                Some(Err(e)) => view! { <ErrorNotice error=e/> }.into_any(),
                Some(Ok(list)) if list.is_empty() => view! {
                    <p data-testid="no-keys">"You have no security key yet."</p>
                }.into_any(),
                Some(Ok(list)) => view! {
                    <ul class="key-list" data-testid="keys">
                        {list.into_iter().map(|k| view! { <KeyItem key=k on_removed=refresh/> }).collect_view()}
                    </ul>
                }.into_any(),
            })}
            <AddKey on_added=refresh/>
        </section>
    }
}

/// One key, with its Remove button.
#[component]
fn KeyItem(
    /// The key.
    key: SecurityKeyInfo,
    /// Called once it is removed.
    on_removed: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let error = RwSignal::new(None::<String>);
    let id = key.id;
    let remove = move |_| {
        spawn_local(async move {
            match api::remove_key(id).await {
                Ok(()) => on_removed(),
                Err(e) => {
                    error.try_set(Some(e.message));
                }
            }
        });
    };
    let used = key.last_used_at.map_or("never used".to_string(), |at| {
        format!("last used {}", format::timestamp(at))
    });
    view! {
        <li class="key-item" data-testid="key">
            <strong>{key.name.clone()}</strong>
            <span class="muted small">{format!(" added {} · {used}", format::timestamp(key.created_at))}</span>
            " "
            <button class="link-button" on:click=remove aria-label=format!("Remove {}", key.name)>"Remove"</button>
            {dynv(move || error.get().map(|m| view! { <p class="field-error" role="alert">{m}</p> }))}
        </li>
    }
}

/// The form that adds a key: a name, then the browser asks for a touch.
#[component]
fn AddKey(
    /// Called once a key is added.
    on_added: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let name = RwSignal::new(String::new());
    let busy = RwSignal::new(false);
    let error = RwSignal::new(None::<String>);
    let done = RwSignal::new(None::<String>);
    let submit = move || {
        let n = name.get_untracked();
        if let Err(e) = step_up::key_name(&n) {
            error.set(Some(format!("The name {}", e.message)));
            return;
        }
        error.set(None);
        done.set(None);
        busy.set(true);
        spawn_local(async move {
            match api::add_key(&n).await {
                Ok(k) => {
                    name.try_set(String::new());
                    done.try_set(Some(format!("Added {}.", k.name)));
                    on_added();
                }
                Err(e) => {
                    error.try_set(Some(e.message));
                }
            }
            busy.try_set(false);
        });
    };
    view! {
        <form class="key-form row" data-testid="add-key" on:submit=move |ev| { ev.prevent_default(); submit() }>
            <label for="bg-key-name">"Name of the new key"</label>
            <input id="bg-key-name" type="text" maxlength="100" placeholder="YubiKey on my keyring"
                aria-invalid=move || error.get().is_some().to_string()
                aria-describedby="bg-key-error"
                prop:value=move || name.get()
                on:input=move |ev| { name.set(event_target_value(&ev)); error.set(None); }/>
            <button type="submit" class="primary" disabled=busy data-action="add-key">"Add a security key"</button>
            {dynv(move || error.get().map(|m| view! { <p class="field-error" id="bg-key-error" role="alert">{m}</p> }))}
            {dynv(move || done.get().map(|m| view! { <p class="muted" role="status" data-testid="key-added">{m}</p> }))}
        </form>
    }
}
