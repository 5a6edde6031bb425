//! The ports of the lifecycle: what it needs from the cluster driver, the recorder and the
//! terminal connections, as traits and typed values. The lifecycle owns one implementation of
//! each; the adapters (`cluster`, `recorder`, `connections`) implement them. This module
//! imports nothing of the server's other modules, so no adapter ever needs the lifecycle or the
//! context, and there is no import circle between them.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use breakglass_shared::session::{Progress, RecordingRef, RekorEntry, SessionSpec};
use breakglass_shared::Session;
use tokio::sync::oneshot;
use uuid::Uuid;

/// The error beneath one of these, kept as its `source()` so a log shows the whole chain.
/// Untyped because this module names none of the adapters' error types; shared rather than
/// boxed because one cluster error can answer for several sessions (`ClusterOps::pods_gone`).
pub type Cause = Arc<dyn std::error::Error + Send + Sync>;

/// A failure talking to a cluster, naming the environment and the step.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClusterError {
    /// Credentials or configuration are unusable.
    #[error("cluster `{env}`: {message}{}", because(source.as_ref()))]
    Config {
        /// Environment.
        env: String,
        /// What is wrong.
        message: String,
        /// The library's error beneath it, where there is one.
        source: Option<Cause>,
    },
    /// The API server could not be reached.
    #[error("cluster `{env}` is unreachable while trying to {what}: {source}")]
    Unreachable {
        /// Environment.
        env: String,
        /// The step.
        what: String,
        /// The transport's error.
        source: Cause,
    },
    /// The API server refused the request (RBAC, admission policy, validation).
    #[error("cluster `{env}` refused to {what} ({code}): {message}")]
    Refused {
        /// Environment.
        env: String,
        /// The step.
        what: String,
        /// HTTP status.
        code: u16,
        /// The API server's message (for policies, it names the rule).
        message: String,
    },
    /// The debug container stopped as soon as it started (its image or command is broken).
    #[error("cluster `{env}` could not start the debug container {container}: it exited at once")]
    ContainerExited {
        /// Environment.
        env: String,
        /// The debug container.
        container: String,
    },
    /// A bounded wait ran out.
    #[error("cluster `{env}`: {what} did not happen within {seconds} s")]
    Timeout {
        /// Environment.
        env: String,
        /// What was awaited.
        what: String,
        /// The bound.
        seconds: u64,
    },
    /// The objects activation is about to create are not the ones approved (the debug image's
    /// pin, the server's identity or the pod changed since the request), or the request has no
    /// approved spec at all: nothing is created.
    #[error(
        "cluster `{env}`: the objects to create differ from the approved spec ({approved}): \
         {differences}; ask for access again so the current objects are approved"
    )]
    SpecDrift {
        /// Environment.
        env: String,
        /// The approved spec's hash, shortened (or why there is none).
        approved: String,
        /// What differs, path by path.
        differences: String,
    },
    /// The session changed while the driver worked on it (ended, or moved on elsewhere), so
    /// the step was not recorded.
    #[error("the session changed meanwhile: {0}")]
    SessionChanged(#[from] SessionMoved),
}

impl ClusterError {
    /// A configuration error with no error beneath it.
    pub fn config(env: &str, message: impl Into<String>) -> Self {
        Self::Config {
            env: env.into(),
            message: message.into(),
            source: None,
        }
    }

    /// A configuration error caused by `source` (kept as the error's `source()`).
    pub fn config_from(
        env: &str,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Config {
            env: env.into(),
            message: message.into(),
            source: Some(Arc::new(source)),
        }
    }
}

/// `": cause"` after a message, so the sentence a person reads still names the cause.
fn because(source: Option<&Cause>) -> String {
    source.map(|s| format!(": {s}")).unwrap_or_default()
}

/// The session could not take the recorded step: it is final or moved on. Carries the
/// lifecycle's refusal (a transition error, a store failure) as its source.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct SessionMoved(#[source] pub Cause);

/// A cleanup step done in the cluster, typed so that failpoints and the audit trail name it
/// without parsing sentences.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CleanupStep {
    /// The copy pod was deleted (copy mode).
    CopyDeleted {
        /// Pod name.
        pod: String,
    },
    /// The debugged pod was deleted so its controller replaces it (live mode, tier rule).
    PodRecycled {
        /// Pod name.
        pod: String,
        /// Other ready pods of the same owner.
        others: usize,
    },
    /// The debugged pod was kept (tier rule, or the last ready pod).
    PodKept {
        /// Pod name.
        pod: String,
        /// Other ready pods of the same owner.
        others: usize,
    },
    /// The debug container of a kept pod was stopped, and every process in it (Kubernetes
    /// keeps it in the pod's spec, terminated).
    DebugContainerStopped {
        /// Container name.
        container: String,
    },
    /// The debug container of a kept pod did not stop when asked: it still runs, and the
    /// session page says so.
    DebugContainerLeftRunning {
        /// Container name.
        container: String,
        /// What went wrong.
        why: String,
    },
    /// The pod was kept after a session with process access to one of its containers: a
    /// process that container was made to start through it (a debugger's, say) is that
    /// container's, outlives the debug container, and stays until the pod is replaced.
    ProcessAccessKept {
        /// Pod name.
        pod: String,
        /// The container the session had process access to.
        container: String,
    },
    /// The process-access annotation was removed from the pod.
    AnnotationRemoved,
    /// The grant RoleBinding was deleted.
    GrantDeleted {
        /// RoleBinding name.
        name: String,
    },
}

