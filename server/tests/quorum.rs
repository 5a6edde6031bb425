//! Quorum approvals, on both engines: a Flight environment that needs two approvals from
//! distinct groups keeps a request waiting until it has them; the requester never counts, one
//! person counts once, a second voice of a group already counted does not count, a deny by any
//! approver ends the request, and each approval is an event.
#![allow(clippy::unwrap_used)]

mod common;

use axum::http::{Method, StatusCode};
use breakglass_server::config::{demo_environments, Config, FileConfig};
use breakglass_shared::Permission;
use common::{Resp, TestServer};
use serde_json::{json, Value};

/// `prod` needs two approvals through distinct groups; `dba` may approve there too.
fn file() -> FileConfig {
    FileConfig {
        environments: demo_environments()
            .into_iter()
            .map(|mut e| {
                if e.name == "prod" {
                    e.approvals_required = Some(2);
                    e.approvers_from_distinct_groups = true;
                    if let Some(h) = e.permissions.get_mut(Permission::Approve.name()) {
                        h.groups.push("dba".into());
                    }
                }
                e
            })
            .collect(),
        ..common::dev_users(&[
            ("alice", "engineers"),
            ("bob", "sre"),
            ("carol", "admins"),
            ("dan", "sre"),
            ("erin", "dba"),
        ])
    }
}

async fn decide(s: &TestServer, who: &str, id: &str, what: &str) -> Resp {
    let caller = s.login(who).await;
    let body = (what == "deny").then(|| json!({ "reason": "not during the freeze" }));
    s.act(&caller, id, what, body).await
}

#[tokio::test]
async fn a_request_waits_for_its_quorum_of_distinct_groups() {
    for s in common::servers_with(file).await {
        let b = s.backend;
        let alice = s.login("alice").await;
        let made = s.create(&alice, "prod").await;
        let id = made["id"].as_str().unwrap().to_string();
        assert_eq!(
            made["quorum"],
            json!({"required": 2, "distinct_groups": true}),
            "{b}"
        );

        let r = decide(&s, "bob", &id, "approve").await;
        assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);
        assert_eq!(r.body["state"], "PendingApproval", "{b}");
        assert_eq!(r.body["approvals"][0]["by"], "bob", "{b}");
        assert_eq!(r.body["approvals"][0]["group"], "sre", "{b}");

        // The same person again; another of the same group; the requester: none counts.
        let r = decide(&s, "bob", &id, "approve").await;
        assert_eq!(r.status, StatusCode::CONFLICT, "{b}: {:?}", r.body);
        assert!(
            r.body["message"].as_str().unwrap().contains("already"),
            "{b}"
        );
        let r = decide(&s, "dan", &id, "approve").await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{b}: {:?}", r.body);
        assert!(
            r.body["message"]
                .as_str()
                .unwrap()
                .contains("another group"),
            "{b}"
        );
        let r = s.act(&alice, &id, "approve", None).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{b}: {:?}", r.body);

        let r = decide(&s, "erin", &id, "approve").await;
        assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);
        assert_eq!(
            (&r.body["state"], &r.body["approver"]),
            (&json!("Approved"), &json!("erin")),
            "{b}"
        );
        let detail = s
            .send(
                &alice,
                Method::GET,
                &format!("/api/breakglass/sessions/{id}"),
                None,
            )
            .await;
        let approvals: Vec<&Value> = detail.body["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "approve")
            .collect();
        assert_eq!(approvals.len(), 2, "{b}: each approval is an event");
        assert_eq!(
            (
                approvals[0]["actor"].as_str(),
                approvals[1]["actor"].as_str()
            ),
            (Some("bob"), Some("erin")),
            "{b}"
        );

        // A deny by any approver ends a request whatever it had.
        let other = s.create(&alice, "prod").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            decide(&s, "bob", &other, "approve").await.status,
            StatusCode::OK
        );
        let r = decide(&s, "carol", &other, "deny").await;
        assert_eq!(
            (r.status, &r.body["state"]),
            (StatusCode::OK, &json!("Denied")),
            "{b}: {:?}",
            r.body
        );
    }
}

#[test]
fn a_quorum_is_one_to_five_and_only_on_flight() {
    let dir = tempfile::tempdir().unwrap();
    let args = common::dev_args(dir.path());
    for (env, required, key) in [
        ("prod", 0, "environments[1].approvals_required"),
        ("prod", 6, "environments[1].approvals_required"),
        ("dev", 2, "environments[0].approvals_required"),
    ] {
        let mut f = file();
        for e in &mut f.environments {
            if e.name == env {
                e.approvals_required = Some(required);
            }
        }
        let e = Config::resolve(&args, f).unwrap_err();
        assert_eq!(e.key, key, "{env} {required}");
    }
}
