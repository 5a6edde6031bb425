//! Holes an outside abuse run found in the API's rules, each closed here: protected
//! namespaces refused at create and again by the cluster driver, environments the caller
//! holds nothing in answered as unknown ones, and reviews only from someone who neither asked
//! for, approved nor broke the glass for the session.
#![allow(clippy::unwrap_used)]

mod common;

use async_trait::async_trait;
use axum::http::StatusCode;
use breakglass_server::config::{Config, FileConfig, ServeArgs};
use breakglass_server::ports::{CleanupStep, ClusterError, ClusterOps, ProgressSink, SessionMoved};
use breakglass_shared::session::{NewSession, Progress};
use breakglass_shared::{Mode, Session, SessionState, Tier};
use common::request_body;
use serde_json::json;

#[tokio::test]
async fn protected_namespaces_are_refused_at_create_naming_the_field() {
    for s in common::servers().await {
        let alice = s.login("alice").await;
        let before = s.counts().await;
        for (env, ns) in [
            ("dev", "kube-system"),
            ("prod", "kube-node-lease"),
            ("dev", "breakglass"),
        ] {
            let mut body = request_body(env);
            body["namespace"] = json!(ns);
            let r = s.try_create(&alice, body).await;
            assert_eq!(
                r.status,
                StatusCode::BAD_REQUEST,
                "{env}/{ns}: {:?}",
                r.body
            );
            assert_eq!(r.body["field"], "namespace", "{:?}", r.body);
            assert!(
                r.body["message"].as_str().unwrap().contains("protected"),
                "{:?}",
                r.body
            );
        }
        assert_eq!(s.counts().await, before, "{}: nothing written", s.backend);
    }
}

#[tokio::test]
async fn an_environment_the_caller_holds_nothing_in_answers_as_an_unknown_one() {
    let file: FileConfig = toml::from_str(
        r#"
[[environments]]
name = "dev"
tier = "ground"
[environments.permissions]
"tower.breakglass.request" = { groups = ["engineers"] }

[[environments]]
name = "vault"
tier = "flight"
[environments.permissions]
"tower.breakglass.request" = { groups = ["admins"] }
"#,
    )
    .unwrap();
    let s = common::server_with("sqlite", None, file).await;
    let alice = s.login("alice").await;
    let ask = |env: &str| {
        let body = request_body(env);
        let alice = alice.clone();
        let s = &s;
        async move {
            s.send(
                &alice,
                axum::http::Method::POST,
                "/api/breakglass/sessions",
                Some(body),
            )
            .await
        }
    };
    let hidden = ask("vault").await;
    let unknown = ask("nowhere").await;
    assert_eq!(hidden.status, StatusCode::BAD_REQUEST, "{:?}", hidden.body);
    assert_eq!(hidden.body["field"], "environment");
    assert_eq!(
        hidden.body["message"]
            .as_str()
            .unwrap()
            .replace("vault", "X"),
        unknown.body["message"]
            .as_str()
            .unwrap()
            .replace("nowhere", "X"),
        "the same answer for both"
    );
    assert_eq!(s.counts().await.0, 0);
}

#[tokio::test]
async fn the_approver_does_not_review_what_they_approved() {
    for s in common::servers().await {
        let alice = s.login("alice").await;
        let bob = s.login("bob").await;
        let carol = s.login("carol").await;
        let id = s.create(&alice, "prod").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            s.act(&bob, &id, "approve", None).await.status,
            StatusCode::OK
        );
        let mut changes = s.ctx.changes.subscribe();
        assert_eq!(
            s.act(&carol, &id, "terminate", None).await.status,
            StatusCode::OK
        );
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while changes.recv().await.unwrap().session.state != SessionState::Ended {}
        })
        .await
        .expect("the session did not end");
        let r = s
            .act(&bob, &id, "review", Some(json!({"verdict": "ok"})))
            .await;
        assert_eq!(
            r.status,
            StatusCode::FORBIDDEN,
            "{}: {:?}",
            s.backend,
            r.body
        );
        assert!(
            r.body["message"].as_str().unwrap().contains("approved"),
            "{:?}",
            r.body
        );
        let r = s
            .act(&carol, &id, "review", Some(json!({"verdict": "ok"})))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}: {:?}", s.backend, r.body);
    }
}

/// A sink the driver must never reach: the refusal comes before any step.
struct NoSteps;

#[async_trait]
impl ProgressSink for NoSteps {
    async fn record(&self, p: Progress) -> Result<Session, SessionMoved> {
        panic!("the driver recorded {p:?} for a protected namespace");
    }
    async fn cleaned(&self, step: CleanupStep) -> Result<Session, SessionMoved> {
        panic!("the driver cleaned {step} for a protected namespace");
    }
}

