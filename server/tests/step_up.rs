//! Step-up, on both engines, as far as it goes without an authenticator (the browser tests
//! register keys and answer challenges with Chromium's virtual authenticator): in an
//! environment that asks for a key, approving, breaking the glass and terminating with a
//! cookie alone are refused and change nothing; an answer that is no assertion is refused;
//! without a key the refusal says where to add one; the page learns which environments ask.
#![allow(clippy::unwrap_used)]

mod common;

use axum::http::{Method, StatusCode};
use breakglass_server::config::{demo_environments, Config, FileConfig};
use common::{Caller, Resp, TestServer};
use serde_json::{json, Value};

fn file() -> FileConfig {
    FileConfig {
        environments: demo_environments()
            .into_iter()
            .map(|mut e| {
                e.step_up = e.name == "prod";
                e
            })
            .collect(),
        ..FileConfig::default()
    }
}

async fn options(s: &TestServer, who: &Caller, action: &str, id: &str) -> Resp {
    let body = json!({ "action": action, "session": id });
    s.send(
        who,
        Method::POST,
        "/api/breakglass/step-up/options",
        Some(body),
    )
    .await
}

async fn state_of(s: &TestServer, who: &Caller, id: &str) -> Value {
    let path = format!("/api/breakglass/sessions/{id}");
    s.send(who, Method::GET, &path, None).await.body["session"]["state"].clone()
}

#[tokio::test]
async fn a_cookie_alone_approves_breaks_or_terminates_nothing_where_a_key_is_asked() {
    for s in common::servers_with(file).await {
        let b = s.backend;
        let (alice, bob, carol) = (
            s.login("alice").await,
            s.login("bob").await,
            s.login("carol").await,
        );
        let id = s.create(&alice, "prod").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        // A second session, approved by the lifecycle itself (no page asks it for a key), to
        // be terminated.
        let other = s.create(&alice, "prod").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        let carol_actor = breakglass_shared::Actor::User {
            name: "carol".into(),
            permissions: breakglass_shared::PermissionSet::ALL,
        };
        let other_id = uuid::Uuid::parse_str(&other).unwrap();
        let glass = breakglass_shared::SessionEvent::BreakGlass { by: carol_actor };
        s.ctx.lifecycle.act(other_id, glass).await.unwrap();
        for (who, action, on) in [
            (&bob, "approve", &id),
            (&carol, "break-glass", &id),
            (&carol, "terminate", &other),
        ] {
            let r = s.act(who, on, action, None).await;
            assert_eq!(
                (r.status, r.code()),
                (StatusCode::FORBIDDEN, "step_up_required"),
                "{b} {action}: {:?}",
                r.body
            );
            assert!(
                r.body["message"].as_str().unwrap().contains("security key"),
                "{b}: {:?}",
                r.body
            );
        }
        // An answer that is no assertion, or one that answers no challenge, changes nothing.
        for answer in ["not json", r#"{"id":"x"}"#] {
            let req = axum::http::Request::builder()
                .method(Method::POST)
                .uri(format!("/api/breakglass/sessions/{id}/approve"))
                .header("host", "localhost")
                .header("cookie", bob.cookie.clone().unwrap())
                .header("x-csrf-token", bob.csrf.clone().unwrap())
                .header("breakglass-step-up", answer);
            let r = s.raw(req.body(axum::body::Body::empty()).unwrap()).await;
            assert_eq!(r.code(), "step_up_required", "{b}: {:?}", r.body);
        }
        assert_eq!(state_of(&s, &alice, &id).await, "PendingApproval", "{b}");
        assert_eq!(state_of(&s, &alice, &other).await, "Approved", "{b}");

        // Without a key, the challenge is refused with where to add one; Ground asks nothing.
        let r = options(&s, &bob, "approve", &id).await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::FORBIDDEN, "no_security_key"),
            "{b}: {:?}",
            r.body
        );
        assert!(
            r.body["message"].as_str().unwrap().contains("account page"),
            "{b}"
        );
        // Nobody is asked to touch a key for what they may not do.
        let r = options(&s, &alice, "approve", &id).await;
        assert_eq!(r.code(), "forbidden", "{b}: {:?}", r.body);

        let dev = s.create(&alice, "dev").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        let r = s.act(&carol, &dev, "terminate", None).await;
        assert_eq!(
            r.status,
            StatusCode::OK,
            "{b}: Ground asks no key: {:?}",
            r.body
        );
    }
}

#[tokio::test]
async fn the_page_learns_where_a_key_is_asked_and_how_many_keys_one_has() {
    for s in common::servers_with(file).await {
        let b = s.backend;
        let bob = s.login("bob").await;
        let me = s
            .send(&bob, Method::GET, "/api/breakglass/whoami", None)
            .await
            .body;
        assert_eq!(me["user"]["security_keys"], 0, "{b}");
        let envs = me["environments"].as_array().unwrap();
        let asks = |name: &str| envs.iter().find(|e| e["name"] == name).unwrap()["step_up"].clone();
        assert_eq!(
            (asks("prod"), asks("dev")),
            (json!(true), json!(false)),
            "{b}"
        );

        // Registration options are a WebAuthn creation for this server and this person.
        let r = s
            .send(
                &bob,
                Method::POST,
                "/api/breakglass/account/keys/options",
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{b}: {:?}", r.body);
        let pk = &r.body["publicKey"];
        assert_eq!(pk["rp"]["id"], "localhost", "{b}");
        assert_eq!(pk["user"]["name"], "bob", "{b}");
        assert!(
            pk["challenge"].as_str().unwrap().len() >= 43,
            "{b}: 32 bytes at least"
        );
        let keys = s
            .send(&bob, Method::GET, "/api/breakglass/account/keys", None)
            .await;
        assert_eq!(keys.body, json!([]), "{b}");

        // A registration that is none is refused naming the field, and stores nothing.
        let body = json!({ "name": "YubiKey", "credential": { "id": "x" } });
        let r = s
            .send(
                &bob,
                Method::POST,
                "/api/breakglass/account/keys",
                Some(body),
            )
            .await;
        assert_eq!(
            (r.status, r.body["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("credential")),
            "{b}: {:?}",
            r.body
        );
        let body = json!({ "name": " ", "credential": {} });
        let r = s
            .send(
                &bob,
                Method::POST,
                "/api/breakglass/account/keys",
                Some(body),
            )
            .await;
        assert_eq!(r.body["field"], "name", "{b}: {:?}", r.body);
        let keys = s
            .send(&bob, Method::GET, "/api/breakglass/account/keys", None)
            .await;
        assert_eq!(keys.body, json!([]), "{b}");
        let r = s
            .send(
                &bob,
                Method::DELETE,
                &format!("/api/breakglass/account/keys/{}", uuid::Uuid::nil()),
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{b}");
    }
}

#[test]
fn step_up_needs_a_secure_origin() {
    let dir = tempfile::tempdir().unwrap();
    let args = common::dev_args(dir.path());
    let mut f = file();
    f.public_url = Some("http://bg.example:8080".into());
    let e = Config::resolve(&args, f).unwrap_err();
    assert!(e.to_string().contains("environments[1].step_up"), "{e}");
    for ok in ["https://bg.example", "http://localhost:8080"] {
        let mut f = file();
        f.public_url = Some(ok.into());
        // (An https address refuses the dev login beside it: any error but this one.)
        let said = Config::resolve(&args, f).err().map(|e| e.to_string());
        assert!(!said.unwrap_or_default().contains("step_up"), "{ok}");
    }
}
