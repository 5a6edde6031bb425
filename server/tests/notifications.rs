//! Notifications against real receivers (`e2e/receivers/receiver.py`, started through
//! `scripts/notify-receivers.sh`): a Standard Webhooks endpoint checked by the independent
//! `standardwebhooks` package, a Slack-shaped endpoint that checks the Block Kit JSON, and an
//! SMTP server (`aiosmtpd`) whose mail is read back. On both engines: every event reaches the
//! receivers its route names, once per `webhook-id`, signed; a receiver that is down for a
//! while gets everything when it is back; a hanging receiver never holds a request; the clock's
//! reminders and escalations are written once; a replica that died holding deliveries leaves
//! them to another.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use breakglass_server::config::{demo_environments, FileConfig};
use common::metrics::{sample, sample_until};
use common::TestServer;

use receivers::{clean, hooks, of_kind, Receivers, SECRET};

/// The key `siem` signs with beside [`SECRET`], as while keys rotate: the receivers know only
/// the other, and accept every message.
const ROTATED: &str = "whsec_51nJ97PrPy1sWCnNGJYL2UUBlqopobFl+Bn//mO6ChM=";

#[path = "../../e2e/src/receivers.rs"]
mod receivers;

const TOTAL: &str = "breakglass_notifications_total";
const PENDING: &str = "breakglass_notifications_pending";
const OLDEST: &str = "breakglass_notifications_oldest_pending_seconds";

/// The configuration: the three receivers, `prod` routed to them (escalating to the
/// webhook only), `dev` to the webhook alone.
fn file(rx: &Receivers) -> FileConfig {
    let text = format!(
        r#"
        timeout_seconds = 2
        first_retry_seconds = 1
        [[webhooks]]
        name = "siem"
        url = "http://127.0.0.1:{http}/webhook"
        secret = "{ROTATED} {SECRET}"
        [[webhooks]]
        name = "pager"
        url = "http://127.0.0.1:{http}/webhook"
        secret = "{SECRET}"
        events = ["escalation"]
        [[slack]]
        name = "chat"
        url = "http://127.0.0.1:{http}/slack"
        events = ["requested", "approved", "reminder", "glass_broken"]
        [[email]]
        name = "mail"
        approvers = true
        requester = true
        events = ["requested", "approved", "denied"]
        [[email]]
        name = "unaddressed"
        requester = true
        events = ["requested"]
        [smtp]
        host = "127.0.0.1"
        port = {smtp}
        tls = "none"
        from = "breakglass@example.com"
        [addresses]
        alice = "alice@example.com"
        "group:sre" = ["sre-oncall@example.com"]
        "#,
        http = rx.http,
        smtp = rx.smtp,
    );
    FileConfig {
        notifications: toml::from_str(&text).unwrap(),
        environments: demo_environments()
            .into_iter()
            .map(|mut e| {
                if e.name == "prod" {
                    e.notify = vec![
                        "siem".into(),
                        "chat".into(),
                        "mail".into(),
                        "unaddressed".into(),
                    ];
                    e.escalate_to = vec!["pager".into()];
                    e.remind_after_minutes = Some(10);
                    e.escalate_after_minutes = Some(30);
                } else {
                    e.notify = vec!["siem".into()];
                }
                e
            })
            .collect(),
        ..common::dev_users(&[("alice", "engineers"), ("bob", "sre"), ("carol", "admins")])
    }
}

