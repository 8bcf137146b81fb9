//! Unpacks a tar of an image's directory into a directory of the host, treating every entry as
//! hostile: the image may be one the user named (`--image`), and whatever it holds ends up in a
//! directory the engine bind-mounts.
//!
//! Each entry is created relative to a directory fd, one component at a time with
//! `O_NOFOLLOW`, so no name in the archive (`..`, an absolute path, a path through a symlink an
//! earlier entry made) reaches outside the target: such an archive is refused whole, since an
//! engine's archive never holds one. Device nodes and FIFOs are left out, setuid and setgid
//! bits are dropped, and a hard link may only point at a file already unpacked. Modification
//! times are kept: Python trusts a `.pyc` only while its source's mtime matches, and recompiles
//! every module on import otherwise. Owners are kept when this process runs as root. The size
//! and the number of entries are bounded.

use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path};

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags, Timespec, Timestamps};
use rustix::io::Errno;

/// Bounds of one unpacking.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Bytes of file content in all.
    pub bytes: u64,
    /// Entries of every kind.
    pub entries: u64,
}

/// Why an archive was not unpacked.
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error("the archive names {path:?}, which is not a plain path inside its directory")]
    Escapes { path: String },
    #[error("the archive's entry {path:?} does not lie under {top:?}")]
    OutsideTop { path: String, top: String },
    #[error(
        "the archive's {path:?} would be created through {through:?}, which is not a directory it made"
    )]
    ThroughLink { path: String, through: String },
    #[error("the archive's {top:?} is not a directory")]
    TopNotADirectory { top: String },
    #[error("the archive holds more than {0} bytes")]
    TooLarge(u64),
    #[error("the archive holds more than {0} entries")]
    TooManyEntries(u64),
    #[error("the archive could not be read: {0}")]
    Read(std::io::Error),
    #[error("{path:?} could not be written: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

/// What an unpacking did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Unpacked {
    pub files: u64,
    pub bytes: u64,
    /// Device nodes, FIFOs and entries of unknown types, left out.
    pub skipped: u64,
    /// Files and directories whose setuid or setgid bit was dropped.
    pub privileges_dropped: u64,
}

/// Unpacks `archive`, whose every entry must lie under `top` (one plain name, such as `usr`),
/// into the directory `target` (an fd opened by the caller on a fresh, empty directory).
pub fn unpack(
    archive: impl Read,
    target: BorrowedFd<'_>,
    top: &str,
    bounds: Bounds,
) -> Result<Unpacked, UnpackError> {
    let mut archive = tar::Archive::new(archive);
    let mut done = Unpacked::default();
    let mut entries_seen = 0u64;
    let as_root = rustix::process::geteuid().is_root();
    // Directory modes are set last, so a read-only directory does not stop its own entries.
    let mut dir_modes: Vec<(Vec<String>, u32)> = Vec::new();
    let mut parents = ParentCache::default();
    for entry in archive.entries().map_err(UnpackError::Read)? {
        let mut entry = entry.map_err(UnpackError::Read)?;
        entries_seen += 1;
        if entries_seen > bounds.entries {
            return Err(UnpackError::TooManyEntries(bounds.entries));
        }
        let raw = entry.path().map_err(UnpackError::Read)?.into_owned();
        let Some(parts) = plain_parts(&raw)? else {
            continue; // "." or "./": the target itself
        };
        let shown = || raw.display().to_string();
        if parts[0] != top {
            return Err(UnpackError::OutsideTop {
                path: shown(),
                top: top.into(),
            });
        }
        let header = entry.header();
        let kind = header.entry_type();
        let mode = header.mode().map_err(UnpackError::Read)?;
        let mtime = header.mtime().unwrap_or(0);
        let owner = (header.uid().unwrap_or(0), header.gid().unwrap_or(0));
        if parts.len() == 1 && !kind.is_dir() {
            return Err(UnpackError::TopNotADirectory { top: top.into() });
        }
        let (dirs, name) = parts.split_at(parts.len() - 1);
        let place = Place {
            parent: parents.open(target, dirs, &shown)?,
            name: name[0].as_str(),
            shown: &shown,
        };
        let owner = as_root.then_some(owner);
        let privileged = mode & 0o6000 != 0;
        match kind {
            tar::EntryType::Directory => {
                make_dir(&place)?;
                done.privileges_dropped += u64::from(privileged);
                // Sticky stays; setuid and setgid go. The owner may always enter and remove it.
                dir_modes.push((parts.clone(), (mode & 0o1777) | 0o700));
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let size = entry.size();
                if done.bytes.saturating_add(size) > bounds.bytes {
                    return Err(UnpackError::TooLarge(bounds.bytes));
                }
                // At most the header's size: a lying header cannot grow the file past the bound.
                let content = (&mut entry).take(size);
                done.bytes += write_file(&place, content, mode, mtime, owner)?;
                done.files += 1;
                done.privileges_dropped += u64::from(privileged);
            }
            tar::EntryType::Symlink => {
                make_symlink(&place, &entry.link_name_bytes().unwrap_or_default(), owner)?;
            }
            tar::EntryType::Link => {
                let source = entry.link_name().map_err(UnpackError::Read)?;
                make_hard_link(&place, target, top, source.as_deref())?;
            }
            // Device nodes, FIFOs, and whatever else: nothing a sandbox's /usr needs.
            _ => done.skipped += 1,
        }
    }
    set_dir_modes(target, &dir_modes)?;
    match open_dir(target, top) {
        Ok(_) => Ok(done),
        Err(_) => Err(UnpackError::TopNotADirectory { top: top.into() }),
    }
}

