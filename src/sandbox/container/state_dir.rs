//! Each container's own state directory: an empty host directory mounted read-only at
//! [`crate::sandbox::container::spec::STATE_MOUNT`], into which a session's blobs are
//! hard-linked when the container is given that session's state.
//!
//! Why a directory per container rather than the snapshot mounted into a container made for
//! it: the mount is in place before anyone knows which session the container will serve, so a
//! pooled container takes any session's state at once, without a copy and without a container
//! start. The container sees its own directory alone, read-only; links made after its start
//! appear in it (a bind mount shows its directory's entries as they are).
//!
//! The directories of one server are under `<root>/<instance id>/`, with an `owner` file naming
//! the server process (the containers' owner label); a server that starts removes the
//! directories of owners on its host that are gone (`cleanup::reaper::reap_state_dirs`), as the
//! reaper removes their containers.

use std::path::{Path, PathBuf};

/// The file in an instance's directory that names its owner.
pub const OWNER: &str = "owner";

/// Where a server's containers' state directories are made.
#[derive(Debug, Clone)]
pub struct StateDirs {
    /// `<root>/<instance id>` on the host.
    pub host: PathBuf,
    /// The same directory as the engine names it.
    pub engine: PathBuf,
    /// The group that alone may read the directories (the tenant's own), if any.
    pub gid: Option<u32>,
}

/// One container's state directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDir {
    pub host: PathBuf,
    pub engine: PathBuf,
    pub gid: Option<u32>,
}

impl StateDirs {
    /// The state directories of server instance `instance` under `root` (on the host) and
    /// `engine_root` (as the engine names it): the instance's directory is made now, with its
    /// owner noted.
    pub fn open(
        root: &Path,
        engine_root: &Path,
        instance: &str,
        owner: &str,
        gid: Option<u32>,
    ) -> std::io::Result<Self> {
        let host = root.join(instance);
        std::fs::create_dir_all(&host)?;
        std::fs::write(host.join(OWNER), owner)?;
        Ok(Self {
            host,
            engine: engine_root.join(instance),
            gid,
        })
    }

    /// The directory of container `name`.
    pub fn for_container(&self, name: &str) -> StateDir {
        StateDir {
            host: self.host.join(name),
            engine: self.engine.join(name),
            gid: self.gid,
        }
    }
}

impl StateDir {
    /// Makes the empty directory: readable by the tenant's group alone when it has one.
    pub fn create(&self) -> std::io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let mode = if self.gid.is_some() { 0o750 } else { 0o755 };
        std::fs::DirBuilder::new().mode(mode).create(&self.host)?;
        if let Some(gid) = self.gid {
            std::os::unix::fs::chown(&self.host, None, Some(gid))?;
        }
        std::fs::set_permissions(&self.host, std::fs::Permissions::from_mode(mode))
    }
}

/// Removes a container's directory (its links only: the blobs stay in their store).
pub fn remove(host: &Path) {
    if let Err(e) = std::fs::remove_dir_all(host)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(
            "could not remove the state directory {}: {e}",
            host.display()
        );
    }
}
