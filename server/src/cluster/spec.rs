//! The approved spec (`breakglass_shared::SessionSpec`): the objects activation will create,
//! rendered from the same builders activation uses ([`super::objects`]), hashed, and compared
//! again at activation. The rendering is pure; [`dry_run`] and the [`Clusters`] methods at the
//! end ask the cluster.
//!
//! What only activation can know is left out of the hashed objects, so the same session renders
//! the same document at request time and at activation: the approver's or the broken glass's
//! annotation (the approval itself is what binds them), the grant's spec annotation (it carries
//! this hash), and the debug container's deadline, written as `<activation + N s>`.

use breakglass_shared::session::{DryRun, SessionSpec, SpecSummary};
use breakglass_shared::{Mode, Session, Tier};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::PostParams;
use kube::Api;
use serde_json::{json, Value};
use time::OffsetDateTime;

use super::error::{retry, STEP_BUDGET};
use super::objects::*;
use super::Clusters;
use crate::ports::ClusterError;

/// The version of the document's layout; a new layout is a new hash for the same objects.
const DOCUMENT_VERSION: u32 = 1;

/// What the approver annotation says in the dry run of a Flight grant, before anyone approved.
const DRY_RUN_APPROVER: &str = "(the approver, once approved)";

/// `s` as the spec sees it: nothing that only activation or the approval can fill in.
fn normalized(s: &Session) -> Session {
    let mut n = s.clone();
    n.approver = None;
    n.glass_broken_by = None;
    n.activating_at = None;
    n.created_at = OffsetDateTime::UNIX_EPOCH;
    n.spec = None;
    n
}

/// Rewrites the deadline env var (seconds since the epoch, which with the epoch as the start
/// are the seconds after activation) into words.
fn describe_deadline(container: &mut Value) {
    let Some(env) = container.get_mut("env").and_then(Value::as_array_mut) else {
        return;
    };
    for var in env {
        if var.get("name").and_then(Value::as_str) == Some(DEADLINE_ENV) {
            if let Some(secs) = var.get("value").and_then(Value::as_str).map(str::to_string) {
                var["value"] = Value::String(format!("<activation + {secs} s>"));
            }
        }
    }
}

/// The spec document of `s`: the grant for `server_username`, then the debug container in
/// `image` for `pod` (the pod as read now; for copy mode its copy is rendered from it).
pub fn document(s: &Session, server_username: &str, image: &str, pod: &Pod) -> Value {
    let n = normalized(s);
    let mut grant = serde_json::to_value(grant(&n, server_username)).unwrap_or(Value::Null);
    let debug = match s.mode {
        Mode::Live => {
            let mut c = serde_json::to_value(ephemeral_container(&n, image)).unwrap_or(Value::Null);
            describe_deadline(&mut c);
            json!({
                "kind": "EphemeralContainer",
                "pod": s.pod,
                "namespace": s.namespace,
                "container": c,
            })
        }
        Mode::Copy => {
            let mut p = serde_json::to_value(copy_pod(&n, pod, image)).unwrap_or(Value::Null);
            if let Some(cs) = p
                .pointer_mut("/spec/containers")
                .and_then(Value::as_array_mut)
            {
                cs.iter_mut().for_each(describe_deadline);
            }
            if let Some(m) = p.as_object_mut() {
                m.insert("kind".into(), "Pod".into());
                m.insert("apiVersion".into(), "v1".into());
            }
            p
        }
    };
    if let Some(m) = grant.as_object_mut() {
        m.insert("kind".into(), "RoleBinding".into());
        m.insert("apiVersion".into(), "rbac.authorization.k8s.io/v1".into());
    }
    json!({
        "breakglassSpec": DOCUMENT_VERSION,
        "session": s.id.to_string(),
        "environment": s.environment,
        "target": {
            "namespace": s.namespace,
            "pod": s.pod,
            "uid": pod.metadata.uid.clone().unwrap_or_default(),
        },
        "filledInAtActivation": [
            "the grant's approver (hangar.io/breakglass-approver) or glass-broken annotation",
            "the grant's hangar.io/breakglass-spec-sha256 annotation (this document's hash)",
            "the debug container's deadline, as written here: activation time plus the seconds given",
        ],
        "objects": [grant, debug],
    })
}

/// The spec of `s` with `document`'s hash and summary, and the dry run's verdict.
pub fn spec(
    s: &Session,
    server_username: &str,
    image: &str,
    doc: &Value,
    dry_run: DryRun,
) -> SessionSpec {
    let text = doc.to_string();
    let privileged = any_privileged(doc);
    SessionSpec {
        sha256: crate::recording::sha256_hex(text.as_bytes()),
        document: text,
        summary: SpecSummary {
            image: image.to_string(),
            role: match s.mode {
                Mode::Live => LIVE_ROLE.to_string(),
                Mode::Copy => COPY_ROLE.to_string(),
            },
            subject: server_username.to_string(),
            target_container: s.target_container.clone(),
            process_access: s.target_container.is_some(),
            privileged,
            ttl_minutes: s.granted_minutes(),
            pod_uid: doc
                .pointer("/target/uid")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            creates: match s.mode {
                Mode::Live => "ephemeral container".into(),
                Mode::Copy => "copy pod".into(),
            },
        },
        dry_run,
    }
}

