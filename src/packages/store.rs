//! The cache on disk, under `<data>/packages/`:
//!
//! ```text
//! sets/<set>/        an installed set, named by its content (mounted read-only into every
//!                    sandbox at /mnt/packages; mode 0711, so a sandbox can enter a set whose
//!                    name it was given but cannot list the others)
//! meta/<set>.json    what it holds (the resolved wheels with their sha256, size); its mtime is
//!                    the set's last use
//! requests/<key>     the set a request resolved to (key: image, source, requirements)
//! staging/<random>/  installs in progress; what a crash left is removed at open
//! ```
//!
//! A set appears under `sets/` by one rename, after its check, so a sandbox never sees half of
//! one; it leaves the same way (renamed into staging, then removed).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::Resolved;

/// What a set holds, as written to `meta/<set>.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SetMeta {
    pub set: String,
    pub resolved: Vec<Resolved>,
    pub bytes: u64,
    pub files: u64,
    /// The distributions of the set that the image has too, in another version.
    #[serde(default)]
    pub replaces: Vec<String>,
}

/// One set of the cache, for eviction.
#[derive(Debug, Clone)]
pub struct CachedSet {
    pub set: String,
    pub bytes: u64,
    pub last_used: SystemTime,
}

pub struct Store {
    root: PathBuf,
}

fn io(what: &str, path: &Path, e: std::io::Error) -> String {
    format!("{what} {}: {e}", path.display())
}

/// A set or request name: lower-case hex only (they become file names).
pub fn valid_name(name: &str) -> bool {
    (16..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

impl Store {
    /// Opens (making it when missing) the cache at `root`, and removes unfinished installs.
    pub fn open(root: &Path) -> Result<Self, String> {
        for (dir, mode) in [
            ("", 0o755),
            ("sets", 0o711),
            ("meta", 0o700),
            ("requests", 0o700),
            ("staging", 0o711),
        ] {
            let path = root.join(dir);
            std::fs::create_dir_all(&path).map_err(|e| io("cannot make", &path, e))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                .map_err(|e| io("cannot set the mode of", &path, e))?;
        }
        let store = Self {
            root: root.to_path_buf(),
        };
        if let Ok(entries) = std::fs::read_dir(store.root.join("staging")) {
            for entry in entries.flatten() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        Ok(store)
    }

    /// The directory every sandbox mounts read-only.
    pub fn sets_dir(&self) -> PathBuf {
        self.root.join("sets")
    }

    /// The set a request resolved to, if it is still in the cache.
    pub fn lookup(&self, key: &str) -> Option<SetMeta> {
        let set = std::fs::read_to_string(self.root.join("requests").join(key)).ok()?;
        let set = set.trim();
        if !valid_name(set) || !self.sets_dir().join(set).is_dir() {
            return None;
        }
        self.meta(set)
    }

    fn meta(&self, set: &str) -> Option<SetMeta> {
        let text = std::fs::read(self.root.join("meta").join(format!("{set}.json"))).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// A new, empty staging directory, writable by the installer container's user.
    pub fn new_staging(&self) -> Result<PathBuf, String> {
        let name = uuid::Uuid::new_v4().simple().to_string();
        let path = self.root.join("staging").join(name);
        std::fs::create_dir(&path).map_err(|e| io("cannot make", &path, e))?;
        // The installer runs as a user of its own; the directory's parent is not listable.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777))
            .map_err(|e| io("cannot set the mode of", &path, e))?;
        Ok(path)
    }

    /// Puts a checked staging directory in the cache as `meta.set` (a set of the same name
    /// already there is kept, the staging directory removed), and remembers the request.
    pub fn commit(&self, staging: &Path, meta: &SetMeta, key: &str) -> Result<(), String> {
        let target = self.sets_dir().join(&meta.set);
        std::fs::set_permissions(staging, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| io("cannot set the mode of", staging, e))?;
        if target.exists() {
            let _ = std::fs::remove_dir_all(staging);
        } else {
            std::fs::rename(staging, &target).map_err(|e| io("cannot move in", &target, e))?;
        }
        write_atomically(
            &self.root.join("meta").join(format!("{}.json", meta.set)),
            &serde_json::to_vec(meta).unwrap_or_default(),
        )?;
        write_atomically(&self.root.join("requests").join(key), meta.set.as_bytes())
    }

    /// Marks a set used now (its meta file's mtime).
    pub fn touch(&self, set: &str) {
        let path = self.root.join("meta").join(format!("{set}.json"));
        if let Ok(file) = std::fs::File::options().append(true).open(path) {
            let _ = file.set_modified(SystemTime::now());
        }
    }

    /// Every set in the cache with its size and last use.
    pub fn sets(&self) -> Vec<CachedSet> {
        let Ok(entries) = std::fs::read_dir(self.root.join("meta")) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                let set = name.strip_suffix(".json")?.to_string();
                let last_used = entry.metadata().ok()?.modified().ok()?;
                let meta = self.meta(&set)?;
                Some(CachedSet {
                    set,
                    bytes: meta.bytes,
                    last_used,
                })
            })
            .collect()
    }

    /// Takes a set out of the cache: out of `sets/` in one rename, then removed.
    pub fn remove(&self, set: &str) {
        let _ = std::fs::remove_file(self.root.join("meta").join(format!("{set}.json")));
        let gone = self.root.join("staging").join(format!("evicted-{set}"));
        if std::fs::rename(self.sets_dir().join(set), &gone).is_ok() {
            let _ = std::fs::remove_dir_all(gone);
        }
    }

    /// Removes an install that did not finish.
    pub fn discard(&self, staging: &Path) {
        let _ = std::fs::remove_dir_all(staging);
    }
}

fn write_atomically(path: &Path, data: &[u8]) -> Result<(), String> {
    let tmp = path.with_extension(format!("tmp-{}", uuid::Uuid::new_v4().simple()));
    std::fs::write(&tmp, data).map_err(|e| io("cannot write", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io("cannot write", path, e))
}
