//! What the data directory is stored on, as the kernel's mount table says.
//!
//! Why: in a swarm, servers on several nodes serve every tenant from one data directory, which
//! must be a volume every node mounts (GlusterFS, NFS, CephFS). The failure that matters is
//! quiet: a node whose shared mount did not come up at boot still has an empty directory at
//! that path, on its own disk, and a server started there would serve tenants with no files,
//! no skills and no PII vault, and write new ones nobody else sees. With `--shared-data` the
//! server refuses to start on storage known to be local, `/health` fails while reads of the
//! directory fail or hang past [`STALL_LIMIT`] (so the proxy moves tenants away), and `doctor`
//! reports the filesystem.
//!
//! The check is by filesystem type, from `/proc/self/mountinfo` (inside a container a bind
//! mount reports the type of what it binds: `fuse.glusterfs`, `nfs4`). Types known to be local
//! are refused; any other is taken as shared, so a network filesystem this list does not know
//! is not refused.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Filesystems that live on one machine's own disks or memory.
const LOCAL_TYPES: &[&str] = &[
    "ext2",
    "ext3",
    "ext4",
    "xfs",
    "btrfs",
    "zfs",
    "f2fs",
    "reiserfs",
    "jfs",
    "vfat",
    "exfat",
    "ntfs",
    "ntfs3",
    "tmpfs",
    "ramfs",
    "overlay",
    "fuse.fuse-overlayfs",
    "aufs",
    "squashfs",
    "bcachefs",
];

/// The filesystem a directory is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Storage {
    /// The mount point holding the directory (as this process sees it).
    pub mount_point: PathBuf,
    /// Its type as the kernel names it (`ext4`, `fuse.glusterfs`, `nfs4`).
    pub fs_type: String,
    /// What was mounted (`10.0.0.11:/cem`, `/dev/vda1`).
    pub source: String,
}

impl Storage {
    /// Whether the type is one known to be local to this machine.
    pub fn is_local(&self) -> bool {
        LOCAL_TYPES.contains(&self.fs_type.as_str())
    }
}

impl std::fmt::Display for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({} from {})",
            self.mount_point.display(),
            self.fs_type,
            self.source
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("cannot read the mount table /proc/self/mountinfo: {0}")]
    MountTable(std::io::Error),
    #[error("the data directory {path} cannot be read: {error}")]
    Unreadable {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("no mount holds {0} in /proc/self/mountinfo")]
    NoMount(PathBuf),
    #[error(
        "the data directory {path} is on local storage ({storage}), and --shared-data says it must be the volume every node mounts: mount the shared volume there on this node (and make the mount come up before the engine at boot), or drop --shared-data (CEM_SHARED_DATA) on a single machine"
    )]
    Local { path: PathBuf, storage: Storage },
}

/// The filesystem `dir` is on.
pub fn inspect(dir: &Path) -> Result<Storage, StorageError> {
    let real = dir
        .canonicalize()
        .map_err(|error| StorageError::Unreadable {
            path: dir.to_path_buf(),
            error,
        })?;
    let table =
        std::fs::read_to_string("/proc/self/mountinfo").map_err(StorageError::MountTable)?;
    holding_mount(&table, &real).ok_or(StorageError::NoMount(real))
}

/// With `--shared-data`: the storage, or why the server must not serve from it.
pub fn require_shared(dir: &Path) -> Result<Storage, StorageError> {
    let storage = inspect(dir)?;
    if storage.is_local() {
        return Err(StorageError::Local {
            path: dir.to_path_buf(),
            storage,
        });
    }
    Ok(storage)
}

/// How often the watch reads the data directory.
const PROBE_EVERY: Duration = Duration::from_secs(2);
/// How long one read may take before the storage counts as hung. Longer than the failure
/// detection of network filesystems (GlusterFS's `network.ping-timeout`, 42 s by default; NFS
/// retries): when a storage peer goes, every node's reads wait that long alike, and failing
/// `/health` then would take every node out of the proxy at once.
pub const STALL_LIMIT: Duration = Duration::from_secs(60);

/// The shared data directory's health for `/health`, probed in the background so that a health
/// check never waits on storage (a proxy times its checks out in a second or two).
pub struct StorageWatch {
    dir: PathBuf,
    state: std::sync::Mutex<Probe>,
}

#[derive(Default)]
struct Probe {
    /// When the read under way started.
    started: Option<std::time::Instant>,
    /// The last read's error.
    error: Option<String>,
    /// Reads finished.
    done: u64,
}

impl StorageWatch {
    /// Starts probing `dir` every [`PROBE_EVERY`] until the watch is dropped.
    pub fn start(dir: PathBuf) -> std::sync::Arc<Self> {
        let watch = std::sync::Arc::new(Self {
            dir,
            state: Default::default(),
        });
        let weak = std::sync::Arc::downgrade(&watch);
        tokio::spawn(async move {
            while let Some(watch) = weak.upgrade() {
                watch.probe().await;
                drop(watch);
                tokio::time::sleep(PROBE_EVERY).await;
            }
        });
        watch
    }

