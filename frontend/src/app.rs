//! The application shell: who is signed in (and the dev-login switcher), the live feed, the
//! top bar and the route table. Pages live in [`crate::pages`], components in
//! [`crate::components`]; what they share with the shell (the signed-in user, the title) is in
//! [`crate::auth`] and [`crate::title`], below them all.

use breakglass_shared::api::{LogoutResponse, WhoAmI, OIDC_LOGIN_PATH};
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::api::{self, links};
use crate::auth::{use_auth, Auth};
use crate::components::actions::{DenyDrafts, PendingConfirms};
use crate::components::common::{dynv, ErrorNotice, Loading};
use crate::components::queue_strip::count_waiting_for_me;
use crate::fetch::fetch;
use crate::live::{provide_live, use_live, StreamStatus};
use crate::pages;
use crate::router::{provide_route, provide_router, use_location, Route, A};
use crate::title::{set_title, PRODUCT_NAME};

/// The app: asks the server who we are, then shows the shell.
#[component]
pub fn App() -> impl IntoView {
    provide_router();
    let whoami = fetch(api::whoami);
    view! {
            {dynv(move || match whoami.get() {
                None => view! {
                    <header class="topbar"><Brand/></header>
                    <main class="content"><Loading label="Connecting to the server…"/></main>
                }
                    .into_any(),
                Some(Err(e)) => view! {
                    <header class="topbar"><Brand/></header>
                    <main class="content">
                        <ErrorNotice error=e/>
                        <button class="primary" on:click=move |_| whoami.refetch()>"Try again"</button>
                    </main>
                }
                    .into_any(),
                Some(Ok(me)) => view! { <Shell me=me/> }.into_any(),
            })}
    }
}

#[component]
fn Brand() -> impl IntoView {
    view! {
        <A href=links::home() class="brand">
            <svg class="brand-mark" viewBox="0 0 16 16" width="18" height="18" aria-hidden="true">
                <rect x="1.5" y="1.5" width="13" height="13" rx="2" fill="none" stroke="currentColor" stroke-width="1.5"/>
                <path d="M5 2 7.5 7 5.5 9.5 9 14M7.5 7 14 6M5.5 9.5 2 11" fill="none" stroke="currentColor" stroke-width="1.2"/>
            </svg>
            <span class="brand-name">{PRODUCT_NAME}</span>
            <span class="brand-tagline">"for Kubernetes"</span>
        </A>
    }
}

/// The signed-in (or sign-in) shell around the routes.
#[component]
fn Shell(
    /// The server's first `whoami` answer.
    me: WhoAmI,
) -> impl IntoView {
    let auth = Auth {
        me: RwSignal::new(me),
    };
    provide_context(auth);
    // The session cookie expired (or was revoked): ask again who we are, which shows the
    // sign-in page; the URL stays, so signing in returns to the same page.
    api::on_signed_out(move || {
        if auth.me.with_untracked(|m| m.user.is_some()) {
            spawn_local(async move {
                if let Ok(me) = api::whoami().await {
                    auth.me.set(me);
                }
            });
        }
    });
    let user = Memo::new(move |_| auth.user());
    let live = provide_live(user.into());
    // A lock taken or lifted anywhere: every page of its environment says so, without a
    // reload (the banners read the environments of `whoami`).
    Effect::new(move |seen: Option<u64>| {
        let now = live.locks.get();
        if seen.is_some_and(|s| s != now) {
            spawn_local(async move {
                if let Ok(me) = api::whoami().await {
                    auth.me.set(me);
                }
            });
        }
        now
    });
    let dev_mode = move || auth.me.with(|m| m.dev_mode);
    let location = use_location();
    let on_wall = move || location.pathname() == links::ops_wall();

    view! {
        <a class="skip-link" href="#main">"Skip to content"</a>
        <Show when=dev_mode>
            // A landmark of its own, so nothing on the page sits outside one.
            <aside class="dev-banner" aria-label="Dev mode warning" data-testid="dev-banner">
                <span class="dev-long">"Dev mode — demo users sign in without a password. Never use this in production."</span>
                <span class="dev-short">"Dev mode — no passwords, not for production"</span>
            </aside>
        </Show>
        <Show when=move || !on_wall()>
            <Topbar/>
        </Show>
        <main id="main" class=move || if on_wall() { "wall" } else { "content" } tabindex="-1">
            {dynv(move || match user.get() {
                None => view! { <SignIn/> }.into_any(),
                // Keyed on the user: switching users rebuilds every page and list.
                Some(_) => view! { <AppRoutes/> }.into_any(),
            })}
        </main>
    }
}

