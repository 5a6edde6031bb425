//! Classifying the API server's answers ([`ClusterError`] is declared with the ports) and
//! retrying the transient ones.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};

use crate::ports::ClusterError;

/// Bound on retrying one step.
pub(super) const STEP_BUDGET: Duration = Duration::from_secs(10);

impl ClusterError {
    /// Classifies a kube error for step `what` on `env`.
    pub fn from_kube(env: &str, what: &str, e: kube::Error) -> ClusterError {
        match e {
            kube::Error::Api(status) => ClusterError::Refused {
                env: env.into(),
                what: what.into(),
                code: status.code,
                message: status.message.clone(),
            },
            other => ClusterError::Unreachable {
                env: env.into(),
                what: what.into(),
                source: Arc::new(other),
            },
        }
    }

    /// The API server's HTTP status, when it answered.
    pub(super) fn code(&self) -> Option<u16> {
        match self {
            ClusterError::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub(super) fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    pub(super) fn is_already_exists(&self) -> bool {
        self.code() == Some(409)
    }

    /// Worth another try: transport trouble, throttling, a server hiccup, or (right after a
    /// grant) RBAC not yet caught up.
    pub(super) fn is_transient(&self, forbidden_too: bool) -> bool {
        match self {
            ClusterError::Unreachable { .. } => true,
            ClusterError::Refused { code, .. } => {
                matches!(code, 429 | 500 | 502 | 503 | 504) || (forbidden_too && *code == 403)
            }
            _ => false,
        }
    }
}

/// Retries `op` on transient errors with a short exponential backoff (50 ms doubling to 1 s),
/// for at most `budget` of waiting. `forbidden_too`: a 403 is transient too (right after the
/// grant, RBAC may not see it yet).
pub(super) async fn retry<T, F, Fut>(
    budget: Duration,
    forbidden_too: bool,
    op: F,
) -> Result<T, ClusterError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ClusterError>>,
{
    let backoff = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(50))
        .with_max_delay(Duration::from_secs(1))
        .with_factor(2.0)
        .with_max_times(usize::MAX)
        .with_total_delay(Some(budget));
    op.retry(backoff)
        .when(|e: &ClusterError| e.is_transient(forbidden_too))
        // Each retry is time an activation or an end spends waiting: seen in the log.
        .notify(|e: &ClusterError, after: Duration| {
            tracing::debug!(error = %e, retry_in_ms = after.as_millis(), "cluster step retried");
        })
        .await
}

/// Treats "not found" as done: the object is already gone.
pub(super) fn gone_is_ok(r: Result<(), ClusterError>) -> Result<bool, ClusterError> {
    match r {
        Ok(()) => Ok(true),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}
