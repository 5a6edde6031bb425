//! What the audit tests share: three sessions that end in the three ways a decision ends them,
//! and the OCSF schema files' verdict on events (`scripts/ocsf.sh`, through
//! `BREAKGLASS_TEST_OCSF`).

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::TestServer;

/// The sessions [`decided`] makes.
pub struct Decided {
    /// alice's Ground request on `dev`, withdrawn by her.
    pub ground: String,
    /// alice's Flight request on `prod`, approved by bob.
    pub approved: String,
    /// alice's Flight request on `prod` with `reason`, denied by carol ("use the runbook
    /// first").
    pub denied: String,
}

/// Makes them, in that order, checking each step.
pub async fn decided(s: &TestServer, reason: &str) -> Decided {
    let b = s.backend;
    let (alice, bob, carol) = (
        s.login("alice").await,
        s.login("bob").await,
        s.login("carol").await,
    );
    let id = |v: &Value| v["id"].as_str().unwrap().to_string();
    let ground = id(&s.create(&alice, "dev").await);
    let r = s.act(&alice, &ground, "end", None).await;
    assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);
    let approved = id(&s.create(&alice, "prod").await);
    let r = s.act(&bob, &approved, "approve", Some(json!({}))).await;
    assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);
    let mut body = super::request_body("prod");
    body["reason"] = json!(reason);
    let r = s.try_create(&alice, body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{b}: {:?}", r.body);
    let denied = id(&r.body);
    let deny = json!({ "reason": "use the runbook first" });
    let r = s.act(&carol, &denied, "deny", Some(deny)).await;
    assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);
    Decided {
        ground,
        approved,
        denied,
    }
}

/// Fails unless every event passes the OCSF schema of its class (written to a file under
/// `s`'s directory for the validator); what the validator said.
pub fn assert_ocsf(s: &TestServer, events: &[Value]) -> String {
    let check = std::env::var("BREAKGLASS_TEST_OCSF").expect(
        "BREAKGLASS_TEST_OCSF is not set: `eval \"$(scripts/ocsf.sh env)\"` (scripts/test.sh does)",
    );
    let path = s.dir.path().join("events.ocsf.jsonl");
    let lines: Vec<String> = events.iter().map(Value::to_string).collect();
    std::fs::write(&path, lines.join("\n")).unwrap();
    let mut argv = check.split_whitespace();
    let out = std::process::Command::new(argv.next().unwrap())
        .args(argv)
        .arg(&path)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}: {said}", s.backend);
    assert!(
        said.starts_with(&format!("ok {} events", events.len())),
        "{}: {said}",
        s.backend
    );
    said
}
