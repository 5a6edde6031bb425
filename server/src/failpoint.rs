//! Crash injection for tests: when `BREAKGLASS_FAILPOINT` names a step, the process dies right
//! after that step is durable, as if killed there. The crash tests restart the server and check
//! that the sweep converges. Unset (always, in production) it costs one environment read per
//! step of activation or cleanup, which are rare.

use breakglass_shared::session::Progress;

/// Environment variable naming the step to die after.
pub const ENV: &str = "BREAKGLASS_FAILPOINT";

/// Exit code of a process killed by a failpoint.
pub const EXIT_CODE: i32 = 86;

/// Dies if `step` is the configured failpoint.
pub fn hit(step: &str) {
    if std::env::var(ENV).is_ok_and(|v| v == step) {
        eprintln!("failpoint {step}: exiting");
        std::process::exit(EXIT_CODE);
    }
}

/// The failpoint name of a recorded step.
pub fn name_of(p: &Progress) -> &'static str {
    match p {
        Progress::GrantCreated { .. } => "grant",
        Progress::ProcessAccessAnnotated => "annotate",
        Progress::DebugContainerAdded { .. } | Progress::CopyPodCreated { .. } => "container",
        Progress::RecordingStored(_) => "recording",
        Progress::Anchored(_) => "anchored",
        Progress::CleanupStep { detail } => {
            if detail.starts_with("deleted copy pod") {
                "copy-deleted"
            } else if detail.starts_with("recycled pod") {
                "pod-recycled"
            } else if detail.starts_with("kept pod") {
                "pod-kept"
            } else if detail.starts_with("removed the process-access") {
                "annotation-removed"
            } else if detail.starts_with("deleted grant") {
                "grant-deleted"
            } else {
                "cleanup"
            }
        }
    }
}