async fn request(s: &TestServer, env: &str) -> String {
    let alice = s.login("alice").await;
    s.create(&alice, env).await["id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn every_event_reaches_its_receivers_signed_once_and_in_their_shape() {
    let rx = Receivers::start();
    for s in common::servers_with(|| file(&rx)).await {
        let b = s.backend;
        // Every payload below is checked against the schema the server serves.
        let schema = s
            .send(
                &Default::default(),
                Method::GET,
                "/api/breakglass/notifications/schema.json",
                None,
            )
            .await;
        assert_eq!(schema.status, StatusCode::OK, "{b}");
        rx.schema(&schema.body).await;
        let id = request(&s, "prod").await;
        let bob = s.login("bob").await;
        let r = s.act(&bob, &id, "approve", None).await;
        assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);

        let log = rx
            .until("requested and approved everywhere", |log| {
                hooks(log, &id, "session.approved").len() == 1
                    && of_kind(log, "mail")
                        .iter()
                        .filter(|m| m["text"].as_str().unwrap().contains(&id))
                        .count()
                        == 2
                    && of_kind(log, "slack")
                        .iter()
                        .filter(|m| m.to_string().contains(&id))
                        .count()
                        == 2
            })
            .await;
        clean(&log);
        assert!(
            of_kind(&log, "webhook")
                .iter()
                .all(|w| w["schema_checked"] == true),
            "{b}: every payload was checked against the served schema"
        );
        let asked = hooks(&log, &id, "session.requested");
        assert_eq!(asked.len(), 1, "{b}");
        let p = &asked[0]["payload"];
        assert_eq!(p["version"], 1, "{b}");
        assert_eq!(p["actor"], "alice", "{b}");
        assert_eq!(p["session"]["state"], "PendingApproval", "{b}");
        assert!(
            p["links"]["session"]
                .as_str()
                .unwrap()
                .ends_with(&format!("/sessions/{id}")),
            "{b}: {p}"
        );
        assert_eq!(
            hooks(&log, &id, "session.approved")[0]["payload"]["actor"],
            "bob"
        );

        // Mail: the request to the approvers (the sre group's address), the decision to the
        // requester; each with the link, in both parts.
        let mails: Vec<_> = of_kind(&log, "mail")
            .into_iter()
            .filter(|m| m["text"].as_str().unwrap().contains(&id))
            .collect();
        let to_approvers = mails
            .iter()
            .find(|m| m["subject"].as_str().unwrap().contains("asks to debug"))
            .unwrap();
        assert_eq!(
            to_approvers["to"],
            serde_json::json!(["sre-oncall@example.com"]),
            "{b}"
        );
        assert!(
            to_approvers["html"]
                .as_str()
                .unwrap()
                .contains(&format!("/sessions/{id}")),
            "{b}"
        );
        let to_requester = mails
            .iter()
            .find(|m| m["subject"].as_str().unwrap().starts_with("Approved"))
            .unwrap();
        assert_eq!(
            to_requester["to"],
            serde_json::json!(["alice@example.com"]),
            "{b}"
        );

        // Slack: a header, the reason, the facts, and a link button to the session's page.
        let chat = of_kind(&log, "slack")
            .into_iter()
            .find(|m| {
                m.to_string().contains(&id)
                    && m["message"]["text"].as_str().unwrap().contains("asks")
            })
            .unwrap();
        let blocks = chat["message"]["blocks"].as_array().unwrap();
        let buttons = &blocks.iter().find(|b| b["type"] == "actions").unwrap()["elements"];
        assert!(
            buttons[0]["url"]
                .as_str()
                .unwrap()
                .ends_with(&format!("/sessions/{id}")),
            "{b}"
        );
        assert!(
            chat.to_string().contains("orders stuck"),
            "{b}: the reason is shown"
        );

        // The admins' log lists them, once the worker has written each outcome (just after the
        // receiver took it).
        let carol = s.login("carol").await;
        let deadline = Instant::now() + Duration::from_secs(30);
        let r = loop {
            let r = s
                .send(
                    &carol,
                    Method::GET,
                    "/api/breakglass/notifications/deliveries",
                    None,
                )
                .await;
            let done = r
                .body
                .as_array()
                .is_some_and(|rows| rows.iter().all(|d| d["state"] != "pending"));
            if done || Instant::now() > deadline {
                break r;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);
        let rows = r.body.as_array().unwrap();
        // A mail with nobody to go to is dead at once, saying why; everything else was sent.
        let (dead, sent): (Vec<_>, Vec<_>) =
            rows.iter().partition(|d| d["receiver"] == "unaddressed");
        assert!(sent.iter().all(|d| d["state"] == "sent"), "{b}: {rows:#?}");
        assert_eq!(dead.len(), 1, "{b}: {rows:#?}");
        assert_eq!(dead[0]["state"], "dead", "{b}");
        assert_eq!(dead[0]["attempts"], 1, "{b}");
        assert!(
            dead[0]["last_error"]
                .as_str()
                .unwrap()
                .contains("no recipients"),
            "{b}"
        );
        assert!(
            rows.iter()
                .any(|d| d["receiver"] == "mail" && d["kind"] == "approved"),
            "{b}"
        );
        let alice = s.login("alice").await;
        let r = s
            .send(
                &alice,
                Method::GET,
                "/api/breakglass/notifications/deliveries",
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{b}");
        let r = s
            .send(
                &carol,
                Method::GET,
                "/api/breakglass/notifications/deliveries?state=lost",
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{b}");
        assert!(
            r.body["message"].as_str().unwrap().contains("state"),
            "{b}: {:?}",
            r.body
        );
        // The metrics count what each receiver took.
        let sent = |receiver| sample(&s, TOTAL, &[("receiver", receiver), ("outcome", "sent")]);
        assert!(
            sent("siem") >= 2.0 && sent("mail") >= 2.0 && sent("chat") >= 2.0,
            "{b}"
        );
    }
}

#[tokio::test]
async fn a_receiver_down_for_a_while_gets_everything_once_and_a_hanging_one_holds_nothing() {
    let rx = Receivers::start();
    for s in common::servers_with(|| file(&rx)).await {
        let b = s.backend;
        rx.mode("down").await;
        // The receivers are shared by both engines' servers: count from here.
        let from = rx.log().await.len();
        let id = request(&s, "dev").await;
        let bob = s.login("bob").await;
        let r = s.act(&s.login("alice").await, &id, "end", None).await;
        assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);
        // Refused twice at least (the first try and a retry) while down ...
        rx.until("two refusals", |log| {
            of_kind(&log[from..], "refused").len() >= 2
        })
        .await;
        let failed = sample(&s, TOTAL, &[("outcome", "failed")]);
        assert!(failed >= 2.0, "{b}: {failed} failures counted");
        let waiting = sample_until(&s, PENDING, &[], |v| v >= 1.0).await;
        assert!(waiting.is_ok(), "{b}: pending gauge {waiting:?} while down");
        let age = sample_until(&s, OLDEST, &[], |v| v >= 1.0).await;
        assert!(age.is_ok(), "{b}: oldest pending {age:?} s while down");
        let carol = s.login("carol").await;
        let r = s
            .send(
                &carol,
                Method::GET,
                "/api/breakglass/notifications/deliveries?state=pending",
                None,
            )
            .await;
        let pending = r.body.as_array().unwrap();
        assert!(
            pending.iter().any(|d| d["last_status"] == 503
                && d["last_error"]
                    .as_str()
                    .unwrap()
                    .contains("down for maintenance")),
            "{b}: {pending:#?}"
        );
        // ... and delivered once it is back.
        rx.mode("up").await;
        let other = request(&s, "prod").await;
        let log = rx
            .until("the withdrawn request after the outage", |log| {
                hooks(log, &other, "session.requested").len() == 1
                    && hooks(log, &id, "session.withdrawn").len() == 1
            })
            .await;
        clean(&log);
        let drained = sample_until(&s, PENDING, &[], |v| v == 0.0).await;
        assert!(
            drained.is_ok(),
            "{b}: pending gauge {drained:?} after the outage"
        );
        let age = sample(&s, OLDEST, &[]);
        assert_eq!(
            age, 0.0,
            "{b}: nothing pending, yet the oldest is {age} s old"
        );

        // A receiver that hangs: the request is answered, the delivery times out and waits.
        rx.mode("hang").await;
        let before = rx.log().await.len();
        let hung = request(&s, "prod").await;
        let r = s
            .act(
                &bob,
                &hung,
                "deny",
                Some(serde_json::json!({"reason": "not during the freeze"})),
            )
            .await;
        assert_eq!(
            r.status,
            StatusCode::OK,
            "{b}: a hanging receiver held the decision: {:?}",
            r.body
        );
        rx.until("the hanging receiver to be called", |log| {
            log[before..].iter().any(|e| e["kind"] == "hung")
        })
        .await;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = s
                .send(
                    &carol,
                    Method::GET,
                    "/api/breakglass/notifications/deliveries?state=pending",
                    None,
                )
                .await;
            let timed_out = r.body.as_array().unwrap().iter().any(|d| {
                d["last_error"]
                    .as_str()
                    .is_some_and(|e| e.contains("within 2 s") || e.contains("timed out"))
            });
            if timed_out {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{b}: no delivery timed out: {:?}",
                r.body
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        rx.mode("up").await;
        let log = rx
            .until("the denial after the hang", |log| {
                hooks(log, &hung, "session.denied").len() == 1
            })
            .await;
        clean(&log);
    }
}

#[tokio::test]
async fn reminders_and_escalations_are_written_once_when_their_time_comes() {
    let rx = Receivers::start();
    for s in common::servers_with(|| file(&rx)).await {
        let b = s.backend;
        let id = request(&s, "prod").await;
        let now = time::OffsetDateTime::now_utc();
        // Rows the clock writes `m` minutes after the request.
        let written = async |m: i64| {
            let at = now + time::Duration::minutes(m);
            breakglass_server::sweep::clock_notices(&s.ctx, at)
                .await
                .unwrap()
        };
        assert_eq!(written(5).await, 0, "{b}: too early");
        // After 10 minutes: a reminder to the route's receivers that take it (siem, chat).
        assert_eq!(written(11).await, 2, "{b}");
        assert_eq!(written(12).await, 0, "{b}: once");
        // After 30: the escalation to `pager` alone (it takes nothing else).
        assert_eq!(written(31).await, 1, "{b}");
        // A glass-broken session that finished unreviewed is overdue after the environment's
        // review window (a week by default), told to the receivers that take it (siem).
        let mut ended = s.ctx.store.get(id.parse().unwrap()).await.unwrap().unwrap();
        ended.glass_broken_by = Some("carol".into());
        ended.state = breakglass_shared::SessionState::Ended;
        ended.finished_at = Some(now - time::Duration::hours(100));
        let overdue = |at| {
            s.ctx
                .outbox
                .clock_drafts(&[], std::slice::from_ref(&ended), at)
        };
        assert!(overdue(now).is_empty(), "{b}: 100 hours is within the week");
        let due = overdue(now + time::Duration::hours(70));
        let names: Vec<_> = due
            .iter()
            .map(|d| (d.receiver.as_str(), d.kind.as_str()))
            .collect();
        assert_eq!(names, [("siem", "review_overdue")], "{b}");
        let log = rx
            .until("the reminder and the escalation", |log| {
                hooks(log, &id, "session.reminder").len() == 1
                    && hooks(log, &id, "session.escalation").len() == 1
            })
            .await;
        clean(&log);
    }
}

#[tokio::test]
async fn deliveries_a_dead_replica_had_claimed_are_delivered_by_another() {
    use breakglass_shared::notify::NoticeKind;
    let rx = Receivers::start();
    for s in common::servers_with(|| file(&rx)).await {
        let b = s.backend;
        let id = request(&s, "dev").await;
        let session = s.ctx.store.get(id.parse().unwrap()).await.unwrap().unwrap();
        // A row due in half a second, claimed before that by a replica that then dies: its
        // claim (two seconds) is left behind with no outcome.
        let now = time::OffsetDateTime::now_utc();
        let due = now + Duration::from_millis(500);
        let drafts = s
            .ctx
            .outbox
            .drafts_of(NoticeKind::Reminder, &session, "system", due);
        assert_eq!(drafts.len(), 1, "{b}: dev routes to siem alone");
        assert_eq!(s.ctx.store.enqueue(&drafts).await.unwrap(), 1, "{b}");
        let ms = breakglass_server::outbox::unix_ms;
        let taken = s
            .ctx
            .store
            .claim_deliveries(
                "dead-replica",
                ms(due),
                ms(now + Duration::from_secs(2)),
                10,
            )
            .await
            .unwrap();
        assert_eq!(taken.len(), 1, "{b}: the dead replica had it");
        let log = rx
            .until("the dead replica's delivery", |log| {
                hooks(log, &id, "session.reminder").len() == 1
            })
            .await;
        clean(&log);
        // The receiver has it; the outcome is written right after.
        let deadline = Instant::now() + Duration::from_secs(30);
        let row = loop {
            let rows = s.ctx.store.deliveries(Some("sent"), 100).await.unwrap();
            if let Some(row) = rows.into_iter().find(|d| d.id == drafts[0].id) {
                break row;
            }
            assert!(
                Instant::now() < deadline,
                "{b}: the delivery was never recorded as sent"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let row = &row;
        assert_eq!(row.attempts, 2, "{b}: the dead claim and the delivery");
        assert_ne!(row.claimed_by.as_deref(), Some("dead-replica"), "{b}");
        assert_eq!(
            hooks(&log, &id, "session.reminder")[0]["id"],
            breakglass_server::notify::webhook_id(row),
            "{b}: the id the row keeps is the one the receiver saw"
        );
    }
}

#[tokio::test]
async fn mail_goes_over_starttls_or_tls_and_never_to_a_server_it_cannot_trust() {
    let rx = Receivers::start();
    let cases = [
        ("starttls", rx.smtp_starttls, true),
        ("tls", rx.smtp_tls, true),
        ("starttls", rx.smtp_starttls, false),
    ];
    for (mode, port, trusted) in cases {
        let ca = if trusted {
            format!("ca_file = \"{}\"\n", rx.ca_file.display())
        } else {
            String::new()
        };
        let text = format!(
            "timeout_seconds = 2\nfirst_retry_seconds = 1\n\
             [[email]]\nname = \"mail\"\nto = [\"oncall@example.com\"]\n\
             [smtp]\nhost = \"127.0.0.1\"\nport = {port}\ntls = \"{mode}\"\n\
             from = \"breakglass@example.com\"\n{ca}"
        );
        let file = FileConfig {
            notifications: toml::from_str(&text).unwrap(),
            environments: demo_environments()
                .into_iter()
                .map(|mut e| {
                    e.notify = vec!["mail".into()];
                    e
                })
                .collect(),
            ..common::dev_users(&[("alice", "engineers"), ("bob", "sre"), ("carol", "admins")])
        };
        let s = common::server_with("sqlite", None, file).await;
        let id = request(&s, "prod").await;
        let case = format!("{mode}, CA trusted: {trusted}");
        if trusted {
            let log = rx
                .until("the mail", |log| {
                    of_kind(log, "mail")
                        .iter()
                        .any(|m| m["text"].as_str().unwrap().contains(&id))
                })
                .await;
            let mail = of_kind(&log, "mail")
                .into_iter()
                .find(|m| m["text"].as_str().unwrap().contains(&id))
                .unwrap();
            assert_eq!(mail["tls"], true, "{case}: {mail:#}");
            continue;
        }
        // An unknown issuer: the attempt fails and says why; nothing is sent in the clear.
        let deadline = Instant::now() + Duration::from_secs(30);
        let error = loop {
            let rows = s.ctx.store.deliveries(None, 10).await.unwrap();
            if let Some(e) = rows.iter().find_map(|d| d.last_error.clone()) {
                break e;
            }
            assert!(
                Instant::now() < deadline,
                "{case}: no attempt failed: {rows:#?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(
            error.to_lowercase().contains("certificate"),
            "{case}: {error}"
        );
        let log = rx.log().await;
        assert!(
            !of_kind(&log, "mail")
                .iter()
                .any(|m| m["text"].as_str().unwrap().contains(&id)),
            "{case}: the mail went out anyway"
        );
    }
}
