//! The bounded directory walk behind listing, usage and the stale-temp sweep: depth-first, one fd
//! per level, each subdirectory opened relative to its parent's fd with `O_NOFOLLOW |
//! O_DIRECTORY`, so a directory swapped for a symlink is skipped, never followed. The callers
//! decide per entry whether to go on, descend or stop.

use std::ffi::CStr;
use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

pub(super) struct Entry<'a> {
    pub(super) dir: BorrowedFd<'a>,
    pub(super) name: &'a CStr,
    pub(super) file_type: FileType,
    /// Level of the directory holding the entry (the start directory is 0).
    pub(super) depth: usize,
    pub(super) prefix: &'a str,
}

pub(super) enum Flow {
    Next,
    /// Enter this directory; its entries get this prefix.
    Descend(String),
    Stop,
}

#[derive(Default)]
pub(super) struct WalkEnd {
    pub(super) depth_limited: bool,
    pub(super) unreadable: usize,
}

struct Frame {
    dir: rfs::Dir,
    prefix: String,
    depth: usize,
}

/// Depth-first walk holding one fd per level. Subdirectories are opened relative to their
/// parent's fd with `O_NOFOLLOW | O_DIRECTORY`: a directory swapped for a symlink is skipped.
pub(super) fn walk(
    start: OwnedFd,
    prefix: String,
    max_depth: usize,
    mut visit: impl FnMut(Entry<'_>) -> Flow,
) -> std::io::Result<WalkEnd> {
    let mut end = WalkEnd::default();
    let mut stack = vec![Frame {
        dir: rfs::Dir::new(start)?,
        prefix,
        depth: 0,
    }];
    while let Some(frame) = stack.last_mut() {
        let entry = match frame.dir.read() {
            None => {
                stack.pop();
                continue;
            }
            Some(Err(_)) => {
                end.unreadable += 1;
                stack.pop();
                continue;
            }
            Some(Ok(entry)) => entry,
        };
        let name = entry.file_name();
        if name.to_bytes() == b"." || name.to_bytes() == b".." {
            continue;
        }
        let dirfd = frame.dir.fd()?;
        let mut file_type = entry.file_type();
        if file_type == FileType::Unknown {
            file_type = rfs::statat(dirfd, name, AtFlags::SYMLINK_NOFOLLOW)
                .map(|st| FileType::from_raw_mode(st.st_mode))
                .unwrap_or(FileType::Unknown);
        }
        let depth = frame.depth;
        match visit(Entry {
            dir: dirfd,
            name,
            file_type,
            depth,
            prefix: &frame.prefix,
        }) {
            Flow::Next => {}
            Flow::Stop => break,
            Flow::Descend(child_prefix) => {
                if depth + 1 > max_depth {
                    end.depth_limited = true;
                    continue;
                }
                match rfs::openat(
                    dirfd,
                    name,
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                ) {
                    Ok(fd) => stack.push(Frame {
                        dir: rfs::Dir::new(fd)?,
                        prefix: child_prefix,
                        depth: depth + 1,
                    }),
                    // Deleted or swapped for something else since the read: nothing to list.
                    Err(Errno::NOENT | Errno::LOOP | Errno::NOTDIR) => {}
                    Err(_) => end.unreadable += 1,
                }
            }
        }
    }
    Ok(end)
}
