//! The cluster objects a session creates, built as plain values (no I/O), so their shape can be
//! tested against what the admission policies admit.

use std::collections::BTreeMap;

use breakglass_shared::session::{short_id, SPEC_ANNOTATION};
use breakglass_shared::{Mode, Session, Tier};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerState, EnvVar, EphemeralContainer, Pod, PodSpec,
    SecurityContext,
};
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

// The contract names (labels, annotations, roles) are declared once, with the guardrails that
// match them.
use crate::guardrails::Identity;
pub use crate::guardrails::{
    APPROVER_ANNOTATION, COPY_LABEL, COPY_ROLE, GLASS_BROKEN_ANNOTATION, LIVE_ROLE,
    MANAGED_BY_LABEL, MANAGED_BY_VALUE, PROCESS_ACCESS_ANNOTATION, REQUESTER_ANNOTATION,
    SESSION_ENV, SESSION_LABEL, TTL_ANNOTATION, TTL_LABEL,
};

/// `breakglass-<short id>`.
pub fn grant_name(s: &Session) -> String {
    format!("breakglass-{}", s.short_id())
}

/// `debug-<short id>`.
pub fn debug_container_name(s: &Session) -> String {
    format!("debug-{}", s.short_id())
}

/// `<pod>-bg-<short id>`, shortened so the name stays a valid pod name.
pub fn copy_pod_name(s: &Session) -> String {
    let suffix = format!("-bg-{}", short_id(&s.id));
    let keep = 63usize.saturating_sub(suffix.len());
    let base: String = s.pod.chars().take(keep).collect();
    format!("{}{suffix}", base.trim_end_matches(['-', '.']))
}

/// The RBAC subject for the server's username on a cluster.
pub fn subject_for(username: &str) -> Subject {
    match Identity::parse(username) {
        Identity::ServiceAccount { namespace, name } => Subject {
            kind: "ServiceAccount".into(),
            name: name.into(),
            namespace: Some(namespace.into()),
            api_group: None,
        },
        Identity::User(name) => Subject {
            kind: "User".into(),
            name: name.into(),
            namespace: None,
            api_group: Some("rbac.authorization.k8s.io".into()),
        },
    }
}

/// The grant's TTL (label and annotation): the minutes the session may run, extensions
/// included; an extension rewrites it.
pub fn grant_ttl(s: &Session) -> String {
    format!("{}m", s.granted_minutes())
}

/// The grant: binds the mode's debug role to the server itself, in the pod's namespace only.
pub fn grant(s: &Session, server_username: &str) -> RoleBinding {
    let ttl = grant_ttl(s);
    let mut labels = BTreeMap::from([
        (MANAGED_BY_LABEL.to_string(), MANAGED_BY_VALUE.to_string()),
        (SESSION_LABEL.to_string(), s.id.to_string()),
        (TTL_LABEL.to_string(), ttl.clone()),
    ]);
    labels.retain(|_, v| !v.is_empty());
    let mut annotations = BTreeMap::from([
        (REQUESTER_ANNOTATION.to_string(), s.requester.clone()),
        (TTL_ANNOTATION.to_string(), ttl),
    ]);
    if let Some(spec) = &s.spec {
        annotations.insert(SPEC_ANNOTATION.to_string(), spec.sha256.clone());
    }
    if s.tier == Tier::Flight {
        if s.glass_broken_by.is_some() {
            annotations.insert(GLASS_BROKEN_ANNOTATION.into(), "true".into());
        } else if let Some(a) = &s.approver {
            annotations.insert(APPROVER_ANNOTATION.into(), a.clone());
        }
    }
    RoleBinding {
        metadata: ObjectMeta {
            name: Some(grant_name(s)),
            namespace: Some(s.namespace.clone()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: match s.mode {
                breakglass_shared::Mode::Live => LIVE_ROLE.into(),
                breakglass_shared::Mode::Copy => COPY_ROLE.into(),
            },
        },
        subjects: Some(vec![subject_for(server_username)]),
    }
}

fn debug_security_context(process_access: bool) -> SecurityContext {
    SecurityContext {
        privileged: Some(false),
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            add: process_access.then(|| vec!["SYS_PTRACE".to_string()]),
            drop: None,
        }),
        ..Default::default()
    }
}

/// The env var with the session's deadline (Unix seconds), at which the debug container's
/// supervisor ends it.
pub const DEADLINE_ENV: &str = "BREAKGLASS_DEADLINE";

/// How long after its time box a debug container ends by itself: the box starts once the
/// container runs (a little after its deadline is written), and the server ends it explicitly
/// at the box's end; this is the backstop for when the server cannot.
const DEADLINE_GRACE_SECONDS: i64 = 60;