/// The signed-in user's pages: the page of the address shown, built again only when the route
/// changes, under the state that outlives a page (drafts, questions, the waiting count).
#[component]
fn AppRoutes() -> impl IntoView {
    DenyDrafts::provide();
    PendingConfirms::provide();
    crate::components::kept::Kept::provide();
    count_waiting_for_me();
    let route = provide_route();
    dynv(move || match route.get() {
        Route::Home => view! { <pages::Home/> }.into_any(),
        Route::OpsWall => pages::chunks::ops_wall(),
        Route::Account => pages::chunks::account(),
        Route::Deliveries => pages::chunks::deliveries(),
        Route::RecordingSearch => pages::chunks::search(),
        Route::Environment | Route::Namespace => pages::chunks::environment(),
        Route::Pod => view! { <pages::PodPage/> }.into_any(),
        Route::Session => pages::chunks::session(),
        Route::Recording => pages::chunks::recording(),
        Route::NotFound => view! { <pages::NotFound/> }.into_any(),
    })
}

#[component]
fn Topbar() -> impl IntoView {
    let auth = use_auth();
    let live = use_live();
    let error = RwSignal::new(None::<api::ApiError>);
    let sign_out = move |_| {
        spawn_local(async move {
            match api::logout().await {
                // The provider ends its own session too, then sends the browser back here.
                Ok(LogoutResponse {
                    end_session_url: Some(url),
                }) => {
                    if let Some(w) = web_sys::window() {
                        let _ = w.location().assign(&url);
                    }
                }
                Ok(_) => match api::whoami().await {
                    Ok(me) => auth.me.set(me),
                    Err(e) => error.set(Some(e)),
                },
                Err(e) => error.set(Some(e)),
            }
        });
    };
    view! {
        <header class="topbar">
            <Brand/>
            <nav class="nav" aria-label="Main">
                <A href=links::home() exact=true>"Home"</A>
                <A href=links::ops_wall()>"Ops wall"</A>
                <A href=links::recording_search()>"Search"</A>
                <A href=links::account()>"Account"</A>
                {move || auth.me.with(|m| m.environments.iter().any(|e| e.permissions.terminate)).then(|| view! {
                    <A href=links::deliveries()>"Deliveries"</A>
                })}
            </nav>
            <div class="topbar-right">
                {move || auth.user().map(|_| view! { <crate::components::queue_strip::NotifyMe/> })}
                {dynv(move || {
                    auth.user()
                        .map(|_| {
                            let (text, class) = match live.status.get() {
                                StreamStatus::Open => ("live", "live-dot live-on"),
                                StreamStatus::Connecting => ("reconnecting…", "live-dot live-wait"),
                                StreamStatus::Off => ("offline", "live-dot"),
                            };
                            view! {
                                <span class=class title="Live updates from the server">{text}</span>
                            }
                        })
                })}
                <div class="whoami" data-testid="whoami">
                    {dynv(move || match auth.user() {
                        Some(name) => view! {
                            <Show
                                when=move || auth.me.with(|m| m.dev_mode)
                                fallback=move || view! {
                                    <span class="muted">"Signed in as "</span>
                                    <strong class="user">{auth.user()}</strong>
                                }
                            >
                                <UserSwitcher/>
                            </Show>
                            <button class="link-button" on:click=sign_out data-testid="sign-out"
                                title=format!("Sign out {name}")>
                                "Sign out"
                            </button>
                        }
                            .into_any(),
                        None => view! { <span class="muted">"not signed in"</span> }.into_any(),
                    })}
                </div>
            </div>
        </header>
        {dynv(move || error.get().map(|e| view! { <div class="content"><ErrorNotice error=e/></div> }))}
    }
}