impl CleanupStep {
    /// Whether the step leaves something the session created running in the cluster, so that
    /// nobody may be told the cluster is clean.
    pub fn leaves_something(&self) -> bool {
        matches!(
            self,
            CleanupStep::DebugContainerLeftRunning { .. } | CleanupStep::ProcessAccessKept { .. }
        )
    }
}

impl fmt::Display for CleanupStep {
    /// The sentence kept in the events table.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CleanupStep::CopyDeleted { pod } => write!(f, "deleted copy pod {pod}"),
            CleanupStep::PodRecycled { pod, others } => {
                write!(f, "recycled pod {pod} ({others} other ready pods)")
            }
            CleanupStep::PodKept { pod, others } => {
                write!(f, "kept pod {pod} (tier rule; {others} other ready pods)")
            }
            CleanupStep::DebugContainerStopped { container } => {
                write!(
                    f,
                    "stopped debug container {container} and every process in it"
                )
            }
            CleanupStep::DebugContainerLeftRunning { container, why } => {
                write!(f, "debug container {container} still runs: {why}")
            }
            CleanupStep::ProcessAccessKept { pod, container } => write!(
                f,
                "anything container {container} was made to start through process access runs on in pod {pod} until the pod is replaced (recycling at End replaces it where the tier allows)"
            ),
            CleanupStep::AnnotationRemoved => f.write_str("removed the process-access annotation"),
            CleanupStep::GrantDeleted { name } => write!(f, "deleted grant {name}"),
        }
    }
}

/// Where the driver reports each step it completed, so the step is on the session row (through
/// the state machine) before the next cluster write. Implemented by the lifecycle.
#[async_trait]
pub trait ProgressSink: Send + Sync {
    /// Records an activation step (or a recording step) on the row.
    async fn record(&self, p: Progress) -> Result<Session, SessionMoved>;

    /// Records a cleanup step for the audit trail.
    async fn cleaned(&self, step: CleanupStep) -> Result<Session, SessionMoved>;
}

/// The cluster side of a session: implemented by the cluster driver. The lifecycle calls it
/// at the right moments and turns its outcome into transitions; implementations never write
/// sessions themselves.
#[async_trait]
pub trait ClusterOps: Send + Sync + 'static {
    /// Whether this driver reaches `environment`'s cluster.
    fn serves(&self, environment: &str) -> bool;

    /// Creates the grant and the debug container (or copy pod) for an `Activating` session and
    /// waits, bounded, until it runs. Every step must be idempotent: after a crash this is
    /// called again for the same session.
    async fn activate(
        &self,
        session: &Session,
        progress: &dyn ProgressSink,
    ) -> Result<(), ClusterError>;

    /// The objects activation would create for `session` (a request about to be stored), with
    /// their hash and the cluster's answer to a dry run. Asked at create, so the approver
    /// approves exactly these and activation can refuse anything else.
    async fn spec(&self, session: &Session) -> Result<SessionSpec, ClusterError>;

    /// Gives a running session's grant the session's new time (its TTL label and annotation
    /// say [`Session::granted_minutes`]); asked before an extension is written, so the row
    /// never promises more time than the cluster's backstop allows. Idempotent.
    async fn extend(&self, session: &Session) -> Result<(), ClusterError>;

    /// Removes everything the session may have created (idempotent; safe when nothing was).
    async fn cleanup(
        &self,
        session: &Session,
        progress: &dyn ProgressSink,
    ) -> Result<(), ClusterError>;

    /// The containers of `pod` in `namespace` of `environment`, or `None` when the cluster does
    /// not list it (or it is being deleted). Asked at create, so no approver is ever asked
    /// about a pod or a container that does not exist.
    async fn containers_of(
        &self,
        environment: &str,
        namespace: &str,
        pod: &str,
    ) -> Result<Option<Vec<String>>, ClusterError>;

    /// Whether the debugged pod (or the copy) has disappeared.
    async fn pod_gone(&self, session: &Session) -> Result<bool, ClusterError>;

    /// [`ClusterOps::pod_gone`] for each of `sessions`, answers in their order. The sweep asks
    /// it of every active session each pass; the driver reads a namespace's pods once where
    /// several sessions share it, so a pass costs what the namespaces in use cost, not what
    /// the sessions do. This default asks one at a time.
    async fn pods_gone(&self, sessions: &[&Session]) -> Vec<Result<bool, ClusterError>> {
        let mut gone = Vec::with_capacity(sessions.len());
        for s in sessions {
            gone.push(self.pod_gone(s).await);
        }
        gone
    }

    /// Removes break-glass objects in `environment` whose session is not in `live`; returns how
    /// many objects were removed.
    async fn reconcile(
        &self,
        environment: &str,
        live: &HashSet<Uuid>,
    ) -> Result<usize, ClusterError>;

    /// Attaches (stdin + tty) to the session's debug container with fresh credentials.
    async fn attach(&self, session: &Session) -> Result<Box<dyn AttachedTerminal>, ClusterError>;
}

