//! Crash injection for tests: when `BREAKGLASS_FAILPOINT` names a step, the process dies right
//! after that step is durable, as if killed there, or (the `*-written` steps) right after the
//! cluster write and before its row write: the window a real crash leaves an object the row
//! does not name. The crash tests restart the server and check that the sweep converges.
//!
//! Compiled only with the `failpoints` cargo feature (scripts/test-env.sh builds the tested
//! binary with it); without it this module and every call site are absent, so no production
//! build reads these variables. With it, an unset variable costs one environment read per step
//! of activation or cleanup, which are rare.
//!
//! Debug builds also pause at a named step ([`pause`]), so a test can change the cluster
//! between two steps of a running activation, through the real API server, or act while a
//! watcher's first screen waits for the recording's store.

use breakglass_shared::session::Progress;

use crate::ports::CleanupStep;

/// Environment variable naming the step to die after.
pub const ENV: &str = "BREAKGLASS_FAILPOINT";

/// Exit code of a process killed by a failpoint.
pub const EXIT_CODE: i32 = 86;

/// Start of the line [`announce`] logs; the end-to-end tests look for it to tell a binary
/// built without the `failpoints` feature (which would ignore the variables and never die
/// or pause) from one that is armed.
pub const ARMED: &str = "crash injection armed";

/// Logs, at start-up, which failpoint or pause the environment arms, if any.
pub fn announce() {
    for var in [ENV, PAUSE_ENV] {
        if let Ok(step) = std::env::var(var) {
            tracing::warn!("{ARMED}: {var}={step} (a test build: cargo feature `failpoints`)");
        }
    }
}

/// A step a test can kill the server after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failpoint {
    /// The session is `Activating`.
    Activating,
    /// The grant exists in the cluster; the row does not name it yet.
    GrantWritten,
    /// The grant is on the row.
    Grant,
    /// The process-access annotation is on the pod; the row does not say so yet.
    AnnotateWritten,
    /// The process-access annotation is on the row.
    Annotate,
    /// The ephemeral debug container is on the pod; the row does not name it yet.
    ContainerWritten,
    /// The copy pod exists; the row does not name it yet.
    CopyWritten,
    /// The debug container (or copy pod) is on the row.
    Container,
    /// The debug container runs, before `Active` is stored.
    Running,
    /// A recording version is on the row.
    Recording,
    /// The final hash's log entry is on the row.
    Anchored,
    /// The session is `Ending`, before any cleanup.
    Ending,
    /// The copy pod's deletion is on the row.
    CopyDeleted,
    /// The pod's recycling is on the row.
    PodRecycled,
    /// The decision to keep the pod is on the row.
    PodKept,
    /// The debug container's stop (or its failure) is on the row.
    DebugStopped,
    /// The annotation's removal is on the row.
    AnnotationRemoved,
    /// The grant's deletion is on the row.
    GrantDeleted,
    /// A watcher's first screen is about to be drawn from the recording (a pause only: the
    /// draw waits there, as it would for a slow store).
    FirstScreen,
}

impl Failpoint {
    /// The name `BREAKGLASS_FAILPOINT` takes.
    pub fn name(self) -> &'static str {
        match self {
            Failpoint::Activating => "activating",
            Failpoint::GrantWritten => "grant-written",
            Failpoint::Grant => "grant",
            Failpoint::AnnotateWritten => "annotate-written",
            Failpoint::Annotate => "annotate",
            Failpoint::ContainerWritten => "container-written",
            Failpoint::CopyWritten => "copy-written",
            Failpoint::Container => "container",
            Failpoint::Running => "running",
            Failpoint::Recording => "recording",
            Failpoint::Anchored => "anchored",
            Failpoint::Ending => "ending",
            Failpoint::CopyDeleted => "copy-deleted",
            Failpoint::PodRecycled => "pod-recycled",
            Failpoint::PodKept => "pod-kept",
            Failpoint::DebugStopped => "debug-stopped",
            Failpoint::AnnotationRemoved => "annotation-removed",
            Failpoint::GrantDeleted => "grant-deleted",
            Failpoint::FirstScreen => "first-screen",
        }
    }

    /// The failpoint after a recorded activation or recording step; `None` for cleanup steps,
    /// which are named by [`Failpoint::after_cleanup`].
    pub fn after_progress(p: &Progress) -> Option<Failpoint> {
        match p {
            Progress::GrantCreated { .. } => Some(Failpoint::Grant),
            Progress::ProcessAccessAnnotated => Some(Failpoint::Annotate),
            Progress::DebugContainerAdded { .. } | Progress::CopyPodCreated { .. } => {
                Some(Failpoint::Container)
            }
            Progress::RecordingStored(_) => Some(Failpoint::Recording),
            Progress::Anchored(_) => Some(Failpoint::Anchored),
            Progress::CleanupStep { .. } => None,
        }
    }

    /// The failpoint after a recorded cleanup step.
    pub fn after_cleanup(step: &CleanupStep) -> Failpoint {
        match step {
            CleanupStep::CopyDeleted { .. } => Failpoint::CopyDeleted,
            CleanupStep::PodRecycled { .. } => Failpoint::PodRecycled,
            CleanupStep::PodKept { .. } => Failpoint::PodKept,
            // Said of the kept pod once its debug container's stop is settled.
            CleanupStep::DebugContainerStopped { .. }
            | CleanupStep::DebugContainerLeftRunning { .. }
            | CleanupStep::ProcessAccessKept { .. } => Failpoint::DebugStopped,
            CleanupStep::AnnotationRemoved => Failpoint::AnnotationRemoved,
            CleanupStep::GrantDeleted { .. } => Failpoint::GrantDeleted,
        }
    }
}

/// Dies if `point` is the configured failpoint.
pub fn hit(point: Failpoint) {
    let name = point.name();
    if std::env::var(ENV).is_ok_and(|v| v == name) {
        eprintln!("failpoint {name}: exiting");
        std::process::exit(EXIT_CODE);
    }
}

/// Environment variable naming the step to pause after (debug builds only).
pub const PAUSE_ENV: &str = "BREAKGLASS_PAUSE_AT";

/// Environment variable naming the file whose appearance ends the pause; the server creates
/// `<file>.paused` when it stops there, so the test knows the moment has come.
pub const PAUSE_UNTIL_ENV: &str = "BREAKGLASS_PAUSE_UNTIL";

/// Waits, if `point` is the configured pause, until the test's file appears. Release builds
/// never pause: a production server must not be stoppable through its environment.
pub async fn pause(point: Failpoint) {
    if !cfg!(debug_assertions) || std::env::var(PAUSE_ENV).ok().as_deref() != Some(point.name()) {
        return;
    }
    let Ok(until) = std::env::var(PAUSE_UNTIL_ENV) else {
        eprintln!("{PAUSE_ENV} is set but {PAUSE_UNTIL_ENV} is not: not pausing");
        return;
    };
    let until = std::path::PathBuf::from(until);
    let mut marker = until.clone().into_os_string();
    marker.push(".paused");
    if let Err(e) = std::fs::write(&marker, point.name()) {
        eprintln!("pause at {}: cannot write {marker:?}: {e}", point.name());
        return;
    }
    eprintln!("pause at {}: waiting for {}", point.name(), until.display());
    // A test file, polled: no watch machinery for a debug-only hook.
    while !until.exists() {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
