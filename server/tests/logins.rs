//! Logins are server-side records: logout and an administrator end every copy of a cookie at
//! once, groups come from the current configuration, names are normalised once at the auth
//! edge (so `Zoe` is `zoe`, and nobody signs in as the server itself), and a proxy user's
//! CSRF token changes every hour.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{header, Method, Request, StatusCode};
use breakglass_server::auth::{csrf_token, proxy_nonce};
use breakglass_server::config::{Config, FileConfig};
use breakglass_server::state::{AppState, Context};
use breakglass_server::store::LoginSelector;
use common::{request_body, Caller, TestServer};
use serde_json::{json, Value};

/// Who `c` is signed in as (`Null` when nobody).
async fn whoami(s: &TestServer, c: &Caller) -> Value {
    s.send(c, Method::GET, "/api/breakglass/whoami", None)
        .await
        .body["user"]["name"]
        .clone()
}

#[tokio::test]
async fn a_copied_cookie_is_worthless_after_logout() {
    for s in common::servers().await {
        let alice = s.login("alice").await;
        // The copy an attacker took before the logout: the same cookie and CSRF token.
        let copy = alice.clone();
        let other = s.login("alice").await;
        let out = s
            .send(&alice, Method::POST, "/api/breakglass/auth/logout", None)
            .await;
        assert_eq!(out.status, StatusCode::OK, "{}: {:?}", s.backend, out.body);
        assert_eq!(whoami(&s, &copy).await, Value::Null, "{}", s.backend);
        let before = s.counts().await;
        let r = s.try_create(&copy, request_body("dev")).await;
        assert_eq!(
            r.status,
            StatusCode::UNAUTHORIZED,
            "{}: {:?}",
            s.backend,
            r.body
        );
        assert_eq!(s.counts().await, before, "{}: nothing written", s.backend);
        // Her other login (another browser) is a login of its own and still holds.
        assert_eq!(whoami(&s, &other).await, "alice", "{}", s.backend);
    }
}

#[tokio::test]
async fn an_administrator_ends_every_login_of_a_user_at_once() {
    for s in common::servers().await {
        let bob1 = s.login("bob").await;
        let bob2 = s.login("bob").await;
        let carol = s.login("carol").await;
        let revoke_bob = || async {
            s.ctx
                .store
                .revoke_logins(
                    &LoginSelector::User("bob".into()),
                    "admin",
                    time::OffsetDateTime::now_utc(),
                )
                .await
                .unwrap()
        };
        let n = revoke_bob().await;
        assert_eq!(n, 2, "{}", s.backend);
        for b in [&bob1, &bob2] {
            assert_eq!(whoami(&s, b).await, Value::Null, "{}", s.backend);
        }
        assert_eq!(whoami(&s, &carol).await, "carol", "{}", s.backend);
        // Ending them again ends nothing more.
        let again = revoke_bob().await;
        assert_eq!(again, 0, "{}", s.backend);
    }
}

#[tokio::test]
async fn the_logins_command_lists_and_ends_a_users_logins() {
    let s = common::server("sqlite", None).await;
    let bob = s.login("bob").await;
    let alice = s.login("alice").await;
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_breakglass-server"))
            .args(args)
            .args(["--dev", "--data-dir"])
            .arg(s.dir.path())
            .env_clear()
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let listed = run(&["logins", "list"]);
    assert!(listed.contains("2 live login(s)"), "{listed}");
    // The name is normalised as at sign-in: `BOB` is bob.
    let ended = run(&["logins", "revoke", "--user", "BOB"]);
    assert_eq!(ended.trim(), "ended 1 login(s)");
    assert_eq!(whoami(&s, &bob).await, Value::Null);
    assert_eq!(whoami(&s, &alice).await, "alice");
    assert!(run(&["logins", "list", "--user", "bob"]).contains("0 live login(s)"));
}

/// A dev-mode server on the SQLite file in `dir` whose demo user bob is in `group`.
async fn bob_in(dir: &std::path::Path, group: &str) -> TestServer {
    let file: FileConfig = toml::from_str(&format!(
        "[dev_login]\nenabled = true\nusers = [{{ name = \"alice\", groups = [\"engineers\"] }}, \
         {{ name = \"bob\", groups = [\"{group}\"] }}]"
    ))
    .unwrap();
    let mut args = common::dev_args(dir);
    args.no_clusters = true;
    let config = Config::resolve(&args, file).unwrap();
    let ctx = Context::new(config, None).await.unwrap();
    TestServer {
        backend: "sqlite",
        app: breakglass_server::app(AppState(ctx.clone())),
        ctx,
        dir: tempfile::tempdir().unwrap(),
    }
}

