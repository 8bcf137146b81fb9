//! What an execution created or changed in the workspace: a snapshot of the regular files
//! (size, modification time, inode) before the job and one after, compared. The walk is the
//! listing's (never follows a symlink, leaves out names the tools would refuse), bounded in
//! files and entries examined, so a workspace of a million files costs a bounded walk and the
//! result says it is partial.

use std::collections::HashMap;

use rustix::fs::{self as rfs, AtFlags, FileType};

use super::error::{Result, WorkspaceError};
use super::path::check_name;
use super::walk::{Flow, walk};
use super::{LIST_MAX_DEPTH, Workspace};

/// Entries a snapshot examines per file it may record.
const SCAN_FACTOR: usize = 10;

/// The regular files of the workspace at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    files: HashMap<String, Stamp>,
    /// The walk stopped early: files beyond it are not compared.
    pub truncated: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    size: u64,
    mtime: (i64, u64),
    inode: u64,
}

/// A file an execution created or changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// Relative to the workspace root, usable with every workspace tool.
    pub path: String,
    pub size: u64,
    /// True when the file did not exist before.
    pub created: bool,
}

impl Workspace {
    /// The workspace's regular files with their size, modification time and inode, up to
    /// `max_list_entries` files.
    pub fn snapshot(&self) -> Result<Snapshot> {
        self.renewing(|| self.snapshot_once())
    }

    fn snapshot_once(&self) -> Result<Snapshot> {
        let start = self
            .open_dir_for_reading(&[])
            .map_err(|e| WorkspaceError::io("cannot open the workspace root", e))?;
        let max_files = self.limits.max_list_entries;
        let budget = max_files.saturating_mul(SCAN_FACTOR).max(1000);
        let max_path = self.limits.max_path_len;
        let mut snapshot = Snapshot::default();
        let mut examined = 0usize;
        let end = walk(start, String::new(), LIST_MAX_DEPTH, |e| {
            examined += 1;
            if examined > budget || snapshot.files.len() >= max_files {
                snapshot.truncated = true;
                return Flow::Stop;
            }
            let Some(name) = e.name.to_str().ok().filter(|n| check_name(n).is_ok()) else {
                return Flow::Next;
            };
            if e.depth == 0 && name == "lost+found" {
                return Flow::Next;
            }
            let path = if e.prefix.is_empty() {
                name.to_owned()
            } else {
                format!("{}/{name}", e.prefix)
            };
            if path.len() > max_path {
                return Flow::Next;
            }
            match e.file_type {
                FileType::Directory => Flow::Descend(path),
                FileType::RegularFile => {
                    if let Ok(st) = rfs::statat(e.dir, e.name, AtFlags::SYMLINK_NOFOLLOW)
                        && FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
                    {
                        let stamp = Stamp {
                            size: u64::try_from(st.st_size).unwrap_or(0),
                            mtime: (st.st_mtime, st.st_mtime_nsec),
                            inode: st.st_ino,
                        };
                        snapshot.files.insert(path, stamp);
                    }
                    Flow::Next
                }
                _ => Flow::Next,
            }
        })
        .map_err(|e| WorkspaceError::io("cannot walk the workspace", e))?;
        snapshot.truncated |= end.depth_limited;
        Ok(snapshot)
    }
}

impl Snapshot {
    /// Files in `self` that `before` did not have, or had with another size, modification time
    /// or inode (a file replaced by a rename), sorted by path.
    pub fn changes_since(&self, before: &Snapshot) -> Vec<FileChange> {
        let mut changes: Vec<FileChange> = self
            .files
            .iter()
            .filter_map(|(path, now)| {
                let earlier = before.files.get(path);
                (earlier != Some(now)).then(|| FileChange {
                    path: path.clone(),
                    size: now.size,
                    created: earlier.is_none(),
                })
            })
            .collect();
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        changes
    }

    /// Files `before` had that `self` does not, sorted.
    pub fn removed_since(&self, before: &Snapshot) -> Vec<String> {
        let mut removed: Vec<String> = before
            .files
            .keys()
            .filter(|path| !self.files.contains_key(*path))
            .cloned()
            .collect();
        removed.sort();
        removed
    }
}
