//! The Debug panel's request form: mode, target container, reason, ticket, duration, recycle.
//! Checked with the shared validation rules before it is sent; the server's field errors are
//! shown next to their field too.

use std::collections::BTreeMap;

use breakglass_shared::api::{CreateSessionRequest, EnvironmentInfo};
use breakglass_shared::validate::{self, FieldError};
use breakglass_shared::{Mode, Session, Tier};
use leptos::prelude::*;
use leptos::task::spawn_local;

use breakglass_shared::listing::ContainerInfo;

use crate::api;
use crate::components::common::{dynv, focus_soon};
use crate::live::use_live;

/// The form's fields as typed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FormInput {
    /// `live` or `copy`.
    pub mode: String,
    /// Target container (empty: none).
    pub target: String,
    /// Reason.
    pub reason: String,
    /// Ticket URL (empty: none).
    pub ticket: String,
    /// Minutes as typed.
    pub duration: String,
    /// Recycle ticked.
    pub recycle: bool,
}

/// Checks every field (not just the first bad one) and builds the request. Errors are keyed by
/// the wire field name, as the server names them.
pub fn check(
    env: &EnvironmentInfo,
    namespace: &str,
    pod: &str,
    input: &FormInput,
) -> Result<CreateSessionRequest, BTreeMap<String, String>> {
    let mut errors = BTreeMap::new();
    let mut note = |e: FieldError| {
        errors.entry(e.field.to_string()).or_insert(e.message);
    };
    let mode = input.mode.parse().unwrap_or(Mode::Live);
    let target = input.target.trim();
    if !target.is_empty() {
        if let Err(e) = validate::dns_label("target_container", target) {
            note(e);
        }
    }
    if let Err(e) = validate::reason(&input.reason) {
        note(e);
    }
    let ticket = input.ticket.trim();
    if !ticket.is_empty() {
        if let Err(e) = validate::ticket(ticket) {
            note(e);
        }
    }
    let duration = match input.duration.trim().parse::<u32>() {
        Ok(d) => {
            if let Err(e) = validate::duration(d, &env.durations) {
                note(e);
            }
            Some(d)
        }
        Err(_) => {
            note(FieldError::new(
                "duration_minutes",
                "must be a whole number of minutes",
            ));
            None
        }
    };
    // The form offers the checkbox only where the tier allows recycling (the server refuses the
    // flag elsewhere), so a flag that cannot apply is never sent.
    let recycle = input.recycle && env.tier.allows_recycle();
    let req = CreateSessionRequest {
        environment: env.name.clone(),
        namespace: namespace.to_string(),
        pod: pod.to_string(),
        mode,
        target_container: (!target.is_empty()).then(|| target.to_string()),
        reason: input.reason.trim().to_string(),
        ticket: (!ticket.is_empty()).then(|| ticket.to_string()),
        duration_minutes: duration,
        recycle,
    };
    // The shared whole-request check is the last word (it also covers namespace and pod).
    if let Err(e) = req.validate(&env.durations) {
        note(e);
    }
    if errors.is_empty() {
        Ok(req)
    } else {
        Err(errors)
    }
}

