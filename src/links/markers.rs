//! Single use: a spent link is a file `used/EXPIRES-ID` in the tenant's links directory,
//! created with `O_CREAT | O_EXCL`, so exactly one commit (or complete download) of a link
//! creates it, on whichever node of a swarm (they share the tenant's volume). The expiry in
//! the name lets [`Markers::sweep`] remove the markers of links that expired, which can no
//! longer be used anyway.

use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;

use super::{Link, now_secs};

/// One tenant's markers.
#[derive(Debug, Clone)]
pub struct Markers {
    dir: PathBuf,
}

impl Markers {
    /// The markers under a tenant's links directory.
    pub fn new(links_dir: PathBuf) -> Self {
        Self {
            dir: links_dir.join("used"),
        }
    }

    fn path(&self, link: &Link) -> PathBuf {
        // The id was checked to be 32 hex digits when the token opened: a plain name.
        debug_assert!(link.id_is_valid());
        self.dir.join(format!("{}-{}", link.expires, link.id))
    }

    /// Whether `link` was spent.
    pub fn is_used(&self, link: &Link) -> bool {
        std::fs::symlink_metadata(self.path(link)).is_ok()
    }

    /// Spends `link`: `Ok(true)` when this call did, `Ok(false)` when it was spent already.
    pub fn spend(&self, link: &Link) -> std::io::Result<bool> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(self.path(link));
        match created {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Makes `link` usable again (its commit failed after it was spent).
    pub fn unspend(&self, link: &Link) {
        let _ = std::fs::remove_file(self.path(link));
    }

    /// Removes the markers of links that expired; returns how many.
    pub fn sweep(&self) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let now = now_secs();
        let mut removed = 0;
        for entry in entries.flatten().take(100_000) {
            let name = entry.file_name();
            let expired = name
                .to_str()
                .and_then(|n| n.split_once('-'))
                .and_then(|(expires, _)| expires.parse::<u64>().ok())
                .is_some_and(|expires| expires <= now);
            if expired && std::fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::links::Kind;

    #[test]
    fn a_link_is_spent_once_and_its_marker_swept_after_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let markers = Markers::new(dir.path().to_path_buf());
        let link = Link::new(Kind::Upload, None, Duration::from_secs(60));
        assert!(!markers.is_used(&link));
        assert!(markers.spend(&link).unwrap());
        assert!(!markers.spend(&link).unwrap());
        assert!(markers.is_used(&link));
        assert_eq!(markers.sweep(), 0);
        markers.unspend(&link);
        assert!(!markers.is_used(&link));
        let old = Link {
            expires: 1,
            ..link.clone()
        };
        assert!(markers.spend(&old).unwrap());
        assert_eq!(markers.sweep(), 1);
    }
}
