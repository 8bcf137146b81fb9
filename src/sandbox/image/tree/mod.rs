//! The sandbox image's `/usr`, served from a directory of the host instead of the engine's
//! storage. Where the engine stores images on a filesystem in user space (`fuse-overlayfs`),
//! every file Python opens or stats crosses into that daemon: on the reference machine
//! `import numpy, pandas` took 2.7 times as long as from a host directory (docs/measured.md).
//! Bind-mounting a read-only copy of the image's `/usr` directories over the container's (all
//! but `/usr/sbin`, where Docker's init is mounted) takes that daemon out of the path where
//! Python reads most; the root stays the image's, read-only.
//!
//! The copy is made once per image id, under `DIR/<short id>/` (`--image-tree-dir`, by
//! default `DATA_DIR/image-trees`): the files come from the engine as a tar
//! (`Engine::image_archive`) and are unpacked safely ([`unpack`]) into a temp directory beside
//! it, which is renamed into place only when complete, so a crash mid-way leaves nothing that is
//! used (the next extraction removes the leftover). Servers sharing the directory coordinate
//! with `flock` on `<short id>.lock`: one extracts while holding it exclusively, and each
//! server holds it shared for as long as it mounts the tree, so a tree in use is never removed;
//! a tree whose image is no longer on the engine and that no server holds is removed at start.
//!
//! Serving from the host is an optimisation: the caller falls back to the engine's storage,
//! with a warning saying why, when the copy cannot be made.

pub mod unpack;

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rustix::fs::{self as rfs, FlockOperation, Mode, OFlags};
use rustix::io::Errno;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use crate::sandbox::container::spec::TreeMount;
use crate::sandbox::container::spec::{LABEL_MANAGED, LABEL_OWNER, SERVED};
use crate::sandbox::engine::backend::Backend;
use crate::sandbox::engine::docker::{Engine, EngineStorage};
use crate::sandbox::engine::error::EngineError;

/// The data directory's subdirectory of trees, unless `--image-tree-dir` names another.
pub const DIR_NAME: &str = "image-trees";
/// Storage drivers that read through a filesystem in user space.
pub const SLOW_DRIVERS: [&str; 1] = ["fuse-overlayfs"];
/// Bounds of one image's tree.
pub const BOUNDS: unpack::Bounds = unpack::Bounds {
    bytes: 16 << 30,
    entries: 2_000_000,
};
/// Longest wait for another server extracting the same image.
const WAIT_LIMIT: Duration = Duration::from_secs(600);
const WAIT_STEP: Duration = Duration::from_millis(250);
const TEMP_MARK: &str = ".tmp-";

/// Where the sandbox image's read-only tree is read from (`--image-tree`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImageTreeMode {
    /// From the host where the engine's storage driver reads through user space
    /// (fuse-overlayfs), else from the engine's storage.
    Auto,
    /// Always from the engine's storage.
    Engine,
    /// Always from a copy on the host (falling back to the engine's storage when it cannot be
    /// made).
    Host,
}

/// Whether the tree is served from the host, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub host: bool,
    pub reason: String,
}

/// What `mode` means on an engine with `storage`.
pub fn choose(mode: ImageTreeMode, storage: &EngineStorage) -> Choice {
    let driver = if storage.driver.is_empty() {
        "an unreported driver"
    } else {
        &storage.driver
    };
    let rootless = if storage.rootless { ", rootless" } else { "" };
    match mode {
        ImageTreeMode::Engine => Choice {
            host: false,
            reason: format!("--image-tree engine (storage driver {driver}{rootless})"),
        },
        ImageTreeMode::Host => Choice {
            host: true,
            reason: format!("--image-tree host (storage driver {driver}{rootless})"),
        },
        ImageTreeMode::Auto if SLOW_DRIVERS.contains(&storage.driver.as_str()) => Choice {
            host: true,
            reason: format!(
                "storage driver {driver}{rootless} reads through a filesystem in user space"
            ),
        },
        ImageTreeMode::Auto => Choice {
            host: false,
            reason: format!("storage driver {driver}{rootless} reads at the kernel's speed"),
        },
    }
}

