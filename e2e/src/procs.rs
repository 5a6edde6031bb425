//! The processes a session's debug container runs, found on this machine. The test node runs
//! each container as a runtime does, in a PID namespace of its own (or its target's), so a
//! process id a shell in it prints is its number there, not this machine's: these read this
//! machine's `/proc` to find every process by the namespace it is in, the number it has there,
//! or the session it was started for.

use std::path::Path;

/// The PID namespace process `pid` (this machine's number) is in, as `/proc/<pid>/ns/pid`
/// names it (`pid:[4026532…]`, what `readlink /proc/self/ns/pid` prints inside the container).
pub fn pid_namespace(pid: u32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/ns/pid"))
        .ok()
        .map(|l| l.to_string_lossy().into_owned())
}

/// Whether process `pid` (this machine's number) runs; a zombie does not.
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

/// One process, told apart from a later one given the same number: its number on this
/// machine and when it started (clock ticks after boot, `/proc/<pid>/stat`'s 22nd field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proc {
    /// Its number on this machine.
    pub pid: u32,
    /// When it started.
    pub start: u64,
}

impl Proc {
    /// Process `pid` as it runs now, if it does.
    pub fn of(pid: u32) -> Option<Proc> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // pid (comm) state ppid ...: comm may hold spaces and parentheses.
        let (_, rest) = stat.rsplit_once(')')?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() == Some(&"Z") {
            return None;
        }
        // The 22nd field of the line is the 20th after comm.
        let start = fields.get(19)?.parse().ok()?;
        Some(Proc { pid, start })
    }

    /// Whether this process (not a later one with its number) still runs.
    pub fn alive(self) -> bool {
        Proc::of(self.pid) == Some(self)
    }
}

/// This machine's numbers of every live process.
fn all() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .filter(|&pid| alive(pid))
                .collect()
        })
        .unwrap_or_default()
}

/// The live processes in PID namespace `ns`.
pub fn in_pid_namespace(ns: &str) -> Vec<u32> {
    all()
        .into_iter()
        .filter(|&pid| pid_namespace(pid).as_deref() == Some(ns))
        .collect()
}

/// This machine's number of the process numbered `pid` in PID namespace `ns` (the last
/// number of its `NSpid` line is its number in its own namespace).
pub fn host_pid(ns: &str, pid: u32) -> Option<u32> {
    in_pid_namespace(ns).into_iter().find(|&host| {
        std::fs::read_to_string(format!("/proc/{host}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("NSpid:"))
                    .and_then(|l| l.split_whitespace().last()?.parse::<u32>().ok())
            })
            == Some(pid)
    })
}

/// The live processes whose environment holds `name=value` (what a debug container's
/// processes inherit, such as the session's id).
pub fn with_env(name: &str, value: &str) -> Vec<u32> {
    let wanted = format!("{name}={value}");
    all()
        .into_iter()
        .filter(|pid| {
            std::fs::read(Path::new("/proc").join(pid.to_string()).join("environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == wanted.as_bytes()))
        })
        .collect()
}

/// What process `pid` runs, its parent and its numbers in each PID namespace, for a message.
pub fn command_line(pid: u32) -> String {
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| {
            String::from_utf8_lossy(&c)
                .replace('\0', " ")
                .trim()
                .to_string()
        })
        .unwrap_or_default();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.split_whitespace().collect::<Vec<_>>().join(","))
            .unwrap_or_default()
    };
    format!(
        "{cmd} (parent {}, ns pids {})",
        field("PPid:"),
        field("NSpid:")
    )
}
