//! The seccomp profile as a file, for engines that take `seccomp=<path>` only.
//!
//! Docker accepts the profile's JSON inline in `HostConfig.SecurityOpt` (what the Docker CLI
//! sends). Podman's Docker-compatible API opens that value as a path and fails the create with
//! "file name too long" (podman#27710), so against Podman the server writes the profile into its
//! data directory once at start and names the file. The engine reads it at create time and keeps
//! its own copy in the container's spec; the name carries the profile's hash, so servers of
//! different versions sharing a data directory never swap profiles under each other.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use rustix::fs::{self as rfs, Mode, OFlags};
use sha2::{Digest, Sha256};

use crate::host::safe_fs::{AtomicWriteError, temp_name, write_atomic};
use crate::sandbox::container::runtime::RuntimeKind;
use crate::sandbox::container::spec::Seccomp;

/// The directory under the data directory that holds the profile. No sandbox mounts it.
pub const DIR_NAME: &str = "engine";

/// The file name of `profile`: its sha256, so a changed profile (or another runtime's) gets a
/// file of its own.
pub fn file_name(profile: &str) -> String {
    let digest = hex::encode(Sha256::digest(profile.as_bytes()));
    format!("seccomp-{}.json", &digest[..16])
}

/// How the profile for `runtime` reaches an engine of `kind` ([`crate::sandbox::EngineInfo::kind`]):
/// inline for Docker; for Podman, written into `dir` and named by its path as this process sees
/// it (a server in a container translates it for the engine like any mount).
pub fn for_engine(kind: &str, runtime: RuntimeKind, dir: &Path) -> std::io::Result<Seccomp> {
    if kind == "Podman" {
        Ok(Seccomp::File(write(dir, runtime.seccomp_profile())?))
    } else {
        Ok(Seccomp::Inline)
    }
}

/// Writes `profile` into `dir` (created, mode 0755: a rootless engine reads it as the same
/// user, a rootful one as root) atomically, mode 0644, and returns the file's path.
pub fn write(dir: &Path, profile: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)?;
    let fd = rfs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let name = file_name(profile);
    write_atomic(
        fd.as_fd(),
        &name,
        profile.as_bytes(),
        Mode::from(0o644),
        || temp_name(".seccomp-"),
        |_| Ok(()),
    )
    .map_err(|e| match e {
        AtomicWriteError::CreateTemp(errno) | AtomicWriteError::Rename(errno) => errno.into(),
        AtomicWriteError::Write(e) => e,
    })?;
    Ok(dir.join(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn writes_the_profile_readable_by_the_engine_and_replaces_a_planted_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "keep").unwrap();
        let engine_dir = dir.path().join(DIR_NAME);
        std::fs::create_dir(&engine_dir).unwrap();
        let profile = RuntimeKind::Native.seccomp_profile();
        std::os::unix::fs::symlink(&target, engine_dir.join(file_name(profile))).unwrap();

        let path = write(&engine_dir, profile).unwrap();
        assert_eq!(path, engine_dir.join(file_name(profile)));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), profile);
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o644);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        // Twice is fine: the same name, the same content.
        assert_eq!(write(&engine_dir, profile).unwrap(), path);
        // gVisor's variant is a file of its own beside it.
        let gvisor = write(&engine_dir, RuntimeKind::Gvisor.seccomp_profile()).unwrap();
        assert_ne!(gvisor, path);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), profile);
    }
}
