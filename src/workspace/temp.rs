//! Temp files of [`Workspace::write_file`]: their names carry the writing process
//! (`.cem-tmp-<pid>-<start time>-<random>`), so that the ones a killed server left behind are told
//! apart from a live writer's and removed at the next start.

use rustix::fs::{self as rfs, AtFlags, FileType};

use super::error::{Result, WorkspaceError};
use super::walk::{Flow, walk};
use super::{TEMP_PREFIX, USAGE_MAX_DEPTH, USAGE_MAX_ENTRIES, Workspace};
use crate::host::safe_fs;

/// Temp files whose writer cannot be told from their name (an older naming) are removed once
/// they are this old.
const STALE_TEMP_AGE: std::time::Duration = std::time::Duration::from_secs(3600);

impl Workspace {
    /// Removes the temp files of [`Workspace::write_file`] whose writing process is gone (a
    /// server killed between creating and renaming one), anywhere in the workspace; the walk is
    /// bounded like [`Workspace::usage`]. Only regular files are removed, by name (a link is
    /// never followed). A live writer's temp files, this process's included, are left alone.
    /// Returns how many were removed.
    pub fn remove_stale_temps(&self) -> Result<usize> {
        let start = self
            .open_dir_for_reading(&[])
            .map_err(|e| WorkspaceError::io("cannot open the workspace root", e))?;
        let now = std::time::SystemTime::now();
        let mut removed = 0;
        let mut examined = 0usize;
        walk(start, String::new(), USAGE_MAX_DEPTH, |e| {
            examined += 1;
            if examined > USAGE_MAX_ENTRIES {
                return Flow::Stop;
            }
            match e.file_type {
                FileType::Directory => return Flow::Descend(String::new()),
                FileType::RegularFile => {}
                _ => return Flow::Next,
            }
            let Some(rest) = e
                .name
                .to_str()
                .ok()
                .and_then(|n| n.strip_prefix(TEMP_PREFIX))
            else {
                return Flow::Next;
            };
            let stale = match parse_temp_writer(rest) {
                Some((pid, started)) => crate::host::process::process_is_gone(pid, started),
                None => rfs::statat(e.dir, e.name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
                    let mtime = std::time::UNIX_EPOCH
                        + std::time::Duration::from_secs(st.st_mtime.max(0) as u64);
                    now.duration_since(mtime).unwrap_or_default() > STALE_TEMP_AGE
                }),
            };
            if stale && rfs::unlinkat(e.dir, e.name, AtFlags::empty()).is_ok() {
                removed += 1;
            }
            Flow::Next
        })
        .map_err(|e| WorkspaceError::io("cannot walk the workspace", e))?;
        Ok(removed)
    }
}

/// `.cem-tmp-<pid>-<start time>-<random>`: the writer's identity, so that its leftovers can be
/// recognised once it is gone (see [`Workspace::remove_stale_temps`]).
pub(super) fn temp_name() -> String {
    static WRITER: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let prefix = WRITER.get_or_init(|| {
        let pid = std::process::id();
        let started = crate::host::process::process_start_time(pid).unwrap_or(0);
        format!("{TEMP_PREFIX}{pid}-{started}-")
    });
    safe_fs::temp_name(prefix)
}

/// The writer's pid and start time from what follows [`TEMP_PREFIX`] in a temp file's name.
pub(super) fn parse_temp_writer(rest: &str) -> Option<(u32, u64)> {
    let mut parts = rest.splitn(3, '-');
    let pid = parts.next()?.parse().ok()?;
    let started = parts.next()?.parse().ok()?;
    let random = parts.next()?;
    (random.len() == 16 && random.bytes().all(|b| b.is_ascii_hexdigit())).then_some((pid, started))
}
