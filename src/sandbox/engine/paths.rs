//! Paths as the Docker engine sees them. A server running in a container (compose.yaml) drives
//! the host's engine through its socket, and the engine resolves a bind mount's source on the
//! host, not in the server's container: `/data/tenants/a/workspace` in the server is some other
//! path on the host. So at start the server finds its own container (its id appears in
//! `/proc/self/mountinfo`), asks the engine for that container's mounts, and translates each
//! directory it hands to sandboxes through the bind mount that holds it. A directory on no mount
//! lives in the server container's own filesystem, and one on a named volume lives under the
//! engine's data root, where the engine refuses private bind mounts: either fails the start
//! with what to mount instead.
//!
//! Outside a container (or in one the engine does not know, e.g. with a remote engine) paths
//! pass unchanged.

use crate::host::runtime_leftovers::is_container_id;
use std::path::{Path, PathBuf};

use crate::sandbox::engine::docker::{ContainerMount, MountKind};
use crate::sandbox::{Engine, EngineError};

#[derive(Debug, thiserror::Error)]
pub enum HostPathError {
    #[error(
        "{path} is inside the server container's own filesystem (container {container}), which the Docker engine cannot mount into sandboxes: mount a volume or host directory at it or at a parent (compose.yaml mounts one at /data), or point --data-dir there"
    )]
    NotOnAMount { path: PathBuf, container: String },
    #[error(
        "{path} is on the Docker volume mounted at {mount} in the server's container; the engine refuses to bind directories of volumes (they live under its data root) into sandboxes: mount a host directory at {mount} instead (compose.yaml mounts CEM_DATA_HOST_DIR, by default /var/lib/code-execution-mcp, at /data)"
    )]
    OnAVolume { path: PathBuf, mount: PathBuf },
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// How paths of this process map to paths of the engine's host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPaths {
    /// The server shares the engine's filesystem view.
    Same,
    /// The server runs in container `container`, with these mounts.
    InContainer {
        container: String,
        mounts: Vec<ContainerMount>,
    },
}

impl HostPaths {
    /// Finds out whether this process runs in a container of `engine`, and that container's
    /// mounts.
    pub async fn detect(engine: &Engine) -> Result<Self, HostPathError> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let Some(id) = own_container_id(&mountinfo, &cgroup) else {
            return Ok(Self::Same);
        };
        let Some(mounts) = engine.container_mounts(&id).await? else {
            tracing::warn!(
                "this server runs in container {id}, which the Docker engine does not know (a remote or nested engine?): directories are handed to it unchanged"
            );
            return Ok(Self::Same);
        };
        tracing::info!(
            "running in container {}: sandbox mounts are translated through its {} mounts",
            &id[..12],
            mounts.len()
        );
        Ok(Self::InContainer {
            container: id,
            mounts,
        })
    }

    /// `path` (absolute, canonical, of this process) as the engine's host names it.
    pub fn to_engine(&self, path: &Path) -> Result<PathBuf, HostPathError> {
        let Self::InContainer { container, mounts } = self else {
            return Ok(path.to_owned());
        };
        let mount = mounts
            .iter()
            .filter_map(|m| Some((m, path.strip_prefix(&m.destination).ok()?)))
            .max_by_key(|(m, _)| m.destination.components().count());
        let not_on_a_mount = || HostPathError::NotOnAMount {
            path: path.to_owned(),
            container: container[..12.min(container.len())].to_string(),
        };
        match mount {
            Some((m, rest)) if m.kind == MountKind::Bind && m.source.is_absolute() => {
                Ok(m.source.join(rest))
            }
            Some((m, _)) if m.kind == MountKind::Volume => Err(HostPathError::OnAVolume {
                path: path.to_owned(),
                mount: m.destination.clone(),
            }),
            // On a tmpfs (or such) of the container, or on none: nothing the engine can bind.
            _ => Err(not_on_a_mount()),
        }
    }
}

