//! Lists, reviews and the rest of the surface: filters and paging, the cards' filters, reviews, whoami, health, metrics, OpenAPI, expiry, recordings' readers.

use super::*;

#[tokio::test]
async fn list_filters_paging_and_awaiting_me() {
    for s in servers().await {
        let alice = s.login("alice").await;
        let bob = s.login("bob").await;
        let carol = s.login("carol").await;
        let mut ids = vec![];
        for _ in 0..5 {
            ids.push(
                s.create(&alice, "prod").await["id"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            );
        }
        s.create(&alice, "dev").await;
        let bobs = s.create(&bob, "prod").await["id"]
            .as_str()
            .unwrap()
            .to_string();

        let get = |q: &str| format!("/api/breakglass/sessions?{q}");
        let r = s
            .send(&alice, Method::GET, &get("environment=prod"), None)
            .await;
        assert_eq!(
            r.body["items"].as_array().unwrap().len(),
            6,
            "{}",
            s.backend
        );
        let r = s
            .send(&alice, Method::GET, &get("state=Approved"), None)
            .await;
        assert_eq!(r.body["items"].as_array().unwrap().len(), 1);
        let r = s
            .send(&alice, Method::GET, &get("requester=bob"), None)
            .await;
        assert_eq!(r.body["items"][0]["id"], bobs.as_str());

        // Pages of 2, newest first, covering all 7 exactly once.
        let mut seen = vec![];
        let mut cursor: Option<String> = None;
        loop {
            let q = match &cursor {
                Some(c) => format!("limit=2&cursor={c}"),
                None => "limit=2".into(),
            };
            let r = s.send(&alice, Method::GET, &get(&q), None).await;
            for it in r.body["items"].as_array().unwrap() {
                seen.push(it["id"].as_str().unwrap().to_string());
            }
            match r.body["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => break,
            }
        }
        assert_eq!(seen.len(), 7);
        let mut sorted = seen.clone();
        sorted.sort_by(|a, b| b.cmp(a));
        assert_eq!(seen, sorted, "newest first");

        // Awaiting my approval: bob sees alice's five, not his own; alice (no approve) none.
        let r = s
            .send(&bob, Method::GET, &get("awaiting_me=true"), None)
            .await;
        let items = r.body["items"].as_array().unwrap();
        assert_eq!(items.len(), 5, "{}", s.backend);
        assert!(items.iter().all(|i| i["requester"] == "alice"));
        let r = s
            .send(&carol, Method::GET, &get("awaiting_me=true"), None)
            .await;
        assert_eq!(r.body["items"].as_array().unwrap().len(), 6);
        let r = s
            .send(&alice, Method::GET, &get("awaiting_me=true"), None)
            .await;
        assert_eq!(r.body["items"].as_array().unwrap().len(), 0);

        for (q, field) in [
            ("limit=0", "limit"),
            ("limit=201", "limit"),
            ("cursor=zzz", "cursor"),
            ("state=Sleeping", "state"),
            ("awaiting_me=maybe", "awaiting_me"),
        ] {
            let r = s.send(&alice, Method::GET, &get(q), None).await;
            assert_eq!(
                (r.status, r.body["field"].as_str()),
                (StatusCode::BAD_REQUEST, Some(field)),
                "{q}: {:?}",
                r.body
            );
        }
        let _ = ids;
    }
}

/// The cards' filters: each asks the store for exactly the rows it shows, whatever else is
/// stored, and combines with the other filters.
#[tokio::test]
async fn list_filters_of_the_cards() {
    for s in servers().await {
        let alice = s.login("alice").await;
        let bob = s.login("bob").await;
        let carol = s.login("carol").await;
        let id = |v: Value| v["id"].as_str().unwrap().to_string();
        let approved = id(s.create(&alice, "prod").await);
        let denied = id(s.create(&alice, "prod").await);
        let waiting = id(s.create(&alice, "prod").await);
        let ground = id(s.create(&alice, "dev").await);
        assert_eq!(
            s.act(&bob, &approved, "approve", None).await.status,
            StatusCode::OK
        );
        let r = s
            .act(
                &bob,
                &denied,
                "deny",
                Some(json!({"reason": "use the runbook first"})),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
        let broken = id(s.create(&carol, "prod").await);
        s.act(&carol, &broken, "break-glass", None).await;
        s.act(&carol, &broken, "terminate", None).await;
        wait_state(&s, &carol, &broken, "Ended").await;

        let (server, reader) = (&s, &bob);
        let ids = move |q: &str| {
            let q = format!("/api/breakglass/sessions?{q}");
            async move {
                let r = server.send(reader, Method::GET, &q, None).await;
                assert_eq!(r.status, StatusCode::OK, "{q}: {:?}", r.body);
                let mut v: Vec<String> = r.body["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| i["id"].as_str().unwrap().to_string())
                    .collect();
                v.sort();
                v
            }
        };
        let sorted = |mut v: Vec<&String>| {
            v.sort();
            v.into_iter().cloned().collect::<Vec<_>>()
        };
        assert_eq!(
            ids("in_progress=true").await,
            sorted(vec![&approved, &ground]),
            "{}",
            s.backend
        );
        assert_eq!(
            ids("in_progress=true&environment=prod").await,
            std::slice::from_ref(&approved)
        );
        assert!(ids("in_progress=true&state=PendingApproval")
            .await
            .is_empty());
        assert_eq!(
            ids("in_progress=false").await.len(),
            5,
            "false filters nothing"
        );
        assert_eq!(
            ids("state=PendingApproval").await,
            std::slice::from_ref(&waiting)
        );
        assert_eq!(ids("approver=bob").await, sorted(vec![&approved, &denied]));
        assert_eq!(
            ids("approver=bob&state=Denied").await,
            std::slice::from_ref(&denied)
        );
        assert!(ids("approver=alice").await.is_empty());
        assert_eq!(ids("review_due=true").await, std::slice::from_ref(&broken));
        assert!(ids("review_due=true&environment=dev").await.is_empty());
        let r = s
            .act(&bob, &broken, "review", Some(json!({"verdict": "ok"})))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
        assert!(ids("review_due=true").await.is_empty(), "reviewed");

        for (q, field) in [
            ("in_progress=maybe", "in_progress"),
            ("review_due=1x", "review_due"),
        ] {
            let r = s
                .send(
                    &bob,
                    Method::GET,
                    &format!("/api/breakglass/sessions?{q}"),
                    None,
                )
                .await;
            assert_eq!(
                (r.status, r.body["field"].as_str()),
                (StatusCode::BAD_REQUEST, Some(field)),
                "{q}: {:?}",
                r.body
            );
        }
    }
}

#[tokio::test]
async fn reviews_of_finished_sessions() {
    for s in servers().await {
        let alice = s.login("alice").await;
        let bob = s.login("bob").await;
        let carol = s.login("carol").await;
        let id = s.create(&carol, "prod").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        s.act(&carol, &id, "break-glass", None).await;
        // Not finished yet.
        let r = s
            .act(&bob, &id, "review", Some(json!({"verdict": "ok"})))
            .await;
        assert_eq!(r.status, StatusCode::CONFLICT, "{:?}", r.body);
        s.act(&carol, &id, "terminate", None).await;
        wait_state(&s, &carol, &id, "Ended").await;
        let r = s
            .act(&carol, &id, "review", Some(json!({"verdict": "ok"})))
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "own session");
        let r = s
            .act(&alice, &id, "review", Some(json!({"verdict": "ok"})))
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "alice lacks approve");
        let r = s
            .act(&bob, &id, "review", Some(json!({"verdict": "great"})))
            .await;
        assert_eq!(r.body["field"], "verdict");
        // No verdict is assumed: a request without one is refused, naming the field.
        let r = s
            .act(&bob, &id, "review", Some(json!({"notes": "looked fine"})))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
        assert_eq!(r.body["field"], "verdict", "{:?}", r.body);
        // A concern says what to follow up; blank notes change nothing.
        for blank in [
            json!({"verdict": "concern"}),
            json!({"verdict": "concern", "notes": "  "}),
        ] {
            let r = s.act(&bob, &id, "review", Some(blank)).await;
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{:?}", r.body);
            assert_eq!(r.body["field"], "notes", "{:?}", r.body);
        }
        let row = s
            .send(
                &bob,
                Method::GET,
                &format!("/api/breakglass/sessions/{id}"),
                None,
            )
            .await;
        assert!(row.body["session"]["review"].is_null(), "{:?}", row.body);
        let r = s
            .act(
                &bob,
                &id,
                "review",
                Some(json!({"verdict": "concern", "notes": "ran tcpdump"})),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}: {:?}", s.backend, r.body);
        assert_eq!(r.body["review"]["reviewer"], "bob");
        assert_eq!(r.body["review"]["verdict"], "concern");
        let r = s
            .act(&bob, &id, "review", Some(json!({"verdict": "ok"})))
            .await;
        assert_eq!(r.status, StatusCode::CONFLICT);
    }
}

#[tokio::test]
async fn whoami_health_metrics_and_openapi() {
    for s in servers().await {
        let anon = Caller::default();
        let r = s
            .send(&anon, Method::GET, "/api/breakglass/whoami", None)
            .await;
        assert_eq!(r.body["user"], Value::Null);
        assert_eq!(r.body["dev_mode"], true);
        assert_eq!(r.body["dev_users"], json!(["alice", "bob", "carol"]));
        let bob = s.login("bob").await;
        let r = s
            .send(&bob, Method::GET, "/api/breakglass/whoami", None)
            .await;
        assert_eq!(r.body["user"]["name"], "bob");
        let envs = r.body["environments"].as_array().unwrap();
        assert_eq!(envs.len(), 2);
        assert_eq!(envs[1]["tier"], "flight");
        assert_eq!(
            envs[1]["permissions"]["tower.breakglass.approve"],
            Value::Null,
            "field names are short"
        );
        assert_eq!(envs[1]["permissions"]["approve"], true);
        assert_eq!(envs[1]["permissions"]["self"], false);

        assert_eq!(
            s.send(&anon, Method::GET, "/healthz", None).await.status,
            StatusCode::OK
        );
        assert_eq!(
            s.send(&anon, Method::GET, "/readyz", None).await.status,
            StatusCode::OK
        );
        s.create(&bob, "dev").await;
        let m = s.send(&anon, Method::GET, "/metrics", None).await;
        let text = m.body.as_str().unwrap();
        assert!(
            text.contains("breakglass_transitions_total{kind=\"create\"} 1"),
            "{text}"
        );
        assert!(text.contains("breakglass_http_requests_total"));
        assert!(text.contains("breakglass_sse_streams_open 0"));

        let doc = s
            .send(&anon, Method::GET, "/api/breakglass/openapi.json", None)
            .await;
        let paths = doc.body["paths"].as_object().unwrap();
        for p in [
            "/api/breakglass/sessions",
            "/api/breakglass/sessions/{id}/approve",
            "/api/breakglass/events",
            "/api/breakglass/whoami",
        ] {
            assert!(paths.contains_key(p), "{p} missing from OpenAPI");
        }
    }
}

#[tokio::test]
async fn sweep_expires_requests_that_waited_too_long() {
    for s in servers().await {
        let alice = s.login("alice").await;
        let id = s.create(&alice, "prod").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        let now = time::OffsetDateTime::now_utc();
        let r = breakglass_server::sweep::sweep_once(&s.ctx, now)
            .await
            .unwrap();
        assert_eq!(r.expired, 0, "not yet");
        let later = now + s.ctx.config.approval_expiry + time::Duration::seconds(1);
        let r = breakglass_server::sweep::sweep_once(&s.ctx, later)
            .await
            .unwrap();
        assert_eq!(r.expired, 1, "{}", s.backend);
        let d = s
            .send(
                &alice,
                Method::GET,
                &format!("/api/breakglass/sessions/{id}"),
                None,
            )
            .await;
        assert_eq!(d.body["session"]["state"], "Expired");
        assert_eq!(
            d.body["events"].as_array().unwrap().last().unwrap()["actor"],
            "system"
        );
    }
}

#[tokio::test]
async fn recordings_are_for_the_requester_and_approvers() {
    for s in servers().await {
        let alice = s.login("alice").await;
        let bob = s.login("bob").await;
        let carol = s.login("carol").await;
        let id = s.create(&bob, "prod").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        for path in ["recording", "recording/verify"] {
            let path = format!("/api/breakglass/sessions/{id}/{path}");
            // alice sees the session (she holds request there) but is neither its requester
            // nor an approver.
            let r = s.send(&alice, Method::GET, &path, None).await;
            assert_eq!((r.status, r.code()), (StatusCode::FORBIDDEN, "forbidden"));
            assert!(r.body["message"]
                .as_str()
                .unwrap()
                .contains("recordings are for the requester"));
            // The requester and an approver get past the rule: nothing was recorded yet.
            for who in [&bob, &carol] {
                let r = s.send(who, Method::GET, &path, None).await;
                assert_eq!((r.status, r.code()), (StatusCode::NOT_FOUND, "not_found"));
            }
        }
    }
}
