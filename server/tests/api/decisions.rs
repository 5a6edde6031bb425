//! Requests and decisions: approval by a second person, break glass, deny, field errors, CSRF and Origin, the dev login, what others may see.

use super::*;

#[tokio::test]
async fn flight_request_is_approved_by_a_second_person_then_ended() {
    for s in servers().await {
        let alice = s.login("alice").await;
        let bob = s.login("bob").await;
        let created = s.create(&alice, "prod").await;
        assert_eq!(created["state"], "PendingApproval", "{}", s.backend);
        assert_eq!(created["requester"], "alice");
        let id = created["id"].as_str().unwrap();

        // alice cannot approve (no permission) and bob sees himself listed as approver.
        let r = s.act(&alice, id, "approve", None).await;
        assert_eq!(
            r.status,
            StatusCode::FORBIDDEN,
            "{}: {:?}",
            s.backend,
            r.body
        );
        let detail = s
            .send(
                &alice,
                Method::GET,
                &format!("/api/breakglass/sessions/{id}"),
                None,
            )
            .await;
        assert!(detail.body["approvers"]
            .as_array()
            .unwrap()
            .contains(&json!("bob")));

        let r = s.act(&bob, id, "approve", None).await;
        assert_eq!(r.status, StatusCode::OK, "{}: {:?}", s.backend, r.body);
        assert_eq!(r.body["state"], "Approved");
        assert_eq!(r.body["approver"], "bob");

        // Approving twice is a state error naming the state.
        let r = s.act(&bob, id, "approve", None).await;
        assert_eq!(r.status, StatusCode::CONFLICT);
        assert_eq!(r.code(), "wrong_state");
        assert_eq!(r.body["state"], "Approved");

        // Only the requester ends; before activation, ending withdraws.
        let r = s.act(&bob, id, "end", None).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        let r = s.act(&alice, id, "end", None).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body["state"], "Withdrawn");

        let detail = s
            .send(
                &alice,
                Method::GET,
                &format!("/api/breakglass/sessions/{id}"),
                None,
            )
            .await;
        let kinds: Vec<&str> = detail.body["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["create", "approve", "end"], "{}", s.backend);
        assert_eq!(detail.body["events"][1]["actor"], "bob");
        assert_eq!(detail.body["events"][1]["from_state"], "PendingApproval");
    }
}

#[tokio::test]
async fn requester_with_approve_cannot_approve_own_request_but_admin_can_break_glass() {
    for s in servers().await {
        let bob = s.login("bob").await;
        let carol = s.login("carol").await;
        let own = s.create(&bob, "prod").await;
        let r = s
            .act(&bob, own["id"].as_str().unwrap(), "approve", None)
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", s.backend);
        assert!(r.body["message"].as_str().unwrap().contains("own request"));
        // bob lacks `self`.
        let r = s
            .act(&bob, own["id"].as_str().unwrap(), "break-glass", None)
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        assert!(r.body["message"]
            .as_str()
            .unwrap()
            .contains("tower.breakglass.self"));

        let mine = s.create(&carol, "prod").await;
        let r = s
            .act(&carol, mine["id"].as_str().unwrap(), "break-glass", None)
            .await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
        assert_eq!(r.body["state"], "Approved");
        assert_eq!(r.body["glass_broken_by"], "carol");
    }
}

#[tokio::test]
async fn ground_requests_skip_approval_and_terminate_needs_permission() {
    for s in servers().await {
        let alice = s.login("alice").await;
        let bob = s.login("bob").await;
        let carol = s.login("carol").await;
        let mut body = request_body("dev");
        body["recycle"] = json!(true);
        let r = s
            .send(&alice, Method::POST, "/api/breakglass/sessions", Some(body))
            .await;
        assert_eq!(r.status, StatusCode::CREATED);
        assert_eq!(r.body["state"], "Approved", "{}", s.backend);
        assert_eq!(r.body["recycle"], true);
        let id = r.body["id"].as_str().unwrap().to_string();
        // Approval makes no sense on Ground.
        let r = s.act(&bob, &id, "approve", None).await;
        assert_eq!(r.status, StatusCode::CONFLICT);
        // bob may not terminate; carol may.
        let r = s.act(&bob, &id, "terminate", None).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
        assert!(r.body["message"]
            .as_str()
            .unwrap()
            .contains("tower.breakglass.terminate"));
        let r = s.act(&carol, &id, "terminate", None).await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
        // Nothing was ever created in a cluster, so cleanup is immediate.
        let detail = wait_state(&s, &carol, &id, "Ended").await;
        assert_eq!(
            detail["session"]["end_reason"],
            json!({"kind": "Terminated", "by": "carol"})
        );
    }
}

