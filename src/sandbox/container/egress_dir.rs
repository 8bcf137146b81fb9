//! Each container's egress directory: a host directory mounted read-only at [`EGRESS_MOUNT`],
//! holding the certificate of the server's egress authority (`ca.pem`) and, while an execution
//! runs in the container, the socket of that execution's proxy (`proxy.sock`).
//!
//! The sandbox has no network: the socket is its only way out, and it exists only while the
//! execution that may use it runs (`run::egress` binds it at hand-over and removes it after),
//! so a pooled container waiting for a job reaches nothing, and no container reaches another's
//! proxy (each sees its own directory alone). A socket on a read-only mount still connects:
//! the kernel checks write permission on the socket file, not the mount.
//!
//! The directories live on local disk (`--egress-socket-dir`), never on the shared data
//! volume: a Unix socket is one kernel's object. They are laid out as the state directories
//! are (`<root>/<instance id>/<container>`, an `owner` file per instance), and reaped the same
//! way.

use std::path::PathBuf;
use std::sync::Arc;

use super::state_dir::{StateDir, StateDirs};

/// Where a container's egress directory appears.
pub const EGRESS_MOUNT: &str = "/mnt/egress";
/// The proxy's socket in it.
pub const SOCKET: &str = "proxy.sock";
/// The egress authority's certificate in it: the sandbox's only trusted root.
pub const CA_FILE: &str = "ca.pem";

/// Where a server's containers' egress directories are made, and the certificate they hold.
#[derive(Debug, Clone)]
pub struct EgressDirs {
    pub dirs: StateDirs,
    pub ca_pem: Arc<str>,
}

/// One container's egress directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressDir {
    pub dir: StateDir,
    pub ca_pem: Arc<str>,
}

impl EgressDirs {
    pub fn for_container(&self, name: &str) -> EgressDir {
        EgressDir {
            dir: self.dirs.for_container(name),
            ca_pem: self.ca_pem.clone(),
        }
    }
}

impl EgressDir {
    /// Makes the directory (readable by the tenant's group alone when it has one) with the
    /// authority's certificate in it.
    pub fn create(&self) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        self.dir.create()?;
        let ca = self.dir.host.join(CA_FILE);
        std::fs::write(&ca, self.ca_pem.as_bytes())?;
        std::fs::set_permissions(&ca, std::fs::Permissions::from_mode(0o644))
    }

    /// The directory on the host.
    pub fn host(&self) -> &PathBuf {
        &self.dir.host
    }
}
