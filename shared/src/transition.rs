//! The state machine: every change to a session row is computed here, by [`Session::apply`]
//! for events, [`Session::review`] and [`Session::anchor_late`], each checking first the rule
//! [`crate::access`] states for the person asking. The store writes the result with a
//! compare-and-set on the row's version.

use time::{Duration, OffsetDateTime};

use crate::permissions::PermissionSet;
use crate::session::{
    EndReason, Extension, ExtensionAsk, ExtensionDenial, Progress, RekorEntry, Review, ReviewError,
    Session, SessionEvent, SessionState, Tier, TransitionError, Verdict,
};
use crate::Mode;

#[cfg(test)]
mod extension_tests;
#[cfg(test)]
mod tests;

impl Session {
    /// Applies `event` at `now`: the next row (version + 1) or why not.
    pub fn apply(
        &self,
        event: &SessionEvent,
        now: OffsetDateTime,
    ) -> Result<Session, TransitionError> {
        use SessionState as S;
        if self.state.is_final() {
            return Err(TransitionError::Final { state: self.state });
        }
        let wrong = || TransitionError::WrongState {
            state: self.state,
            event: event.kind(),
        };
        // People's events pass first the rule `Session::may` states for them.
        if let Some(action) = event.action() {
            let (name, perms) = self.person(event)?;
            self.may_change(action, name, perms)?;
        }
        let by = event.actor().name();
        let mut next = self.clone();
        next.version += 1;
        match event {
            SessionEvent::Approve { groups, .. } => {
                let approval = self.quorum.admit(&self.approvals, by, groups, now)?;
                next.approvals.push(approval);
                // Until the quorum is reached the request keeps waiting (its deadline too).
                if next.approvals.len() >= self.quorum.needed() {
                    next.approver = Some(by.to_string());
                    next.decided_at = Some(now);
                    next.state = S::Approved;
                }
            }
            SessionEvent::Deny { reason, .. } => {
                next.approver = Some(by.to_string());
                next.decided_at = Some(now);
                next.state = S::Denied;
                next.denial_reason = Some(reason.clone());
                next.finished_at = Some(now);
            }
            SessionEvent::AskExtension {
                minutes, reason, ..
            } => {
                if self.expires_at.is_some_and(|at| at <= now) {
                    return Err(TransitionError::DeadlinePassed);
                }
                let room = self.extensions.room(self.duration_minutes);
                if *minutes == 0 || *minutes > room {
                    return Err(TransitionError::BeyondMaximum { room });
                }
                let ask = ExtensionAsk {
                    minutes: *minutes,
                    reason: reason.clone(),
                    at: now,
                    approvals: Vec::new(),
                };
                next.extensions.denied = None;
                match self.tier {
                    Tier::Ground => next.extend(ask, now),
                    Tier::Flight => next.extensions.pending = Some(ask),
                }
            }
            SessionEvent::ApproveExtension { groups, .. } => {
                let Some(mut ask) = next.extensions.pending.take() else {
                    return Err(TransitionError::NoExtensionWaiting);
                };
                ask.approvals
                    .push(self.quorum.admit(&ask.approvals, by, groups, now)?);
                if ask.approvals.len() >= self.quorum.needed() {
                    next.extend(ask, now);
                } else {
                    next.extensions.pending = Some(ask);
                }
            }
            SessionEvent::DenyExtension { reason, .. } => {
                next.extensions.pending = None;
                next.extensions.denied = Some(ExtensionDenial {
                    by: by.to_string(),
                    reason: reason.clone(),
                    at: now,
                });
            }
            SessionEvent::BreakGlass { .. } => {
                next.glass_broken_by = Some(by.to_string());
                next.decided_at = Some(now);
                next.state = S::Approved;
            }
            SessionEvent::End { recycle, .. } => {
                if matches!(self.state, S::PendingApproval | S::Approved) {
                    next.state = S::Withdrawn;
                    next.finished_at = Some(now);
                } else {
                    if *recycle {
                        if !self.tier.allows_recycle() {
                            return Err(TransitionError::NoRecycle {
                                why: "pods are never recycled on a Flight environment; end without recycling",
                            });
                        }
                        if self.mode == Mode::Copy {
                            return Err(TransitionError::NoRecycle {
                                why: "a copy pod is always deleted at the end; recycling is for live mode",
                            });
                        }
                        next.recycle = true;
                    }
                    next.begin_ending(EndReason::UserEnded, now);
                }
            }
            SessionEvent::Terminate { .. } => {
                next.begin_ending(EndReason::Terminated { by: by.to_string() }, now);
            }
            SessionEvent::SystemEnd { reason } => {
                if matches!(reason, EndReason::UserEnded | EndReason::Terminated { .. }) {
                    return Err(TransitionError::WrongActor {
                        event: event.kind(),
                        actor: "system".to_string(),
                    });
                }
                match self.state {
                    S::Activating | S::Active => next.begin_ending(reason.clone(), now),
                    _ => return Err(wrong()),
                }
            }
            SessionEvent::Expire => match self.state {
                S::PendingApproval | S::Approved => {
                    next.state = S::Expired;
                    next.finished_at = Some(now);
                }
                _ => return Err(wrong()),
            },
            SessionEvent::BeginActivation => {
                if self.state != S::Approved {
                    return Err(wrong());
                }
                // Defence in depth: an Approved Flight row without a second person or broken
                // glass can only come from a tampered store; never activate it.
                if self.tier == Tier::Flight && !self.is_authorized_for_flight() {
                    return Err(wrong());
                }
                next.state = S::Activating;
                next.activating_at = Some(now);
            }
            SessionEvent::Activated => {
                if self.state != S::Activating {
                    return Err(wrong());
                }
                next.state = S::Active;
                next.active_at = Some(now);
                next.expires_at = Some(now + Duration::minutes(i64::from(self.duration_minutes)));
            }
            SessionEvent::ActivationFailed { error } => {
                if self.state != S::Activating {
                    return Err(wrong());
                }
                next.state = S::Failed;
                next.failure = Some(error.clone());
                next.finished_at = Some(now);
            }
            SessionEvent::CleanupDone => {
                if self.state != S::Ending {
                    return Err(wrong());
                }
                next.state = S::Ended;
                next.finished_at = Some(now);
            }
            SessionEvent::Progress(p) => {
                if !self.state.may_hold_cluster_objects() {
                    return Err(wrong());
                }
                next.record(p);
            }
        }
        Ok(next)
    }