/// Directories of the image's `/usr` left to the image: Docker mounts its init at
/// `/sbin/docker-init` before the other mounts, which merged /usr resolves to `/usr/sbin`, so a
/// mount over all of `/usr` would hide it (and the container could not start).
pub const KEPT_IN_IMAGE: [&str; 1] = ["sbin"];

/// The directories of `root`'s [`SERVED`] directory that are mounted (real directories, not
/// links, and not [`KEPT_IN_IMAGE`]), sorted.
pub fn mounted_dirs(root: &Path) -> std::io::Result<Vec<String>> {
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(root.join(SERVED))? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if entry.file_type()?.is_dir() && !KEPT_IN_IMAGE.contains(&name.as_str()) {
            dirs.push(name);
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// Why a tree could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("another server has been extracting the tree in {0} for 10 minutes")]
    Waited(PathBuf),
    #[error("{path} is not a directory this server made: {problem}")]
    NotATree { path: PathBuf, problem: String },
    #[error("the image's /{SERVED} could not be unpacked into {path}: {source}")]
    Unpack {
        path: PathBuf,
        source: unpack::UnpackError,
    },
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("the server is stopping: the copy was abandoned and removed")]
    Stopped,
}

/// A tree in place, held for as long as this value lives (a shared `flock`).
#[derive(Debug)]
pub struct Prepared {
    /// The tree's directory, as this process names it.
    pub root: PathBuf,
    /// Whether this call extracted it (false: another server or an earlier start had).
    pub extracted: bool,
    _hold: OwnedFd,
}

/// The directory name of `image_id`'s tree: its first 12 hex digits.
pub fn short_id(image_id: &str) -> Option<&str> {
    let hex = image_id.strip_prefix("sha256:").unwrap_or(image_id);
    let short = hex.get(..12)?;
    short
        .bytes()
        .all(|b| b.is_ascii_hexdigit())
        .then_some(short)
}

/// Makes sure `image_id`'s tree is in `dir` (extracting it once) and holds it. Once `stop` is
/// cancelled it gives up ([`TreeError::Stopped`]), leaving no container and no partial tree.
pub async fn prepare(
    engine: &Engine,
    image_id: &str,
    dir: &Path,
    stop: &CancellationToken,
) -> Result<Prepared, TreeError> {
    let short = short_id(image_id).ok_or_else(|| TreeError::NotATree {
        path: dir.to_path_buf(),
        problem: format!("the image id {image_id:?} is not a sha256 digest"),
    })?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source: std::io::Error| TreeError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let dir_fd = open_dir(None, dir).map_err(|e| io(dir)(e.into()))?;
    let lock_path = dir.join(format!("{short}.lock"));
    let lock =
        open_lock(&dir_fd, &format!("{short}.lock")).map_err(|e| io(&lock_path)(e.into()))?;
    let root = dir.join(short);
    let started = Instant::now();
    loop {
        if try_lock(&lock, FlockOperation::NonBlockingLockExclusive) {
            let extracted = if tree_present(&dir_fd, short, &root)? {
                false
            } else {
                extract(engine, image_id, (&dir_fd, dir), short, stop).await?;
                true
            };
            // Downgrade: other servers may now use it too.
            rfs::flock(&lock, FlockOperation::LockShared).map_err(|e| io(&lock_path)(e.into()))?;
            return Ok(Prepared {
                root,
                extracted,
                _hold: lock,
            });
        }
        // Another server holds it: in use (shared), or being extracted (exclusive).
        if try_lock(&lock, FlockOperation::NonBlockingLockShared) {
            if tree_present(&dir_fd, short, &root)? {
                return Ok(Prepared {
                    root,
                    extracted: false,
                    _hold: lock,
                });
            }
            let _ = rfs::flock(&lock, FlockOperation::Unlock);
        }
        if started.elapsed() > WAIT_LIMIT {
            return Err(TreeError::Waited(dir.to_path_buf()));
        }
        tokio::select! {
            () = stop.cancelled() => return Err(TreeError::Stopped),
            () = tokio::time::sleep(WAIT_STEP) => {}
        }
    }
}

