//! Locks: an admin locks an environment, or lifts its lock (a second admin confirms on
//! Flight).

use breakglass_shared::lock::{Lock, LockBody, UnlockAnswer};

use super::{encode, post_json, ApiError};

/// `POST /environments/{env}/lock`.
pub async fn lock_environment(env: &str, reason: &str) -> Result<Lock, ApiError> {
    let body = LockBody {
        reason: reason.into(),
    };
    post_json(
        "lock the environment",
        &format!("/environments/{}/lock", encode(env)),
        Some(&body),
    )
    .await
}

/// `POST /environments/{env}/unlock`.
pub async fn unlock_environment(env: &str, reason: &str) -> Result<UnlockAnswer, ApiError> {
    let body = LockBody {
        reason: reason.into(),
    };
    post_json(
        "unlock the environment",
        &format!("/environments/{}/unlock", encode(env)),
        Some(&body),
    )
    .await
}
