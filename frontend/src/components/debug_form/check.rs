//! The form's fields as typed, checked with the shared validation rules into the request the
//! server takes; every bad field is named, as the server names it.

use std::collections::BTreeMap;

use breakglass_shared::api::{CreateSessionRequest, EnvironmentInfo};
use breakglass_shared::validate::{self, FieldError};
use breakglass_shared::Mode;

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
pub const FORM_FIELDS: [&str; 6] = [
    "mode",
    "target_container",
    "reason",
    "ticket",
    "duration_minutes",
    "recycle",
];

/// "reason: must be ..." -> "must be ..." (the message sits next to its field).
pub fn strip_field(message: &str) -> String {
    match message.split_once(": ") {
        Some((field, rest)) if !field.contains(' ') => rest.to_string(),
        _ => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use breakglass_shared::validate::DurationBounds;
    use breakglass_shared::PermissionSet;
    use breakglass_shared::Tier;

    fn env(tier: Tier) -> EnvironmentInfo {
        EnvironmentInfo {
            name: "prod".into(),
            tier,
            permissions: PermissionSet::ALL,
            durations: DurationBounds::default(),
            cluster: breakglass_shared::api::ClusterStatus::ApiOnly,
            lock: None,
            step_up: false,
            moderated: false,
            auditors_watch: false,
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
