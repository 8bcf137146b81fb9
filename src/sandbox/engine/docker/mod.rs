//! The Docker Engine API (through bollard): connect (negotiating the API version, since the
//! engines we meet speak 1.41), the container verbs of the [`crate::sandbox::engine::backend::Backend`] seam
//! (`container.rs`), image builds and pulls (`image.rs`), and the engine facts `doctor`, the
//! health check and the host-path translation ask for (here). Errors are turned into messages
//! that tell the user what to do (`error.rs`). An image's files as a tar and the storage driver,
//! for serving the image's tree from the host, are in `archive.rs`.
//!
//! Only this module talks to bollard; the rest of the server goes through [`Engine`]'s methods
//! and the [`crate::sandbox::engine::backend::Backend`] trait.

use std::time::Duration;

use bollard::Docker;

use crate::sandbox::engine::error::EngineError;
use bollard::query_parameters::InspectContainerOptions;

pub use archive::EngineStorage;
pub use error::start_hint;
pub use image::BuildFailure;
pub use oneshot::Finished;

mod archive;
mod container;
mod error;
mod image;
mod oneshot;

/// A connected engine. Cheap to clone (the client is shared).
#[derive(Debug, Clone)]
pub struct Engine {
    docker: Docker,
}

/// One mount of a container, as the engine reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerMount {
    pub destination: std::path::PathBuf,
    /// The mounted directory on the engine's host (for a bind mount).
    pub source: std::path::PathBuf,
    pub kind: MountKind,
}

/// What a container's mount is, as far as binding its directories elsewhere goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountKind {
    /// A host directory or file: its source is a host path.
    Bind,
    /// A named or anonymous volume, under the engine's data root.
    Volume,
    /// tmpfs and the like: nothing on the host to bind.
    Other,
}

/// Engine facts for `doctor` and the stats tool.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct EngineInfo {
    /// Which engine answers on the socket: `Docker`, or `Podman` (its Docker-compatible API).
    pub kind: String,
    pub version: String,
    pub api_version: String,
    pub os: String,
    pub kernel: String,
    /// The engine's host name (`docker info`'s Name).
    pub host_name: String,
    /// The swarm this engine is a node of, when it is an active node of one.
    pub swarm: Option<SwarmNode>,
}

/// This engine's place in a Docker Swarm.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SwarmNode {
    pub node_id: String,
    /// Nodes and managers the swarm has (reported by managers only; 0 on a worker).
    pub nodes: i64,
    pub managers: i64,
}

impl EngineInfo {
    /// Whether the engine tells an OOM kill from another SIGKILL (an `oom` event or
    /// `State.OOMKilled`). Podman before 5.0 reports neither for containers it runs, so an
    /// execution that reaches its memory limit there ends as a plain exit 137.
    pub fn reports_oom_kills(&self) -> bool {
        let major = (self.version.split('.').next()).and_then(|m| m.parse::<u32>().ok());
        self.kind != "Podman" || major.is_some_and(|m| m >= 5)
    }
}

/// What the engine supports of the sandbox's hardening, for `doctor`.
#[derive(Debug, Clone, Default)]
pub struct EngineFeatures {
    /// Memory and swap limits (the memory cgroup with swap accounting).
    pub memory_and_swap_limits: bool,
    pub seccomp: bool,
    /// The cgroup version the engine runs containers under (1 or 2; 0 when it does not say).
    pub cgroup_version: u8,
    /// A rootless engine: the `rootless` security option (Docker's and Podman's `/info`).
    pub rootless: bool,
    /// The engine's cgroup driver (`cgroupfs`, `systemd`, or `none`: no cgroups at all, as a
    /// rootless engine on cgroup v1 has); empty when it does not say.
    pub cgroup_driver: String,
}

impl EngineFeatures {
    /// What is missing for the sandbox's hardening, as (feature, what to do); the server logs
    /// these at start and `doctor` fails on them.
    pub fn problems(&self) -> Vec<(&'static str, &'static str)> {
        let mut problems = Vec::new();
        if !self.memory_and_swap_limits && self.rootless {
            problems.push((
                "memory and swap limits",
                crate::sandbox::container::rootless::NO_CGROUPS_FIX,
            ));
        } else if !self.memory_and_swap_limits {
            problems.push((
                "memory and swap limits",
                "the engine reports no memory or swap limit support, so a sandbox's memory is not bounded: enable the memory cgroup with swap accounting (kernel command line `cgroup_enable=memory swapaccount=1`, or cgroup v2) and restart the engine",
            ));
        }
        if !self.seccomp {
            problems.push((
                "seccomp",
                "the engine has no seccomp support, so the sandbox's system-call filter cannot be applied: use an engine built with seccomp (Debian's docker.io and podman have it)",
            ));
        }
        problems
    }
}