#[tokio::test]
async fn groups_come_from_the_current_configuration_not_the_cookie() {
    let dir = tempfile::tempdir().unwrap();
    let (alice, bob, id) = {
        let s = bob_in(dir.path(), "sre").await;
        let alice = s.login("alice").await;
        let bob = s.login("bob").await;
        let id = s.create(&alice, "prod").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        (alice, bob, id)
    };
    // Bob leaves the SRE group; the server restarts on the same data with the new
    // configuration. His old cookie still signs him in, but no longer as an approver.
    let s = bob_in(dir.path(), "engineers").await;
    assert_eq!(whoami(&s, &bob).await, "bob");
    let r = s.act(&bob, &id, "approve", Some(json!({}))).await;
    assert!(
        r.status == StatusCode::FORBIDDEN || r.status == StatusCode::NOT_FOUND,
        "{:?}",
        r.body
    );
    let row = s
        .send(
            &alice,
            Method::GET,
            &format!("/api/breakglass/sessions/{id}"),
            None,
        )
        .await;
    assert_eq!(
        row.body["session"]["state"], "PendingApproval",
        "{:?}",
        row.body
    );
}

const PROXY: &str = r#"
trusted_proxies = ["127.0.0.1/32"]

[[environments]]
name = "prod"
tier = "flight"
[environments.permissions]
"tower.breakglass.request" = { users = ["Zoe"], groups = ["engineers"] }
"tower.breakglass.approve" = { groups = ["sre"] }
"#;

/// A proxied request from 127.0.0.1 as `user` in `groups`.
async fn proxied(
    s: &TestServer,
    user: &str,
    groups: &str,
    method: Method,
    path: &str,
    csrf: Option<&str>,
    body: Option<Value>,
) -> common::Resp {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, "localhost")
        .header("x-auth-request-user", user)
        .header("x-auth-request-groups", groups);
    if let Some(t) = csrf {
        req = req.header("x-csrf-token", t);
    }
    let mut req = match body {
        Some(b) => req
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(b.to_string()))
            .unwrap(),
        None => req.body(Body::empty()).unwrap(),
    };
    req.extensions_mut()
        .insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
    s.raw(req).await
}

