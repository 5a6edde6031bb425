//! Sessions: the list, one session's detail, a request, and the changes people make.

use breakglass_shared::api::{
    CreateSessionRequest, DenyRequest, EndRequest, ExtendRequest, ListQuery, ReviewRequest,
    SessionDetail, SessionPage,
};
use breakglass_shared::Session;
use uuid::Uuid;

use super::{get_json, post_json, post_json_confirmed, query_string, ApiError};

/// The query string of `GET /sessions`.
pub fn list_query_string(q: &ListQuery) -> String {
    query_string(&[
        ("environment", q.environment.clone()),
        ("state", q.state.map(|s| s.as_str().to_string())),
        ("requester", q.requester.clone()),
        ("awaiting_me", q.awaiting_me.map(|b| b.to_string())),
        ("in_progress", q.in_progress.map(|b| b.to_string())),
        ("review_due", q.review_due.map(|b| b.to_string())),
        ("approver", q.approver.clone()),
        ("limit", q.limit.map(|l| l.to_string())),
        ("cursor", q.cursor.clone()),
    ])
}

/// `GET /sessions?...`: one page, newest first.
pub async fn list_sessions(q: &ListQuery) -> Result<SessionPage, ApiError> {
    get_json(
        "list sessions",
        &format!("/sessions{}", list_query_string(q)),
    )
    .await
}

/// `GET /sessions/{id}`.
pub async fn session(id: Uuid) -> Result<SessionDetail, ApiError> {
    get_json("load the session", &format!("/sessions/{id}")).await
}

/// `POST /sessions`.
pub async fn create_session(req: &CreateSessionRequest) -> Result<Session, ApiError> {
    post_json("request access", "/sessions", Some(req)).await
}

/// A bodiless change of a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// `POST /sessions/{id}/approve`.
    Approve,
    /// `POST /sessions/{id}/break-glass`.
    BreakGlass,
    /// `POST /sessions/{id}/end` (withdraws before activation).
    End,
    /// `POST /sessions/{id}/terminate`.
    Terminate,
}

impl Action {
    fn path(self) -> &'static str {
        match self {
            Action::Approve => "approve",
            Action::BreakGlass => "break-glass",
            Action::End => "end",
            Action::Terminate => "terminate",
        }
    }

    /// What the action does, for error messages.
    pub fn verb(self) -> &'static str {
        match self {
            Action::Approve => "approve",
            Action::BreakGlass => "break the glass",
            Action::End => "end the session",
            Action::Terminate => "terminate the session",
        }
    }
}

/// `POST /sessions/{id}/end` asking for the pod to be recycled at the end (Ground, live mode);
/// without the ask, [`act`] with [`Action::End`].
pub async fn end_recycling(id: Uuid) -> Result<Session, ApiError> {
    post_json(
        Action::End.verb(),
        &format!("/sessions/{id}/{}", Action::End.path()),
        Some(&EndRequest { recycle: true }),
    )
    .await
}

/// Applies `action` to session `id`, with a security key's answer where its environment asks
/// for one; the session after the change.
pub async fn act(id: Uuid, action: Action, step_up: Option<&str>) -> Result<Session, ApiError> {
    post_json_confirmed(
        action.verb(),
        &format!("/sessions/{id}/{}", action.path()),
        step_up,
    )
    .await
}

/// `POST /sessions/{id}/deny`.
pub async fn deny(id: Uuid, reason: &str) -> Result<Session, ApiError> {
    let body = DenyRequest {
        reason: reason.into(),
    };
    post_json("deny", &format!("/sessions/{id}/deny"), Some(&body)).await
}

/// `POST /sessions/{id}/extend`: more time for one's own running session.
pub async fn extend(id: Uuid, req: &ExtendRequest) -> Result<Session, ApiError> {
    post_json(
        "ask for more time",
        &format!("/sessions/{id}/extend"),
        Some(req),
    )
    .await
}

/// `POST /sessions/{id}/extension/approve`, with a security key's answer where the
/// environment asks for one.
pub async fn approve_extension(id: Uuid, step_up: Option<&str>) -> Result<Session, ApiError> {
    post_json_confirmed(
        "approve more time",
        &format!("/sessions/{id}/extension/approve"),
        step_up,
    )
    .await
}

/// `POST /sessions/{id}/extension/deny`.
pub async fn deny_extension(id: Uuid, reason: &str) -> Result<Session, ApiError> {
    let body = DenyRequest {
        reason: reason.into(),
    };
    post_json(
        "refuse more time",
        &format!("/sessions/{id}/extension/deny"),
        Some(&body),
    )
    .await
}

/// `POST /sessions/{id}/review`.
pub async fn review(id: Uuid, req: &ReviewRequest) -> Result<Session, ApiError> {
    post_json(
        "record the review",
        &format!("/sessions/{id}/review"),
        Some(req),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use breakglass_shared::SessionState;

    #[test]
    fn list_queries() {
        let q = ListQuery {
            environment: Some("prod".into()),
            state: Some(SessionState::PendingApproval),
            requester: Some("al ice".into()),
            awaiting_me: None,
            in_progress: Some(true),
            review_due: None,
            approver: Some("bob".into()),
            limit: Some(20),
            cursor: None,
        };
        assert_eq!(
            list_query_string(&q),
            "?environment=prod&state=PendingApproval&requester=al%20ice&in_progress=true\
             &approver=bob&limit=20"
        );
        assert_eq!(list_query_string(&ListQuery::default()), "");
    }
}