/// What a debug container runs: the debug image's supervisor (`debug-image/supervisor`), the
/// container's main process, which starts the interactive shell on the container's terminal and
/// ends the container, so the runtime stops every process in it, when the terminal's size is
/// [`breakglass_shared::terminal::END_SIZE`] (the server sets it through the attach when the
/// session ends), at the deadline in [`DEADLINE_ENV`], on the runtime's SIGTERM, or when the
/// shell exits. Not the shell itself: in a PID namespace of its own the main process is PID 1,
/// and the kernel drops a signal sent to PID 1 from inside that it has no handler for, so a
/// shell there could not be ended from beside it; and a watcher beside the shell would be a
/// process of the person's, which they could stop. The supervisor catches and ignores what a
/// person can send it, and looks at the terminal's size four times a second (an ioctl, no
/// process started).
pub const DEBUG_SUPERVISOR: &str = "/usr/local/bin/breakglass-supervisor";

fn debug_command() -> Option<Vec<String>> {
    Some(vec![DEBUG_SUPERVISOR.into()])
}

/// The env vars of the debug container: the session (which the policies match against the
/// container's name) and its deadline. A container's environment cannot change, so the
/// deadline is the session's ceiling (every extension it may still get); the server ends the
/// container at the session's actual end.
fn session_env(s: &Session) -> Option<Vec<EnvVar>> {
    let from = s.activating_at.unwrap_or(s.created_at);
    let deadline =
        from.unix_timestamp() + i64::from(s.ceiling_minutes()) * 60 + DEADLINE_GRACE_SECONDS;
    Some(vec![
        EnvVar {
            name: SESSION_ENV.into(),
            value: Some(s.id.to_string()),
            value_from: None,
        },
        EnvVar {
            name: DEADLINE_ENV.into(),
            value: Some(deadline.to_string()),
            value_from: None,
        },
    ])
}

/// The ephemeral debug container (live mode).
pub fn ephemeral_container(s: &Session, image: &str) -> EphemeralContainer {
    EphemeralContainer {
        name: debug_container_name(s),
        image: Some(image.into()),
        stdin: Some(true),
        tty: Some(true),
        command: debug_command(),
        env: session_env(s),
        target_container_name: s.target_container.clone(),
        security_context: Some(debug_security_context(s.target_container.is_some())),
        ..Default::default()
    }
}

/// The hardened copy of `original` with the debug container (copy mode): no labels (so no
/// Service selects it), no owner, no service-account token, no host namespaces or host paths,
/// no probes, a shared process namespace, and the debug container as a regular container.
pub fn copy_pod(s: &Session, original: &Pod, image: &str) -> Pod {
    let spec = original.spec.clone().unwrap_or_default();
    let host_path_volumes: Vec<String> = spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| v.host_path.is_some() || v.name.starts_with("kube-api-access-"))
        .map(|v| v.name.clone())
        .collect();
    let harden = |mut c: Container| {
        c.liveness_probe = None;
        c.readiness_probe = None;
        c.startup_probe = None;
        let mut sc = c.security_context.take().unwrap_or_default();
        sc.privileged = Some(false);
        sc.allow_privilege_escalation = Some(false);
        c.security_context = Some(sc);
        if let Some(m) = c.volume_mounts.as_mut() {
            m.retain(|vm| !host_path_volumes.contains(&vm.name));
        }
        c
    };
    let mut containers: Vec<Container> = spec.containers.into_iter().map(harden).collect();
    containers.push(Container {
        name: debug_container_name(s),
        image: Some(image.into()),
        stdin: Some(true),
        tty: Some(true),
        command: debug_command(),
        env: session_env(s),
        security_context: Some(debug_security_context(s.target_container.is_some())),
        ..Default::default()
    });
    let volumes = spec.volumes.map(|vs| {
        vs.into_iter()
            .filter(|v| !host_path_volumes.contains(&v.name))
            .collect::<Vec<_>>()
    });
    Pod {
        metadata: ObjectMeta {
            name: Some(copy_pod_name(s)),
            namespace: Some(s.namespace.clone()),
            // The policies allow process access (SYS_PTRACE) only on a pod naming the session.
            annotations: s.target_container.as_ref().map(|_| {
                BTreeMap::from([(PROCESS_ACCESS_ANNOTATION.to_string(), s.id.to_string())])
            }),
            labels: Some(BTreeMap::from([
                (COPY_LABEL.to_string(), s.id.to_string()),
                (MANAGED_BY_LABEL.to_string(), MANAGED_BY_VALUE.to_string()),
                // A pod's labels cannot change later (the pod-patch policy): its backstop
                // covers every extension the session may still get.
                (TTL_LABEL.to_string(), format!("{}m", s.ceiling_minutes())),
            ])),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers,
            init_containers: spec
                .init_containers
                .map(|v| v.into_iter().map(harden).collect()),
            volumes,
            automount_service_account_token: Some(false),
            share_process_namespace: Some(true),
            restart_policy: Some("Never".into()),
            host_network: None,
            host_pid: None,
            host_ipc: None,
            node_selector: spec.node_selector,
            tolerations: spec.tolerations,
            affinity: spec.affinity,
            image_pull_secrets: spec.image_pull_secrets,
            security_context: spec.security_context,
            termination_grace_period_seconds: Some(0),
            ..Default::default()
        }),
        status: None,
    }
}

