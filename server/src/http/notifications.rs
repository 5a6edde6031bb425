//! Notifications over HTTP: `GET /notifications/deliveries`, the recent deliveries with their
//! status and last error, for those who hold `terminate` (each sees the environments they hold
//! it in); and `GET /notifications/schema.json`, the JSON Schema of the webhook payload, next
//! to the OpenAPI document.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::Json;
use breakglass_shared::notify::{DeliveryView, Notification, DELIVERY_STATES};
use breakglass_shared::validate::FieldError;
use breakglass_shared::ErrorBody;
use serde::Deserialize;
use serde_json::Value;
use time::OffsetDateTime;
use utoipa::{IntoParams, OpenApi};

use crate::auth::CurrentUser;
use crate::config::Config;
use crate::error::ApiError;
use crate::store::{Delivery, Store};

/// Most deliveries one page lists.
const MAX_LIMIT: i64 = 500;

/// The query of `GET /notifications/deliveries`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct DeliveriesQuery {
    /// Only `pending`, `sent` or `dead` ones.
    pub state: Option<String>,
    /// How many, newest first (1 to 500; default 100).
    pub limit: Option<i64>,
}

/// The recent deliveries of the environments where the caller holds `terminate`.
#[utoipa::path(get, path = "/api/breakglass/notifications/deliveries", tag = "notifications",
    params(DeliveriesQuery),
    responses(
        (status = 200, description = "Deliveries, newest first", body = Vec<DeliveryView>),
        (status = 400, description = "A bad `state` or `limit` (the field is named)", body = ErrorBody),
        (status = 401, description = "Not signed in", body = ErrorBody),
        (status = 403, description = "Needs tower.breakglass.terminate in some environment", body = ErrorBody),
    ))]
pub async fn deliveries(
    State(config): State<Arc<Config>>,
    State(store): State<Arc<dyn Store>>,
    user: CurrentUser,
    Query(q): Query<DeliveriesQuery>,
) -> Result<Json<Vec<DeliveryView>>, ApiError> {
    let admin_of: Vec<&str> = config
        .environments
        .iter()
        .filter(|e| e.permissions_of(&user.name, &user.groups).terminate)
        .map(|e| e.name.as_str())
        .collect();
    if admin_of.is_empty() {
        return Err(ApiError::forbidden(
            "the delivery log is for admins: it needs tower.breakglass.terminate in an environment",
        ));
    }
    if let Some(s) = q.state.as_deref().filter(|s| !DELIVERY_STATES.contains(s)) {
        return Err(FieldError::new(
            "state",
            format!("`{s}` is no state; use pending, sent or dead"),
        )
        .into());
    }
    let limit = q.limit.unwrap_or(100);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(FieldError::new("limit", format!("must be 1 to {MAX_LIMIT}")).into());
    }
    let rows = store.deliveries(q.state.as_deref(), limit).await?;
    Ok(Json(
        rows.into_iter()
            .map(view)
            .filter(|v| admin_of.contains(&v.environment.as_str()))
            .collect(),
    ))
}

fn at_ms(ms: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// What the page shows of a stored delivery (its environment read from its payload).
fn view(d: Delivery) -> DeliveryView {
    let environment = match serde_json::from_str::<Notification>(&d.payload) {
        Ok(n) => n.session.environment,
        // A SIEM's row holds an OCSF event.
        Err(_) => serde_json::from_str::<Value>(&d.payload)
            .ok()
            .and_then(|v| breakglass_shared::ocsf::environment_of(&v).map(str::to_string))
            .unwrap_or_default(),
    };
    DeliveryView {
        webhook_id: crate::notify::webhook_id(&d),
        environment,
        receiver: d.receiver,
        kind: d.kind,
        session_id: d.session_id,
        state: d.state,
        attempts: d.attempts,
        created_at: at_ms(d.created_at_ms),
        next_at: at_ms(d.next_at_ms),
        sent_at: d.sent_at_ms.map(at_ms),
        last_status: d.last_status,
        last_error: d.last_error,
    }
}

#[derive(OpenApi)]
#[openapi(components(schemas(Notification)))]
struct PayloadDoc;

/// The JSON Schema (2020-12) of the payload every webhook receives, with the types it uses
/// under `$defs`.
#[utoipa::path(get, path = "/api/breakglass/notifications/schema.json", tag = "notifications",
    responses((status = 200, description = "The JSON Schema of the webhook payload", body = Object)))]
pub async fn schema() -> Json<Value> {
    Json(payload_schema())
}

/// The payload's JSON Schema, made from the same types the server serialises.
pub fn payload_schema() -> Value {
    let doc = PayloadDoc::openapi();
    let defs = serde_json::to_value(doc.components.map(|c| c.schemas).unwrap_or_default())
        .unwrap_or_default();
    let text = serde_json::to_string(&defs)
        .unwrap_or_default()
        .replace("#/components/schemas/", "#/$defs/");
    let defs: Value = serde_json::from_str(&text).unwrap_or_default();
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "breakglass-notification-v1",
        "title": "Break-glass notification, version 1",
        "$ref": "#/$defs/Notification",
        "$defs": defs,
    })
}