#[tokio::test]
async fn the_cluster_driver_refuses_a_protected_namespace_before_any_write() {
    // Credentials for an API server that does not exist: the refusal must come first.
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
         clusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n\
         users: [{name: u, user: {token: t}}]\n\
         contexts: [{name: c, context: {cluster: c, user: u}}]\n",
    )
    .unwrap();
    let file: FileConfig = toml::from_str(&format!(
        "[[environments]]\nname = \"dev\"\ntier = \"ground\"\nprotected_namespaces = [\"payments\"]\n\
         cluster = {{ kind = \"kubeconfig\", path = \"{}\" }}\n",
        kubeconfig.display()
    ))
    .unwrap();
    let args = ServeArgs {
        data_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let config = Config::resolve(&args, file).unwrap();
    let clusters = breakglass_server::cluster::Clusters::from_config(&config).unwrap();
    for ns in ["kube-system", "breakglass", "payments"] {
        let s = Session::new_request(
            uuid::Uuid::now_v7(),
            NewSession {
                environment: "dev".into(),
                tier: Tier::Ground,
                namespace: ns.into(),
                pod: "web-1".into(),
                target_container: None,
                mode: Mode::Live,
                reason: "a row the API would have refused".into(),
                ticket: None,
                duration_minutes: 15,
                recycle: false,
                requester: "alice".into(),
                quorum: breakglass_shared::session::Quorum::default(),
                extension_limits: breakglass_shared::session::ExtensionLimits::default(),
            },
            time::OffsetDateTime::now_utc(),
        );
        match clusters.activate(&s, &NoSteps).await {
            Err(ClusterError::Config { message, .. }) => {
                assert!(message.contains("protected"), "{ns}: {message}");
            }
            other => panic!("{ns}: {other:?}"),
        }
    }
}

/// A POST of raw `body` bytes as `caller`.
fn post_raw(
    caller: &common::Caller,
    path: &str,
    body: Vec<u8>,
) -> axum::http::Request<axum::body::Body> {
    axum::http::Request::builder()
        .method(axum::http::Method::POST)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .header("cookie", caller.cookie.clone().unwrap())
        .header("x-csrf-token", caller.csrf.clone().unwrap())
        .body(axum::body::Body::from(body))
        .unwrap()
}

