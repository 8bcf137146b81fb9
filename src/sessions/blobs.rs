//! One tenant's blobs: each variable's bytes as a sandbox sent them, stored once under the
//! sha256 the server computes (never the one the harness claims), shared by every revision and
//! fork that holds them.
//!
//! A blob is written to a temp file and renamed to its name when whole, so a name always means
//! those bytes; a blob that exists already is kept and its time refreshed. Blobs no revision
//! names are removed by [`Blobs::sweep`], except those younger than a grace period: a snapshot
//! being received has written its blobs but not yet its manifest. Blobs are read-only to the
//! tenant's group (or everyone, without one): they are hard-linked into containers' state
//! directories, whose mount is read-only.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::Digest;

/// Blobs no revision names are kept this long after their last write.
pub const SWEEP_GRACE: Duration = Duration::from_secs(120);

/// Whether `name` has the shape of a blob's name (64 lowercase hex digits).
pub fn valid_blob(name: &str) -> bool {
    name.len() == 64
        && name
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The blobs directory of one tenant.
#[derive(Debug, Clone)]
pub struct Blobs {
    dir: PathBuf,
    reader_gid: Option<u32>,
}

impl Blobs {
    pub fn new(dir: PathBuf, reader_gid: Option<u32>) -> Self {
        Self { dir, reader_gid }
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
        })
    }

    /// Removes the blobs not in `kept` and older than `grace`; returns how many.
    pub fn sweep(&self, kept: &HashSet<String>, grace: Duration) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let now = SystemTime::now();
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| now.duration_since(t).unwrap_or_default() >= grace);
            // Temp files of a writer that died are swept the same way.
            let named = valid_blob(&name) || name.starts_with(".blob-");
            if named && old && !kept.contains(&name) && std::fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
        removed
    }
}

/// One blob being written; its name is the sha256 of what was written.
#[derive(Debug)]
pub struct BlobWriter {
    file: Option<std::io::BufWriter<std::fs::File>>,
    tmp: PathBuf,
    dir: PathBuf,
    hash: sha2::Sha256,
    /// Bytes still expected.
    left: u64,
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

    /// Stores the blob under its name once all its bytes arrived; returns the name.
    pub fn finish(mut self) -> std::io::Result<String> {
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
        let target = self.dir.join(&name);
        if target.exists() {
            // The same bytes are there: keep them, and keep them from a sweep for a while.
            let _ = std::fs::remove_file(&self.tmp);
            touch(&target)?;
        } else {
            std::fs::rename(&self.tmp, &target)?;
        }
        Ok(name)
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
        w.finish().unwrap()
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
