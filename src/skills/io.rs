//! The store's file primitives, each relative to a directory fd and following no link: opening a
//! regular file (`O_NOFOLLOW`, then `fstat` on the fd actually opened) or a directory
//! (`O_DIRECTORY | O_NOFOLLOW`, created when asked), atomic writes through an `O_EXCL` temp file
//! and `renameat`, `fsync` of a directory, bounded reads, removal of stale temp files and of a
//! deleted skill's history directory; also the check that code is UTF-8 text without NUL. Kept
//! apart so that the safety of the store's file access can be reviewed in one place.

use std::ffi::CStr;
use std::os::fd::{BorrowedFd, OwnedFd};

use chrono::{DateTime, Utc};
use rustix::fs::{self as rfs, AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::error::{Result, SkillError};
use super::store::SkillStore;
use super::{DIR_MODE, FILE_MODE, STALE_TEMP_SECS, TEMP_PREFIX};
use crate::host::safe_fs::{self, AtomicWriteError};

pub(super) use crate::host::safe_fs::kind_phrase as kind_name;

pub(super) fn mtime_of(st: &rfs::Stat) -> DateTime<Utc> {
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    let (secs, nsec) = (st.st_mtime as i64, st.st_mtime_nsec as u32);
    DateTime::from_timestamp(secs, nsec / 1000 * 1000).unwrap_or_default()
}

impl SkillStore {
    /// Opens `file` in `dir` without following a link; `None` when it does not exist. Anything
    /// but a regular file is refused.
    pub(super) fn open_regular(
        &self,
        dir: BorrowedFd<'_>,
        file: &str,
        path: &str,
    ) -> Result<Option<(std::fs::File, rfs::Stat)>> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        match rfs::openat(dir, file, flags, Mode::empty()) {
            Ok(fd) => {
                let st = rfs::fstat(&fd)
                    .map_err(|e| SkillError::io(format!("cannot stat {path}"), e))?;
                let ft = FileType::from_raw_mode(st.st_mode);
                if ft != FileType::RegularFile {
                    return Err(SkillError::NotRegular {
                        path: path.to_owned(),
                        kind: kind_name(ft),
                        expected: "a regular file",
                    });
                }
                Ok(Some((std::fs::File::from(fd), st)))
            }
            Err(Errno::NOENT) => Ok(None),
            Err(Errno::LOOP) => Err(SkillError::Symlink {
                path: path.to_owned(),
            }),
            Err(Errno::NXIO) => Err(SkillError::NotRegular {
                path: path.to_owned(),
                kind: "a socket or device",
                expected: "a regular file",
            }),
            Err(e) => Err(SkillError::io(format!("cannot open {path}"), e)),
        }
    }

    /// Opens directory `file` in `dir` without following a link, creating it (0755) when
    /// `create`; `None` when it does not exist and `create` is false.
    pub(super) fn open_dir(
        &self,
        dir: BorrowedFd<'_>,
        file: &str,
        path: &str,
        create: bool,
    ) -> Result<Option<OwnedFd>> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        for _ in 0..2 {
            match rfs::openat(dir, file, flags, Mode::empty()) {
                Ok(fd) => return Ok(Some(fd)),
                Err(Errno::NOENT) if create => {
                    match rfs::mkdirat(dir, file, Mode::from_raw_mode(DIR_MODE)) {
                        Ok(()) => {
                            let fd = rfs::openat(dir, file, flags, Mode::empty())
                                .map_err(|e| SkillError::io(format!("cannot open {path}"), e))?;
                            rfs::fchmod(&fd, Mode::from_raw_mode(DIR_MODE))
                                .map_err(|e| SkillError::io(format!("cannot chmod {path}"), e))?;
                            self.sync_dir(dir, path)?;
                            return Ok(Some(fd));
                        }
                        Err(Errno::EXIST) => continue, // raced with another creator
                        Err(e) => return Err(SkillError::io(format!("cannot create {path}"), e)),
                    }
                }
                Err(Errno::NOENT) => return Ok(None),
                Err(Errno::NOTDIR | Errno::LOOP) => {
                    let ft = rfs::statat(dir, file, AtFlags::SYMLINK_NOFOLLOW)
                        .map(|st| FileType::from_raw_mode(st.st_mode))
                        .unwrap_or(FileType::Unknown);
                    return Err(if ft == FileType::Symlink {
                        SkillError::Symlink {
                            path: path.to_owned(),
                        }
                    } else {
                        SkillError::NotRegular {
                            path: path.to_owned(),
                            kind: kind_name(ft),
                            expected: "a directory",
                        }
                    });
                }
                Err(e) => return Err(SkillError::io(format!("cannot open {path}"), e)),
            }
        }
        Err(SkillError::io(format!("cannot open {path}"), Errno::NOENT))
    }

    /// Writes `data` to `file` in `dir` through a fresh `O_EXCL` temp file, `fsync` and
    /// `renameat` ([`safe_fs::write_atomic`]). The caller syncs the directory.
    pub(super) fn write_atomic(
        &self,
        dir: BorrowedFd<'_>,
        file: &str,
        data: &[u8],
        path: &str,
    ) -> Result<()> {
        let mode = Mode::from_raw_mode(FILE_MODE);
        let temp = || safe_fs::temp_name(TEMP_PREFIX);
        safe_fs::write_atomic(dir, file, data, mode, temp, |_| Ok(())).map_err(|e| match e {
            AtomicWriteError::CreateTemp(e) => {
                SkillError::io(format!("cannot create a temp file for {path}"), e)
            }
            AtomicWriteError::Write(e) => SkillError::io(format!("cannot write {path}"), e),
            AtomicWriteError::Rename(e) => SkillError::io(format!("cannot write {path}"), e),
        })
    }

    pub(super) fn sync_dir(&self, dir: BorrowedFd<'_>, path: &str) -> Result<()> {
        safe_fs::sync_dir(dir).map_err(|e| SkillError::io(format!("cannot sync {path}"), e))
    }

    /// Removes temp files left by a crash (older than an hour, so a writer in another process is
    /// never disturbed).
    pub(super) fn remove_stale_temps(&self, dir: BorrowedFd<'_>) {
        let Ok(entries) = Dir::read_from(dir) else {
            return;
        };
        let cutoff = Utc::now().timestamp() - STALE_TEMP_SECS;
        for entry in entries.flatten() {
            let Ok(file) = entry.file_name().to_str() else {
                continue;
            };
            if !file.starts_with(TEMP_PREFIX) {
                continue;
            }
            if let Ok(st) = rfs::statat(dir, file, AtFlags::SYMLINK_NOFOLLOW)
                && FileType::from_raw_mode(st.st_mode) != FileType::Directory
                && mtime_of(&st).timestamp() < cutoff
            {
                let _ = rfs::unlinkat(dir, file, AtFlags::empty());
            }
        }
    }
}