/// Whether the debugged pod is deleted at the end (live mode), by the tier rule: a pod with no
/// owner never is; a pod whose owner has other ready pods always is (replaced without an
/// outage, so no debug container lingers); the owner's last ready pod only on Ground and only
/// when the requester asked.
pub fn should_recycle(tier: Tier, asked: bool, has_owner: bool, other_ready_pods: usize) -> bool {
    if !has_owner {
        return false;
    }
    if other_ready_pods > 0 {
        return true;
    }
    tier == Tier::Ground && asked
}

/// Whether a pod is Ready.
pub fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The controller owner's uid, if any.
pub fn controller_uid(p: &Pod) -> Option<String> {
    p.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.clone())
}

/// The state of container `name` (regular or ephemeral; names are unique in a pod).
fn container_state<'a>(p: &'a Pod, name: &str) -> Option<&'a ContainerState> {
    let st = p.status.as_ref()?;
    st.container_statuses
        .iter()
        .flatten()
        .chain(st.ephemeral_container_statuses.iter().flatten())
        .find(|c| c.name == name)?
        .state
        .as_ref()
}

/// The pod the debug container lives in: the debugged pod (live) or its copy (copy).
pub fn debug_pod_name(s: &Session) -> String {
    match s.mode {
        Mode::Live => s.pod.clone(),
        Mode::Copy => s.copy_pod.clone().unwrap_or_else(|| copy_pod_name(s)),
    }
}

/// Whether `pod` has an ephemeral container called `name`.
pub fn has_ephemeral(pod: &Pod, name: &str) -> bool {
    pod.spec
        .as_ref()
        .and_then(|sp| sp.ephemeral_containers.as_ref())
        .is_some_and(|v| v.iter().any(|c| c.name == name))
}

/// Whether `pod` carries the process-access annotation of session `id`.
pub fn annotated_for(pod: &Pod, id: uuid::Uuid) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PROCESS_ACCESS_ANNOTATION))
        .is_some_and(|v| *v == id.to_string())
}

/// The merge patch that sets (`Some(session id)`) or removes (`None`) the process-access
/// annotation.
pub fn process_access_patch(value: Option<&str>) -> serde_json::Value {
    serde_json::json!({"metadata": {"annotations": {PROCESS_ACCESS_ANNOTATION: value}}})
}

/// Whether container `name` (regular or ephemeral) runs.
pub fn container_running(p: &Pod, name: &str) -> bool {
    container_state(p, name).is_some_and(|s| s.running.is_some())
}

