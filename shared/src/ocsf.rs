//! A session as OCSF 1.5.0 events (Identity & Access Management), for a SIEM: the export's
//! `ocsf` format writes them one per line ([`events`]), and a SIEM receiver gets each as it
//! happens ([`changed`]: the moments a change adds). The mapping (also in docs/export.md,
//! "OCSF"):
//!
//! | moment | class (uid) | activity | status |
//! |---|---|---|---|
//! | the request (`created_at`) | Authorize Session (3003) | Other (99), "Request" | Unknown |
//! | approved, glass broken, Ground's own approval (`decided_at`) | Authorize Session (3003) | Assign Privileges (1) | Success |
//! | denied (`decided_at`) | Authorize Session (3003) | Assign Privileges (1) | Failure, the denial's reason |
//! | withdrawn, expired or failed before it ran (`finished_at`) | Authorize Session (3003) | Other (99), the state | Failure |
//! | the grant in force (`active_at`) | Account Change (3001) | Attach Policy (7), the grant | Success |
//! | the grant taken back (`ending_at`) | Account Change (3001) | Detach Policy (8), the end reason | Success |
//!
//! `user` is always the requester (whose access it is), `actor.user` who caused the moment,
//! `metadata.correlation_uid` the session's id (and `session.uid` on Authorize Session, the
//! class that has one), so a SIEM groups a session's events; `metadata.uid` is `<session>/<moment>`, the same on every export (a
//! receiver deduplicates by it). What OCSF has no attribute for (environment, pod, reason,
//! recording hash, transparency-log entry, approved spec's hash) is under `unmapped`.

use serde_json::{json, Value};
use time::OffsetDateTime;

use crate::{Session, SessionState};

/// The OCSF schema version the events follow.
pub const OCSF_VERSION: &str = "1.5.0";

const AUTHORIZE_SESSION: u32 = 3003;
const ACCOUNT_CHANGE: u32 = 3001;
const IAM: u32 = 3;

fn ms(t: OffsetDateTime) -> i64 {
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
}

/// One moment of a session.
struct Moment<'a> {
    /// `request`, `decision`, `closed`, `granted` or `revoked`: the `metadata.uid` suffix.
    name: &'static str,
    class: u32,
    activity: u32,
    activity_name: &'a str,
    at: OffsetDateTime,
    actor: Option<&'a str>,
    status: u32,
    detail: Option<&'a str>,
}

/// The session's events, oldest first; `ended_by` is who moved it to `Ending`.
pub fn events(s: &Session, ended_by: Option<&str>) -> Vec<Value> {
    moments(s, ended_by)
        .iter()
        .map(|m| event(s, s.mode.cluster_role(), m))
        .collect()
}

/// The events a change from `prev` (`None`: a new request) to `next`, made by `actor`, adds:
/// each with its moment's name (`request`, `decision`, `granted`, `revoked`, `closed`), which
/// is also the end of its `metadata.uid`. A moment is told once: the row's times say which
/// have happened, so a change that adds none (an extension, a recording stored) tells nothing.
pub fn changed(prev: Option<&Session>, next: &Session, actor: &str) -> Vec<(&'static str, Value)> {
    let before: Vec<&str> = prev
        .map(|p| moments(p, None).iter().map(|m| m.name).collect())
        .unwrap_or_default();
    moments(next, Some(actor))
        .iter()
        .filter(|m| !before.contains(&m.name))
        .map(|m| (m.name, event(next, next.mode.cluster_role(), m)))
        .collect()
}

/// The environment an event of [`events`] is about (the deliveries page lists it).
pub fn environment_of(event: &Value) -> Option<&str> {
    event["unmapped"]["environment"].as_str()
}

fn moments<'a>(s: &'a Session, ended_by: Option<&'a str>) -> Vec<Moment<'a>> {
    let mut moments = vec![Moment {
        name: "request",
        class: AUTHORIZE_SESSION,
        activity: 99,
        activity_name: "Request",
        at: s.created_at,
        actor: Some(&s.requester),
        status: 0,
        detail: Some(&s.reason),
    }];
    if let Some(at) = s.decided_at {
        let denied = s.state == SessionState::Denied;
        let by = s
            .glass_broken_by
            .as_deref()
            .or(s.approver.as_deref())
            .or(Some("system"));
        moments.push(Moment {
            name: "decision",
            class: AUTHORIZE_SESSION,
            activity: 1,
            activity_name: "Assign Privileges",
            at,
            actor: by,
            status: if denied { 2 } else { 1 },
            detail: if denied {
                s.denial_reason.as_deref()
            } else if s.glass_broken_by.is_some() {
                Some("glass broken")
            } else {
                None
            },
        });
    }
    if let Some(at) = s.active_at {
        moments.push(Moment {
            name: "granted",
            class: ACCOUNT_CHANGE,
            activity: 7,
            activity_name: "Attach Policy",
            at,
            actor: Some("system"),
            status: 1,
            detail: None,
        });
    }
    if let (Some(at), Some(_)) = (s.ending_at, s.active_at) {
        moments.push(Moment {
            name: "revoked",
            class: ACCOUNT_CHANGE,
            activity: 8,
            activity_name: "Detach Policy",
            at,
            actor: ended_by.or(Some("system")),
            status: 1,
            detail: s.end_reason.as_ref().map(crate::EndReason::kind),
        });
    }
    let closed_early = matches!(
        s.state,
        SessionState::Withdrawn | SessionState::Expired | SessionState::Failed
    ) && s.active_at.is_none();
    if let (true, Some(at)) = (closed_early, s.finished_at) {
        moments.push(Moment {
            name: "closed",
            class: AUTHORIZE_SESSION,
            activity: 99,
            activity_name: s.state.into(),
            at,
            actor: if s.state == SessionState::Withdrawn {
                Some(&s.requester)
            } else {
                Some("system")
            },
            status: 2,
            detail: s.failure.as_deref(),
        });
    }
    moments
}

