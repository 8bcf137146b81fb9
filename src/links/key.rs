//! The key links are signed with: a file of at least [`MIN_KEY_BYTES`] bytes (its whole
//! content is the HMAC key), made at the first start when missing. The default file lives in
//! the data directory, which every node of a swarm mounts, so all nodes sign and check with
//! one key; the first node to start makes it (created under a temp name and linked into
//! place, so another node never reads half of it), the others read it.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use ring::hmac;

/// The shortest key accepted.
pub const MIN_KEY_BYTES: usize = 32;
/// The longest key file read.
const MAX_KEY_BYTES: u64 = 4096;

/// An HMAC-SHA256 key.
pub struct LinkKey(hmac::Key);

impl std::fmt::Debug for LinkKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LinkKey(…)")
    }
}

/// Why the key could not be had.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "the links key file {} holds {len} bytes, fewer than {MIN_KEY_BYTES}: write at least {MIN_KEY_BYTES} random bytes into it (e.g. `head -c 32 /dev/urandom > FILE`), or remove it to have one made",
        path.display()
    )]
    TooShort { path: PathBuf, len: usize },
    #[error(
        "the links key file {} is larger than {MAX_KEY_BYTES} bytes: it should hold 32 to 4096 random bytes",
        path.display()
    )]
    TooLong { path: PathBuf },
    #[error("cannot {what} the links key file {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

impl LinkKey {
    /// A key of `bytes` (at least [`MIN_KEY_BYTES`]).
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        (bytes.len() >= MIN_KEY_BYTES).then(|| Self(hmac::Key::new(hmac::HMAC_SHA256, bytes)))
    }

    /// The key in `path`, made (32 random bytes, mode 0600) when there is none.
    pub fn load_or_create(path: &Path) -> Result<Self, KeyError> {
        let io = |what, source| KeyError::Io {
            what,
            path: path.to_path_buf(),
            source,
        };
        match std::fs::File::open(path) {
            Ok(file) => return Self::read(path, file),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("open", e)),
        }
        if let Some(dir) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| io("make the directory of", e))?;
        }
        let mut bytes = [0u8; MIN_KEY_BYTES];
        getrandom::fill(&mut bytes).expect("the system's random source works");
        // Random, not the pid: the servers of a swarm's nodes may all be pid 1.
        let mut suffix = [0u8; 8];
        getrandom::fill(&mut suffix).expect("the system's random source works");
        let temp = path.with_extension(format!("tmp-{}", hex::encode(suffix)));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .map_err(|e| io("write", e))?;
        let written = (|| {
            file.write_all(&bytes)?;
            file.sync_all()?;
            // Fails when another node made it first: then theirs is the key.
            match std::fs::hard_link(&temp, path) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
                _ => Ok(()),
            }
        })();
        let _ = std::fs::remove_file(&temp);
        written.map_err(|e| io("write", e))?;
        let file = std::fs::File::open(path).map_err(|e| io("open", e))?;
        Self::read(path, file)
    }

    fn read(path: &Path, file: std::fs::File) -> Result<Self, KeyError> {
        let meta = file.metadata().map_err(|source| KeyError::Io {
            what: "read",
            path: path.to_path_buf(),
            source,
        })?;
        crate::host::safe_fs::warn_if_readable_by_all(path, &meta, "the links key file");
        let bytes =
            crate::host::safe_fs::read_bounded(file, MAX_KEY_BYTES, 64).map_err(|source| {
                KeyError::Io {
                    what: "read",
                    path: path.to_path_buf(),
                    source,
                }
            })?;
        if bytes.len() as u64 > MAX_KEY_BYTES {
            return Err(KeyError::TooLong {
                path: path.to_path_buf(),
            });
        }
        Self::from_bytes(&bytes).ok_or(KeyError::TooShort {
            path: path.to_path_buf(),
            len: bytes.len(),
        })
    }

    /// The MAC of the concatenation of `parts`.
    pub fn sign(&self, parts: &[&[u8]]) -> Vec<u8> {
        let mut ctx = hmac::Context::with_key(&self.0);
        for part in parts {
            ctx.update(part);
        }
        ctx.sign().as_ref().to_vec()
    }

    /// Whether `tag` is the MAC of `parts`, compared in constant time.
    pub fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        let data: Vec<u8> = parts.concat();
        hmac::verify(&self.0, &data, tag).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_made_once_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("links/key");
        let a = LinkKey::load_or_create(&path).unwrap();
        let b = LinkKey::load_or_create(&path).unwrap();
        let tag = a.sign(&[b"x", b"y"]);
        assert!(b.verify(&[b"xy"], &tag));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );
    }

    #[test]
    fn a_short_key_file_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, b"short").unwrap();
        let e = LinkKey::load_or_create(&path).unwrap_err().to_string();
        assert!(e.contains("fewer than 32") && e.contains("urandom"), "{e}");
    }
}
