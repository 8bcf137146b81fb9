//! The Docker engine as the sandbox uses it: connect (negotiating the API version, since the
//! engines we meet speak 1.41), and the few lifecycle verbs an execution needs. Errors are
//! turned into messages that tell the user what to do, which usually means running
//! `code-execution-mcp doctor`.

use std::collections::HashMap;
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::{
    InspectContainerOptions, KillContainerOptionsBuilder, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder,
};

pub use error::EngineError;

mod error;

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
    pub version: String,
    pub api_version: String,
    pub os: String,
    pub kernel: String,
}

impl Engine {
    /// Connects with the usual defaults (DOCKER_HOST or the local socket) and negotiates the
    /// API version down to what the engine speaks.
    pub async fn connect() -> Result<Self, EngineError> {
        let docker = Docker::connect_with_local_defaults()
            .map_err(|e| EngineError::Unreachable(e.to_string()))?
            .with_timeout(Duration::from_secs(120));
        let docker = tokio::time::timeout(Duration::from_secs(10), docker.negotiate_version())
            .await
            .map_err(|_| EngineError::Unreachable("no answer within 10 s".into()))?
            .map_err(|e| EngineError::Unreachable(e.to_string()))?;
        Ok(Self { docker })
    }

    /// The OCI runtimes registered with the engine, sorted.
    pub async fn runtimes(&self) -> Result<Vec<String>, EngineError> {
        let info = self
            .docker
            .info()
            .await
            .map_err(|e| EngineError::api("report its runtimes", e))?;
        let mut names: Vec<String> = info.runtimes.unwrap_or_default().into_keys().collect();
        names.sort();
        Ok(names)
    }

    pub fn client(&self) -> &Docker {
        &self.docker
    }

    pub async fn info(&self) -> Result<EngineInfo, EngineError> {
        let v = self
            .docker
            .version()
            .await
            .map_err(|e| EngineError::api("report its version", e))?;
        Ok(EngineInfo {
            version: v.version.unwrap_or_default(),
            api_version: v.api_version.unwrap_or_default(),
            os: v.os.unwrap_or_default(),
            kernel: v.kernel_version.unwrap_or_default(),
        })
    }

    /// Sends SIGKILL; a container that is already gone or stopped is not an error.
    pub async fn kill(&self, id: &str) -> Result<(), EngineError> {
        let opts = KillContainerOptionsBuilder::default()
            .signal("SIGKILL")
            .build();
        match self.docker.kill_container(id, Some(opts)).await {
            Ok(()) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404 | 409,
                ..
            }) => Ok(()),
            Err(e) => Err(EngineError::api("kill a sandbox container", e)),
        }
    }

    /// Force-removes a container; one that is already gone is not an error.
    pub async fn remove(&self, id: &str) -> Result<(), EngineError> {
        let opts = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        match self.docker.remove_container(id, Some(opts)).await {
            Ok(()) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(()),
            // 409: removal already in progress (another path got there first).
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409, ..
            }) => Ok(()),
            Err(e) => Err(EngineError::api("remove a sandbox container", e)),
        }
    }

    /// Sets a running container's memory limit, swap included (as the spec does at creation).
    pub async fn set_memory_limit(&self, id: &str, bytes: i64) -> Result<(), EngineError> {
        let body = bollard::models::ContainerUpdateBody {
            memory: Some(bytes),
            memory_swap: Some(bytes),
            ..Default::default()
        };
        self.docker
            .update_container(id, body)
            .await
            .map_err(|e| EngineError::api("set a sandbox container's memory limit", e))
    }

    /// Whether the engine recorded an OOM kill for the container, and its exit code.
    pub async fn exit_state(&self, id: &str) -> Result<(bool, Option<i64>), EngineError> {
        let c = self
            .docker
            .inspect_container(id, None::<InspectContainerOptions>)
            .await
            .map_err(|e| EngineError::api("inspect a sandbox container", e))?;
        let state = c.state.unwrap_or_default();
        Ok((state.oom_killed.unwrap_or(false), state.exit_code))
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

    /// Containers carrying all the given labels (`key=value` or `key`), running or not.
    pub async fn list_labelled(
        &self,
        labels: &[String],
    ) -> Result<Vec<(String, HashMap<String, String>)>, EngineError> {
        let filters = HashMap::from([("label".to_string(), labels.to_vec())]);
        let opts = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        let list = self
            .docker
            .list_containers(Some(opts))
            .await
            .map_err(|e| EngineError::api("list sandbox containers", e))?;
        Ok(list
            .into_iter()
            .filter_map(|c| Some((c.id?, c.labels.unwrap_or_default())))
            .collect())
    }
}
