//! `/deliveries`: the notification deliveries, for admins (those who hold `terminate`
//! somewhere): to whom each went, whether it arrived, how often it was tried, and the last
//! error of those that did not, so a receiver that stopped taking messages is seen.

use breakglass_shared::notify::{DeliveryView, DELIVERY_STATES};
use leptos::prelude::*;

use crate::api::{self, links};
use crate::components::common::{dynv, Empty, ErrorNotice, Loading};
use crate::fetch::fetch;
use crate::format;
use crate::title::set_title;

/// The deliveries page.
#[component]
pub fn DeliveriesPage() -> impl IntoView {
    set_title("Notification deliveries");
    let state = RwSignal::new(String::new());
    let rows = fetch(move || {
        let s = state.get();
        async move { api::deliveries((!s.is_empty()).then_some(s.as_str())).await }
    });
    view! {
        <section class="card deliveries">
            <h1>"Notification deliveries"</h1>
            <p class="muted">
                "The latest notifications to webhooks, Slack and mail, newest first. A pending one is tried again with growing pauses; a dead one was given up after the retry window."
            </p>
            <label>
                "Show "
                <select data-testid="delivery-state" on:change=move |ev| state.set(event_target_value(&ev))>
                    <option value="">"all"</option>
                    {DELIVERY_STATES.iter().map(|s| view! { <option value=*s>{*s}</option> }).collect_view()}
                </select>
            </label>
            <button class="link-button" on:click=move |_| rows.refetch()>"Refresh"</button>
            {dynv(move || match rows.get() {
                None => view! { <Loading label="Loading deliveries…"/> }.into_any(),
                Some(Err(e)) => view! { <ErrorNotice error=e/> }.into_any(),
                Some(Ok(list)) if list.is_empty() => view! { <Empty text="No notification was sent yet."/> }.into_any(),
                Some(Ok(list)) => view! {
                    <div class="table-scroll"><table class="delivery-table" data-testid="deliveries">
                        <thead><tr>
                            <th scope="col">"Written"</th>
                            <th scope="col">"Event"</th>
                            <th scope="col">"Receiver"</th>
                            <th scope="col">"Session"</th>
                            <th scope="col">"State"</th>
                            <th scope="col">"Tries"</th>
                            <th scope="col">"Last answer"</th>
                        </tr></thead>
                        <tbody>{list.into_iter().map(|d| view! { <Row d=d/> }).collect_view()}</tbody>
                    </table></div>
                }.into_any(),
            })}
        </section>
    }
}

/// One delivery.
#[component]
fn Row(
    /// The delivery.
    d: DeliveryView,
) -> impl IntoView {
    let answer = match (&d.last_error, d.last_status) {
        (Some(e), _) => e.clone(),
        (None, Some(s)) => format!("{s}"),
        (None, None) => String::new(),
    };
    view! {
        <tr data-state=d.state.clone()>
            <td>{format::timestamp(d.created_at)}</td>
            <td>{d.kind.replace('_', " ")}</td>
            <td>{d.receiver}</td>
            <td><a href=links::session(d.session_id)>{format!("{} · {}", d.environment, format::session_label(d.session_id))}</a></td>
            <td><span class="badge">{d.state.clone()}</span></td>
            <td>{d.attempts}</td>
            <td class="wrap">{answer}</td>
        </tr>
    }
}