/// Removes the trees (and leftover temp directories) in `dir` that no server holds and whose
/// image is no longer on the engine; `keep` is never removed. Failures are logged.
pub async fn remove_unused(engine: &Engine, dir: &Path, keep: &str) {
    let Ok(dir_fd) = open_dir(None, dir) else {
        return;
    };
    let Ok(names) = std::fs::read_dir(dir) else {
        return;
    };
    let names: Vec<String> = names
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    for name in names.iter().filter_map(|n| n.strip_suffix(".lock")) {
        if name == keep || short_id(name) != Some(name) {
            continue;
        }
        let Ok(lock) = open_lock(&dir_fd, &format!("{name}.lock")) else {
            continue;
        };
        if !try_lock(&lock, FlockOperation::NonBlockingLockExclusive) {
            continue; // in use, or being extracted
        }
        if !matches!(Backend::image_id(engine, name).await, Ok(None)) {
            continue; // still on the engine (or the engine did not say)
        }
        let leftovers = names
            .iter()
            .filter(|n| n.as_str() == name || n.starts_with(&format!(".{name}{TEMP_MARK}")));
        for leftover in leftovers {
            remove_tree(&dir_fd, dir, leftover);
        }
        tracing::info!(
            "removed the image tree {} (its image is no longer on the engine)",
            dir.join(name).display()
        );
    }
}

/// Whether the finished tree is there (a directory holding a directory [`SERVED`]).
fn tree_present(dir_fd: &OwnedFd, short: &str, root: &Path) -> Result<bool, TreeError> {
    let tree = match open_dir(Some(dir_fd), Path::new(short)) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(false),
        Err(e) => {
            return Err(TreeError::NotATree {
                path: root.to_path_buf(),
                problem: e.to_string(),
            });
        }
    };
    open_dir(Some(&tree), Path::new(SERVED))
        .map(|_| true)
        .map_err(|e| TreeError::NotATree {
            path: root.join(SERVED),
            problem: e.to_string(),
        })
}