#[tokio::test]
async fn bodies_are_refused_whole_for_typos_breaks_and_size_naming_what_is_wrong() {
    let s = common::server("sqlite", None).await;
    let alice = s.login("alice").await;
    let path = "/api/breakglass/sessions";

    let mut typo = request_body("dev");
    typo.as_object_mut().unwrap().remove("duration_minutes");
    typo["duration"] = json!(5);
    let r = s
        .send(&alice, axum::http::Method::POST, path, Some(typo))
        .await;
    assert_eq!(
        (r.status, r.body["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("duration")),
        "{:?}",
        r.body
    );

    let whole = request_body("dev").to_string();
    let r = s
        .raw(post_raw(
            &alice,
            path,
            whole.as_bytes()[..whole.len() / 2].to_vec(),
        ))
        .await;
    assert_eq!(
        (r.status, r.body["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("body")),
        "{:?}",
        r.body
    );
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .contains("not valid JSON"),
        "{:?}",
        r.body
    );

    let mut big = request_body("dev");
    big["reason"] = json!("x".repeat(100 * 1024));
    let r = s
        .raw(post_raw(&alice, path, big.to_string().into_bytes()))
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{:?}", r.body);
    assert_eq!(
        (r.body["code"].as_str(), r.body["field"].as_str()),
        (Some("too_large"), Some("body"))
    );
    assert_eq!(s.counts().await.0, 0, "nothing written");
}

#[tokio::test]
async fn control_and_direction_characters_never_reach_the_audit_trail() {
    for s in common::servers().await {
        let alice = s.login("alice").await;
        let bob = s.login("bob").await;
        for (field, bad) in [
            ("reason", "stuck \u{0} orders in the worker"),
            ("reason", "stuck \u{202E}sredro in the worker"),
            ("ticket", "https://tracker.example.com/\u{1b}[2J"),
        ] {
            let mut body = request_body("prod");
            body[field] = json!(bad);
            let r = s.try_create(&alice, body).await;
            assert_eq!(
                (r.status, r.body["field"].as_str()),
                (StatusCode::BAD_REQUEST, Some(field)),
                "{}: {:?}",
                s.backend,
                r.body
            );
        }
        let id = s.create(&alice, "prod").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        let r = s
            .act(
                &bob,
                &id,
                "deny",
                Some(json!({"reason": "no\u{7}\u{7}\u{7}"})),
            )
            .await;
        assert_eq!(
            (r.status, r.body["field"].as_str()),
            (StatusCode::BAD_REQUEST, Some("reason")),
            "{:?}",
            r.body
        );
        let (_, events) = s.counts().await;
        assert_eq!(events, 1, "{}: only the create event", s.backend);
    }
}

#[tokio::test]
async fn every_response_forbids_framing_sniffing_and_foreign_script() {
    let s = common::server("sqlite", None).await;
    let dist = s.dir.path().join("dist");
    std::fs::create_dir_all(&dist).unwrap();
    std::fs::write(
        dist.join("index.html"),
        "<html><head><script type=\"module\">import init from '/a.js';</script></head></html>",
    )
    .unwrap();
    // The headers are computed when the router is built: build it again over this index.
    let app = breakglass_server::app(breakglass_server::state::AppState(s.ctx.clone()));
    let s = common::TestServer { app, ..s };
    for path in ["/", "/env/prod", "/api/breakglass/whoami"] {
        let r = s
            .send(
                &common::Caller::default(),
                axum::http::Method::GET,
                path,
                None,
            )
            .await;
        let h = |n: &str| {
            r.headers
                .get(n)
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default()
        };
        let csp = h("content-security-policy");
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert!(
            csp.contains("script-src 'self' 'wasm-unsafe-eval' 'sha256-"),
            "{path}: {csp}"
        );
        // The inline module script, by its hash.
        let hash = {
            use base64::Engine as _;
            use sha2::Digest as _;
            base64::engine::general_purpose::STANDARD
                .encode(sha2::Sha256::digest(b"import init from '/a.js';"))
        };
        assert!(csp.contains(&format!("'sha256-{hash}'")), "{csp}");
        assert!(
            !csp.split(';')
                .any(|d| d.trim().starts_with("script-src") && d.contains("unsafe-inline")),
            "{csp}"
        );
        assert_eq!(h("x-frame-options"), "DENY", "{path}");
        assert_eq!(h("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(h("referrer-policy"), "same-origin", "{path}");
        // Plain HTTP here: no HSTS.
        assert_eq!(h("strict-transport-security"), "", "{path}");
    }
}

#[tokio::test]
async fn a_session_in_an_environment_one_holds_nothing_in_does_not_exist_for_them() {
    const VAULT: &str = r#"
[[environments]]
name = "dev"
tier = "ground"
[environments.permissions]
"tower.breakglass.request" = { groups = ["engineers", "admins"] }

[[environments]]
name = "vault"
tier = "flight"
[environments.permissions]
"tower.breakglass.request" = { groups = ["admins"] }
"tower.breakglass.approve" = { groups = ["admins"] }
"#;
    let mut backends = vec![("sqlite", None)];
    if let Some(admin) = common::postgres_admin() {
        backends.push(("postgres", Some(common::fresh_pg_database(&admin).await)));
    }
    for (backend, url) in backends {
        let file: FileConfig = toml::from_str(VAULT).unwrap();
        let s = common::server_with(backend, url, file).await;
        let alice = s.login("alice").await;
        let carol = s.login("carol").await;
        let id = s.create(&carol, "vault").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        let unknown = "0190f3a4-0000-7000-8000-000000000000";
        for sub in ["", "/recording", "/recording/verify"] {
            for who in [&id, &unknown.to_string()] {
                let path = format!("/api/breakglass/sessions/{who}{sub}");
                let r = s.send(&alice, axum::http::Method::GET, &path, None).await;
                assert_eq!(
                    (r.status, r.code()),
                    (StatusCode::NOT_FOUND, "not_found"),
                    "{backend} {path}: {:?}",
                    r.body
                );
            }
        }
        for (action, body) in [
            ("approve", None),
            ("deny", Some(json!({"reason": "no"}))),
            ("end", None),
            ("terminate", None),
            ("review", Some(json!({"verdict": "ok"}))),
        ] {
            let r = s.act(&alice, &id, action, body).await;
            assert_eq!(
                r.status,
                StatusCode::NOT_FOUND,
                "{backend} {action}: {:?}",
                r.body
            );
        }
        let r = s
            .send(
                &alice,
                axum::http::Method::GET,
                "/api/breakglass/sessions?environment=vault",
                None,
            )
            .await;
        assert_eq!(r.body["items"], json!([]), "{backend}: {:?}", r.body);
    }
}

#[tokio::test]
async fn the_terminal_route_without_an_upgrade_answers_with_the_error_body() {
    let s = common::server("sqlite", None).await;
    let alice = s.login("alice").await;
    let id = s.create(&alice, "dev").await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = s
        .send(
            &alice,
            axum::http::Method::GET,
            &format!("/api/breakglass/sessions/{id}/terminal"),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
    assert_eq!(
        (r.code(), r.body["field"].as_str()),
        ("invalid_input", Some("upgrade")),
        "{:?}",
        r.body
    );
    assert_eq!(
        r.headers.get("content-type").unwrap(),
        "application/json",
        "{:?}",
        r.headers
    );
}
