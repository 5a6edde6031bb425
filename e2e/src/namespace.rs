//! Fresh namespaces per test.

use std::collections::hash_map::RandomState;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use futures::FutureExt as _;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::{Api, Client, Config};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::controlplane::{ControlPlane, Identity};
use crate::wait::wait_until;

/// A namespace created for one test.
///
/// Call [`TestNamespace::delete`] at the end of a passing test. If the value
/// is dropped without that (the test returned an error or panicked), the
/// namespace is treated as belonging to a failed test: with
/// `BREAKGLASS_KEEP_NAMESPACES=1` it is kept and its objects are dumped to
/// stderr, otherwise it is deleted. [`in_namespace`] does all this for you.
#[derive(Debug)]
pub struct TestNamespace {
    name: String,
    /// Admin configuration, to build a fresh client on another runtime in Drop.
    admin: Config,
    done: bool,
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

// Declared here rather than in `controlplane`, so the control plane knows nothing of the
// namespaces made on it (the namespace depends on the control plane, not both ways).
impl ControlPlane {
    /// Creates a fresh namespace named `e2e-<prefix>-<random>` and waits
    /// until its `default` ServiceAccount exists (pods can be created).
    pub async fn namespace(&self, prefix: &str) -> anyhow::Result<TestNamespace> {
        TestNamespace::create(self, prefix).await
    }
}

impl TestNamespace {
    pub(crate) async fn create(cp: &ControlPlane, prefix: &str) -> anyhow::Result<TestNamespace> {
        let name = namespace_name(prefix);
        let admin = cp.config(Identity::Admin).await?;
        let client = Client::try_from(admin.clone()).context("building kube client")?;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some([("breakglass.test/e2e".to_owned(), "true".to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .with_context(|| format!("creating namespace {name}"))?;
        let this = TestNamespace {
            name,
            admin,
            done: false,
        };
        // Pods are refused until the controllers made the default SA.
        let sas: Api<ServiceAccount> = Api::namespaced(client, &this.name);
        wait_until(
            &format!("ServiceAccount {}/default", this.name),
            Duration::from_secs(30),
            || async { Ok(sas.get_opt("default").await?) },
        )
        .await?;
        Ok(this)
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Deletes the namespace (without waiting for it to be gone); the end of
    /// a passing test.
    pub async fn delete(mut self) -> anyhow::Result<()> {
        self.done = true;
        let client = Client::try_from(self.admin.clone()).context("building kube client")?;
        delete_namespace(client, &self.name).await
    }

    /// Ends a failed test: with `BREAKGLASS_KEEP_NAMESPACES=1` keeps the
    /// namespace and dumps its objects to stderr, otherwise deletes it.
    pub async fn fail(mut self) {
        self.done = true;
        let client = match Client::try_from(self.admin.clone()) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("[e2e] cannot clean up namespace {}: {e}", self.name);
                return;
            }
        };
        finish_failed(client, &self.name).await;
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // Dropped without delete(): a failed test. Do the async cleanup on a
        // runtime of its own (this may run inside another runtime, or while
        // it unwinds).
        let name = self.name.clone();
        let admin = self.admin.clone();
        let handle = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                match Client::try_from(admin) {
                    Ok(client) => finish_failed(client, &name).await,
                    Err(e) => eprintln!("[e2e] cannot clean up namespace {name}: {e}"),
                }
            });
        });
        let _ = handle.join();
    }
}

/// Runs `test` with a fresh namespace: deletes it when the test passes; when
/// it fails (error or panic) keeps and dumps it if
/// `BREAKGLASS_KEEP_NAMESPACES=1`, else deletes it; then returns the test's
/// result (or resumes its panic).
pub async fn in_namespace<F, Fut>(cp: &ControlPlane, prefix: &str, test: F) -> anyhow::Result<()>
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let ns = cp.namespace(prefix).await?;
    let outcome = AssertUnwindSafe(test(ns.name().to_owned()))
        .catch_unwind()
        .await;
    match outcome {
        Ok(Ok(())) => ns.delete().await,
        Ok(Err(e)) => {
            ns.fail().await;
            Err(e)
        }
        Err(panic) => {
            ns.fail().await;
            std::panic::resume_unwind(panic)
        }
    }
}

fn keep_namespaces() -> bool {
    std::env::var("BREAKGLASS_KEEP_NAMESPACES")
        .is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

async fn finish_failed(client: Client, name: &str) {
    if keep_namespaces() {
        eprintln!("[e2e] test failed: keeping namespace {name}; its objects:");
        dump_namespace(client, name).await;
    } else if let Err(e) = delete_namespace(client, name).await {
        eprintln!("[e2e] deleting namespace {name}: {e:#}");
    }
}

async fn delete_namespace(client: Client, name: &str) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client);
    match namespaces.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("deleting namespace {name}")),
    }
}

/// Prints the namespace's common objects to stderr as JSON.
pub(crate) async fn dump_namespace(client: Client, name: &str) {
    dump::<Pod>(&client, name, "Pod").await;
    dump::<Deployment>(&client, name, "Deployment").await;
    dump::<ReplicaSet>(&client, name, "ReplicaSet").await;
    dump::<Role>(&client, name, "Role").await;
    dump::<RoleBinding>(&client, name, "RoleBinding").await;
    dump::<ServiceAccount>(&client, name, "ServiceAccount").await;
    dump::<ConfigMap>(&client, name, "ConfigMap").await;
    dump::<Event>(&client, name, "Event").await;
}

async fn dump<K>(client: &Client, namespace: &str, kind: &str)
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    match api.list(&ListParams::default()).await {
        Ok(list) => {
            for mut item in list.items {
                item.meta_mut().managed_fields = None;
                let text = serde_json::to_string_pretty(&item).unwrap_or_else(|e| format!("<{e}>"));
                eprintln!(
                    "--- {kind} {namespace}/{}\n{text}",
                    item.meta().name.as_deref().unwrap_or("?")
                );
            }
        }
        Err(e) => eprintln!("--- {kind}: list failed: {e}"),
    }
}

/// `e2e-<prefix>-<suffix>`, a valid DNS label.
fn namespace_name(prefix: &str) -> String {
    let mut clean: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    clean.truncate(40);
    let clean = clean.trim_matches('-');
    // RandomState is randomly seeded per instance: a cheap random suffix.
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let suffix = to_base36(hasher.finish() % 36u64.pow(6));
    if clean.is_empty() {
        format!("e2e-{suffix}")
    } else {
        format!("e2e-{clean}-{suffix}")
    }
}

fn to_base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}
