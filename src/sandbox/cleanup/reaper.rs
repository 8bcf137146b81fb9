//! Removes sandbox containers whose server is gone. Every container carries the owner label
//! `host:pid:starttime`; at start, a server removes the containers of owners on its host whose
//! process no longer exists (a SIGKILLed or crashed server), and leaves live servers' containers
//! alone, so several servers (or test processes) can share one engine.

use crate::host::process::{hostname, process_is_gone};
#[cfg(test)]
use crate::sandbox::container::spec::current_owner;
use crate::sandbox::container::spec::{LABEL_MANAGED, LABEL_OWNER};
use crate::sandbox::engine::backend::{Backend, Labelled};
use crate::sandbox::engine::error::EngineError;

/// Whether the owner label names a process on this host that is no longer running.
pub fn owner_is_dead(owner: &str) -> bool {
    let mut parts = owner.rsplitn(3, ':');
    let (Some(start), Some(pid), Some(host)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    if host != hostname() {
        return false;
    }
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return false;
    };
    process_is_gone(pid, start)
}

/// Removes the managed containers whose owner process on this host has died. Returns how many.
pub async fn reap_orphans(backend: &dyn Backend) -> Result<usize, EngineError> {
    let containers = backend.list_labelled(&[LABEL_MANAGED.to_string()]).await?;
    let mut removed = 0;
    for Labelled { id, labels } in containers {
        let orphan = labels.get(LABEL_OWNER).is_some_and(|o| owner_is_dead(o));
        if orphan {
            // One container the engine cannot remove must not stop the others, or the server.
            match backend.remove(&id).await {
                Ok(()) => removed += 1,
                Err(e) => {
                    tracing::warn!(container = %id, "could not remove an orphaned sandbox container: {e}")
                }
            }
        }
    }
    if removed > 0 {
        tracing::info!("removed {removed} sandbox containers left by a server that is gone");
    }
    Ok(removed)
}

/// Removes every container carrying all the given labels.
pub async fn remove_labelled(
    backend: &dyn Backend,
    labels: &[String],
) -> Result<usize, EngineError> {
    let containers = backend.list_labelled(labels).await?;
    let mut removed = 0;
    for Labelled { id, .. } in &containers {
        match backend.remove(id).await {
            Ok(()) => removed += 1,
            Err(e) => tracing::warn!(container = %id, "could not remove sandbox container: {e}"),
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_made_up_one_is_not() {
        assert!(!owner_is_dead(&current_owner()));
        let dead = format!("{}:{}:{}", hostname(), u32::MAX - 1, 1);
        assert!(owner_is_dead(&dead));
    }

    #[test]
    fn a_reused_pid_with_another_start_time_counts_as_dead() {
        let pid = std::process::id();
        let start = crate::host::process::process_start_time(pid).unwrap();
        assert!(owner_is_dead(&format!(
            "{}:{pid}:{}",
            hostname(),
            start + 1
        )));
    }

    #[test]
    fn other_hosts_and_junk_are_left_alone() {
        assert!(!owner_is_dead("another-host:1:1"));
        assert!(!owner_is_dead("junk"));
        assert!(!owner_is_dead(""));
    }
}

/// Removes the state directories (`container::state_dir`) of server instances under `root`
/// whose owner process on this host is gone.
pub fn reap_state_dirs(root: &std::path::Path) {
    use crate::sandbox::container::state_dir::{OWNER, remove};
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        let owner = std::fs::read_to_string(dir.join(OWNER)).unwrap_or_default();
        if owner_is_dead(owner.trim()) {
            remove(&dir);
        }
    }
}

#[cfg(test)]
mod state_dir_tests {
    use super::*;
    use crate::sandbox::container::state_dir::{StateDirs, remove};
    use std::path::Path;

    #[test]
    fn a_gone_servers_state_directories_are_removed_and_a_live_ones_kept() {
        let root = tempfile::tempdir().unwrap();
        let live = current_owner();
        let gone = format!("{}:4194303:1", hostname());
        for (instance, owner) in [("a", &live), ("b", &gone)] {
            let dirs = StateDirs::open(root.path(), Path::new("/e"), instance, owner, None);
            let dir = dirs.unwrap().for_container("cem-1");
            dir.create().unwrap();
            assert_eq!(dir.engine, Path::new("/e").join(instance).join("cem-1"));
        }
        reap_state_dirs(root.path());
        assert!(root.path().join("a/cem-1").is_dir());
        assert!(!root.path().join("b").exists());
        remove(&root.path().join("a/cem-1"));
        assert!(!root.path().join("a/cem-1").exists());
    }
}
