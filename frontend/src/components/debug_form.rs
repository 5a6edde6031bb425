//! The Debug panel's request form: mode, target container, reason, ticket, duration, recycle.
//! Checked with the shared validation rules before it is sent; the server's field errors are
//! shown next to their field too.
//!
//! The fields as typed are one signal ([`Form::input`]), written only through [`Form::edit`];
//! the errors shown are the last submit's, each dropped by the edit that makes its field
//! valid (new errors wait for the next submit, so typing is not interrupted).

use std::collections::BTreeMap;

use breakglass_shared::api::EnvironmentInfo;
use breakglass_shared::listing::ContainerInfo;
use breakglass_shared::{Session, Tier};
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::api;
use crate::components::common::{dynv, focus_soon};
use crate::live::use_live;

mod check;
mod fields;

pub use check::{check, FormInput};

use check::{strip_field, FORM_FIELDS};
use fields::{DurationField, ModeField, ReasonField, RecycleField, TargetField, TicketField};

/// The form's state, shared by its fields (a `Copy` handle).
#[derive(Clone, Copy)]
struct Form {
    /// The fields as typed.
    input: RwSignal<FormInput>,
    /// The errors shown, by wire field name.
    errors: RwSignal<BTreeMap<String, String>>,
    /// What the request is for: the environment, the namespace and the pod.
    target: StoredValue<(EnvironmentInfo, String, String)>,
}

impl Form {
    /// The fields checked now: the request, or every error.
    fn checked(
        &self,
    ) -> Result<breakglass_shared::api::CreateSessionRequest, BTreeMap<String, String>> {
        let input = self.input.get_untracked();
        self.target
            .with_value(|(env, namespace, pod)| check(env, namespace, pod, &input))
    }

    /// Changes the fields as typed; an error shown goes (with its `aria-invalid`) as soon as
    /// its field is valid.
    fn edit(&self, change: impl FnOnce(&mut FormInput)) {
        self.input.update(change);
        if self.errors.with_untracked(BTreeMap::is_empty) {
            return;
        }
        let now = self.checked().err().unwrap_or_default();
        if self
            .errors
            .with_untracked(|e| e.keys().any(|f| !now.contains_key(f)))
        {
            self.errors.update(|e| e.retain(|f, _| now.contains_key(f)));
        }
    }

    /// One field's value as typed (tracked).
    fn value(&self, field: fn(&FormInput) -> &String) -> String {
        self.input.with(|i| field(i).clone())
    }

    /// The error shown at `field` (tracked).
    fn error_of(&self, field: &'static str) -> Signal<Option<String>> {
        let errors = self.errors;
        Signal::derive(move || errors.with(|e| e.get(field).cloned()))
    }

    /// `aria-invalid` of `field`.
    fn invalid(&self, field: &'static str) -> impl Fn() -> String + Copy + Send + 'static {
        let errors = self.errors;
        move || errors.with(|e| e.contains_key(field)).to_string()
    }
}

/// The request form of a pod's Debug panel.
#[component]
pub fn DebugForm(
    /// The environment (tier, duration bounds).
    env: EnvironmentInfo,
    /// The pod's namespace.
    #[prop(into)]
    namespace: String,
    /// The pod.
    #[prop(into)]
    pod: String,
    /// The pod's containers when the cluster listing answered (a select), else `None` (a text
    /// input).
    #[prop(into)]
    containers: Signal<Option<Vec<ContainerInfo>>>,
    /// Called with the new session once the server accepted the request.
    on_created: Callback<Session>,
) -> impl IntoView {
    let live = use_live();
    let bounds = env.durations;
    let tier = env.tier;
    let may_break = env.permissions.self_approve;
    let form = Form {
        input: RwSignal::new(FormInput {
            mode: "live".into(),
            duration: bounds.default_minutes.to_string(),
            ..FormInput::default()
        }),
        errors: RwSignal::new(BTreeMap::new()),
        target: StoredValue::new((env, namespace, pod)),
    };
    let errors = form.errors;
    let form_error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);

    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        form_error.set(None);
        match form.checked() {
            Err(e) => {
                focus_first(&e);
                let other: Vec<String> = e
                    .iter()
                    .filter(|(f, _)| !FORM_FIELDS.contains(&f.as_str()))
                    .map(|(f, m)| format!("{f}: {m}"))
                    .collect();
                if !other.is_empty() {
                    form_error.set(Some(other.join("; ")));
                }
                errors.set(e);
            }
            Ok(req) => {
                errors.set(BTreeMap::new());
                busy.set(true);
                spawn_local(async move {
                    match api::create_session(&req).await {
                        Ok(s) => {
                            let id = s.id;
                            live.upsert(s.clone());
                            on_created.run(s);
                            // The form goes away: focus goes to the request's new state.
                            focus_soon(vec![format!("#panel-{id}")]);
                        }
                        Err(e) => match e
                            .field
                            .clone()
                            .filter(|f| FORM_FIELDS.contains(&f.as_str()))
                        {
                            Some(f) => {
                                let mut m = BTreeMap::new();
                                m.insert(f, strip_field(&e.message));
                                focus_first(&m);
                                errors.try_set(m);
                            }
                            None => {
                                form_error.try_set(Some(e.message));
                            }
                        },
                    }
                    // The form goes away once the request exists: only `try_` writes here.
                    busy.try_set(false);
                });
            }
        }
    };

    view! {
        <form class="debug-form" on:submit=submit novalidate data-testid="debug-form" aria-labelledby="debug-form-title">
            <h3 id="debug-form-title">"Request access"</h3>
            {(tier == Tier::Flight).then(|| view! {
                <p class="notice small">"Flight environment: a second person with approve rights must approve before the terminal opens."</p>
            })}
            // Those who may break the glass learn it here, before they send anything.
            {(tier == Tier::Flight && may_break).then(|| view! {
                <p class="notice notice-warn small" data-testid="break-glass-hint">
                    <strong>"You may break the glass: "</strong>
                    "send the request, then choose Break the glass on it to open the terminal without waiting for an approval. The session is then due for review by someone else."
                </p>
            })}
            <ModeField form=form/>
            <TargetField form=form containers=containers/>
            <ReasonField form=form/>
            <TicketField form=form/>
            <DurationField form=form bounds=bounds/>
            {tier.allows_recycle().then(|| view! { <RecycleField form=form/> })}
            {dynv(move || form_error.get().map(|m| view! { <p class="notice notice-error" role="alert">{m}</p> }))}
            <div class="row">
                <button type="submit" class="primary" disabled=busy data-testid="request-access">
                    {dynv(move || if busy.get() { "Sending…" } else if tier == Tier::Ground { "Open a debug session" } else { "Ask for approval" })}
                </button>
            </div>
        </form>
    }
}

/// Moves keyboard focus to the first field in error, in form order.
fn focus_first(errors: &BTreeMap<String, String>) {
    use wasm_bindgen::JsCast;
    let order = [
        ("target_container", "bg-target"),
        ("reason", "bg-reason"),
        ("ticket", "bg-ticket"),
        ("duration_minutes", "bg-duration"),
    ];
    let Some((_, id)) = order.iter().find(|(f, _)| errors.contains_key(*f)) else {
        return;
    };
    if let Some(el) = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.get_element_by_id(id))
        .and_then(|e| e.dyn_into::<web_sys::HtmlElement>().ok())
    {
        let _ = el.focus();
    }
}
