//! Process identity on this host: a process's start time from /proc, whether a process known
//! by pid and start time is gone, and this host's name. Sandbox containers carry their server's
//! identity in a label and workspace temp files carry their writer's in the name; both are told
//! dead or alive here, apart from either use.

/// This host's name (`uname` nodename).
pub(crate) fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// Field 22 of /proc/PID/stat: the process's start time in clock ticks since boot.
pub(crate) fn process_start_time(pid: u32) -> Option<u64> {
    stat_field(pid, 22)
}

/// Field 4 of /proc/PID/stat: the parent's pid.
pub(crate) fn parent_pid(pid: u32) -> Option<u32> {
    stat_field(pid, 4)
}

/// Field `n` (from 3, the state) of /proc/PID/stat.
fn stat_field<T: std::str::FromStr>(pid: u32, n: usize) -> Option<T> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: skip past its last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(n - 3)?.parse().ok()
}

/// Whether process `pid` of this host, started at `start` (clock ticks since boot), no longer
/// runs (a reused pid has another start time).
pub(crate) fn process_is_gone(pid: u32, start: u64) -> bool {
    process_start_time(pid) != Some(start)
}
