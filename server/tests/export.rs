//! The audit export, on both engines: an auditor (`tower.breakglass.audit` in `prod` only)
//! gets every `prod` session of the range and nothing else, with who approved, denied or ended
//! each; an admin gets CSV whose header is the JSON keys and whose formula-like cells are
//! defused; a requester without either permission is refused; bad times and formats name
//! their field and change nothing; the command line writes the same records; the `ocsf`
//! events pass the OCSF schema files' own validation (`scripts/ocsf.sh`).
#![allow(clippy::unwrap_used)]

mod common;

use axum::http::{Method, StatusCode};
use breakglass_server::config::{demo_environments, FileConfig, Holders};
use breakglass_server::export::COLUMNS;
use breakglass_server::store::EventDraft;
use breakglass_shared::{Permission, Session};
use common::{Caller, Resp, TestServer};
use serde_json::Value;

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
        let (alice, carol, erin) = (
            s.login("alice").await,
            s.login("carol").await,
            s.login("erin").await,
        );
        let since = time::OffsetDateTime::now_utc() - time::Duration::minutes(1);
        let since = since
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap();
        let common::audit::Decided {
            ground,
            approved,
            denied,
        } = common::audit::decided(
            &s,
            "=HYPERLINK(\"http://evil\") disk is full on the primary",
        )
        .await;

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
        // An `until` written with another offset is the same instant: nothing is dropped (the
        // store compares instants, not the text of times).
        let until = (time::OffsetDateTime::now_utc() + time::Duration::minutes(1))
            .to_offset(time::UtcOffset::from_hms(-10, 0, 0).unwrap())
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap();
        let r = export(
            &s,
            &carol,
            &format!("since={since}&until={until}&format=csv"),
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);
        assert_eq!(
            text(&r).lines().count(),
            4,
            "{b}: until={until}: {}",
            text(&r)
        );
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

/// Session histories through the state machine: approved, run and terminated (Flight);
/// broken glass that failed; denied; withdrawn (Ground).
fn histories(now: time::OffsetDateTime) -> Vec<Vec<(Session, EventDraft)>> {
    use breakglass_shared::{Actor, Mode, PermissionSet, SessionEvent, Tier};
    let person = |name: &str| Actor::User {
        name: name.into(),
        permissions: PermissionSet::ALL,
    };
    let plans: Vec<(Tier, Vec<SessionEvent>)> = vec![
        (
            Tier::Flight,
            vec![
                SessionEvent::Approve {
                    by: person("bob"),
                    groups: vec!["sre".into()],
                },
                SessionEvent::BeginActivation,
                SessionEvent::Activated,
                SessionEvent::Terminate {
                    by: person("carol"),
                },
                SessionEvent::CleanupDone,
            ],
        ),
        (
            Tier::Flight,
            vec![
                SessionEvent::BreakGlass {
                    by: person("alice"),
                },
                SessionEvent::BeginActivation,
                SessionEvent::ActivationFailed {
                    error: "pod is gone".into(),
                },
            ],
        ),
        (
            Tier::Flight,
            vec![SessionEvent::Deny {
                by: person("bob"),
                reason: "use the runbook first".into(),
            }],
        ),
        (
            Tier::Ground,
            vec![SessionEvent::End {
                by: person("alice"),
                recycle: false,
            }],
        ),
    ];
    plans
        .into_iter()
        .map(|(tier, events)| {
            let new = breakglass_shared::session::NewSession {
                environment: if tier == Tier::Flight { "prod" } else { "dev" }.into(),
                tier,
                namespace: "payments".into(),
                pod: "worker-0".into(),
                target_container: None,
                mode: Mode::Live,
                reason: "+1 on the pager: stuck payment worker".into(),
                ticket: Some("https://tickets.example/INC-1".into()),
                duration_minutes: 30,
                recycle: false,
                requester: "alice".into(),
                quorum: Default::default(),
                extension_limits: Default::default(),
            };
            let first = Session::new_request(uuid::Uuid::now_v7(), new, now);
            let create = EventDraft {
                actor: "alice".into(),
                kind: "create".into(),
                detail: None,
                at: now,
                notices: Vec::new(),
            };
            let mut h = vec![(first, create)];
            for e in events {
                let next = h[h.len() - 1].0.apply(&e, now).unwrap();
                let ev = EventDraft {
                    actor: e.actor().name().into(),
                    kind: e.kind().into(),
                    detail: e.detail(),
                    at: now,
                    notices: Vec::new(),
                };
                h.push((next, ev));
            }
            h
        })
        .collect()
}

#[tokio::test]
async fn the_ocsf_export_passes_the_ocsf_schema_and_tells_each_moment() {
    for s in common::servers_with(file).await {
        let b = s.backend;
        let now = time::OffsetDateTime::now_utc();
        let batch = histories(now);
        s.ctx.store.insert_many(&batch).await.unwrap();
        let carol = s.login("carol").await;
        let since = (now - time::Duration::minutes(1))
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap();
        let r = export(&s, &carol, &format!("since={since}&format=ocsf")).await;
        assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);
        let events = lines(&r);
        // The terminated one: request, approval, grant, revocation by carol.
        let ran = batch[0].last().unwrap().0.id.to_string();
        let of_ran: Vec<(u64, u64, &str)> = events
            .iter()
            .filter(|e| e["metadata"]["correlation_uid"] == ran.as_str())
            .map(|e| {
                (
                    e["class_uid"].as_u64().unwrap(),
                    e["activity_id"].as_u64().unwrap(),
                    e["actor"]["user"]["name"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            of_ran,
            [
                (3003, 99, "alice"),
                (3003, 1, "bob"),
                (3001, 7, "system"),
                (3001, 8, "carol")
            ],
            "{b}"
        );
        let denied = batch[2].last().unwrap().0.id.to_string();
        let decision = events
            .iter()
            .find(|e| e["metadata"]["uid"] == format!("{denied}/decision").as_str())
            .unwrap();
        assert_eq!(decision["status_id"], 2, "{b}");
        assert_eq!(decision["status_detail"], "use the runbook first", "{b}");

        // The schema's own verdict, from the OCSF schema files.
        common::audit::assert_ocsf(&s, &events);
    }
}