/// The fields the form shows; a server error on any other field is shown above the form.
const FORM_FIELDS: [&str; 6] = [
    "mode",
    "target_container",
    "reason",
    "ticket",
    "duration_minutes",
    "recycle",
];

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
    let b = env.durations;
    let mode = RwSignal::new("live".to_string());
    let target = RwSignal::new(String::new());
    let reason = RwSignal::new(String::new());
    let ticket = RwSignal::new(String::new());
    let duration = RwSignal::new(b.default_minutes.to_string());
    let recycle = RwSignal::new(false);
    let errors = RwSignal::new(BTreeMap::<String, String>::new());
    let form_error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    let ground = env.tier == Tier::Ground;
    let offers_recycle = env.tier.allows_recycle();

    let error_of = move |field: &'static str| move || errors.with(|e| e.get(field).cloned());
    let invalid =
        move |field: &'static str| move || errors.with(|e| e.contains_key(field)).to_string();

    // A shown error goes (with its aria-invalid) as soon as the field's value is valid; new
    // errors wait for the next submit, so typing is not interrupted.
    {
        let env = env.clone();
        let namespace = namespace.clone();
        let pod = pod.clone();
        Effect::new(move |_| {
            let input = FormInput {
                mode: mode.get(),
                target: target.get(),
                reason: reason.get(),
                ticket: ticket.get(),
                duration: duration.get(),
                recycle: recycle.get(),
            };
            if errors.with_untracked(BTreeMap::is_empty) {
                return;
            }
            let now = check(&env, &namespace, &pod, &input)
                .err()
                .unwrap_or_default();
            let stale = errors.with_untracked(|e| e.keys().any(|f| !now.contains_key(f)));
            if stale {
                errors.update(|e| e.retain(|f, _| now.contains_key(f)));
            }
        });
    }

    let submit = {
        let env = env.clone();
        let namespace = namespace.clone();
        let pod = pod.clone();
        move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            form_error.set(None);
            let input = FormInput {
                mode: mode.get_untracked(),
                target: target.get_untracked(),
                reason: reason.get_untracked(),
                ticket: ticket.get_untracked(),
                duration: duration.get_untracked(),
                recycle: recycle.get_untracked(),
            };
            match check(&env, &namespace, &pod, &input) {
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
                                    errors.set(m);
                                }
                                None => form_error.set(Some(e.message)),
                            },
                        }
                        busy.set(false);
                    });
                }
            }
        }
    };

    let reason_len = move || reason.with(|r| r.trim().chars().count());
    view! {
        <form class="debug-form" on:submit=submit novalidate data-testid="debug-form" aria-labelledby="debug-form-title">
            <h3 id="debug-form-title">"Request access"</h3>
            {(env.tier == Tier::Flight).then(|| view! {
                <p class="notice small">"Flight environment: a second person with approve rights must approve before the terminal opens."</p>
            })}
            <fieldset class="field">
                <legend>"Mode"</legend>
                <label class="choice">
                    <input type="radio" name="mode" value="live" checked=true
                        on:change=move |_| mode.set("live".into())/>
                    <span><strong>"Live"</strong>" — a debug container added to the running pod"</span>
                </label>
                <label class="choice">
                    <input type="radio" name="mode" value="copy"
                        on:change=move |_| mode.set("copy".into())/>
                    <span><strong>"Copy"</strong>" — a hardened copy of the pod, out of traffic"</span>
                </label>
            </fieldset>

            <div class="field">
                <label for="bg-target">"Process access to container " <span class="muted">"(optional)"</span></label>
                {dynv(move || match containers.get() {
                    Some(list) if list.iter().any(|c| !c.ephemeral) => view! {
                        <select id="bg-target" name="target_container"
                            aria-invalid=invalid("target_container")
                            aria-describedby="bg-target-error bg-target-hint"
                            on:change=move |ev| target.set(event_target_value(&ev))>
                            <option value="" selected=move || target.with(String::is_empty)>"none: network and filesystem of the debug container only"</option>
                            {list.into_iter().filter(|c| !c.ephemeral).map(|c| {
                                let name = c.name.clone();
                                let selected = move || target.with(|t| *t == name);
                                view! { <option value=c.name.clone() selected=selected>{c.name.clone()}</option> }
                            }).collect_view()}
                        </select>
                    }
                        .into_any(),
                    _ => view! {
                        <input id="bg-target" name="target_container" type="text" placeholder="e.g. app"
                            autocomplete="off" spellcheck="false"
                            aria-invalid=invalid("target_container")
                            aria-describedby="bg-target-error bg-target-hint"
                            bind:value=target/>
                    }
                        .into_any(),
                })}
                <p class="hint" id="bg-target-hint">"The debug container can see this container's processes (ps, strace, /proc)."</p>
                <FieldError id="bg-target-error" message=Signal::derive(error_of("target_container"))/>
            </div>

            <div class="field">
                <label for="bg-reason">"Reason"</label>
                <textarea id="bg-reason" name="reason" rows="3" required
                    placeholder="What do you need to look at, and why?"
                    aria-invalid=invalid("reason")
                    aria-describedby="bg-reason-error bg-reason-hint"
                    bind:value=reason></textarea>
                <p class="hint" id="bg-reason-hint">
                    {dynv(move || format!("{} / {} characters (at least {})", reason_len(), validate::REASON_MAX, validate::REASON_MIN))}
                </p>
                <FieldError id="bg-reason-error" message=Signal::derive(error_of("reason"))/>
            </div>

            <div class="field">
                <label for="bg-ticket">"Ticket or incident link " <span class="muted">"(optional)"</span></label>
                <input id="bg-ticket" name="ticket" type="url" inputmode="url" placeholder="https://tracker.example.com/INC-42"
                    aria-invalid=invalid("ticket") aria-describedby="bg-ticket-error"
                    bind:value=ticket/>
                <FieldError id="bg-ticket-error" message=Signal::derive(error_of("ticket"))/>
            </div>

            <div class="field">
                <label for="bg-duration">"Duration (minutes)"</label>
                <input id="bg-duration" name="duration_minutes" type="number" inputmode="numeric"
                    min=b.min_minutes max=b.max_minutes step="1"
                    aria-invalid=invalid("duration_minutes")
                    aria-describedby="bg-duration-error bg-duration-hint"
                    bind:value=duration/>
                <p class="hint" id="bg-duration-hint">
                    {format!("Between {} and {} minutes here; access ends by itself after that.", b.min_minutes, b.max_minutes)}
                </p>
                <FieldError id="bg-duration-error" message=Signal::derive(error_of("duration_minutes"))/>
            </div>

            {offers_recycle.then(|| view! {
                <div class="field">
                    <label class="choice">
                        <input type="checkbox" name="recycle" bind:checked=recycle aria-describedby="bg-recycle-hint"/>
                        <span>"Recycle the pod at the end if it is the workload's last ready pod"</span>
                    </label>
                    <p class="hint" id="bg-recycle-hint">"Ground only: a debugged pod is otherwise left running."</p>
                    <FieldError id="bg-recycle-error" message=Signal::derive(error_of("recycle"))/>
                </div>
            })}

            {dynv(move || form_error.get().map(|m| view! { <p class="notice notice-error" role="alert">{m}</p> }))}
            <div class="row">
                <button type="submit" class="primary" disabled=busy data-testid="request-access">
                    {dynv(move || if busy.get() { "Sending…" } else if ground { "Open a debug session" } else { "Ask for approval" })}
                </button>
            </div>
        </form>
    }
}

