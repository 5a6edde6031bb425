//! The application shell. Pages and components will be added as modules under it.

use leptos::prelude::*;

use crate::api::{self, WhoAmI};

/// Product name shown in the header (keep `<title>` in index.html in step).
pub const PRODUCT_NAME: &str = "Break-glass";

#[component]
pub fn App() -> impl IntoView {
    let whoami = LocalResource::new(api::whoami);

    view! {
        <Suspense fallback=|| view! { <header class="topbar"><Brand/></header> }>
            {move || whoami.get().map(|result| view! { <Shell whoami=result/> })}
        </Suspense>
    }
}

#[component]
fn Brand() -> impl IntoView {
    view! {
        <div class="brand">
            <svg class="brand-mark" viewBox="0 0 16 16" width="18" height="18" aria-hidden="true">
                <rect x="1.5" y="1.5" width="13" height="13" rx="2" fill="none" stroke="currentColor" stroke-width="1.5"/>
                <path d="M5 2 7.5 7 5.5 9.5 9 14M7.5 7 14 6M5.5 9.5 2 11" fill="none" stroke="currentColor" stroke-width="1.2"/>
            </svg>
            <span class="brand-name">{PRODUCT_NAME}</span>
            <span class="brand-tagline">"for Kubernetes"</span>
        </div>
    }
}

#[component]
fn Shell(whoami: Result<WhoAmI, api::ApiError>) -> impl IntoView {
    let (me, error) = match whoami {
        Ok(me) => (Some(me), None),
        Err(e) => (None, Some(e.to_string())),
    };
    let dev_mode = me.as_ref().is_some_and(|m| m.dev_mode);
    let user = me.and_then(|m| m.user);

    view! {
        {dev_mode.then(|| view! { <div class="dev-banner" role="alert">"DEV MODE — demo users"</div> })}
        <header class="topbar">
            <Brand/>
            <div class="whoami" data-testid="whoami">
                {match user {
                    Some(name) => view! {
                        <span class="muted">"Signed in as "</span>
                        <strong class="user">{name}</strong>
                    }
                        .into_any(),
                    None => view! { <span class="muted">"not signed in"</span> }.into_any(),
                }}
            </div>
        </header>
        <main class="content">
            {error.map(|e| view! { <p class="notice notice-error">"Server unavailable: " {e}</p> })}
        </main>
    }
}
