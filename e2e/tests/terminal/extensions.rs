//! More time for a running session on a real cluster: the grant's TTL (label and annotation,
//! through the grant policy) follows the extension, the deadline moves, the terminal stays
//! open, and the recording says when and by how much. The debug container's own deadline was
//! set at the session's ceiling, since a container's environment cannot change later.

use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::ResourceExt;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::*;

fn at(v: &serde_json::Value) -> OffsetDateTime {
    OffsetDateTime::parse(v.as_str().unwrap(), &Rfc3339).unwrap()
}

#[tokio::test]
async fn an_extension_moves_the_grants_ttl_the_deadline_and_is_in_the_recording() {
    let (server, alice, id, _dir, ns) = setup().await;
    let mut ws = connect(&server, &alice, &id).await;
    type_and_see(&server, &mut ws, b"echo before-$((6*7))\r", "before-42").await;
    let before = alice.session(&id).await.unwrap()["session"].clone();
    let cp = ControlPlane::shared().await.unwrap();
    let grants: Api<RoleBinding> = Api::namespaced(cp.client(Identity::Admin).await.unwrap(), &ns);
    let grant = before["grant_name"].as_str().unwrap();
    let ttl = |rb: &RoleBinding| {
        (
            rb.labels()["cleanup.kyverno.io/ttl"].clone(),
            rb.annotations()["hangar.io/breakglass-ttl"].clone(),
        )
    };
    assert_eq!(
        ttl(&grants.get(grant).await.unwrap()),
        ("30m".into(), "30m".into())
    );

    // The container's own deadline is the ceiling: the tier's maximum plus its grace.
    let pod = Api::<Pod>::namespaced(cp.client(Identity::Admin).await.unwrap(), &ns)
        .get("shell")
        .await
        .unwrap();
    let debug = before["debug_container"].as_str().unwrap();
    let env = pod.spec.unwrap().ephemeral_containers.unwrap();
    let deadline: i64 = env
        .iter()
        .find(|c| c.name == debug)
        .and_then(|c| c.env.as_ref())
        .and_then(|e| e.iter().find(|v| v.name == "BREAKGLASS_DEADLINE"))
        .and_then(|v| v.value.as_deref())
        .unwrap()
        .parse()
        .unwrap();
    let from = at(&before["activating_at"]).unix_timestamp();
    assert_eq!(
        deadline - from,
        60 * 60 + 60,
        "the ground tier's 60 minutes and a minute's grace"
    );

    let (st, after) = alice
        .post(
            &format!("/sessions/{id}/extend"),
            json!({"minutes": 10, "reason": "the heap dump is still being written"}),
        )
        .await
        .unwrap();
    assert_eq!(st, 200, "{after}\n{}", server.log_text());
    assert_eq!(
        at(&after["expires_at"]) - at(&before["expires_at"]),
        time::Duration::minutes(10)
    );
    assert_eq!(
        ttl(&grants.get(grant).await.unwrap()),
        ("40m".into(), "40m".into())
    );
    // The terminal was not touched.
    type_and_see(&server, &mut ws, b"echo after-$((7*7))\r", "after-49").await;

    end_and_wait(&alice, &id).await;
    let (_, events) = recording_of(&alice, &id).await;
    assert!(
        markers_of(&events)
            .iter()
            .any(|m| m.starts_with("extended by 10 min to ")
                && m.ends_with("the heap dump is still being written")),
        "{:?}",
        markers_of(&events)
    );
}