fn event(s: &Session, role: &str, m: &Moment<'_>) -> Value {
    let mut e = json!({
        "class_uid": m.class,
        "category_uid": IAM,
        "activity_id": m.activity,
        "activity_name": m.activity_name,
        "type_uid": u64::from(m.class) * 100 + u64::from(m.activity),
        "severity_id": if s.glass_broken_by.is_some() { 3 } else { 1 },
        "time": ms(m.at),
        "status_id": m.status,
        "message": format!(
            "{} debug access to {}/{} in {} ({}): {}",
            s.requester, s.namespace, s.pod, s.environment, s.tier.as_str(), m.activity_name
        ),
        "metadata": {
            "version": OCSF_VERSION,
            "uid": format!("{}/{}", s.id, m.name),
            "correlation_uid": s.id.to_string(),
            "product": {
                "name": "breakglass",
                "vendor_name": "breakglass",
                "version": env!("CARGO_PKG_VERSION"),
            },
        },
        "user": { "name": s.requester },
        "unmapped": {
            "environment": s.environment,
            "tier": s.tier.as_str(),
            "namespace": s.namespace,
            "pod": s.pod,
            "mode": s.mode.as_str(),
            "reason": s.reason,
            "ticket": s.ticket,
            "state": s.state.to_string(),
        },
    });
    if let Some(a) = m.actor {
        e["actor"] = json!({ "user": { "name": a } });
    }
    if let Some(d) = m.detail {
        e["status_detail"] = json!(d);
    }
    if m.class == AUTHORIZE_SESSION {
        // Account Change has no `session`: its events are tied by `correlation_uid`.
        e["session"] = json!({ "uid": s.id.to_string(), "created_time": ms(s.created_at) });
        if let Some(t) = s.expires_at {
            e["session"]["expiration_time"] = json!(ms(t));
        }
        // The class wants exactly one of `privileges` and `group`: the ClusterRole asked for,
        // granted or refused.
        e["privileges"] = json!([role]);
    }
    if m.class == ACCOUNT_CHANGE {
        e["policies"] = json!([{
            "name": s.grant_name.clone().unwrap_or_else(|| role.to_string()),
            "desc": format!("RoleBinding to ClusterRole {role} in {}", s.namespace),
        }]);
    }
    if let Some(r) = &s.recording {
        e["unmapped"]["recording_key"] = json!(r.key);
        e["unmapped"]["recording_sha256"] = json!(r.sha256);
    }
    if let Some(r) = &s.rekor {
        e["unmapped"]["rekor_uuid"] = json!(r.uuid);
    }
    if let Some(sp) = &s.spec {
        e["unmapped"]["spec_sha256"] = json!(sp.sha256);
    }
    e
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::session::testing::{req, session_in, user, NOW};
    use crate::{PermissionSet, SessionEvent, Tier};

    fn names(v: &[(&'static str, Value)]) -> Vec<&'static str> {
        v.iter().map(|(n, _)| *n).collect()
    }

    #[test]
    fn each_change_tells_the_moments_it_adds_once() {
        let s = session_in(SessionState::PendingApproval, Tier::Flight);
        assert_eq!(names(&changed(None, &s, "alice")), ["request"]);
        let bob = user("bob", PermissionSet::ALL);
        let carol = user("carol", PermissionSet::ALL);
        let mut steps = vec![(s.clone(), String::new())];
        for (e, actor) in [
            (
                SessionEvent::Approve {
                    by: bob,
                    groups: vec![],
                },
                "bob",
            ),
            (SessionEvent::BeginActivation, "system"),
            (SessionEvent::Activated, "system"),
            (SessionEvent::Terminate { by: carol }, "carol"),
            (SessionEvent::CleanupDone, "system"),
        ] {
            let prev = steps[steps.len() - 1].0.clone();
            let next = prev.apply(&e, NOW).unwrap();
            let told = changed(Some(&prev), &next, actor);
            steps.push((next, names(&told).join(",")));
            if let Some((name, ev)) = told.first() {
                assert_eq!(ev["metadata"]["uid"], format!("{}/{name}", s.id));
                assert_eq!(ev["privileges"].is_array(), ev["class_uid"] == 3003);
            }
        }
        let told: Vec<&str> = steps[1..].iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(told, ["decision", "", "granted", "revoked", ""]);
        let ended = &steps[4].0;
        let revoked = &changed(Some(&steps[3].0), ended, "carol")[0].1;
        assert_eq!(revoked["actor"]["user"]["name"], "carol");
        assert_eq!(revoked["activity_id"], 8);
        // The export tells the same moments, in order.
        let all: Vec<String> = events(&steps[5].0, Some("carol"))
            .iter()
            .map(|e| e["metadata"]["uid"].as_str().unwrap().to_string())
            .collect();
        let want: Vec<String> = ["request", "decision", "granted", "revoked"]
            .iter()
            .map(|n| format!("{}/{n}", s.id))
            .collect();
        assert_eq!(all, want);
    }

    #[test]
    fn a_ground_request_is_asked_and_granted_at_once() {
        let g = Session::new_request(uuid::Uuid::from_u128(9), req(Tier::Ground), NOW);
        let told = changed(None, &g, "alice");
        assert_eq!(names(&told), ["request", "decision"]);
        assert_eq!(told[1].1["actor"]["user"]["name"], "system");
        assert_eq!(environment_of(&told[0].1), Some(g.environment.as_str()));
    }
}