async fn proxy_csrf(s: &TestServer, user: &str, groups: &str) -> String {
    let me = proxied(
        s,
        user,
        groups,
        Method::GET,
        "/api/breakglass/whoami",
        None,
        None,
    )
    .await;
    me.body["csrf_token"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn names_behind_the_proxy_compare_without_case_so_zoe_cannot_approve_her_own() {
    let file: FileConfig = toml::from_str(PROXY).unwrap();
    let s = common::server_with("sqlite", None, file).await;
    let t = proxy_csrf(&s, "zoe", "engineers").await;
    let r = proxied(
        &s,
        "zoe",
        "engineers",
        Method::POST,
        "/api/breakglass/sessions",
        Some(&t),
        Some(request_body("prod")),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    // The grant to `Zoe` in the file names the same person.
    assert_eq!(r.body["requester"], "zoe");
    let id = r.body["id"].as_str().unwrap().to_string();
    // `Zoe`, now also in the approvers' group, is still the requester.
    let t2 = proxy_csrf(&s, "Zoe", "sre").await;
    let me = proxied(
        &s,
        " ZOE ",
        "sre",
        Method::GET,
        "/api/breakglass/whoami",
        None,
        None,
    )
    .await;
    assert_eq!(me.body["user"]["name"], "zoe", "{:?}", me.body);
    let r = proxied(
        &s,
        "Zoe",
        "sre",
        Method::POST,
        &format!("/api/breakglass/sessions/{id}/approve"),
        Some(&t2),
        Some(json!({})),
    )
    .await;
    assert!(r.status.is_client_error(), "{:?}", r.body);
    let row = s.ctx.store.get(id.parse().unwrap()).await.unwrap().unwrap();
    assert_eq!(row.state.as_str(), "PendingApproval");
}

#[tokio::test]
async fn nobody_signs_in_under_a_name_the_server_uses_for_itself() {
    let file: FileConfig = toml::from_str(PROXY).unwrap();
    let s = common::server_with("sqlite", None, file).await;
    for name in [
        "system",
        "System",
        "system:kube-controller-manager",
        "breakglass-server",
    ] {
        let r = proxied(
            &s,
            name,
            "engineers,sre",
            Method::GET,
            "/api/breakglass/sessions",
            None,
            None,
        )
        .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{name}: {:?}", r.body);
        assert!(
            r.body["message"].as_str().unwrap().contains("reserved"),
            "{:?}",
            r.body
        );
    }
    // ...and no configuration can grant such a name anything.
    let bad: FileConfig = toml::from_str(&PROXY.replace("[\"Zoe\"]", "[\"System\"]")).unwrap();
    let args = common::dev_args(s.dir.path());
    let e = Config::resolve(&args, bad).unwrap_err();
    assert_eq!(
        e.key,
        "environments[0].permissions.tower.breakglass.request.users[0]"
    );
}

/// A name that is another name in disguise (full-width letters, a ligature, a zero-width space,
/// a letter that case folding spells differently) is refused where it comes in, by the proxy
/// and in the configuration, so `zoe`'s grant never reaches `ｚｏｅ`.
#[tokio::test]
async fn no_name_comes_in_in_two_spellings() {
    let file: FileConfig = toml::from_str(PROXY).unwrap();
    let s = common::server_with("sqlite", None, file).await;
    for name in ["ｚｏｅ", "zo\u{200b}e", "ﬁona", "straße", "zoe\u{301}"] {
        let r = proxied(
            &s,
            name,
            "engineers",
            Method::GET,
            "/api/breakglass/sessions",
            None,
            None,
        )
        .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{name:?}: {:?}", r.body);
    }
    let bad: FileConfig = toml::from_str(&PROXY.replace("[\"Zoe\"]", "[\"ｚｏｅ\"]")).unwrap();
    let e = Config::resolve(&common::dev_args(s.dir.path()), bad).unwrap_err();
    assert_eq!(
        e.key,
        "environments[0].permissions.tower.breakglass.request.users[0]"
    );
}

#[tokio::test]
async fn a_proxy_users_csrf_token_changes_every_hour() {
    let file: FileConfig = toml::from_str(PROXY).unwrap();
    let s = common::server_with("sqlite", None, file).await;
    let state = AppState(s.ctx.clone());
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let served = proxy_csrf(&s, "zoe", "engineers").await;
    assert_eq!(served, csrf_token(&state, "zoe", &proxy_nonce(now)));
    let create = |t: String| {
        let s = &s;
        async move {
            proxied(
                s,
                "zoe",
                "engineers",
                Method::POST,
                "/api/breakglass/sessions",
                Some(&t),
                Some(request_body("prod")),
            )
            .await
        }
    };
    // The token of the previous hour still holds (a page loaded just before the hour turned).
    let r = create(csrf_token(&state, "zoe", &proxy_nonce(now - 3600))).await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    // One of two hours ago, and the token that never changed before, do not.
    for old in [
        csrf_token(&state, "zoe", &proxy_nonce(now - 2 * 3600)),
        csrf_token(&state, "zoe", ""),
    ] {
        let before = s.counts().await;
        let r = create(old).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{:?}", r.body);
        assert_eq!(r.body["code"], "csrf_failed");
        assert_eq!(s.counts().await, before);
    }
}

#[tokio::test]
async fn a_proxied_identity_on_two_lines_or_in_two_spellings_authenticates_nobody() {
    let file: FileConfig = toml::from_str(PROXY).unwrap();
    let s = common::server_with("sqlite", None, file).await;
    let whoami_with = |extra: &[(&str, &str)]| {
        let mut req = Request::builder()
            .uri("/api/breakglass/whoami")
            .header(header::HOST, "localhost");
        for (name, value) in extra {
            req = req.header(*name, *value);
        }
        let mut req = req.body(Body::empty()).unwrap();
        req.extensions_mut()
            .insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
        req
    };
    let one = [
        ("x-auth-request-user", "bob"),
        ("x-auth-request-groups", "sre"),
    ];
    let me = s.raw(whoami_with(&one)).await;
    assert_eq!(me.body["user"]["name"], "bob", "{:?}", me.body);
    for extra in [
        ("x-auth-request-user", "carol"),
        ("x-forwarded-user", "carol"),
        ("x-forwarded-groups", "admins"),
        ("remote-user", "carol"),
    ] {
        let mut headers = one.to_vec();
        headers.push(extra);
        let me = s.raw(whoami_with(&headers)).await;
        assert_eq!(me.status, StatusCode::OK);
        assert!(me.body["user"].is_null(), "{extra:?}: {:?}", me.body);
    }
    // Groups on several lines are the proxy's own format (oauth2-proxy sends one per group).
    let mut lines = one.to_vec();
    lines.push(("x-auth-request-groups", "oncall"));
    let me = s.raw(whoami_with(&lines)).await;
    assert_eq!(me.body["user"]["groups"], json!(["sre", "oncall"]));
}
