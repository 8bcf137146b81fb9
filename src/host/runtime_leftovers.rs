//! What a failed gVisor start leaves on this host, ended.
//!
//! When runsc's `create` succeeded and its `start` failed, the engine removes the container but
//! the containerd shim that ran it stays, with runsc's sandbox and gofer under it: three
//! processes per failed start, holding memory, that no engine call reaches (the engine no longer
//! knows the container). They are found here by the container's id, which the shim carries as
//! `-id ID` (an id this server's own container had, so another engine's processes are never
//! matched), and killed with the processes under them. Where the server cannot see the engine's
//! processes (it runs in a container of its own, or on another host) nothing is found.

use std::collections::HashSet;

/// A container id as Docker and Podman write it: 64 lowercase hex digits.
pub(crate) fn is_container_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The processes of the shim that ran container `id` (64 hex digits) and everything under it;
/// empty where there is none or `id` is not a container id.
pub(crate) fn shim_processes(id: &str) -> Vec<u32> {
    if !is_container_id(id) {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut parents: Vec<(u32, u32)> = Vec::new();
    let mut shims: HashSet<u32> = HashSet::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(ppid) = super::process::parent_pid(pid) {
            parents.push((pid, ppid));
        }
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if is_shim_of(&cmdline, id) {
            shims.insert(pid);
        }
    }
    // The shims and their descendants (runsc's sandbox and gofer, and what those started).
    let mut found: HashSet<u32> = shims;
    loop {
        let before = found.len();
        for (pid, ppid) in &parents {
            if found.contains(ppid) {
                found.insert(*pid);
            }
        }
        if found.len() == before {
            break;
        }
    }
    let mut found: Vec<u32> = found.into_iter().collect();
    found.sort_unstable();
    found
}

/// Kills what [`shim_processes`] finds for container `id`; how many processes that was.
pub(crate) fn end(id: &str) -> usize {
    let found = shim_processes(id);
    for pid in &found {
        if let Some(pid) = rustix::process::Pid::from_raw(*pid as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
    found.len()
}

/// Whether a NUL-separated command line is a containerd shim's for container `id`.
fn is_shim_of(cmdline: &[u8], id: &str) -> bool {
    let mut args = cmdline.split(|b| *b == 0);
    let Some(program) = args.next() else {
        return false;
    };
    let name = program.rsplit(|b| *b == b'/').next().unwrap_or_default();
    if !name.starts_with(b"containerd-shim") {
        return false;
    }
    let args: Vec<&[u8]> = args.collect();
    args.windows(2)
        .any(|pair| pair[0] == b"-id" && pair[1] == id.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "bb581ac7c3f7fa39b8795f2f2dd581e39f874fcfb181190b73d4f06d94c83d7d";

    #[test]
    fn a_shim_is_known_by_its_program_and_the_exact_id() {
        let shim = format!(
            "/usr/bin/containerd-shim-runc-v2\0-namespace\0moby\0-id\0{ID}\0-address\0/run/containerd.sock\0"
        );
        assert!(is_shim_of(shim.as_bytes(), ID));
        let other = ID.replace('b', "c");
        assert!(!is_shim_of(shim.as_bytes(), &other));
        let not_a_shim = format!("/usr/bin/sleep\0-id\0{ID}\0");
        assert!(!is_shim_of(not_a_shim.as_bytes(), ID));
        assert!(!is_shim_of(b"", ID));
    }

    #[test]
    fn only_a_container_id_is_looked_for() {
        assert!(shim_processes("").is_empty());
        assert!(shim_processes("../../etc").is_empty());
        assert!(shim_processes(&"g".repeat(64)).is_empty());
        // A well-formed id that no shim has.
        assert!(shim_processes(&"0".repeat(64)).is_empty());
    }
}
