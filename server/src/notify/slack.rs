//! Slack incoming webhooks: a Block Kit message made from the payload. Its buttons are links to
//! the session's page (and the recording): decisions are taken there, signed in, never from a
//! chat message.

use breakglass_shared::notify::Notification;
use serde_json::{json, Value};

use super::{Answer, Failure};

/// The Block Kit message of `note`.
pub fn message(note: &Notification) -> Value {
    let s = &note.session;
    let headline = note
        .notice_kind()
        .map_or_else(|| note.kind.clone(), |k| k.headline(s));
    let mut fields = vec![
        field("Environment", &s.environment),
        field("Tier", s.tier.as_str()),
        field("Requester", &s.requester),
        field("Pod", &format!("{}/{}", s.namespace, s.pod)),
        field("Duration", &format!("{} min", s.duration_minutes)),
        field(
            "Waiting",
            &format!("{} min", (note.at - s.created_at).whole_minutes().max(0)),
        ),
    ];
    if let Some(t) = &s.ticket {
        fields.push(json!({"type": "mrkdwn", "text": format!("*Ticket*\n<{}|{}>", t, escape(t))}));
    }
    if let Some(by) = note.ended_by() {
        fields.push(field("Ended by", &by));
    }
    let mut buttons = vec![json!({
        "type": "button",
        "text": {"type": "plain_text", "text": "Open the session"},
        "url": note.links.session,
    })];
    if let Some(r) = &note.links.recording {
        buttons.push(json!({
            "type": "button",
            "text": {"type": "plain_text", "text": "Watch the recording"},
            "url": r,
        }));
    }
    json!({
        "text": headline,
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": truncate(&headline, 150)}},
            {"type": "section", "text": {"type": "mrkdwn", "text": format!("*Reason*\n{}", escape(&s.reason))}},
            {"type": "section", "fields": fields},
            {"type": "actions", "elements": buttons},
        ],
    })
}

fn field(name: &str, value: &str) -> Value {
    json!({"type": "mrkdwn", "text": format!("*{name}*\n{}", escape(value))})
}

/// Slack's three control characters in text.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn truncate(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// POSTs the message of `note` to the incoming webhook `url`.
pub async fn send(
    http: &reqwest::Client,
    url: &str,
    note: &Notification,
) -> Result<Answer, Failure> {
    let req = http.post(url).json(&message(note));
    super::http_answer(req).await
}