/// Where one entry goes: its parent directory, its name there, and its path as errors name it.
struct Place<'p> {
    parent: BorrowedFd<'p>,
    name: &'p str,
    shown: &'p dyn Fn() -> String,
}

impl Place<'_> {
    fn write_err(&self, source: std::io::Error) -> UnpackError {
        UnpackError::Write {
            path: (self.shown)(),
            source,
        }
    }

    fn errno(&self, e: Errno) -> UnpackError {
        self.write_err(e.into())
    }
}

/// A directory entry: made (owner-only until its mode is set last), or kept when an earlier
/// entry made it; an existing name must be a directory, not a link made earlier.
fn make_dir(place: &Place<'_>) -> Result<(), UnpackError> {
    match rfs::mkdirat(place.parent, place.name, Mode::from_raw_mode(0o700)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(place.errno(e)),
    }
    open_dir(place.parent, place.name).map_err(|_| UnpackError::ThroughLink {
        path: (place.shown)(),
        through: (place.shown)(),
    })?;
    Ok(())
}

/// A file entry written from `content`, with its mode (setuid and setgid dropped), its
/// modification time, and `owner` when given. Returns the bytes written.
fn write_file(
    place: &Place<'_>,
    mut content: impl Read,
    mode: u32,
    mtime: u64,
    owner: Option<(u64, u64)>,
) -> Result<u64, UnpackError> {
    replace(place.parent, place.name).map_err(|e| place.errno(e))?;
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rfs::openat(place.parent, place.name, flags, Mode::from_raw_mode(0o600))
        .map_err(|e| place.errno(e))?;
    let mut file = std::fs::File::from(fd);
    let copied = std::io::copy(&mut content, &mut file).map_err(|e| place.write_err(e))?;
    if let Some((u, g)) = owner {
        rfs::fchown(&file, Some(uid(u)), Some(gid(g))).map_err(|e| place.errno(e))?;
    }
    rfs::fchmod(&file, Mode::from_raw_mode(mode & 0o777)).map_err(|e| place.errno(e))?;
    let when = Timespec {
        tv_sec: i64::try_from(mtime).unwrap_or(0),
        tv_nsec: 0,
    };
    rfs::futimens(
        &file,
        &Timestamps {
            last_access: when,
            last_modification: when,
        },
    )
    .map_err(|e| place.errno(e))?;
    Ok(copied)
}

/// A symlink entry pointing at `link`, owned by `owner` when given.
fn make_symlink(
    place: &Place<'_>,
    link: &[u8],
    owner: Option<(u64, u64)>,
) -> Result<(), UnpackError> {
    replace(place.parent, place.name).map_err(|e| place.errno(e))?;
    // The link is created, never followed here: it resolves inside the sandbox.
    rfs::symlinkat(link, place.parent, place.name).map_err(|e| place.errno(e))?;
    if let Some((u, g)) = owner {
        rfs::chownat(
            place.parent,
            place.name,
            Some(uid(u)),
            Some(gid(g)),
            AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|e| place.errno(e))?;
    }
    Ok(())
}