impl Engine {
    /// Connects with the usual defaults (DOCKER_HOST or the local socket) and negotiates the
    /// API version down to what the engine speaks.
    pub async fn connect() -> Result<Self, EngineError> {
        let docker = Docker::connect_with_local_defaults()
            .map_err(|e| EngineError::unreachable(e.to_string()))?
            .with_timeout(Duration::from_secs(120));
        let docker = tokio::time::timeout(Duration::from_secs(10), docker.negotiate_version())
            .await
            .map_err(|_| EngineError::unreachable("no answer within 10 s".into()))?
            .map_err(|e| EngineError::unreachable(e.to_string()))?;
        Ok(Self { docker })
    }

    /// The OCI runtimes registered with the engine, by name, with their binaries and arguments.
    pub async fn runtimes(
        &self,
    ) -> Result<
        std::collections::HashMap<String, crate::sandbox::container::runtime::Registration>,
        EngineError,
    > {
        let info = self
            .docker
            .info()
            .await
            .map_err(|e| EngineError::api("report its runtimes", e))?;
        Ok(crate::sandbox::container::runtime::Registration::from_info(
            info.runtimes.unwrap_or_default(),
        ))
    }

    /// What the engine supports of the sandbox's hardening.
    pub async fn features(&self) -> Result<EngineFeatures, EngineError> {
        let sys = self
            .docker
            .info()
            .await
            .map_err(|e| EngineError::api("report its features", e))?;
        let options = sys.security_options.unwrap_or_default();
        Ok(EngineFeatures {
            memory_and_swap_limits: sys.memory_limit.unwrap_or(false)
                && sys.swap_limit.unwrap_or(false),
            seccomp: options.iter().any(|o| o.contains("seccomp")),
            rootless: crate::sandbox::container::rootless::rootless_option(&options),
            cgroup_driver: sys.cgroup_driver.map(|d| d.to_string()).unwrap_or_default(),
            cgroup_version: match sys.cgroup_version.map(|v| v.to_string()).as_deref() {
                Some("1") => 1,
                Some("2") => 2,
                _ => 0,
            },
        })
    }

    /// The raw client, for tests that inspect the engine directly. The server's own code goes
    /// through [`Engine`]'s methods and the [`crate::sandbox::engine::backend::Backend`] trait.
    pub fn client(&self) -> &Docker {
        &self.docker
    }

    pub async fn info(&self) -> Result<EngineInfo, EngineError> {
        let v = self
            .docker
            .version()
            .await
            .map_err(|e| EngineError::api("report its version", e))?;
        let podman = v
            .components
            .unwrap_or_default()
            .iter()
            .any(|c| c.name.contains("Podman"));
        // Supplementary (the node's name and swarm): an engine that does not answer `/info`
        // still runs sandboxes.
        let system = self.docker.info().await.unwrap_or_else(|e| {
            tracing::debug!("the engine did not report its system information: {e}");
            Default::default()
        });
        let swarm = system.swarm.and_then(|s| {
            let active = s.local_node_state == Some(bollard::models::LocalNodeState::ACTIVE);
            active.then(|| SwarmNode {
                node_id: s.node_id.unwrap_or_default(),
                nodes: s.nodes.unwrap_or(0),
                managers: s.managers.unwrap_or(0),
            })
        });
        Ok(EngineInfo {
            kind: if podman { "Podman" } else { "Docker" }.into(),
            version: v.version.unwrap_or_default(),
            api_version: v.api_version.unwrap_or_default(),
            os: v.os.unwrap_or_default(),
            kernel: v.kernel_version.unwrap_or_default(),
            host_name: system.name.unwrap_or_default(),
            swarm,
        })
    }

    /// A container's mounts, or `None` when the engine knows no such container.
    pub async fn container_mounts(
        &self,
        id: &str,
    ) -> Result<Option<Vec<ContainerMount>>, EngineError> {
        let c = match self
            .docker
            .inspect_container(id, None::<InspectContainerOptions>)
            .await
        {
            Ok(c) => c,
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => return Ok(None),
            Err(e) => return Err(EngineError::api("inspect the server's own container", e)),
        };
        Ok(Some(
            c.mounts
                .unwrap_or_default()
                .into_iter()
                .filter_map(|m| {
                    Some(ContainerMount {
                        destination: m.destination?.into(),
                        source: m.source?.into(),
                        kind: match m.typ.as_deref() {
                            Some("bind") => MountKind::Bind,
                            Some("volume") => MountKind::Volume,
                            _ => MountKind::Other,
                        },
                    })
                })
                .collect(),
        ))
    }

    /// Whether the engine answers a ping within `limit`.
    pub async fn ping(&self, limit: Duration) -> bool {
        matches!(
            tokio::time::timeout(limit, self.docker.ping()).await,
            Ok(Ok(_))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::EngineInfo;

    #[test]
    fn podman_reports_oom_kills_from_version_5() {
        let info = |kind: &str, version: &str| EngineInfo {
            kind: kind.into(),
            version: version.into(),
            api_version: "1.41".into(),
            os: "linux".into(),
            kernel: String::new(),
            host_name: String::new(),
            swarm: None,
        };
        assert!(info("Docker", "20.10.24").reports_oom_kills());
        assert!(!info("Podman", "4.3.1").reports_oom_kills());
        assert!(!info("Podman", "junk").reports_oom_kills());
        assert!(info("Podman", "5.0.0").reports_oom_kills());
    }
}
