//! [`Commit`]: what kind of change a commit applied, typed, so the effects that follow a
//! commit (spawning a drive, metrics, the live stream's `kind`) match on a value instead of on
//! strings.

use breakglass_shared::SessionEvent;

/// The kind of a committed change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Commit {
    /// A new request was stored.
    Create,
    /// A second person approved.
    Approve,
    /// A second person refused.
    Deny,
    /// An admin broke the glass.
    BreakGlass,
    /// The requester ended (or withdrew) it.
    End,
    /// The requester asked for more time (on Ground: given).
    AskExtension,
    /// A second person approved the waiting extension.
    ApproveExtension,
    /// A second person refused the waiting extension.
    DenyExtension,
    /// An admin terminated it.
    Terminate,
    /// The server ended it.
    SystemEnd,
    /// Approval did not come in time.
    Expire,
    /// Activation began.
    BeginActivation,
    /// The debug container runs.
    Activated,
    /// Activation failed.
    ActivationFailed,
    /// Cleanup finished.
    CleanupDone,
    /// A step was recorded; the state stays.
    Progress,
    /// A review was recorded.
    Review,
}

impl Commit {
    /// The kind of the change `event` makes.
    pub fn of(event: &SessionEvent) -> Commit {
        match event {
            SessionEvent::Approve { .. } => Commit::Approve,
            SessionEvent::Deny { .. } => Commit::Deny,
            SessionEvent::BreakGlass { .. } => Commit::BreakGlass,
            SessionEvent::End { .. } => Commit::End,
            SessionEvent::AskExtension { .. } => Commit::AskExtension,
            SessionEvent::ApproveExtension { .. } => Commit::ApproveExtension,
            SessionEvent::DenyExtension { .. } => Commit::DenyExtension,
            SessionEvent::Terminate { .. } => Commit::Terminate,
            SessionEvent::SystemEnd { .. } => Commit::SystemEnd,
            SessionEvent::Expire => Commit::Expire,
            SessionEvent::BeginActivation => Commit::BeginActivation,
            SessionEvent::Activated => Commit::Activated,
            SessionEvent::ActivationFailed { .. } => Commit::ActivationFailed,
            SessionEvent::CleanupDone => Commit::CleanupDone,
            SessionEvent::Progress(_) => Commit::Progress,
        }
    }

    /// The stable name used in metrics, the events table and the live stream: the variant in
    /// snake case, derived as [`SessionEvent::kind`] is, so an event change's label is its kind.
    pub fn label(self) -> &'static str {
        self.into()
    }

    /// Whether the change may leave a session `Approved` with activation owed by this server.
    pub fn hands_over(self) -> bool {
        matches!(self, Commit::Create | Commit::Approve | Commit::BreakGlass)
    }

    /// Whether the change may leave a session `Ending` with cleanup owed by this server.
    pub fn ends(self) -> bool {
        matches!(self, Commit::End | Commit::Terminate | Commit::SystemEnd)
    }
}