/// Whether any security context in `doc` is privileged or allows privilege escalation.
fn any_privileged(v: &Value) -> bool {
    match v {
        Value::Object(m) => {
            m.get("privileged") == Some(&Value::Bool(true))
                || m.get("allowPrivilegeEscalation") == Some(&Value::Bool(true))
                || m.values().any(any_privileged)
        }
        Value::Array(a) => a.iter().any(any_privileged),
        _ => false,
    }
}

/// Up to `limit` differences between the approved document and the one rendered now, each as
/// `path: approved → now`.
pub fn differences(approved: &Value, now: &Value, limit: usize) -> Vec<String> {
    fn walk(a: &Value, b: &Value, path: &mut String, out: &mut Vec<String>, limit: usize) {
        if out.len() >= limit || a == b {
            return;
        }
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    let len = path.len();
                    path.push('/');
                    path.push_str(k);
                    walk(
                        x.get(k).unwrap_or(&Value::Null),
                        y.get(k).unwrap_or(&Value::Null),
                        path,
                        out,
                        limit,
                    );
                    path.truncate(len);
                }
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                for (i, (p, q)) in x.iter().zip(y).enumerate() {
                    let len = path.len();
                    path.push_str(&format!("/{i}"));
                    walk(p, q, path, out, limit);
                    path.truncate(len);
                }
            }
            _ => out.push(format!("{path}: {} → {}", clip(a), clip(b))),
        }
    }
    let mut out = Vec::new();
    walk(approved, now, &mut String::new(), &mut out, limit);
    out
}

fn clip(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(120) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// Asks the cluster, as a server-side dry run, whether it would admit the grant (with a
/// stand-in approver on Flight, where the approval fills it in). The debug container and the
/// copy pod are not tried: the server may change the pod only through the grant, which a dry
/// run does not create, so the same policies check them at activation.
pub async fn dry_run(rbs: &Api<RoleBinding>, s: &Session, server_username: &str) -> DryRun {
    let mut n = normalized(s);
    if n.tier == Tier::Flight {
        n.approver = Some(DRY_RUN_APPROVER.into());
    }
    let g = grant(&n, server_username);
    let params = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let name = grant_name(s);
    let later = match s.mode {
        Mode::Live => format!(
            "ephemeral container {}: checked by the same policies at activation (the server may \
             change the pod only once the grant exists)",
            debug_container_name(s)
        ),
        Mode::Copy => format!(
            "copy pod {}: checked by the same policies at activation (the server may create it \
             only once the grant exists)",
            copy_pod_name(s)
        ),
    };
    match rbs.create(&params, &g).await {
        Ok(_) => DryRun {
            admitted: Some(true),
            lines: vec![format!("grant {name}: admitted"), later],
        },
        Err(kube::Error::Api(status)) => DryRun {
            admitted: Some(false),
            lines: vec![
                format!(
                    "grant {name}: refused ({}): {}",
                    status.code, status.message
                ),
                later,
            ],
        },
        Err(e) => DryRun {
            admitted: None,
            lines: vec![format!(
                "grant {name}: not checked, the cluster did not answer: {e}"
            )],
        },
    }
}

impl Clusters {
    /// [`ClusterOps::spec`](crate::ports::ClusterOps::spec): reads the pod, renders, dry-runs.
    pub(super) async fn spec_inner(&self, s: &Session) -> Result<SessionSpec, ClusterError> {
        let env = s.environment.as_str();
        let client = self.client(env).await?;
        let me = self.identity(env, &client).await?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), &s.namespace);
        let pod = retry(STEP_BUDGET, false, || async {
            pods.get(&s.pod)
                .await
                .map_err(|e| ClusterError::from_kube(env, "read the pod", e))
        })
        .await?;
        let doc = document(s, &me, &self.debug_image, &pod);
        let rbs: Api<RoleBinding> = Api::namespaced(client, &s.namespace);
        let verdict = dry_run(&rbs, s, &me).await;
        Ok(spec(s, &me, &self.debug_image, &doc, verdict))
    }

    /// Refuses to go on unless the objects rendered now, from `pod` as just read, are the
    /// approved ones.
    pub(super) fn check_spec(&self, s: &Session, me: &str, pod: &Pod) -> Result<(), ClusterError> {
        let env = s.environment.as_str();
        let now = document(s, me, &self.debug_image, pod);
        let Some(approved) = &s.spec else {
            return Err(ClusterError::SpecDrift {
                env: env.into(),
                approved: "none: the request was made before approvals were bound to a spec".into(),
                differences: "nothing to compare with".into(),
            });
        };
        let text = now.to_string();
        if crate::recording::sha256_hex(text.as_bytes()) == approved.sha256
            && text == approved.document
        {
            return Ok(());
        }
        let was: Value = serde_json::from_str(&approved.document).unwrap_or(Value::Null);
        let mut diff = differences(&was, &now, 5);
        if diff.is_empty() {
            diff.push("the stored hash does not match the stored document".into());
        }
        Err(ClusterError::SpecDrift {
            env: env.into(),
            approved: format!("sha256 {}…", approved.short_sha256()),
            differences: diff.join("; "),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
