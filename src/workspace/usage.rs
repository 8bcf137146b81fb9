//! Disk usage and the soft quota: a bounded walk adding up allocated bytes, hard links counted
//! once, and the check that refuses new executions while a soft quota is reached.

use std::collections::HashSet;

use rustix::fs::{self as rfs, AtFlags, FileType};

use super::error::{Result, WorkspaceError};
use super::walk::{Flow, walk};
use super::{USAGE_MAX_DEPTH, USAGE_MAX_ENTRIES, Usage, Workspace};

impl Workspace {
    /// Bounded walk of the whole workspace adding up allocated bytes (`st_blocks * 512`).
    pub fn usage(&self) -> Result<Usage> {
        self.renewing(|| self.usage_once())
    }

    fn usage_once(&self) -> Result<Usage> {
        let start = self
            .open_dir_for_reading(&[])
            .map_err(|e| WorkspaceError::io("cannot open the workspace root", e))?;
        let mut usage = Usage::default();
        let mut seen: HashSet<(u64, u64)> = HashSet::new();
        let mut examined = 0usize;
        let end = walk(start, String::new(), USAGE_MAX_DEPTH, |e| {
            examined += 1;
            if examined > USAGE_MAX_ENTRIES {
                usage.truncated = true;
                return Flow::Stop;
            }
            let Ok(st) = rfs::statat(e.dir, e.name, AtFlags::SYMLINK_NOFOLLOW) else {
                return Flow::Next; // raced away
            };
            let ft = FileType::from_raw_mode(st.st_mode);
            if ft != FileType::Directory && st.st_nlink > 1 && !seen.insert((st.st_dev, st.st_ino))
            {
                return Flow::Next;
            }
            usage.bytes = usage
                .bytes
                .saturating_add((st.st_blocks as u64).saturating_mul(512));
            match ft {
                FileType::RegularFile => {
                    usage.files += 1;
                    Flow::Next
                }
                FileType::Directory => Flow::Descend(String::new()),
                _ => Flow::Next,
            }
        })
        .map_err(|e| WorkspaceError::io("cannot measure the workspace", e))?;
        usage.truncated |= end.depth_limited;
        Ok(usage)
    }

    /// Refuses with [`WorkspaceError::Full`] when a soft quota is reached (a bounded
    /// [`Workspace::usage`] walk); the executor calls this before each execution. Under a kernel
    /// quota nothing is refused here: writes past it fail with ENOSPC by themselves, and code
    /// that cleans up a full workspace must still be able to run.
    pub fn check_quota(&self) -> Result<()> {
        if self.limits.soft_quota {
            let usage = self.usage()?;
            // A walk cut short is a lower bound: treat it as full rather than under.
            if usage.truncated || usage.bytes >= self.limits.quota_bytes {
                return Err(self.full());
            }
        }
        Ok(())
    }
}
