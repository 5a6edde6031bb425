//! The SIEM stream, on both engines: a `[[siem]]` receiver gets every moment of every session
//! of its environments as an OCSF event, as it happens, through the outbox: each once (one
//! `webhook-id`, no replay), signed (checked by the independent `standardwebhooks` package in
//! `e2e/receivers/receiver.py`), and valid against the OCSF schema files
//! (`scripts/ocsf.sh`); the admins' delivery log names its environment. A syslog collector
//! (rsyslog, `common/syslog.rs`) gets the same events as RFC 5424 messages over TCP and TLS.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;

use axum::http::{Method, StatusCode};
use breakglass_server::config::{demo_environments, FileConfig};
use receivers::{of_kind, Receivers, SECRET};
use serde_json::{json, Value};

#[path = "../../e2e/src/receivers.rs"]
mod receivers;

fn file(rx: &Receivers) -> FileConfig {
    let text = format!(
        r#"
        timeout_seconds = 2
        first_retry_seconds = 1
        [[siem]]
        name = "soc"
        url = "http://127.0.0.1:{}/webhook"
        secret = "{SECRET}"
        "#,
        rx.http
    );
    FileConfig {
        notifications: toml::from_str(&text).unwrap(),
        environments: demo_environments()
            .into_iter()
            .map(|mut e| {
                e.notify = vec!["soc".into()];
                e
            })
            .collect(),
        ..common::dev_users(&[("alice", "engineers"), ("bob", "sre"), ("carol", "admins")])
    }
}

#[tokio::test]
async fn a_siem_gets_every_moment_once_signed_and_in_ocsf() {
    let rx = Receivers::start();
    for s in common::servers_with(|| file(&rx)).await {
        let b = s.backend;
        let carol = s.login("carol").await;
        let common::audit::Decided {
            ground,
            approved,
            denied,
        } = common::audit::decided(&s, "the payment worker is stuck again").await;

        let want: BTreeSet<String> = [
            (&ground, "request"),
            (&ground, "decision"),
            (&ground, "closed"),
            (&approved, "request"),
            (&approved, "decision"),
            (&denied, "request"),
            (&denied, "decision"),
        ]
        .iter()
        .map(|(id, m)| format!("{id}/{m}"))
        .collect();
        let ours = |log: &[Value]| -> Vec<Value> {
            of_kind(log, "webhook")
                .into_iter()
                .map(|e| e["payload"].clone())
                .filter(|p| want.contains(p["metadata"]["uid"].as_str().unwrap_or("")))
                .collect()
        };
        let log = rx
            .until("every moment at the SIEM", |log| {
                ours(log).len() >= want.len()
            })
            .await;
        let got = ours(&log);
        let uids: BTreeSet<String> = got
            .iter()
            .map(|p| p["metadata"]["uid"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(uids, want, "{b}");
        assert_eq!(got.len(), want.len(), "{b}: each moment once");
        assert!(
            of_kind(&log, "rejected").is_empty(),
            "{b}: every one signed"
        );
        assert!(of_kind(&log, "replay").is_empty(), "{b}: no id twice");
        let decision = got
            .iter()
            .find(|p| p["metadata"]["uid"] == format!("{denied}/decision").as_str())
            .unwrap();
        assert_eq!(decision["actor"]["user"]["name"], "carol", "{b}");
        assert_eq!(decision["status_id"], 2, "{b}");

        // The OCSF schema files' own verdict on what the SIEM got.
        common::audit::assert_ocsf(&s, &got);

        // The delivery log: sent, named by moment, in its environment.
        let r = s
            .send(
                &carol,
                Method::GET,
                "/api/breakglass/notifications/deliveries?state=sent&limit=500",
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);
        let rows = r.body.as_array().unwrap();
        let row = rows
            .iter()
            .find(|d| d["session_id"] == ground.as_str() && d["kind"] == "ocsf.closed")
            .unwrap_or_else(|| panic!("{b}: {rows:?}"));
        assert_eq!(row["environment"], "dev", "{b}");
        assert_eq!(row["receiver"], "soc", "{b}");
    }
}

#[tokio::test]
async fn syslog_collectors_get_every_moment_over_tcp_and_over_tls() {
    let collector = common::syslog::Collector::start();
    let text = format!(
        r#"
        timeout_seconds = 5
        first_retry_seconds = 1
        [[siem]]
        name = "plain"
        syslog = "127.0.0.1:{}"
        tls = false
        [[siem]]
        name = "secure"
        syslog = "127.0.0.1:{}"
        ca_file = "{}"
        "#,
        collector.plain,
        collector.tls,
        collector.ca_file.display()
    );
    let file = || FileConfig {
        notifications: toml::from_str(&text).unwrap(),
        environments: demo_environments()
            .into_iter()
            .map(|mut e| {
                e.notify = vec!["plain".into(), "secure".into()];
                e
            })
            .collect(),
        ..common::dev_users(&[("alice", "engineers"), ("bob", "sre")])
    };
    let mut sent = 0;
    for s in common::servers_with(file).await {
        let b = s.backend;
        let (alice, bob) = (s.login("alice").await, s.login("bob").await);
        let id = s.create(&alice, "prod").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        let r = s.act(&bob, &id, "approve", Some(json!({}))).await;
        assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);
        sent += 2;
        let (plain, tls) = collector.until(sent).await;
        for (port, got) in [("plain", &plain), ("tls", &tls)] {
            let ours: Vec<&common::syslog::Parsed> =
                got.iter().filter(|m| m.msg.contains(&id)).collect();
            let mut uids: Vec<String> = ours
                .iter()
                .map(|m| {
                    // rsyslog parsed it as RFC 5424: authpriv.notice, version 1, our names.
                    assert_eq!(
                        (
                            m.pri.as_str(),
                            m.version.as_str(),
                            m.app.as_str(),
                            m.msgid.as_str()
                        ),
                        ("85", "1", "breakglass", "ocsf"),
                        "{b} {port}: {m:?}"
                    );
                    assert_eq!(m.procid, std::process::id().to_string(), "{b} {port}");
                    let event: Value = serde_json::from_str(&m.msg).unwrap();
                    event["metadata"]["uid"].as_str().unwrap().to_string()
                })
                .collect();
            // Deliveries run side by side: the events carry their times, not their order.
            uids.sort();
            let mut want = [format!("{id}/decision"), format!("{id}/request")];
            want.sort();
            assert_eq!(uids, want, "{b} {port}: each moment once");
        }
    }
}
