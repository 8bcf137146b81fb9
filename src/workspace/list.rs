//! Listing: the regular files below a directory, recursively, sorted, bounded in files, entries
//! examined and depth, leaving out (and counting) names the other tools would refuse, so every
//! listed path can be passed back to a tool as is.

use rustix::fs::FileType;

use super::error::{Result, WorkspaceError};
use super::path::{check_name, ctx};
use super::walk::{Flow, walk};
use super::{FileStat, LIST_MAX_DEPTH, Listing, Workspace, validate_relative_subpath};

/// A listing examines at most this many entries per file it may return.
const LIST_SCAN_FACTOR: usize = 10;

impl Workspace {
    /// Lists regular files below `subpath` (`""` or `"."` for the whole workspace), recursively,
    /// as paths relative to the workspace root, sorted.
    pub fn list_files(&self, subpath: &str) -> Result<Listing> {
        self.renewing(|| self.list_files_once(subpath))
    }

    fn list_files_once(&self, subpath: &str) -> Result<Listing> {
        let comps = validate_relative_subpath(subpath, self.limits.max_path_len)?;
        let start = self
            .open_dir_for_reading(&comps)
            .map_err(|e| self.open_error(e, &comps, "open directory"))?;
        let max_files = self.limits.max_list_entries;
        let budget = max_files.saturating_mul(LIST_SCAN_FACTOR).max(1000);
        let at_root = comps.is_empty();
        let mut listing = Listing::default();
        let mut examined = 0usize;
        let end = walk(start, comps.join("/"), LIST_MAX_DEPTH, |e| {
            examined += 1;
            if examined > budget {
                listing.truncated = true;
                return Flow::Stop;
            }
            let Ok(name) = e.name.to_str() else {
                listing.skipped += 1;
                return Flow::Next;
            };
            if at_root && e.depth == 0 && name == "lost+found" {
                return Flow::Next;
            }
            if !matches!(e.file_type, FileType::RegularFile | FileType::Directory) {
                return Flow::Next;
            }
            if check_name(name).is_err() {
                listing.skipped += 1;
                return Flow::Next;
            }
            let path = if e.prefix.is_empty() {
                name.to_owned()
            } else {
                format!("{}/{name}", e.prefix)
            };
            if path.len() > self.limits.max_path_len {
                listing.skipped += 1;
                return Flow::Next;
            }
            if e.file_type == FileType::Directory {
                return Flow::Descend(path);
            }
            if listing.files.len() >= max_files {
                listing.truncated = true;
                return Flow::Stop;
            }
            let stat = rustix::fs::statat(e.dir, e.name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                .map(|st| FileStat {
                    size: u64::try_from(st.st_size).unwrap_or(0),
                    modified_ns: i128::from(st.st_mtime) * 1_000_000_000
                        + i128::from(st.st_mtime_nsec),
                })
                .unwrap_or_default();
            listing.files.push(path);
            listing.stats.push(stat);
            Flow::Next
        })
        .map_err(|e| WorkspaceError::io(ctx("list", &comps), e))?;
        listing.truncated |= end.depth_limited;
        listing.skipped += end.unreadable;
        let mut pairs: Vec<(String, FileStat)> = std::mem::take(&mut listing.files)
            .into_iter()
            .zip(std::mem::take(&mut listing.stats))
            .collect();
        pairs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        (listing.files, listing.stats) = pairs.into_iter().unzip();
        Ok(listing)
    }
}