/// Signs in as demo user `name`; the shell rebuilds for them.
fn dev_sign_in(
    auth: Auth,
    name: String,
    error: RwSignal<Option<api::ApiError>>,
    busy: RwSignal<bool>,
) {
    busy.set(true);
    spawn_local(async move {
        match api::dev_login(&name).await {
            Ok(me) => {
                error.try_set(None);
                auth.me.set(me);
            }
            Err(e) => {
                error.try_set(Some(e));
            }
        }
        // Signing in can replace the page that owns these.
        busy.try_set(false);
    });
}

/// Dev mode: a select to switch demo users.
#[component]
fn UserSwitcher() -> impl IntoView {
    let auth = use_auth();
    let error = RwSignal::new(None::<api::ApiError>);
    let busy = RwSignal::new(false);
    let users = move || auth.me.with(|m| m.dev_users.clone());
    view! {
        <label class="switcher">
            <span class="muted">"Signed in as (demo) "</span>
            <select
                data-testid="user-switcher"
                prop:value=move || auth.user().unwrap_or_default()
                disabled=busy
                on:change=move |ev| {
                    let name = event_target_value(&ev);
                    if Some(&name) != auth.user().as_ref() {
                        dev_sign_in(auth, name, error, busy);
                    }
                }
            >
                {dynv(move || {
                    users()
                        .into_iter()
                        .map(|u| view! { <option value=u.clone()>{u.clone()}</option> })
                        .collect_view()
                })}
            </select>
        </label>
        {dynv(move || error.get().map(|e| view! { <span class="field-error" role="alert">{e.message}</span> }))}
    }
}

/// Not signed in: the organisation's sign-in (OIDC) when configured, the dev-login picker in
/// dev mode, else a note about the authenticating proxy.
#[component]
fn SignIn() -> impl IntoView {
    set_title("Sign in");
    let auth = use_auth();
    let error = RwSignal::new(None::<api::ApiError>);
    let busy = RwSignal::new(false);
    let dev = move || auth.me.with(|m| m.dev_mode);
    let oidc = move || auth.me.with(|m| m.oidc_login);
    let location = use_location();
    // Back to this very page once signed in.
    let oidc_href = move || {
        let here = format!("{}{}", location.pathname(), location.search());
        format!("{OIDC_LOGIN_PATH}?return_to={}", api::encode(&here))
    };
    view! {
        <section class="card signin" aria-labelledby="signin-title">
            <h1 id="signin-title">"Sign in"</h1>
            <Show when=oidc>
                <p>"Sign in with your organisation's account; you come back to this page afterwards."</p>
                <p>
                    <a class="button primary" data-testid="oidc-sign-in" href=oidc_href rel="external">
                        "Sign in with your organisation"
                    </a>
                </p>
            </Show>
            <Show
                when=dev
                fallback=move || (!oidc()).then(|| view! {
                    <p>
                        "You are not signed in. This server expects your organisation's login (an "
                        "authenticating proxy in front of it): open it through that address, or ask "
                        "your platform team."
                    </p>
                })
            >
                <p>"Pick a demo user. No password: this server runs in dev mode."</p>
                <ul class="user-picker">
                    {dynv(move || {
                        auth.me
                            .with(|m| m.dev_users.clone())
                            .into_iter()
                            .map(|u| {
                                let name = u.clone();
                                let hint = match u.as_str() {
                                    "alice" => "engineer: requests access",
                                    "bob" => "SRE: requests and approves",
                                    "carol" => "admin: everything, incl. breaking the glass",
                                    _ => "demo user",
                                };
                                view! {
                                    <li>
                                        <button
                                            class="user-choice"
                                            data-user=u.clone()
                                            disabled=busy
                                            on:click=move |_| dev_sign_in(auth, name.clone(), error, busy)
                                        >
                                            <strong>{u.clone()}</strong>
                                            <span class="muted">{hint}</span>
                                        </button>
                                    </li>
                                }
                            })
                            .collect_view()
                    })}
                </ul>
            </Show>
            {dynv(move || error.get().map(|e| view! { <ErrorNotice error=e/> }))}
        </section>
    }
}
