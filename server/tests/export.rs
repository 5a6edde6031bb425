//! The audit export, on both engines: an auditor (`tower.breakglass.audit` in `prod` only)
//! gets every `prod` session of the range and nothing else, with who approved, denied or ended
//! each; an admin gets CSV whose header is the JSON keys and whose formula-like cells are
//! defused; a requester without either permission is refused; bad times and formats name
//! their field and change nothing; the command line writes the same records.
#![allow(clippy::unwrap_used)]

mod common;

use axum::http::{Method, StatusCode};
use breakglass_server::config::{demo_environments, FileConfig, Holders};
use breakglass_server::export::COLUMNS;
use breakglass_shared::Permission;
use common::{Caller, Resp, TestServer};
use serde_json::{json, Value};

fn file() -> FileConfig {
    let mut environments = demo_environments();
    for e in &mut environments {
        if e.name == "prod" {
            e.permissions.insert(
                Permission::Audit.name().to_string(),
                Holders {
                    users: vec![],
                    groups: vec!["auditors".into()],
                },
            );
        }
    }
    FileConfig {
        environments,
        ..common::dev_users(&[
            ("alice", "engineers"),
            ("bob", "sre"),
            ("carol", "admins"),
            ("erin", "auditors"),
        ])
    }
}

/// The body as text, whatever `Resp` made of it.
fn text(r: &Resp) -> String {
    match &r.body {
        Value::String(s) => s.clone(),
        other => format!("{other}\n"),
    }
}

async fn export(s: &TestServer, who: &Caller, query: &str) -> Resp {
    s.send(
        who,
        Method::GET,
        &format!("/api/breakglass/export?{query}"),
        None,
    )
    .await
}

fn lines(r: &Resp) -> Vec<Value> {
    text(r)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn auditors_and_admins_export_what_they_may_and_nobody_else_does() {
    for s in common::servers_with(file).await {
        let b = s.backend;
        let (alice, bob, carol, erin) = (
            s.login("alice").await,
            s.login("bob").await,
            s.login("carol").await,
            s.login("erin").await,
        );
        let since = time::OffsetDateTime::now_utc() - time::Duration::minutes(1);
        let since = since
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap();
        let ground = s.create(&alice, "dev").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            s.act(&alice, &ground, "end", None).await.status,
            StatusCode::OK
        );
        let approved = s.create(&alice, "prod").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        let r = s.act(&bob, &approved, "approve", Some(json!({}))).await;
        assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);
        let mut body = common::request_body("prod");
        body["reason"] = json!("=HYPERLINK(\"http://evil\") disk is full on the primary");
        let denied = s.try_create(&alice, body).await.body["id"]
            .as_str()
            .unwrap()
            .to_string();
        let r = s
            .act(
                &carol,
                &denied,
                "deny",
                Some(json!({ "reason": "use the runbook first" })),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);

        // The auditor: prod only, newest first, with the decisions.
        let r = export(&s, &erin, &format!("since={since}")).await;
        assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);
        assert_eq!(r.headers["content-type"], "application/x-ndjson");
        let got = lines(&r);
        let ids: Vec<&str> = got.iter().map(|v| v["id"].as_str().unwrap()).collect();
        assert_eq!(ids, vec![denied.as_str(), approved.as_str()], "{b}");
        assert_eq!(got[0]["state"], "Denied");
        assert_eq!(got[0]["decided_by"], "carol");
        assert_eq!(got[0]["denial_reason"], "use the runbook first");
        assert_eq!(got[1]["decided_by"], "bob");
        assert!(got[1]["approvers"].as_str().unwrap().starts_with("bob@"));
        let keys: Vec<&str> = got[1]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut columns = COLUMNS.to_vec();
        columns.sort_unstable();
        let mut keys = keys;
        keys.sort_unstable();
        assert_eq!(keys, columns, "{b}");
        // dev is not hers to see at all.
        let r = export(&s, &erin, &format!("since={since}&environment=dev")).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{b}: {:?}", r.body);

        // The admin: both environments, as CSV.
        let r = export(&s, &carol, &format!("since={since}&format=csv")).await;
        assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);
        let csv = text(&r);
        let mut rows = csv.lines();
        assert_eq!(rows.next().unwrap(), COLUMNS.join(","), "{b}");
        let rest: Vec<&str> = rows.collect();
        assert_eq!(rest.len(), 3, "{b}: {csv}");
        assert!(rest[0].contains("\"'=HYPERLINK("), "{b}: {}", rest[0]);
        let ground_row = rest[2];
        assert!(ground_row.starts_with(&ground), "{b}: {ground_row}");
        assert!(ground_row.contains(",Withdrawn,"), "{b}: {ground_row}");
        // A window after everything: the header alone.
        let later = (time::OffsetDateTime::now_utc() + time::Duration::minutes(5))
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap();
        let r = export(
            &s,
            &carol,
            &format!("since={later}&until={later}&format=csv"),
        )
        .await;
        assert_eq!(text(&r).trim(), COLUMNS.join(","), "{b}");

        // Nobody else, and bad input names its field.
        let r = export(&s, &alice, &format!("since={since}")).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{b}: {:?}", r.body);
        for (query, field) in [
            ("since=yesterday".to_string(), "since"),
            (format!("since={since}&format=xlsx"), "format"),
            (format!("since={later}&until={since}"), "until"),
        ] {
            let r = export(&s, &carol, &query).await;
            assert_eq!(
                r.status,
                StatusCode::BAD_REQUEST,
                "{b} {query}: {:?}",
                r.body
            );
            assert_eq!(r.body["field"], field, "{b} {query}: {:?}", r.body);
        }
        assert_eq!(r_anonymous(&s, &since).await, StatusCode::UNAUTHORIZED);

        // The command line: the same records, from the database.
        if b == "sqlite" {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_breakglass-server"))
                .args([
                    "export",
                    "--since",
                    &since,
                    "--environment",
                    "prod",
                    "--dev",
                    "--data-dir",
                ])
                .arg(s.dir.path())
                .env_clear()
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            let cli: Vec<Value> = String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(cli, got);
        }
    }
}

async fn r_anonymous(s: &TestServer, since: &str) -> StatusCode {
    export(s, &Caller::default(), &format!("since={since}"))
        .await
        .status
}
