//! Whether each environment's cluster answers, as the home and environment pages show it.
//!
//! A page load must not wait on a cluster that is down, and the API server must not be asked
//! on every page load either: the last answer is kept for [`FRESH`]; a stale one is shown
//! while one refresh runs in the background; only the very first look waits, bounded by
//! [`PROBE_TIMEOUT`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Clusters;

/// How long an answer stands before it is asked again.
const FRESH: Duration = Duration::from_secs(15);
/// How long one probe may take before the cluster counts as unreachable.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// The last probe of one cluster.
#[derive(Debug, Clone)]
pub(super) struct Probe {
    at: Instant,
    /// `None` when the API server answered; otherwise why not.
    problem: Option<String>,
    refreshing: bool,
}

/// The cached probes, one per environment.
pub(super) type Probes = std::sync::Mutex<HashMap<String, Probe>>;

impl Clusters {
    /// `None` when `env`'s API server answered its version request lately, otherwise what
    /// went wrong (the error as the client saw it).
    pub async fn unreachable(self: &Arc<Self>, env: &str) -> Option<String> {
        let cached = self.lock_probes().get(env).cloned();
        match cached {
            Some(p) if p.at.elapsed() < FRESH || p.refreshing => p.problem,
            Some(p) => {
                if let Some(entry) = self.lock_probes().get_mut(env) {
                    entry.refreshing = true;
                }
                let this = Arc::clone(self);
                let env = env.to_string();
                tokio::spawn(async move { this.probe(&env).await });
                p.problem
            }
            None => self.probe(env).await,
        }
    }

    async fn probe(&self, env: &str) -> Option<String> {
        let problem = match tokio::time::timeout(PROBE_TIMEOUT, self.ask_version(env)).await {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(_) => Some(format!("no answer within {} s", PROBE_TIMEOUT.as_secs())),
        };
        if let Some(p) = &problem {
            tracing::warn!(env, problem = %p, "cluster unreachable");
        }
        self.lock_probes().insert(
            env.to_string(),
            Probe {
                at: Instant::now(),
                problem: problem.clone(),
                refreshing: false,
            },
        );
        problem
    }

    async fn ask_version(&self, env: &str) -> Result<(), String> {
        let client = self.client(env).await.map_err(|e| e.to_string())?;
        client
            .apiserver_version()
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn lock_probes(&self) -> std::sync::MutexGuard<'_, HashMap<String, Probe>> {
        // A panic while holding this lock leaves only a cache behind: keep using it.
        self.probes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
