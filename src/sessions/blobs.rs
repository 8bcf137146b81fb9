//! One tenant's blobs: each variable's bytes as a sandbox sent them, stored once under the
//! sha256 the server computes (never the one the harness claims), shared by every revision and
//! fork that holds them.
//!
//! A blob is written to a temp file and stays there, staged, until its snapshot commits: then it
//! is renamed to its name (or dropped, when a blob of those bytes exists already), so a name
//! always means those bytes and a snapshot that is refused or never arrives whole leaves
//! nothing behind. Placing a snapshot's blobs and writing its manifest happen under the
//! tenant's lock ([`Blobs::lock`]), which [`Blobs::sweep`] holds too: a sweep never removes a
//! blob a manifest is about to name. The sweep removes the blobs no revision names, a little
//! after their last write (a restore may be linking them), and temp files a crashed server
//! left. Blobs are read-only to the tenant's group (or everyone, without one): they are
//! hard-linked into containers' state directories, whose mount is read-only.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use sha2::Digest;

/// Blobs no revision names are kept this long after their last write.
pub const SWEEP_GRACE: Duration = Duration::from_secs(120);
/// A temp file this old is a crashed server's (a snapshot takes at most minutes to arrive).
const TEMP_GRACE: Duration = Duration::from_secs(3600);

/// Whether `name` has the shape of a blob's name (64 lowercase hex digits).
pub fn valid_blob(name: &str) -> bool {
    name.len() == 64
        && name
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The blobs directory of one tenant. Clones share its lock.
#[derive(Debug, Clone)]
pub struct Blobs {
    dir: PathBuf,
    reader_gid: Option<u32>,
    lock: Arc<Mutex<()>>,
}

impl Blobs {
    pub fn new(dir: PathBuf, reader_gid: Option<u32>) -> Self {
        Self {
            dir,
            reader_gid,
            lock: Arc::default(),
        }
    }

    /// Held while a snapshot's blobs are placed and its manifest written, and while a sweep
    /// runs.
    pub fn lock(&self) -> MutexGuard<'_, ()> {
        self.lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The file of blob `name` (checked to be a blob's name first).
    pub fn path(&self, name: &str) -> Option<PathBuf> {
        valid_blob(name).then(|| self.dir.join(name))
    }

    /// A writer for a new blob of `bytes` bytes.
    pub fn writer(&self, bytes: u64) -> std::io::Result<BlobWriter> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let tmp = self.dir.join(crate::host::safe_fs::temp_name(".blob-"));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        let mode = if let Some(gid) = self.reader_gid {
            std::os::unix::fs::fchown(&file, None, Some(gid))?;
            0o640
        } else {
            0o644
        };
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        Ok(BlobWriter {
            file: Some(std::io::BufWriter::with_capacity(1 << 20, file)),
            tmp,
            dir: self.dir.clone(),
            hash: sha2::Sha256::new(),
            left: bytes,
            bytes,
        })
    }

    /// Removes the blobs not in `kept` and older than `grace`, and old temp files; returns
    /// how many. The caller holds [`Blobs::lock`].
    pub fn sweep(&self, kept: &HashSet<String>, grace: Duration) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let now = SystemTime::now();
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let age = (entry.metadata().and_then(|m| m.modified()))
                .map(|t| now.duration_since(t).unwrap_or_default());
            let gone = if valid_blob(&name) {
                !kept.contains(&name) && age.is_ok_and(|a| a >= grace)
            } else {
                name.starts_with(".blob-") && age.is_ok_and(|a| a >= TEMP_GRACE)
            };
            if gone && std::fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
        removed
    }
}

/// A whole blob, staged in its temp file until its snapshot commits ([`Staged::place`]);
/// dropped unplaced, it is removed.
#[derive(Debug)]
pub struct Staged {
    pub name: String,
    pub bytes: u64,
    tmp: Option<PathBuf>,
    dir: PathBuf,
}