/// Extracts the tree into a fresh temp directory and renames it into place (the exclusive lock
/// is held).
async fn extract(
    engine: &Engine,
    image_id: &str,
    (dir_fd, dir): (&OwnedFd, &Path),
    short: &str,
    stop: &CancellationToken,
) -> Result<(), TreeError> {
    // Leftovers of extractions that died: nobody else extracts while the lock is ours.
    let prefix = format!(".{short}{TEMP_MARK}");
    if let Ok(entries) = std::fs::read_dir(dir) {
        for name in entries.filter_map(|e| e.ok()?.file_name().into_string().ok()) {
            if name.starts_with(&prefix) {
                remove_tree(dir_fd, dir, &name);
            }
        }
    }
    let temp_name = format!("{prefix}{}", uuid::Uuid::new_v4().simple());
    let temp = dir.join(&temp_name);
    let io = |source: std::io::Error| TreeError::Io {
        path: temp.clone(),
        source,
    };
    rfs::mkdirat(dir_fd, temp_name.as_str(), Mode::from_raw_mode(0o755))
        .map_err(|e| io(e.into()))?;
    let started = Instant::now();
    let result = async {
        let temp_fd = open_dir(Some(dir_fd), Path::new(&temp_name)).map_err(|e| io(e.into()))?;
        let (tx, rx) = mpsc::channel::<Bytes>(64);
        let unpacking = tokio::task::spawn_blocking(move || {
            let unpacked = unpack::unpack(ChannelReader::new(rx), temp_fd.as_fd(), SERVED, BOUNDS);
            // Complete on disk before it is renamed into use.
            unpacked.and_then(|u| {
                rfs::syncfs(&temp_fd)
                    .map(|()| u)
                    .map_err(|e| unpack::UnpackError::Write {
                        path: SERVED.into(),
                        source: e.into(),
                    })
            })
        });
        let labels = HashMap::from([
            (LABEL_MANAGED.to_string(), "true".to_string()),
            (
                LABEL_OWNER.to_string(),
                crate::sandbox::container::spec::current_owner(),
            ),
        ]);
        let sent = engine
            .image_archive(image_id, &format!("/{SERVED}"), labels, tx, stop)
            .await;
        let unpacked = unpacking.await.map_err(|e| io(std::io::Error::other(e)))?;
        // A stream cut by a stop may unpack as a shorter whole: never renamed into use.
        if stop.is_cancelled() {
            return Err(TreeError::Stopped);
        }
        // The engine's error first: a cut stream also fails the unpacking.
        sent?;
        unpacked.map_err(|source| TreeError::Unpack {
            path: temp.clone(),
            source,
        })
    }
    .await;
    let unpacked = match result {
        Ok(u) => u,
        Err(e) => {
            remove_tree(dir_fd, dir, &temp_name);
            return Err(e);
        }
    };
    if let Err(e) = rfs::renameat(dir_fd, temp_name.as_str(), dir_fd, short) {
        remove_tree(dir_fd, dir, &temp_name);
        return Err(io(e.into()));
    }
    let _ = rfs::fsync(dir_fd);
    tracing::info!(
        files = unpacked.files,
        mib = unpacked.bytes >> 20,
        skipped = unpacked.skipped,
        setuid_dropped = unpacked.privileges_dropped,
        seconds = started.elapsed().as_secs_f32(),
        "extracted the sandbox image's /{SERVED} into {}",
        dir.join(short).display()
    );
    Ok(())
}

/// Removes `name` in `dir` (renamed aside first, so it vanishes at once); logs a failure.
fn remove_tree(dir_fd: &OwnedFd, dir: &Path, name: &str) {
    let aside = format!(".{}{TEMP_MARK}removing", uuid::Uuid::new_v4().simple());
    let target = match rfs::renameat(dir_fd, name, dir_fd, aside.as_str()) {
        Ok(()) => aside,
        Err(_) => name.to_string(),
    };
    // std's remove_dir_all does not follow symlinks inside the tree.
    if let Err(e) = std::fs::remove_dir_all(dir.join(&target)) {
        tracing::warn!(
            "could not remove {}: {e}; remove it by hand",
            dir.join(&target).display()
        );
    }
}

fn open_dir(parent: Option<&OwnedFd>, path: &Path) -> Result<OwnedFd, Errno> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    match parent {
        // The configured directory itself may be reached through links the operator made.
        None => rfs::open(path, flags, Mode::empty()),
        Some(fd) => rfs::openat(fd, path, flags | OFlags::NOFOLLOW, Mode::empty()),
    }
}

fn open_lock(dir_fd: &OwnedFd, name: &str) -> Result<OwnedFd, Errno> {
    rfs::openat(
        dir_fd,
        name,
        OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
}

fn try_lock(lock: &OwnedFd, op: FlockOperation) -> bool {
    rfs::flock(lock, op).is_ok()
}

/// A blocking reader over chunks sent from async code.
struct ChannelReader {
    rx: mpsc::Receiver<Bytes>,
    current: Bytes,
}

impl ChannelReader {
    fn new(rx: mpsc::Receiver<Bytes>) -> Self {
        Self {
            rx,
            current: Bytes::new(),
        }
    }
}

impl std::io::Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(chunk) => self.current = chunk,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}

#[cfg(test)]
mod tests;
