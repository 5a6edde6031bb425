//! Who may do what with a session: one rule per [`Action`], in [`Session::may`]. The server
//! enforces it (its handlers ask before acting, and [`Session::apply`] and [`Session::review`]
//! check the same rules when they compute the next row); the UI asks it to show only what the
//! server would accept.

use crate::permissions::{Permission, PermissionSet};
use crate::session::{ReviewError, Session, SessionEvent, SessionState, Tier, TransitionError};

/// Something a person asks to do with a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Action {
    /// See it: lists, its page, the live feed.
    View,
    /// Approve someone else's pending Flight request.
    Approve,
    /// Deny someone else's pending Flight request.
    Deny,
    /// Approve a pending Flight request without a second person.
    BreakGlass,
    /// End one's own session (before activation: withdraw it).
    End,
    /// Ask for more time on one's own running session.
    Extend,
    /// Approve the waiting extension of someone else's running Flight session.
    ApproveExtension,
    /// Refuse the waiting extension of someone else's running Flight session.
    DenyExtension,
    /// End anyone's session.
    Terminate,
    /// Record a review of someone else's finished session.
    Review,
    /// Type in the session's terminal.
    UseTerminal,
    /// Read or verify the session's recording.
    ReadRecording,
}

/// Why [`Session::may`] said no.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The user holds no permission in the session's environment: to them the session does not
    /// exist (the server answers 404).
    #[error("no such session")]
    Hidden,
    /// Recordings are for the requester and for the environment's approvers and reviewers.
    #[error(
        "recordings are for the requester and for approvers and reviewers of this environment"
    )]
    NotRecordingReader,
    /// Only the requester types in the terminal.
    #[error("only the requester can use this terminal")]
    NotTerminalUser,
    /// Watching is for the environment's approvers and admins (and its auditors where the
    /// environment lets them), never for the requester, who has the terminal itself.
    #[error("watching a session is for approvers and admins of its environment")]
    NotWatcher,
    /// The terminal is open only while the session is active.
    #[error("the session is {0}")]
    TerminalClosed(SessionState),
    /// A change of state refused: who asks, or not in this state.
    #[error(transparent)]
    Change(#[from] TransitionError),
    /// A review refused.
    #[error(transparent)]
    Review(#[from] ReviewError),
}

impl Session {
    /// Whether `user`, holding `permissions` in the session's environment, may do `action` to it
    /// now; if not, why. Everything but the requester's own terminal and recording presumes
    /// [`Action::View`]: the requester keeps those whatever they hold now.
    pub fn may(
        &self,
        action: Action,
        user: &str,
        permissions: &PermissionSet,
    ) -> Result<(), Refusal> {
        let visible = || {
            if permissions.any() {
                Ok(())
            } else {
                Err(Refusal::Hidden)
            }
        };
        match action {
            Action::View => visible(),
            Action::Approve
            | Action::Deny
            | Action::BreakGlass
            | Action::End
            | Action::Extend
            | Action::ApproveExtension
            | Action::DenyExtension
            | Action::Terminate => {
                visible()?;
                Ok(self.may_change(action, user, permissions)?)
            }
            Action::Review => {
                visible()?;
                Ok(self.may_review(user, permissions)?)
            }
            Action::UseTerminal => {
                if user != self.requester {
                    Err(Refusal::NotTerminalUser)
                } else if self.state != SessionState::Active {
                    Err(Refusal::TerminalClosed(self.state))
                } else {
                    Ok(())
                }
            }
            Action::ReadRecording => {
                if user == self.requester || permissions.approve {
                    Ok(())
                } else {
                    visible()?;
                    Err(Refusal::NotRecordingReader)
                }
            }
        }
    }

    /// Whether `user`, holding `permissions` in the session's environment, may watch its
    /// terminal live now: approvers and admins (who may break the glass or terminate), and
    /// auditors when `auditors_watch` (the environment's switch) is on; only while `Active`.
    pub fn may_watch(
        &self,
        user: &str,
        permissions: &PermissionSet,
        auditors_watch: bool,
    ) -> Result<(), Refusal> {
        if !permissions.any() {
            return Err(Refusal::Hidden);
        }
        let allowed = permissions.approve
            || permissions.self_approve
            || permissions.terminate
            || (auditors_watch && permissions.audit);
        if user == self.requester || !allowed {
            Err(Refusal::NotWatcher)
        } else if self.state != SessionState::Active {
            Err(Refusal::TerminalClosed(self.state))
        } else {
            Ok(())
        }
    }

    /// Whether a watcher counts for a moderated session: an approver who is not the
    /// requester (a moderated session takes input only while one watches).
    pub fn moderates(&self, user: &str, permissions: &PermissionSet) -> bool {
        user != self.requester && permissions.approve
    }

    /// The rule of a person-made change of state (what [`Session::apply`] checks before it
    /// computes the next row), in the order the refusals are reported. Actions that change no
    /// state have their rules in [`Session::may`] and pass here.
    pub(crate) fn may_change(
        &self,
        action: Action,
        user: &str,
        permissions: &PermissionSet,
    ) -> Result<(), TransitionError> {
        use SessionState as S;
        if self.state.is_final() {
            return Err(TransitionError::Final { state: self.state });
        }
        let wrong = || TransitionError::WrongState {
            state: self.state,
            event: action.into(),
        };
        let require = |p: Permission| {
            if permissions.has(p) {
                Ok(())
            } else {
                Err(TransitionError::MissingPermission(p))
            }
        };
        match action {
            Action::Approve | Action::Deny | Action::BreakGlass => {
                if self.tier != Tier::Flight {
                    return Err(TransitionError::NotFlight);
                }
                if self.state != S::PendingApproval {
                    return Err(wrong());
                }
                if action == Action::BreakGlass {
                    return require(Permission::SelfApprove);
                }
                if user == self.requester {
                    return Err(TransitionError::OwnRequest);
                }
                require(Permission::Approve)?;
                if action == Action::Approve && self.approvals.iter().any(|a| a.by == user) {
                    return Err(TransitionError::AlreadyApproved);
                }
                Ok(())
            }
            Action::End => {
                if user != self.requester {
                    return Err(TransitionError::NotRequester {
                        requester: self.requester.clone(),
                    });
                }
                match self.state {
                    S::PendingApproval | S::Approved | S::Activating | S::Active => Ok(()),
                    _ => Err(wrong()),
                }
            }
            Action::Extend => {
                if user != self.requester {
                    return Err(TransitionError::NotRequester {
                        requester: self.requester.clone(),
                    });
                }
                if self.state != S::Active {
                    return Err(wrong());
                }
                if self.extensions.pending.is_some() {
                    return Err(TransitionError::ExtensionWaiting);
                }
                if self.extensions.asks_left() == 0 {
                    return Err(TransitionError::NoExtensionsLeft {
                        max: self.extensions.limits.max_count,
                    });
                }
                Ok(())
            }
            Action::ApproveExtension | Action::DenyExtension => {
                if self.tier != Tier::Flight {
                    return Err(TransitionError::NotFlight);
                }
                if self.state != S::Active {
                    return Err(wrong());
                }
                let Some(ask) = &self.extensions.pending else {
                    return Err(TransitionError::NoExtensionWaiting);
                };
                if user == self.requester {
                    return Err(TransitionError::OwnRequest);
                }
                require(Permission::Approve)?;
                if action == Action::ApproveExtension && ask.approvals.iter().any(|a| a.by == user)
                {
                    return Err(TransitionError::AlreadyApproved);
                }
                Ok(())
            }
            Action::Terminate => {
                require(Permission::Terminate)?;
                match self.state {
                    S::Approved | S::Activating | S::Active => Ok(()),
                    _ => Err(wrong()),
                }
            }
            Action::View | Action::Review | Action::UseTerminal | Action::ReadRecording => Ok(()),
        }
    }

    /// The review rule (what [`Session::review`] checks), in the order the refusals are
    /// reported: finished, not yet reviewed, not one's own, not decided by the reviewer (who
    /// approved or broke the glass), `approve` held.
    pub(crate) fn may_review(
        &self,
        reviewer: &str,
        permissions: &PermissionSet,
    ) -> Result<(), ReviewError> {
        if !matches!(self.state, SessionState::Ended | SessionState::Failed) {
            return Err(ReviewError::NotFinished(self.state));
        }
        if let Some(r) = &self.review {
            return Err(ReviewError::AlreadyReviewed(r.reviewer.clone()));
        }
        if reviewer == self.requester {
            return Err(ReviewError::OwnSession);
        }
        // A review is a second pair of eyes: not whoever let the session happen.
        if self.glass_broken_by.as_deref() == Some(reviewer) {
            return Err(ReviewError::OwnDecision("broke the glass for"));
        }
        if self.approver.as_deref() == Some(reviewer) {
            return Err(ReviewError::OwnDecision("approved"));
        }
        if !permissions.approve {
            return Err(ReviewError::MissingPermission(Permission::Approve));
        }
        Ok(())
    }
}

impl SessionEvent {
    /// The person's action this event carries out (whose rule [`Session::may`] states), for the
    /// events people cause.
    pub fn action(&self) -> Option<Action> {
        Some(match self {
            SessionEvent::Approve { .. } => Action::Approve,
            SessionEvent::Deny { .. } => Action::Deny,
            SessionEvent::BreakGlass { .. } => Action::BreakGlass,
            SessionEvent::End { .. } => Action::End,
            SessionEvent::AskExtension { .. } => Action::Extend,
            SessionEvent::ApproveExtension { .. } => Action::ApproveExtension,
            SessionEvent::DenyExtension { .. } => Action::DenyExtension,
            SessionEvent::Terminate { .. } => Action::Terminate,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::testing::{session_in, NOW};
    use crate::session::{Actor, SessionEvent, Verdict};

    fn perms(request: bool, approve: bool, terminate: bool, self_approve: bool) -> PermissionSet {
        PermissionSet {
            request,
            approve,
            terminate,
            self_approve,
            audit: false,
        }
    }

    /// Every permission set: the 16 combinations of the four permissions.
    fn every_permission_set() -> impl Iterator<Item = PermissionSet> {
        (0..16u8).map(|b| perms(b & 1 != 0, b & 2 != 0, b & 4 != 0, b & 8 != 0))
    }

    const ONLY_REQUEST: PermissionSet = PermissionSet {
        request: true,
        ..PermissionSet::NONE
    };
    const APPROVER: PermissionSet = PermissionSet {
        approve: true,
        ..PermissionSet::NONE
    };

    type Outcome = Result<(), Refusal>;

    #[test]
    fn who_may_do_what() {
        use Action as A;
        use SessionState as S;
        use Tier::{Flight, Ground};
        let all = PermissionSet::ALL;
        let none = PermissionSet::NONE;
        let missing = |p| Err(Refusal::Change(TransitionError::MissingPermission(p)));
        let wrong = |state, event| {
            Err(Refusal::Change(TransitionError::WrongState {
                state,
                event,
            }))
        };
        #[rustfmt::skip]
        let cases: Vec<(A, Tier, S, &str, PermissionSet, Outcome)> = vec![
            // Seeing a session takes any permission in its environment.
            (A::View, Flight, S::Active, "carol", ONLY_REQUEST, Ok(())),
            (A::View, Flight, S::Active, "alice", none, Err(Refusal::Hidden)),
            // Approve and deny: someone else's pending Flight request, with `approve`.
            (A::Approve, Flight, S::PendingApproval, "bob", APPROVER, Ok(())),
            (A::Deny, Flight, S::PendingApproval, "bob", APPROVER, Ok(())),
            (A::Approve, Flight, S::PendingApproval, "alice", all, Err(Refusal::Change(TransitionError::OwnRequest))),
            (A::Deny, Flight, S::PendingApproval, "alice", all, Err(Refusal::Change(TransitionError::OwnRequest))),
            (A::Approve, Flight, S::PendingApproval, "bob", ONLY_REQUEST, missing(Permission::Approve)),
            (A::Approve, Ground, S::Approved, "bob", all, Err(Refusal::Change(TransitionError::NotFlight))),
            (A::Approve, Flight, S::Approved, "carol", all, wrong(S::Approved, "approve")),
            (A::Approve, Flight, S::PendingApproval, "bob", none, Err(Refusal::Hidden)),
            // Breaking the glass takes `self`, and may be done on one's own request.
            (A::BreakGlass, Flight, S::PendingApproval, "alice", perms(true, false, false, true), Ok(())),
            (A::BreakGlass, Flight, S::PendingApproval, "alice", APPROVER, missing(Permission::SelfApprove)),
            (A::BreakGlass, Ground, S::Approved, "alice", all, Err(Refusal::Change(TransitionError::NotFlight))),
            // Only the requester ends (or withdraws), until it is ending.
            (A::End, Flight, S::PendingApproval, "alice", ONLY_REQUEST, Ok(())),
            (A::End, Ground, S::Active, "alice", ONLY_REQUEST, Ok(())),
            (A::End, Ground, S::Active, "bob", all, Err(Refusal::Change(TransitionError::NotRequester { requester: "alice".into() }))),
            (A::End, Ground, S::Ending, "alice", all, wrong(S::Ending, "end")),
            (A::End, Ground, S::Ended, "alice", all, Err(Refusal::Change(TransitionError::Final { state: S::Ended }))),
            // Terminating takes `terminate`, from approval until it is ending.
            (A::Terminate, Ground, S::Active, "bob", perms(false, false, true, false), Ok(())),
            (A::Terminate, Ground, S::Active, "bob", APPROVER, missing(Permission::Terminate)),
            (A::Terminate, Flight, S::PendingApproval, "bob", all, wrong(S::PendingApproval, "terminate")),
            // Reviews: someone else's finished, unreviewed session, with `approve`.
            (A::Review, Flight, S::Ended, "bob", APPROVER, Ok(())),
            (A::Review, Flight, S::Failed, "bob", APPROVER, Ok(())),
            (A::Review, Flight, S::Ended, "alice", all, Err(Refusal::Review(ReviewError::OwnSession))),
            (A::Review, Flight, S::Ended, "bob", ONLY_REQUEST, Err(Refusal::Review(ReviewError::MissingPermission(Permission::Approve)))),
            (A::Review, Flight, S::Active, "bob", all, Err(Refusal::Review(ReviewError::NotFinished(S::Active)))),
            (A::Review, Flight, S::Denied, "bob", all, Err(Refusal::Review(ReviewError::NotFinished(S::Denied)))),
            // The terminal and the recording stay the requester's whatever they hold now.
            (A::UseTerminal, Ground, S::Active, "alice", none, Ok(())),
            (A::UseTerminal, Ground, S::Active, "bob", all, Err(Refusal::NotTerminalUser)),
            (A::UseTerminal, Ground, S::Activating, "alice", all, Err(Refusal::TerminalClosed(S::Activating))),
            (A::ReadRecording, Ground, S::Ended, "alice", none, Ok(())),
            (A::ReadRecording, Ground, S::Ended, "bob", APPROVER, Ok(())),
            (A::ReadRecording, Ground, S::Active, "bob", APPROVER, Ok(())),
            (A::ReadRecording, Ground, S::Ended, "bob", perms(true, false, true, true), Err(Refusal::NotRecordingReader)),
            (A::ReadRecording, Ground, S::Ended, "bob", none, Err(Refusal::Hidden)),
        ];
        for (action, tier, state, user, p, want) in cases {
            let s = session_in(state, tier);
            assert_eq!(
                s.may(action, user, &p),
                want,
                "{action:?} {tier:?} {state} {user} {p:?}"
            );
        }
    }

    #[test]
    fn a_review_after_failed_activation_is_allowed_as_the_server_records_it() {
        let mut s = session_in(SessionState::Failed, Tier::Flight);
        s.glass_broken_by = Some("alice".into());
        assert!(s.active_at.is_none(), "it never ran");
        assert_eq!(s.may(Action::Review, "bob", &APPROVER), Ok(()));
        let reviewed = s
            .review("bob", &APPROVER, Verdict::Ok, "", NOW)
            .unwrap_or(s);
        assert_eq!(
            reviewed.may(Action::Review, "carol", &APPROVER),
            Err(Refusal::Review(ReviewError::AlreadyReviewed("bob".into())))
        );
    }

    #[test]
    fn whoever_approved_or_broke_the_glass_does_not_review_it() {
        let mut broken = session_in(SessionState::Ended, Tier::Flight);
        broken.approver = None;
        broken.glass_broken_by = Some("carol".into());
        assert_eq!(
            broken.may(Action::Review, "carol", &APPROVER),
            Err(Refusal::Review(ReviewError::OwnDecision(
                "broke the glass for"
            )))
        );
        assert!(broken
            .review("carol", &APPROVER, Verdict::Ok, "", NOW)
            .is_err());
        assert_eq!(broken.may(Action::Review, "bob", &APPROVER), Ok(()));

        let mut approved = session_in(SessionState::Ended, Tier::Flight);
        approved.approver = Some("bob".into());
        approved.glass_broken_by = None;
        assert_eq!(
            approved.may(Action::Review, "bob", &APPROVER),
            Err(Refusal::Review(ReviewError::OwnDecision("approved")))
        );
        assert!(approved
            .review("bob", &APPROVER, Verdict::Ok, "", NOW)
            .is_err());
        assert_eq!(approved.may(Action::Review, "dave", &APPROVER), Ok(()));
    }

    /// The predicate and the state machine cannot disagree: for every tier, state, person-made
    /// event, user and permission set, `may` allows exactly what `apply` accepts (for users who
    /// see the session), with the same refusal.
    #[test]
    fn may_agrees_with_apply_and_review() {
        for tier in [Tier::Ground, Tier::Flight] {
            for state in SessionState::ALL {
                let s = session_in(state, tier);
                for user in ["alice", "bob"] {
                    for p in every_permission_set() {
                        let by = Actor::User {
                            name: user.into(),
                            permissions: p,
                        };
                        let events = [
                            SessionEvent::Approve {
                                by: by.clone(),
                                groups: vec![],
                            },
                            SessionEvent::Deny {
                                by: by.clone(),
                                reason: "no".into(),
                            },
                            SessionEvent::BreakGlass { by: by.clone() },
                            SessionEvent::End {
                                by: by.clone(),
                                recycle: false,
                            },
                            SessionEvent::Terminate { by },
                        ];
                        for event in events {
                            let action = event.action().unwrap_or(Action::View);
                            let may = s.may(action, user, &p);
                            let applied = s.apply(&event, NOW).map(drop).map_err(Refusal::from);
                            let want = if p.any() {
                                applied
                            } else {
                                Err(Refusal::Hidden)
                            };
                            assert_eq!(may, want, "{tier:?} {state} {user} {p:?} {action:?}");
                        }
                        let reviewed = s
                            .review(user, &p, Verdict::Ok, "", NOW)
                            .map(drop)
                            .map_err(Refusal::from);
                        let want = if p.any() {
                            reviewed
                        } else {
                            Err(Refusal::Hidden)
                        };
                        assert_eq!(s.may(Action::Review, user, &p), want);
                    }
                }
            }
        }
    }

    #[test]
    fn who_may_watch() {
        let s = session_in(SessionState::Active, Tier::Flight);
        let requester = s.requester.clone();
        let auditor = PermissionSet {
            audit: true,
            ..PermissionSet::NONE
        };
        // Approvers and admins, never the requester, never a stranger (to whom it is hidden).
        assert_eq!(s.may_watch("bob", &APPROVER, false), Ok(()));
        assert_eq!(
            s.may_watch("bob", &perms(false, false, true, false), false),
            Ok(())
        );
        assert_eq!(
            s.may_watch("bob", &perms(false, false, false, true), false),
            Ok(())
        );
        assert_eq!(
            s.may_watch("bob", &ONLY_REQUEST, false),
            Err(Refusal::NotWatcher)
        );
        assert_eq!(
            s.may_watch(&requester, &PermissionSet::ALL, true),
            Err(Refusal::NotWatcher)
        );
        assert_eq!(
            s.may_watch("bob", &PermissionSet::NONE, true),
            Err(Refusal::Hidden)
        );
        // Auditors only where the environment lets them.
        assert_eq!(
            s.may_watch("bob", &auditor, false),
            Err(Refusal::NotWatcher)
        );
        assert_eq!(s.may_watch("bob", &auditor, true), Ok(()));
        // Only while Active.
        for state in [SessionState::Activating, SessionState::Ended] {
            let s = session_in(state, Tier::Flight);
            assert_eq!(
                s.may_watch("bob", &APPROVER, false),
                Err(Refusal::TerminalClosed(state))
            );
        }
        // Moderating takes `approve`, and someone else than the requester.
        assert!(s.moderates("bob", &APPROVER));
        assert!(!s.moderates("bob", &perms(false, false, true, true)));
        assert!(!s.moderates(&requester, &PermissionSet::ALL));
    }
}