/// Whether container `name` ended (terminated) — a debug shell that exited.
pub fn container_terminated(p: &Pod, name: &str) -> bool {
    container_state(p, name).is_some_and(|s| s.terminated.is_some())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn the_debug_container_runs_the_images_supervisor() {
        let s = session(Tier::Ground, Mode::Live);
        let c = ephemeral_container(&s, "img");
        assert_eq!(c.command, Some(vec![DEBUG_SUPERVISOR.to_string()]));
        assert!(c.args.is_none());
        let env = c.env.unwrap_or_default();
        assert!(env.iter().any(|e| e.name == DEADLINE_ENV), "{env:?}");
        // The image's Dockerfile installs it there and makes it the entrypoint.
        let dockerfile = include_str!("../../../debug-image/Dockerfile");
        assert!(dockerfile.contains(&format!("ENTRYPOINT [\"{DEBUG_SUPERVISOR}\"]")));
    }
    use breakglass_shared::session::NewSession;
    use breakglass_shared::Mode;
    use uuid::Uuid;

    /// A request for `web-1` (container `app`) in `shop` on `prod`, for the cluster's tests.
    pub(crate) fn session(tier: Tier, mode: Mode) -> Session {
        Session::new_request(
            Uuid::parse_str("01a22929-d3ca-70c7-8b07-0ce9004d43f4").unwrap(),
            NewSession {
                environment: "prod".into(),
                tier,
                namespace: "shop".into(),
                pod: "web-1".into(),
                target_container: Some("app".into()),
                mode,
                reason: "checking a stuck worker".into(),
                ticket: None,
                duration_minutes: 30,
                recycle: false,
                requester: "alice".into(),
                quorum: breakglass_shared::session::Quorum::default(),
                extension_limits: breakglass_shared::session::ExtensionLimits::default(),
            },
            time::OffsetDateTime::UNIX_EPOCH,
        )
    }

    #[test]
    fn names_follow_the_contract() {
        let s = session(Tier::Flight, Mode::Live);
        assert_eq!(grant_name(&s), "breakglass-004d43f4");
        assert_eq!(debug_container_name(&s), "debug-004d43f4");
        assert_eq!(copy_pod_name(&s), "web-1-bg-004d43f4");
        let mut long = s.clone();
        long.pod = "x".repeat(80);
        assert!(copy_pod_name(&long).len() <= 63);
    }

    #[test]
    fn grant_subject_follows_identity_and_flight_carries_the_approver() {
        let mut s = session(Tier::Flight, Mode::Live);
        s.approver = Some("bob".into());
        let g = grant(&s, "system:serviceaccount:breakglass:breakglass-server");
        let subj = &g.subjects.as_ref().unwrap()[0];
        assert_eq!(
            (
                subj.kind.as_str(),
                subj.name.as_str(),
                subj.namespace.as_deref()
            ),
            ("ServiceAccount", "breakglass-server", Some("breakglass"))
        );
        assert_eq!(g.role_ref.name, LIVE_ROLE);
        let ann = g.metadata.annotations.as_ref().unwrap();
        assert_eq!(ann[APPROVER_ANNOTATION], "bob");
        assert_eq!(ann[TTL_ANNOTATION], "30m");
        let labels = g.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[SESSION_LABEL], s.id.to_string());
        let u = grant(
            &session(Tier::Ground, Mode::Copy),
            "hangar:home:tower-actor",
        );
        assert_eq!(u.subjects.as_ref().unwrap()[0].kind, "User");
        assert_eq!(u.role_ref.name, COPY_ROLE);
        assert!(!u
            .metadata
            .annotations
            .as_ref()
            .unwrap()
            .contains_key(APPROVER_ANNOTATION));
    }

    #[test]
    fn recycle_matrix() {
        for tier in [Tier::Ground, Tier::Flight] {
            for asked in [false, true] {
                assert!(!should_recycle(tier, asked, false, 3), "no owner: never");
                assert!(should_recycle(tier, asked, true, 2), "not last: replaced");
                assert_eq!(
                    should_recycle(tier, asked, true, 0),
                    tier == Tier::Ground && asked,
                    "last ready"
                );
            }
        }
    }

    #[test]
    fn copy_pod_is_hardened() {
        let s = session(Tier::Ground, Mode::Copy);
        let original: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-1", "labels": {"app": "web"}, "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u", "controller": true}]},
            "spec": {"hostNetwork": true, "serviceAccountName": "web",
                     "containers": [{"name": "app", "image": "nginx", "livenessProbe": {"exec": {"command": ["true"]}},
                                     "securityContext": {"privileged": true},
                                     "volumeMounts": [{"name": "host", "mountPath": "/h"}, {"name": "data", "mountPath": "/d"}]}],
                     "volumes": [{"name": "host", "hostPath": {"path": "/"}}, {"name": "data", "emptyDir": {}}]}
        }))
        .unwrap();
        let c = copy_pod(&s, &original, "img@sha256:0");
        let labels = c.metadata.labels.as_ref().unwrap();
        assert!(!labels.contains_key("app"));
        assert_eq!(labels[COPY_LABEL], s.id.to_string());
        assert!(c.metadata.owner_references.is_none());
        let spec = c.spec.unwrap();
        assert_eq!(spec.automount_service_account_token, Some(false));
        assert_eq!(spec.host_network, None);
        assert_eq!(spec.share_process_namespace, Some(true));
        assert_eq!(spec.volumes.as_ref().unwrap().len(), 1);
        let app = &spec.containers[0];
        assert!(app.liveness_probe.is_none());
        assert_eq!(
            app.security_context.as_ref().unwrap().privileged,
            Some(false)
        );
        assert_eq!(app.volume_mounts.as_ref().unwrap().len(), 1);
        assert_eq!(spec.containers[1].name, "debug-004d43f4");
    }
}