/// A hard link entry to `source`, which must be a plain path under `top` unpacked already.
fn make_hard_link(
    place: &Place<'_>,
    target: BorrowedFd<'_>,
    top: &str,
    source: Option<&Path>,
) -> Result<(), UnpackError> {
    let escapes = || UnpackError::Escapes {
        path: (place.shown)(),
    };
    let source = source.ok_or_else(escapes)?;
    let source_parts = plain_parts(source)?.ok_or_else(escapes)?;
    if source_parts[0] != top {
        return Err(UnpackError::OutsideTop {
            path: source.display().to_string(),
            top: top.into(),
        });
    }
    let (source_dirs, source_name) = source_parts.split_at(source_parts.len() - 1);
    let source_parent = open_path(target, source_dirs, place.shown)?;
    replace(place.parent, place.name).map_err(|e| place.errno(e))?;
    // No AT_SYMLINK_FOLLOW: a link to a symlink links the symlink itself.
    rfs::linkat(
        &source_parent,
        source_name[0].as_str(),
        place.parent,
        place.name,
        AtFlags::empty(),
    )
    .map_err(|e| place.errno(e))
}

/// The directories' own modes, set last (deepest first), so a read-only directory did not
/// stop its own entries.
fn set_dir_modes(
    target: BorrowedFd<'_>,
    dir_modes: &[(Vec<String>, u32)],
) -> Result<(), UnpackError> {
    for (parts, mode) in dir_modes.iter().rev() {
        let dir = open_path(target, parts, &|| parts.join("/"))?;
        rfs::fchmod(&dir, Mode::from_raw_mode(*mode)).map_err(|e| UnpackError::Write {
            path: parts.join("/"),
            source: e.into(),
        })?;
    }
    Ok(())
}

/// The plain components of an entry's path (`None` for the archive's root itself), or an error
/// for an absolute path, `..`, or a name that is not valid UTF-8.
fn plain_parts(path: &Path) -> Result<Option<Vec<String>>, UnpackError> {
    let escapes = || UnpackError::Escapes {
        path: path.display().to_string(),
    };
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => parts.push(name.to_str().ok_or_else(escapes)?.to_string()),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(escapes());
            }
        }
    }
    Ok((!parts.is_empty()).then_some(parts))
}

fn open_dir(parent: BorrowedFd<'_>, name: &str) -> Result<OwnedFd, Errno> {
    rfs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Opens `dirs` below `target`, one component at a time, creating a missing one; a component
/// that is a symlink or a file fails.
fn open_path(
    target: BorrowedFd<'_>,
    dirs: &[String],
    shown: &dyn Fn() -> String,
) -> Result<OwnedFd, UnpackError> {
    let mut current =
        rustix::io::fcntl_dupfd_cloexec(target, 0).map_err(|e| UnpackError::Write {
            path: shown(),
            source: e.into(),
        })?;
    for name in dirs {
        match rfs::mkdirat(&current, name.as_str(), Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => {
                return Err(UnpackError::Write {
                    path: shown(),
                    source: e.into(),
                });
            }
        }
        current = open_dir(current.as_fd(), name).map_err(|_| UnpackError::ThroughLink {
            path: shown(),
            through: name.clone(),
        })?;
    }
    Ok(current)
}

/// The last parent directory opened: entries come grouped by directory, so most reuse it.
#[derive(Default)]
struct ParentCache {
    dirs: Vec<String>,
    fd: Option<OwnedFd>,
}

impl ParentCache {
    fn open<'a>(
        &'a mut self,
        target: BorrowedFd<'_>,
        dirs: &[String],
        shown: &dyn Fn() -> String,
    ) -> Result<BorrowedFd<'a>, UnpackError> {
        if self.fd.is_none() || self.dirs != dirs {
            self.fd = Some(open_path(target, dirs, shown)?);
            self.dirs = dirs.to_vec();
        }
        Ok(self.fd.as_ref().expect("just opened").as_fd())
    }
}

/// Removes what an earlier entry left at `name` (archives may repeat a name; the last wins),
/// unless it is a directory.
fn replace(parent: BorrowedFd<'_>, name: &str) -> Result<(), Errno> {
    match rfs::unlinkat(parent, name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(e),
    }
}

fn uid(id: u64) -> rustix::fs::Uid {
    rustix::fs::Uid::from_raw(u32::try_from(id).unwrap_or(u32::MAX))
}

fn gid(id: u64) -> rustix::fs::Gid {
    rustix::fs::Gid::from_raw(u32::try_from(id).unwrap_or(u32::MAX))
}
