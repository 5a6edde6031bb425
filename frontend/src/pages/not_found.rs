//! Unknown paths.

use leptos::prelude::*;

use crate::api::links;
use crate::title::set_title;

/// Shown for a path the app does not know.
#[component]
pub fn NotFound() -> impl IntoView {
    set_title("Not found");
    view! {
        <section class="card">
            <h1>"Page not found"</h1>
            <p>"There is nothing at this address. " <a href=links::home()>"Go to the start page"</a>"."</p>
        </section>
    }
}
