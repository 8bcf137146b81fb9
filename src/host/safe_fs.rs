//! File primitives for directories that untrusted code can change, shared by the stores that
//! write into them: an exclusive temp file under a random name, the atomic write built on it
//! (temp file, `fsync`, `renameat` over the name), the directory sync that makes a rename
//! durable, a read bounded to limit + 1 bytes, and the names of file types for messages.
//!
//! Everything works relative to a directory fd the caller opened safely, never follows a link
//! at the name it creates (`O_NOFOLLOW | O_EXCL`), and never modifies an existing inode. Errors
//! are plain errnos or `io::Error`s, tagged with the step that failed where a caller words them
//! differently; each caller maps them to its own error type, with its own paths in the message.

use std::hash::{BuildHasher, RandomState};
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// How many fresh names [`create_temp`] tries before it gives up with `EEXIST`.
const TEMP_ATTEMPTS: usize = 16;

/// `prefix` followed by 16 random hex digits.
pub(crate) fn temp_name(prefix: &str) -> String {
    format!("{prefix}{:016x}", random_u64())
}

/// Unpredictable enough for temp names (O_EXCL makes collisions harmless): std's per-process
/// random hash keys over a counter and the time.
fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    RandomState::new().hash_one((n, t, std::process::id()))
}

/// Creates a new file in `dir` with `O_CREAT | O_EXCL | O_NOFOLLOW` and `mode` (reduced by the
/// umask), under a name from `new_name`; a name that is taken is replaced by the next one, up to
/// 16 in all, then `EEXIST`. Returns the name and a write-only fd.
pub(crate) fn create_temp(
    dir: BorrowedFd<'_>,
    mode: Mode,
    mut new_name: impl FnMut() -> String,
) -> Result<(String, OwnedFd), Errno> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    for _ in 0..TEMP_ATTEMPTS {
        let name = new_name();
        match rfs::openat(dir, name.as_str(), flags, mode) {
            Ok(fd) => return Ok((name, fd)),
            Err(Errno::EXIST) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Errno::EXIST)
}

/// The step of [`write_atomic`] that failed. The temp file is gone in every case.
#[derive(Debug)]
pub(crate) enum AtomicWriteError {
    /// No temp file could be created ([`create_temp`]).
    CreateTemp(Errno),
    /// Setting the temp file's mode, `prepare`, writing or syncing it failed.
    Write(std::io::Error),
    /// Renaming the temp file over the name failed.
    Rename(Errno),
}

/// Writes `data` to `name` in `dir` atomically: a fresh temp file from [`create_temp`], `fchmod`
/// to `mode` (so the umask does not decide it), `prepare` (e.g. an `fchown`), the data, `fsync`,
/// then `renameat` over `name`. Readers see the old content or the new, never a mix; whatever was
/// at `name` (a file, a hard link to another file, a symlink) is replaced, never modified or
/// followed. The temp file is removed on every error; only a crash between create and rename can
/// leave one. The directory is not synced: call [`sync_dir`] once the writes that belong together
/// are done.
pub(crate) fn write_atomic(
    dir: BorrowedFd<'_>,
    name: &str,
    data: &[u8],
    mode: Mode,
    new_name: impl FnMut() -> String,
    prepare: impl FnOnce(BorrowedFd<'_>) -> Result<(), Errno>,
) -> Result<(), AtomicWriteError> {
    let (tmp, fd) = create_temp(dir, mode, new_name).map_err(AtomicWriteError::CreateTemp)?;
    let written = (|| {
        let step = |e: Errno| AtomicWriteError::Write(e.into());
        rfs::fchmod(&fd, mode).map_err(step)?;
        prepare(fd.as_fd()).map_err(step)?;
        let mut file = std::fs::File::from(fd);
        file.write_all(data).map_err(AtomicWriteError::Write)?;
        file.sync_all().map_err(AtomicWriteError::Write)?;
        drop(file);
        #[cfg(test)]
        if FAIL_BEFORE_RENAME.with(|f| f.get()) {
            return Err(AtomicWriteError::Write(Errno::IO.into()));
        }
        rfs::renameat(dir, tmp.as_str(), dir, name).map_err(AtomicWriteError::Rename)
    })();
    if written.is_err() {
        // Best effort: the temp name is ours (O_EXCL), nothing else is lost if it is gone.
        let _ = rfs::unlinkat(dir, tmp.as_str(), AtFlags::empty());
    }
    written
}

/// `fsync`s the directory `dir` (an fd opened for reading: an `O_PATH` fd cannot be synced), so
/// that the renames and creations in it survive a crash. A filesystem that cannot sync a
/// directory (`EINVAL`) counts as done.
pub(crate) fn sync_dir(dir: BorrowedFd<'_>) -> Result<(), Errno> {
    match rfs::fsync(dir) {
        Ok(()) | Err(Errno::INVAL) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Reads at most `limit + 1` bytes, so a caller can tell "over the limit" without reading it
/// all, and a file that grew after its size was checked cannot get past the limit either.
/// `capacity` is what the buffer starts with.
pub(crate) fn read_bounded(
    reader: impl Read,
    limit: u64,
    capacity: usize,
) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(capacity);
    reader.take(limit.saturating_add(1)).read_to_end(&mut buf)?;
    Ok(buf)
}

/// Logs a warning when other users of the machine may read the secret file `path` (`what`
/// names it: "the tokens file").
pub(crate) fn warn_if_readable_by_all(
    path: &std::path::Path,
    meta: &std::fs::Metadata,
    what: &str,
) {
    use std::os::unix::fs::PermissionsExt;
    if meta.permissions().mode() & 0o004 != 0 {
        tracing::warn!(
            "{what} {} is readable by every user of this machine: `chmod 600` it",
            path.display()
        );
    }
}

/// A file type as a message names it ("fifo", "character device").
pub(crate) fn kind_name(ft: FileType) -> &'static str {
    match ft {
        FileType::RegularFile => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symlink",
        FileType::Fifo => "fifo",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        _ => "unknown type",
    }
}

/// A file type as a sentence names it ("is a FIFO", "is of an unknown kind").
pub(crate) fn kind_phrase(ft: FileType) -> &'static str {
    match ft {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        _ => "of an unknown kind",
    }
}