/// Checks code bytes: within `limit`, UTF-8, no NUL, not blank.
pub(super) fn check_code<'a>(bytes: &'a [u8], limit: u64, what: &str) -> Result<&'a str> {
    if bytes.len() as u64 > limit {
        return Err(SkillError::TooLarge {
            what: what.to_owned(),
            size: bytes.len() as u64,
            limit,
        });
    }
    let text = std::str::from_utf8(bytes).map_err(|e| SkillError::NotText {
        what: what.to_owned(),
        reason: format!("it is not valid UTF-8 (at byte {})", e.valid_up_to()),
    })?;
    if let Some(at) = text.find('\0') {
        return Err(SkillError::NotText {
            what: what.to_owned(),
            reason: format!("it contains a NUL byte (at byte {at})"),
        });
    }
    if text.trim().is_empty() {
        return Err(SkillError::NotText {
            what: what.to_owned(),
            reason: "it is empty".into(),
        });
    }
    Ok(text)
}

/// Reads at most `limit + 1` bytes ([`safe_fs::read_bounded`]), so a caller can tell "over the
/// limit" without reading it all.
pub(super) fn read_bounded(f: std::fs::File, limit: u64, path: &str) -> Result<Vec<u8>> {
    safe_fs::read_bounded(f, limit, 0).map_err(|e| SkillError::io(format!("cannot read {path}"), e))
}

/// Removes directory `name` in `parent` and the non-directory entries in it, following nothing.
pub(super) fn remove_dir_shallow(parent: BorrowedFd<'_>, name: &str) {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(fd) = rfs::openat(parent, name, flags, Mode::empty()) else {
        return;
    };
    if let Ok(entries) = Dir::read_from(&fd) {
        for entry in entries.flatten() {
            let file: &CStr = entry.file_name();
            if file.to_bytes() == b"." || file.to_bytes() == b".." {
                continue;
            }
            if entry.file_type() != FileType::Directory {
                let _ = rfs::unlinkat(&fd, file, AtFlags::empty());
            }
        }
    }
    if let Err(e) = rfs::unlinkat(parent, name, AtFlags::REMOVEDIR) {
        tracing::warn!(skill = name, error = %e, "cannot remove the history of a deleted skill");
    }
}