pub(crate) async fn wait_state(s: &common::TestServer, c: &Caller, id: &str, want: &str) -> Value {
    for _ in 0..100 {
        let r = s
            .send(
                c,
                Method::GET,
                &format!("/api/breakglass/sessions/{id}"),
                None,
            )
            .await;
        if r.body["session"]["state"] == want {
            return r.body;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("session {id} did not reach {want}");
}

#[tokio::test]
async fn deny_needs_a_reason_and_is_final() {
    for s in servers().await {
        let alice = s.login("alice").await;
        let bob = s.login("bob").await;
        let id = s.create(&alice, "prod").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        let before = s.counts().await;
        let r = s
            .act(&bob, &id, "deny", Some(json!({"reason": "  "})))
            .await;
        assert_eq!(
            (r.status, r.body["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("reason"))
        );
        assert_eq!(s.counts().await, before, "bad input wrote nothing");
        let r = s
            .act(
                &bob,
                &id,
                "deny",
                Some(json!({"reason": "use the runbook first"})),
            )
            .await;
        assert_eq!(r.body["state"], "Denied", "{}: {:?}", s.backend, r.body);
        assert_eq!(r.body["denial_reason"], "use the runbook first");
        let r = s.act(&alice, &id, "end", None).await;
        assert_eq!(r.status, StatusCode::CONFLICT);
        assert_eq!(r.body["state"], "Denied");
    }
}

#[tokio::test]
async fn every_bad_field_is_named_and_nothing_is_written() {
    for s in servers().await {
        let alice = s.login("alice").await;
        let cases: Vec<(&str, Value)> = vec![
            ("environment", json!({"environment": "nope"})),
            ("namespace", json!({"namespace": "Shop_1"})),
            ("pod", json!({"pod": "-web"})),
            ("target_container", json!({"target_container": "App"})),
            ("reason", json!({"reason": "short"})),
            ("reason", json!({"reason": "x".repeat(1001)})),
            ("ticket", json!({"ticket": "javascript:alert(1)"})),
            ("duration_minutes", json!({"duration_minutes": 61})),
            ("duration_minutes", json!({"duration_minutes": -5})),
            ("mode", json!({"mode": "exec"})),
            ("recycle", json!({"recycle": true})),
            ("reason", json!({"reason": null})),
        ];
        let before = s.counts().await;
        for (field, patch) in cases {
            let mut body = request_body("prod");
            for (k, v) in patch.as_object().unwrap() {
                body[k] = v.clone();
            }
            let r = s
                .send(&alice, Method::POST, "/api/breakglass/sessions", Some(body))
                .await;
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{field}: {:?}", r.body);
            assert_eq!(r.code(), "invalid_input");
            assert_eq!(r.body["field"], field, "{:?}", r.body);
        }
        let mut missing = request_body("prod");
        missing.as_object_mut().unwrap().remove("reason");
        let r = s
            .send(
                &alice,
                Method::POST,
                "/api/breakglass/sessions",
                Some(missing),
            )
            .await;
        assert_eq!(r.body["field"], "reason", "{:?}", r.body);
        // Not JSON at all.
        let req = axum::http::Request::builder()
            .method(Method::POST)
            .uri("/api/breakglass/sessions")
            .header("host", "localhost")
            .header("cookie", alice.cookie.clone().unwrap())
            .header("x-csrf-token", alice.csrf.clone().unwrap())
            .header("content-type", "application/json")
            .body(axum::body::Body::from("{not json"))
            .unwrap();
        let r = s.raw(req).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert_eq!(
            s.counts().await,
            before,
            "{}: bad input wrote nothing",
            s.backend
        );
    }
}

#[tokio::test]
async fn auth_csrf_and_origin_are_enforced() {
    for s in servers().await {
        let alice = s.login("alice").await;
        let before = s.counts().await;
        // No cookie: 401.
        let r = s
            .send(
                &Caller::default(),
                Method::POST,
                "/api/breakglass/sessions",
                Some(request_body("prod")),
            )
            .await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::UNAUTHORIZED, "unauthenticated")
        );
        let r = s
            .send(
                &Caller::default(),
                Method::GET,
                "/api/breakglass/sessions",
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        // Cookie but no CSRF token: 403.
        let no_csrf = Caller {
            cookie: alice.cookie.clone(),
            csrf: None,
        };
        let r = s
            .send(
                &no_csrf,
                Method::POST,
                "/api/breakglass/sessions",
                Some(request_body("prod")),
            )
            .await;
        assert_eq!((r.status, r.code()), (StatusCode::FORBIDDEN, "csrf_failed"));
        // Another user's token does not fit.
        let bob = s.login("bob").await;
        let wrong = Caller {
            cookie: alice.cookie.clone(),
            csrf: bob.csrf.clone(),
        };
        let r = s
            .send(
                &wrong,
                Method::POST,
                "/api/breakglass/sessions",
                Some(request_body("prod")),
            )
            .await;
        assert_eq!(r.code(), "csrf_failed");
        // A forged cookie is ignored.
        let forged = Caller {
            cookie: Some("breakglass_session=eyJ1c2VyIjoiY2Fyb2wifQ".into()),
            csrf: alice.csrf.clone(),
        };
        let r = s
            .send(
                &forged,
                Method::POST,
                "/api/breakglass/sessions",
                Some(request_body("prod")),
            )
            .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        // A foreign Origin is refused even with a valid token.
        let req = axum::http::Request::builder()
            .method(Method::POST)
            .uri("/api/breakglass/sessions")
            .header("host", "localhost")
            .header("origin", "https://evil.example")
            .header("cookie", alice.cookie.clone().unwrap())
            .header("x-csrf-token", alice.csrf.clone().unwrap())
            .header("content-type", "application/json")
            .body(axum::body::Body::from(request_body("prod").to_string()))
            .unwrap();
        let r = s.raw(req).await;
        assert_eq!(r.code(), "csrf_failed");
        assert_eq!(
            s.counts().await,
            before,
            "{}: refused requests wrote nothing",
            s.backend
        );
        // Unknown demo user.
        let r = s
            .send(
                &Caller::default(),
                Method::POST,
                "/api/breakglass/auth/dev-login",
                Some(json!({"user": "mallory"})),
            )
            .await;
        assert_eq!(
            (r.status, r.body["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("user"))
        );
        // The cookie is HttpOnly and SameSite=Strict.
        let r = s
            .send(
                &Caller::default(),
                Method::POST,
                "/api/breakglass/auth/dev-login",
                Some(json!({"user": "bob"})),
            )
            .await;
        let set = r.headers.get("set-cookie").unwrap().to_str().unwrap();
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Strict"),
            "{set}"
        );
    }
}

#[tokio::test]
async fn dev_login_is_refused_unless_enabled() {
    let dir = tempfile::tempdir().unwrap();
    let args = breakglass_server::config::ServeArgs {
        data_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let config = breakglass_server::config::Config::resolve(&args, Default::default()).unwrap();
    let ctx = breakglass_server::state::Context::new(config, None)
        .await
        .unwrap();
    let s = common::TestServer {
        backend: "sqlite",
        ctx: ctx.clone(),
        app: breakglass_server::app(breakglass_server::state::AppState(ctx)),
        dir,
    };
    let r = s
        .send(
            &Caller::default(),
            Method::POST,
            "/api/breakglass/auth/dev-login",
            Some(json!({"user": "alice"})),
        )
        .await;
    assert_eq!((r.status, r.code()), (StatusCode::FORBIDDEN, "forbidden"));
    let r = s
        .send(
            &Caller::default(),
            Method::GET,
            "/api/breakglass/whoami",
            None,
        )
        .await;
    assert_eq!(r.body["dev_mode"], false);
}

#[tokio::test]
async fn unknown_sessions_are_404_and_others_environments_are_invisible() {
    for s in servers().await {
        let alice = s.login("alice").await;
        for path in [
            "/api/breakglass/sessions/0190f3a4-0000-7000-8000-000000000000",
            "/api/breakglass/sessions/not-a-uuid",
        ] {
            let r = s.send(&alice, Method::GET, path, None).await;
            assert_eq!(
                (r.status, r.code()),
                (StatusCode::NOT_FOUND, "not_found"),
                "{path}"
            );
        }
        let r = s
            .act(&alice, "0190f3a4-0000-7000-8000-000000000000", "end", None)
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        let r = s
            .send(&alice, Method::GET, "/api/breakglass/nope", None)
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
    }
}