/// The relay's end of a debug container's terminal (`pods/attach` with a TTY). One is held per
/// open terminal, so what it keeps while idle is multiplied by every open terminal.
#[async_trait]
pub trait AttachedTerminal: Send {
    /// The next output of the terminal (what its TTY wrote, stdout and stderr together), as
    /// the cluster sent it; `None` once it is closed: the process exited, the container or pod
    /// went away, or the connection broke. Cancel-safe: dropping the future loses nothing.
    async fn output(&mut self) -> Option<bytes::Bytes>;

    /// Types `data` into the terminal.
    async fn input(&mut self, data: &[u8]) -> Result<(), ClusterError>;

    /// Sets the terminal's size.
    async fn resize(&mut self, cols: u16, rows: u16) -> Result<(), ClusterError>;
}

/// Why a recording could not be started or continued: "no recording, no session".
#[derive(Debug, Clone, thiserror::Error)]
pub enum RecordingError {
    /// No recording store can take a recording now (the store's error).
    #[error("the recording store is unavailable, so no session can start: {0}")]
    StoreUnavailable(#[source] Cause),
    /// The database lease that makes one replica the writer cannot be taken (the database's
    /// error).
    #[error("the recording's lease cannot be taken: {0}")]
    Lease(#[source] Cause),
    /// Another live replica writes this recording.
    #[error(
        "another server replica records this session; retry (a stopped replica's recording moves here within {lease_seconds} s)"
    )]
    HeldElsewhere {
        /// How long a stopped replica's lease outlives it.
        lease_seconds: u64,
    },
    /// The first version could not be stored (the writer's error).
    #[error("the recording could not be started, so no session can start: {0}")]
    Start(#[source] Cause),
    /// The stored recording must not be continued: the sentence says why and what to do.
    #[error("{0}")]
    Resume(String),
    /// The stored recording cannot be read or continued because of `source`; `what` is the
    /// sentence shown before it.
    #[error("{what}: {source}")]
    ResumeFailed {
        /// What could not be done, e.g. "the recording could not be continued".
        what: &'static str,
        /// The store's or the writer's error.
        source: Cause,
    },
}

/// Whether this replica records a session it was asked to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recording {
    /// This replica writes the recording: it activates the session.
    Here,
    /// Another live replica writes it (and so activates the session): leave it to that one.
    Elsewhere,
}

/// The session recordings, as the lifecycle sees them.
#[async_trait]
pub trait Recordings: Send + Sync + 'static {
    /// Starts (or, after a restart, continues) the recording of a session about to activate.
    async fn start(&self, session: &Session) -> Result<Recording, RecordingError>;

    /// Adds a marker to the live recording of `id` on this replica, if any.
    async fn marker(&self, id: Uuid, label: &str);

    /// Stores the final version (with its `ended` marker) and gives up the writer's lease;
    /// waits for another replica that still writes it. Safe to call more than once. Returns
    /// the version the row must name before the session is final (the writer's own report of
    /// it is lost when the database was down at that moment); `None` when nothing was stored
    /// here (nothing recorded, the store failed, or another replica finishes it).
    async fn finish(&self, session: &Session, reason: &str) -> Option<RecordingRef>;

    /// Anchors the final hash on the row of `session` in the transparency log, up to
    /// `attempts` tries while the log is unreachable; `None` without a log, or on failure.
    async fn anchor(&self, session: &Session, attempts: u32) -> Option<RekorEntry>;

    /// Whether a transparency log is configured.
    fn anchors(&self) -> bool;
}

/// What the recorder reports to the lifecycle, in order, over a channel.
#[derive(Debug)]
pub enum RecorderEvent {
    /// A version of the recording of `id` is stored; `done` is answered once it is on the row
    /// (the writer waits for it, so the row never names a version older than one before it).
    Stored {
        /// Session.
        id: Uuid,
        /// The stored version.
        version: RecordingRef,
        /// Answered when the row names it.
        done: oneshot::Sender<()>,
    },
    /// The recording of `id` cannot be kept: the session must end (`RecordingFailed`).
    Failed {
        /// Session.
        id: Uuid,
        /// Why, for the logs.
        reason: String,
    },
}

/// The live terminal connections, as the lifecycle sees them.
#[async_trait]
pub trait Terminals: Send + Sync + 'static {
    /// Closes the terminal of `id` on this replica, if one is open.
    async fn close(&self, id: Uuid, code: u16, reason: String);
}