/// A field's error message, announced when it appears.
#[component]
fn FieldError(
    /// Element id (the field's `aria-describedby` points here).
    id: &'static str,
    /// The message, if any.
    message: Signal<Option<String>>,
) -> impl IntoView {
    view! {
        <p class="field-error" id=id role="alert" hidden=move || message.with(Option::is_none)>
            {dynv(move || message.get())}
        </p>
    }
}

/// "reason: must be ..." -> "must be ..." (the message sits next to its field).
fn strip_field(message: &str) -> String {
    match message.split_once(": ") {
        Some((field, rest)) if !field.contains(' ') => rest.to_string(),
        _ => message.to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use breakglass_shared::validate::DurationBounds;
    use breakglass_shared::PermissionSet;

    fn env(tier: Tier) -> EnvironmentInfo {
        EnvironmentInfo {
            name: "prod".into(),
            tier,
            permissions: PermissionSet::ALL,
            durations: DurationBounds::default(),
            cluster: breakglass_shared::api::ClusterStatus::ApiOnly,
        }
    }

    fn good() -> FormInput {
        FormInput {
            mode: "live".into(),
            target: "app".into(),
            reason: "  orders stuck in the payment worker  ".into(),
            ticket: String::new(),
            duration: "30".into(),
            recycle: true,
        }
    }

    #[test]
    fn builds_the_request() {
        let req = check(&env(Tier::Flight), "shop", "web-1", &good());
        let req = req.unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(req.reason, "orders stuck in the payment worker");
        assert_eq!(req.ticket, None);
        assert_eq!(req.duration_minutes, Some(30));
        assert!(!req.recycle, "never recycled on Flight");
        let req = check(&env(Tier::Ground), "shop", "web-1", &good());
        assert!(req.is_ok_and(|r| r.recycle));
    }

    #[test]
    fn reports_every_bad_field() {
        let input = FormInput {
            target: "App_1".into(),
            reason: "short".into(),
            ticket: "INC-1".into(),
            duration: "600".into(),
            ..good()
        };
        let errors = check(&env(Tier::Flight), "shop", "web-1", &input)
            .err()
            .unwrap_or_default();
        let fields: Vec<&str> = errors.keys().map(String::as_str).collect();
        assert_eq!(
            fields,
            ["duration_minutes", "reason", "target_container", "ticket"]
        );
        let errors = check(&env(Tier::Flight), "Shop", "web-1", &good())
            .err()
            .unwrap_or_default();
        assert!(errors.contains_key("namespace"));
        let input = FormInput {
            duration: "ten".into(),
            ..good()
        };
        let errors = check(&env(Tier::Flight), "shop", "web-1", &input)
            .err()
            .unwrap_or_default();
        assert!(errors.contains_key("duration_minutes"));
    }

    #[test]
    fn server_messages_lose_their_field_prefix() {
        assert_eq!(strip_field("reason: must be longer"), "must be longer");
        assert_eq!(
            strip_field("the reason is odd: yes"),
            "the reason is odd: yes"
        );
    }
}