    async fn probe(&self) {
        self.lock().started = Some(std::time::Instant::now());
        let dir = self.dir.clone();
        let read = tokio::task::spawn_blocking(move || std::fs::read_dir(&dir).map(|_| ())).await;
        let mut state = self.lock();
        state.started = None;
        state.done += 1;
        state.error = match read {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(e) => Some(e.to_string()),
        };
    }

    /// `Ok` unless the last read failed or a read has hung past [`STALL_LIMIT`].
    pub fn verdict(&self) -> Result<(), String> {
        let state = self.lock();
        if let Some(started) = state.started
            && started.elapsed() > STALL_LIMIT
        {
            return Err(format!(
                "the shared data directory has not answered for {} s",
                started.elapsed().as_secs()
            ));
        }
        match &state.error {
            Some(e) => Err(format!("the shared data directory cannot be read: {e}")),
            None => Ok(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Probe> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The entry of `mountinfo` whose mount point is the longest prefix of `path` (the last one
/// listed wins among equals: it is mounted over the others).
fn holding_mount(mountinfo: &str, path: &Path) -> Option<Storage> {
    let mut best: Option<Storage> = None;
    for line in mountinfo.lines() {
        // ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER_OPTIONS
        let (left, right) = line.split_once(" - ")?;
        let mount_point = PathBuf::from(unescape(left.split(' ').nth(4)?));
        let mut right = right.split(' ');
        let (fs_type, source) = (right.next()?, right.next().unwrap_or(""));
        if !path.starts_with(&mount_point) {
            continue;
        }
        let longer = best
            .as_ref()
            .is_none_or(|b| mount_point.components().count() >= b.mount_point.components().count());
        if longer {
            best = Some(Storage {
                mount_point,
                fs_type: fs_type.to_string(),
                source: unescape(source),
            });
        }
    }
    best
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let v = bytes[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            out.push(v as u8);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
30 22 0:26 / /run rw,nosuid shared:5 - tmpfs tmpfs rw
41 22 0:40 / /srv/cem\\040data rw,relatime shared:9 - fuse.glusterfs 10.0.0.11:/cem rw,allow_other
52 41 0:41 / /srv/cem\\040data/local rw - xfs /dev/vdb rw
";

    #[test]
    fn the_longest_mount_point_holding_the_path_wins() {
        let s = holding_mount(TABLE, Path::new("/srv/cem data/tenants/alice")).unwrap();
        assert_eq!(s.fs_type, "fuse.glusterfs");
        assert_eq!(s.source, "10.0.0.11:/cem");
        assert_eq!(s.mount_point, Path::new("/srv/cem data"));
        assert!(!s.is_local());

        let s = holding_mount(TABLE, Path::new("/srv/cem data/local/x")).unwrap();
        assert_eq!(s.fs_type, "xfs");
        assert!(s.is_local());

        // A sibling whose name extends the mount point's is not under it.
        let s = holding_mount(TABLE, Path::new("/srv/cem data2")).unwrap();
        assert_eq!(s.fs_type, "ext4");
        assert_eq!(
            holding_mount(TABLE, Path::new("/run/x")).unwrap().fs_type,
            "tmpfs"
        );
    }

    #[test]
    fn a_mount_over_another_at_the_same_point_wins() {
        let table = format!("{TABLE}60 22 0:50 / /srv/cem\\040data rw - nfs4 nas:/export rw\n");
        let s = holding_mount(&table, Path::new("/srv/cem data/t")).unwrap();
        assert_eq!(s.fs_type, "nfs4");
    }

    #[test]
    fn local_storage_is_refused_with_what_to_do() {
        // The test's temp directory is on this machine's own disk (or tmpfs).
        let dir = tempfile::tempdir().unwrap();
        let storage = inspect(dir.path()).unwrap();
        assert!(storage.is_local(), "{storage}");
        let err = require_shared(dir.path()).unwrap_err().to_string();
        assert!(err.contains("local storage"), "{err}");
        assert!(err.contains("mount the shared volume"), "{err}");
        let missing = inspect(&dir.path().join("missing"))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("cannot be read"), "{missing}");
    }

    /// Waits until the watch has finished a read.
    async fn probed(watch: &StorageWatch) {
        for _ in 0..500 {
            if watch.lock().done > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the watch never finished a read");
    }

    #[tokio::test]
    async fn the_watch_reports_a_directory_that_cannot_be_read() {
        let dir = tempfile::tempdir().unwrap();
        let watch = StorageWatch::start(dir.path().to_path_buf());
        probed(&watch).await;
        assert_eq!(watch.verdict(), Ok(()));
        let gone = StorageWatch::start(dir.path().join("gone"));
        probed(&gone).await;
        let err = gone.verdict().unwrap_err();
        assert!(err.contains("cannot be read"), "{err}");
        // A read under way for longer than the limit is a hung mount.
        gone.lock().started =
            Some(std::time::Instant::now() - STALL_LIMIT - Duration::from_secs(1));
        assert!(gone.verdict().unwrap_err().contains("has not answered"));
    }
}