#[cfg(test)]
thread_local! {
    /// Test hook: make `write_atomic` fail after the temp file is written, before the rename.
    pub(crate) static FAIL_BEFORE_RENAME: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{MetadataExt, symlink};

    const MODE: u32 = 0o644;

    fn open_dir(path: &std::path::Path) -> OwnedFd {
        rfs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap()
    }

    fn names(path: &std::path::Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(path)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn temp_names_are_the_prefix_and_16_hex_digits() {
        let a = temp_name(".t-");
        let b = temp_name(".t-");
        assert_ne!(a, b);
        let digits = a.strip_prefix(".t-").unwrap();
        assert_eq!(digits.len(), 16);
        assert!(digits.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
    }

    #[test]
    fn create_temp_takes_a_fresh_name_and_gives_up_after_16_taken_ones() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = open_dir(tmp.path());
        fs::write(tmp.path().join("taken"), b"keep").unwrap();
        let mut tries = 0;
        let err = create_temp(dir.as_fd(), Mode::from_raw_mode(MODE), || {
            tries += 1;
            "taken".to_owned()
        })
        .unwrap_err();
        assert_eq!((err, tries), (Errno::EXIST, 16));
        assert_eq!(fs::read(tmp.path().join("taken")).unwrap(), b"keep");

        let mut names_given = vec!["fresh".to_owned(), "taken".to_owned()];
        let (name, _fd) = create_temp(dir.as_fd(), Mode::from_raw_mode(MODE), || {
            names_given.pop().unwrap()
        })
        .unwrap();
        assert_eq!(name, "fresh");

        // A symlink at the name is never followed.
        symlink(tmp.path().join("target"), tmp.path().join("link")).unwrap();
        let err = create_temp(dir.as_fd(), Mode::from_raw_mode(MODE), || "link".into());
        assert_eq!(err.unwrap_err(), Errno::EXIST);
        assert!(!tmp.path().join("target").exists());
    }

    #[test]
    fn write_atomic_replaces_the_name_and_leaves_no_temp_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = open_dir(tmp.path());
        let outside = tmp.path().join("outside");
        fs::write(&outside, b"other").unwrap();
        symlink(&outside, tmp.path().join("f")).unwrap();
        let new_name = || temp_name(".t-");
        let prepared = std::cell::Cell::new(false);
        write_atomic(
            dir.as_fd(),
            "f",
            b"new",
            Mode::from_raw_mode(0o640),
            new_name,
            |_| {
                prepared.set(true);
                Ok(())
            },
        )
        .unwrap();
        assert!(prepared.get());
        let meta = fs::symlink_metadata(tmp.path().join("f")).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(meta.mode() & 0o7777, 0o640);
        assert_eq!(fs::read(tmp.path().join("f")).unwrap(), b"new");
        assert_eq!(fs::read(&outside).unwrap(), b"other");
        sync_dir(dir.as_fd()).unwrap();

        // Each failing step is reported as that step, and removes its temp file.
        let mode = Mode::from_raw_mode(MODE);
        let err = write_atomic(dir.as_fd(), "g", b"x", mode, new_name, |_| Err(Errno::PERM));
        assert!(
            matches!(err, Err(AtomicWriteError::Write(e)) if e.raw_os_error() == Some(Errno::PERM.raw_os_error()))
        );
        fs::create_dir(tmp.path().join("d")).unwrap();
        fs::write(tmp.path().join("d/x"), b"x").unwrap();
        let err = write_atomic(dir.as_fd(), "d", b"x", mode, new_name, |_| Ok(()));
        assert!(matches!(err, Err(AtomicWriteError::Rename(_))), "{err:?}");
        FAIL_BEFORE_RENAME.with(|c| c.set(true));
        let err = write_atomic(dir.as_fd(), "f", b"lost", mode, new_name, |_| Ok(()));
        FAIL_BEFORE_RENAME.with(|c| c.set(false));
        assert!(matches!(err, Err(AtomicWriteError::Write(_))), "{err:?}");
        assert_eq!(fs::read(tmp.path().join("f")).unwrap(), b"new");
        assert_eq!(names(tmp.path()), ["d", "f", "outside"]);
    }

    #[test]
    fn read_bounded_stops_one_byte_past_the_limit() {
        let data = [7u8; 100];
        assert_eq!(read_bounded(&data[..], 200, 0).unwrap().len(), 100);
        assert_eq!(read_bounded(&data[..], 100, 101).unwrap().len(), 100);
        assert_eq!(read_bounded(&data[..], 99, 0).unwrap().len(), 100);
        assert_eq!(read_bounded(&data[..], 10, 0).unwrap().len(), 11);
        assert_eq!(read_bounded(&data[..], u64::MAX, 0).unwrap().len(), 100);
    }

    #[test]
    fn kinds_are_named_for_messages() {
        assert_eq!(kind_name(FileType::Fifo), "fifo");
        assert_eq!(kind_name(FileType::CharacterDevice), "character device");
        assert_eq!(kind_name(FileType::Unknown), "unknown type");
    }
}