/// The id of the container this process runs in: the engine bind-mounts the container's
/// `hostname`, `hosts` and `resolv.conf` from `…/containers/<id>/` (Docker) or
/// `…/overlay-containers/<id>/userdata/` (Podman), which `mountinfo` shows under cgroup v1 and
/// v2 alike; cgroup v1 also names it in `/proc/self/cgroup`.
pub fn own_container_id(mountinfo: &str, cgroup: &str) -> Option<String> {
    let from_mounts = mountinfo.lines().find_map(|line| {
        let root = line.split(' ').nth(3)?;
        let segments: Vec<&str> = root.split('/').collect();
        segments.windows(2).find_map(|w| {
            (matches!(w[0], "containers" | "overlay-containers") && is_container_id(w[1]))
                .then(|| w[1].to_string())
        })
    });
    from_mounts.or_else(|| {
        cgroup.lines().find_map(|line| {
            let path = line.rsplit(':').next()?;
            let last = path.rsplit('/').next()?;
            let id = last
                .strip_prefix("docker-")
                .and_then(|s| s.strip_suffix(".scope"))
                .unwrap_or(last);
            (path.contains("docker") && is_container_id(id)).then(|| id.to_string())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f1c0f8e9a6b4d2c1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d";

    #[test]
    fn finds_the_container_id_in_mountinfo_and_cgroup() {
        let mountinfo = format!(
            "600 500 0:50 / / rw,relatime - overlay overlay rw\n\
             612 600 254:1 /var/lib/docker/containers/{ID}/resolv.conf /etc/resolv.conf rw - ext4 /dev/vda1 rw\n"
        );
        assert_eq!(own_container_id(&mountinfo, "0::/"), Some(ID.to_string()));
        let podman = format!(
            "600 500 0:50 / / rw,relatime - overlay overlay rw\n\
             613 600 254:1 /var/lib/containers/storage/overlay-containers/{ID}/userdata/hostname /etc/hostname rw - ext4 /dev/vda1 rw\n"
        );
        assert_eq!(own_container_id(&podman, "0::/"), Some(ID.to_string()));
        let v1 = format!("12:memory:/docker/{ID}\n0::/\n");
        assert_eq!(own_container_id("", &v1), Some(ID.to_string()));
        let systemd = format!("0::/system.slice/docker-{ID}.scope\n");
        assert_eq!(own_container_id("", &systemd), Some(ID.to_string()));
        // The host itself: no container path, or one that is not an id.
        let host = "25 1 254:1 / / rw - ext4 /dev/vda1 rw\n\
                    30 25 254:1 /var/lib/docker/containers /mnt rw - ext4 /dev/vda1 rw\n";
        assert_eq!(own_container_id(host, "0::/init.scope\n"), None);
        assert_eq!(own_container_id("", "12:memory:/user.slice\n"), None);
    }

    #[test]
    fn translates_through_the_deepest_mount() {
        let paths = HostPaths::InContainer {
            container: ID.into(),
            mounts: vec![
                mount("/data", "/srv/cem", MountKind::Bind),
                mount("/data/tenants/b", "/srv/b", MountKind::Bind),
                mount(
                    "/var/run/docker.sock",
                    "/var/run/docker.sock",
                    MountKind::Bind,
                ),
                mount(
                    "/cache",
                    "/var/lib/docker/volumes/c/_data",
                    MountKind::Volume,
                ),
                mount("/data/scratch", "", MountKind::Other),
            ],
        };
        assert_eq!(
            paths
                .to_engine(Path::new("/data/tenants/a/workspace"))
                .unwrap(),
            PathBuf::from("/srv/cem/tenants/a/workspace")
        );
        assert_eq!(
            paths
                .to_engine(Path::new("/data/tenants/b/workspace"))
                .unwrap(),
            PathBuf::from("/srv/b/workspace")
        );
        assert_eq!(
            paths.to_engine(Path::new("/data")).unwrap(),
            PathBuf::from("/srv/cem")
        );
        // A prefix of a component is not a parent.
        let err = paths
            .to_engine(Path::new("/database/workspace"))
            .unwrap_err();
        assert!(err.to_string().contains("compose.yaml"), "{err}");
        assert!(err.to_string().contains("/database/workspace"), "{err}");
        // A volume's directories cannot be bound privately: the error says what to mount.
        let err = paths.to_engine(Path::new("/cache/ws")).unwrap_err();
        assert!(matches!(err, HostPathError::OnAVolume { .. }), "{err}");
        assert!(err.to_string().contains("host directory"), "{err}");
        // A tmpfs inside the data directory has no host path: refused, not made relative.
        let err = paths.to_engine(Path::new("/data/scratch/ws")).unwrap_err();
        assert!(matches!(err, HostPathError::NotOnAMount { .. }), "{err}");
    }

    fn mount(destination: &str, source: &str, kind: MountKind) -> ContainerMount {
        ContainerMount {
            destination: destination.into(),
            source: source.into(),
            kind,
        }
    }

    #[test]
    fn outside_a_container_paths_pass_unchanged() {
        assert_eq!(
            HostPaths::Same.to_engine(Path::new("/x/y")).unwrap(),
            PathBuf::from("/x/y")
        );
    }
}
