//! Mail over SMTP (`lettre`): a plain-text part and an HTML part, to the receiver's fixed
//! recipients and, where it says so, the environment's approvers (for what asks something of
//! them) and the requester (for what became of their request), found in
//! `[notifications.addresses]` or taken from names that are addresses themselves.

use std::collections::BTreeSet;

use breakglass_shared::notify::{NoticeKind, Notification};
use breakglass_shared::Permission;
use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use super::{Answer, Failure};
use crate::config::{Config, Smtp, SmtpTls, Target};

/// The addresses `note` goes to through the mail receiver `target`.
pub fn recipients(config: &Config, target: &Target, note: &Notification) -> BTreeSet<String> {
    let Target::Email {
        to,
        approvers,
        requester,
    } = target
    else {
        return BTreeSet::new();
    };
    let mut out: BTreeSet<String> = to.iter().cloned().collect();
    let kind = note.notice_kind();
    let of = |who: &str| -> Vec<String> {
        match config.notifications.addresses.get(who) {
            Some(list) => list.clone(),
            None if !who.starts_with("group:") && who.parse::<lettre::Address>().is_ok() => {
                vec![who.to_string()]
            }
            None => Vec::new(),
        }
    };
    if *approvers && kind.is_some_and(NoticeKind::for_approvers) {
        if let Some(h) = config
            .environment(&note.session.environment)
            .and_then(|e| e.permissions.get(&Permission::Approve))
        {
            for u in h.users.iter().filter(|u| **u != note.session.requester) {
                out.extend(of(u));
            }
            for g in &h.groups {
                out.extend(of(&format!("group:{g}")));
            }
        }
    }
    if *requester && kind.is_some_and(NoticeKind::for_requester) {
        out.extend(of(&note.session.requester));
    }
    out
}

/// The subject and the two bodies of `note`.
pub fn render(note: &Notification) -> (String, String, String) {
    let s = &note.session;
    let subject = note
        .notice_kind()
        .map_or_else(|| note.kind.clone(), |k| k.headline(s));
    let mut lines = vec![
        (
            "Environment",
            format!("{} ({})", s.environment, s.tier.as_str()),
        ),
        ("Pod", format!("{}/{}", s.namespace, s.pod)),
        ("Requester", s.requester.clone()),
        ("Reason", s.reason.clone()),
        ("Duration", format!("{} minutes", s.duration_minutes)),
        ("State", s.state.as_str().to_string()),
    ];
    if let Some(t) = &s.ticket {
        lines.push(("Ticket", t.clone()));
    }
    if let Some(by) = note.ended_by() {
        lines.push(("Ended by", by));
    }
    let mut text = format!("{subject}\n\n");
    let mut html = format!("<h2>{}</h2><table>", html_escape::encode_text(&subject));
    for (k, v) in &lines {
        text.push_str(&format!("{k}: {v}\n"));
        html.push_str(&format!(
            "<tr><th align=\"left\">{k}</th><td>{}</td></tr>",
            html_escape::encode_text(v)
        ));
    }
    html.push_str("</table>");
    text.push_str(&format!("\nOpen the session: {}\n", note.links.session));
    html.push_str(&format!(
        "<p><a href=\"{}\">Open the session</a></p>",
        html_escape::encode_double_quoted_attribute(&note.links.session)
    ));
    if let Some(r) = &note.links.recording {
        text.push_str(&format!("Watch the recording: {r}\n"));
        html.push_str(&format!(
            "<p><a href=\"{}\">Watch the recording</a></p>",
            html_escape::encode_double_quoted_attribute(r)
        ));
    }
    text.push_str("\nDecisions are taken on the session's page, signed in.\n");
    (subject, text, html)
}

/// Sends `note` as delivery `id` to `to` over `smtp`, within `timeout`.
pub async fn send(
    smtp: &Smtp,
    timeout: std::time::Duration,
    id: &str,
    to: &BTreeSet<String>,
    note: &Notification,
) -> Result<Answer, Failure> {
    if to.is_empty() {
        return Err(Failure::permanent(
            None,
            "no recipients: the receiver's `to` is empty and no address is known for the \
             approvers or the requester (add them to [notifications.addresses])",
        ));
    }
    let (subject, text, html) = render(note);
    let bad =
        |e: &dyn std::fmt::Display| Failure::permanent(None, format!("cannot build the mail: {e}"));
    let from: Mailbox = smtp.from.parse().map_err(|e| bad(&e))?;
    let mut b = Message::builder()
        .from(from)
        .subject(subject)
        .message_id(Some(format!("<{id}@breakglass>")));
    for a in to {
        b = b.to(a.parse::<Mailbox>().map_err(|e| bad(&e))?);
    }
    let mail = b
        .multipart(MultiPart::alternative_plain_html(text, html))
        .map_err(|e| bad(&e))?;
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&smtp.host)
        .port(smtp.port)
        .timeout(Some(timeout));
    if smtp.tls != SmtpTls::None {
        let settings = |e: lettre::transport::smtp::Error| {
            Failure::permanent(None, format!("the mail server's TLS settings: {e}"))
        };
        let mut params = TlsParameters::builder(smtp.host.clone());
        if let Some(pem) = &smtp.ca_pem {
            params = params.add_root_certificate(Certificate::from_pem(pem).map_err(settings)?);
        }
        let params = params.build_rustls().map_err(settings)?;
        // STARTTLS is required, never opportunistic: a mail is not sent in the clear.
        builder = builder.tls(match smtp.tls {
            SmtpTls::Tls => Tls::Wrapper(params),
            _ => Tls::Required(params),
        });
    }
    if let Some((user, password)) = &smtp.credentials {
        builder = builder.credentials(Credentials::new(
            user.clone(),
            password.expose().to_string(),
        ));
    }
    let transport = builder.build();
    match tokio::time::timeout(timeout, transport.send(mail)).await {
        Ok(Ok(resp)) => Ok(Answer {
            status: resp.code().to_string().parse().ok(),
            body: resp.message().collect::<Vec<_>>().join(" "),
        }),
        Ok(Err(e)) => Err(Failure::retry(
            e.status().and_then(|c| c.to_string().parse().ok()),
            format!("the mail server refused or failed: {e}"),
        )),
        Err(_) => Err(Failure::retry(
            None,
            format!(
                "the mail server did not answer within {} s",
                timeout.as_secs()
            ),
        )),
    }
}
