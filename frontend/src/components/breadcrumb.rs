//! The trail from Home to the page shown, the one every page's breadcrumb is drawn with.

use breakglass_shared::Session;
use leptos::prelude::*;

use crate::api::links;
use crate::components::common::dynv;

/// One step of a [`Breadcrumb`] between Home and the page: where it goes, and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Crumb {
    /// The step's page.
    pub href: String,
    /// What the link says.
    pub text: String,
}

impl Crumb {
    /// A step to `href` that reads `text`.
    pub fn new(href: String, text: impl Into<String>) -> Crumb {
        Crumb {
            href,
            text: text.into(),
        }
    }
}

/// The steps to a session's pod (its environment, then the pod), once the session is known.
pub fn steps_to_pod(s: Option<&Session>) -> Vec<Crumb> {
    s.map(|s| {
        vec![
            Crumb::new(links::environment(&s.environment), s.environment.clone()),
            Crumb::new(
                links::pod(&s.environment, &s.namespace, &s.pod),
                format!("{}/{}", s.namespace, s.pod),
            ),
        ]
    })
    .unwrap_or_default()
}

/// A `nav` landmark labelled "Breadcrumb": Home, the steps, then the page itself, marked
/// `aria-current="page"` and not a link.
#[component]
pub fn Breadcrumb(
    /// The steps between Home and the page, in order (a signal: a session's page learns its
    /// pod once the session has loaded).
    #[prop(into)]
    steps: Signal<Vec<Crumb>>,
    /// The page itself.
    #[prop(into)]
    current: String,
) -> impl IntoView {
    view! {
        <nav class="breadcrumb" aria-label="Breadcrumb">
            <a href=links::home()>"Home"</a> " › "
            {dynv(move || {
                steps
                    .get()
                    .into_iter()
                    .map(|c| view! { <a href=c.href>{c.text}</a> " › " })
                    .collect_view()
            })}
            <span aria-current="page">{current}</span>
        </nav>
    }
}