impl Staged {
    /// Gives the blob its name (kept as it is, its time refreshed, when one of those bytes is
    /// there already). The caller holds [`Blobs::lock`].
    pub fn place(mut self) -> std::io::Result<()> {
        let tmp = self.tmp.take().expect("staged until placed");
        let target = self.dir.join(&self.name);
        if target.exists() {
            let _ = std::fs::remove_file(&tmp);
            touch(&target)
        } else {
            std::fs::rename(&tmp, &target)
        }
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// One blob being written; its name is the sha256 of what was written.
#[derive(Debug)]
pub struct BlobWriter {
    file: Option<std::io::BufWriter<std::fs::File>>,
    tmp: PathBuf,
    dir: PathBuf,
    hash: sha2::Sha256,
    /// Bytes still expected, of `bytes`.
    left: u64,
    bytes: u64,
}

impl BlobWriter {
    pub fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if bytes.len() as u64 > self.left {
            return Err(std::io::Error::other("a blob ran past its announced size"));
        }
        self.left -= bytes.len() as u64;
        self.hash.update(bytes);
        self.file.as_mut().expect("open").write_all(bytes)
    }

    /// The blob, staged, once all its bytes arrived.
    pub fn finish(mut self) -> std::io::Result<Staged> {
        if self.left != 0 {
            return Err(std::io::Error::other(format!(
                "a blob ended {} bytes short",
                self.left
            )));
        }
        let name = hex::encode(std::mem::take(&mut self.hash).finalize());
        let file = self.file.take().expect("open");
        let file = file.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        drop(file);
        Ok(Staged {
            name,
            bytes: self.bytes,
            tmp: Some(std::mem::take(&mut self.tmp)),
            dir: self.dir.clone(),
        })
    }
}

/// Sets a file's modification time to now.
pub fn touch(path: &Path) -> std::io::Result<()> {
    std::fs::File::options()
        .append(true)
        .open(path)?
        .set_modified(SystemTime::now())
}

impl Drop for BlobWriter {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(blobs: &Blobs, bytes: &[u8]) -> String {
        let mut w = blobs.writer(bytes.len() as u64).unwrap();
        w.write(bytes).unwrap();
        let staged = w.finish().unwrap();
        let name = staged.name.clone();
        staged.place().unwrap();
        name
    }

    #[test]
    fn a_blob_is_named_by_its_sha256_and_stored_once() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = Blobs::new(dir.path().join("blobs"), None);
        let a = write(&blobs, b"hello");
        assert_eq!(
            a,
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert_eq!(write(&blobs, b"hello"), a);
        assert_eq!(
            std::fs::read_dir(dir.path().join("blobs")).unwrap().count(),
            1
        );
        assert_eq!(std::fs::read(blobs.path(&a).unwrap()).unwrap(), b"hello");
        assert_eq!(blobs.path("../x"), None);
    }

    #[test]
    fn a_short_or_long_blob_is_refused_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = Blobs::new(dir.path().join("blobs"), None);
        let mut w = blobs.writer(3).unwrap();
        assert!(w.write(b"abcd").is_err());
        w.write(b"ab").unwrap();
        assert!(
            w.finish()
                .unwrap_err()
                .to_string()
                .contains("1 bytes short")
        );
        let mut w = blobs.writer(3).unwrap();
        w.write(b"a").unwrap();
        drop(w);
        // Whole but never placed (its snapshot was refused): nothing is left either.
        let mut w = blobs.writer(1).unwrap();
        w.write(b"a").unwrap();
        drop(w.finish().unwrap());
        assert_eq!(
            std::fs::read_dir(dir.path().join("blobs")).unwrap().count(),
            0
        );
    }

    #[test]
    fn a_sweep_removes_unnamed_blobs_past_the_grace_only() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = Blobs::new(dir.path().join("blobs"), None);
        let (a, b) = (write(&blobs, b"a"), write(&blobs, b"b"));
        assert_eq!(blobs.sweep(&HashSet::new(), Duration::from_secs(60)), 0);
        let kept = HashSet::from([a.clone()]);
        assert_eq!(blobs.sweep(&kept, Duration::ZERO), 1);
        assert!(blobs.path(&a).unwrap().exists());
        assert!(!blobs.path(&b).unwrap().exists());
    }
}