    /// Records a review on a finished session: the next row (version + 1) or why not.
    pub fn review(
        &self,
        reviewer: &str,
        permissions: &PermissionSet,
        verdict: Verdict,
        notes: &str,
        now: OffsetDateTime,
    ) -> Result<Session, ReviewError> {
        self.may_review(reviewer, permissions)?;
        let mut next = self.clone();
        next.version += 1;
        next.review = Some(Review {
            reviewer: reviewer.to_string(),
            at: now,
            verdict,
            notes: notes.to_string(),
        });
        Ok(next)
    }

    /// Puts the transparency-log entry of the final recording hash on a session that ended
    /// before the log could take it (the log was unreachable then): the next row (version + 1)
    /// or why not. Only on an `Ended` session with a recording and no entry yet; nothing else
    /// changes.
    pub fn anchor_late(&self, entry: &RekorEntry) -> Result<Session, TransitionError> {
        if self.state != SessionState::Ended || self.recording.is_none() || self.rekor.is_some() {
            return Err(TransitionError::WrongState {
                state: self.state,
                event: "anchored",
            });
        }
        let mut next = self.clone();
        next.version += 1;
        next.rekor = Some(entry.clone());
        Ok(next)
    }

    /// The person causing a person-made `event`, or why the server cannot cause it.
    fn person<'a>(
        &self,
        event: &'a SessionEvent,
    ) -> Result<(&'a str, &'a PermissionSet), TransitionError> {
        let by = event.actor();
        by.user().ok_or_else(|| TransitionError::WrongActor {
            event: event.kind(),
            actor: by.name().to_string(),
        })
    }

    /// Gives the time `ask` asked for: the deadline moves by it.
    fn extend(&mut self, ask: ExtensionAsk, now: OffsetDateTime) {
        self.expires_at = self
            .expires_at
            .map(|at| at + Duration::minutes(i64::from(ask.minutes)));
        self.extensions.granted.push(Extension {
            minutes: ask.minutes,
            reason: ask.reason,
            asked_at: ask.at,
            granted_at: now,
            approvals: ask.approvals,
        });
    }

    fn begin_ending(&mut self, reason: EndReason, now: OffsetDateTime) {
        self.state = SessionState::Ending;
        self.end_reason = Some(reason);
        self.ending_at = Some(now);
    }

    fn record(&mut self, p: &Progress) {
        match p {
            Progress::GrantCreated { name } => self.grant_name = Some(name.clone()),
            Progress::ProcessAccessAnnotated => self.process_access_annotated = true,
            Progress::DebugContainerAdded { name } => self.debug_container = Some(name.clone()),
            Progress::CopyPodCreated { name, container } => {
                self.copy_pod = Some(name.clone());
                self.debug_container = Some(container.clone());
            }
            Progress::RecordingStored(r) => self.recording = Some(r.clone()),
            Progress::Anchored(e) => self.rekor = Some(e.clone()),
            Progress::CleanupStep { .. } => {}
        }
    }
}
