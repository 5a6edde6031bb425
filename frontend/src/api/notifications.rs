//! The admins' delivery log of notifications.

use breakglass_shared::notify::DeliveryView;

use super::{encode, get_json, ApiError};

/// `GET /notifications/deliveries`, optionally only those in `state`, newest first.
pub async fn deliveries(state: Option<&str>) -> Result<Vec<DeliveryView>, ApiError> {
    let path = match state {
        Some(s) => format!("/notifications/deliveries?state={}", encode(s)),
        None => "/notifications/deliveries".to_string(),
    };
    get_json("load the notification deliveries", &path).await
}
