//! Getting a container ready for its job: create, attach, start, under a guard that removes
//! the container on every path, including a dropped future.

use std::time::Duration;

use bollard::container::LogOutput;
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, StartContainerOptions,
};
use futures::StreamExt;
use tokio_util::task::TaskTracker;

use super::super::docker::{Engine, EngineError};
use super::super::spec::{SandboxSpec, container_body};

/// Removes its container when dropped, in the background, tracked so shutdown can wait.
pub(crate) struct ContainerGuard {
    engine: Engine,
    id: String,
    tracker: TaskTracker,
    /// Whether the engine answered the create. A create abandoned half-way (its execution
    /// timed out or was cancelled) may still land after a first removal found nothing, so
    /// then the removal is repeated for a few seconds.
    created: bool,
}

impl ContainerGuard {
    pub(crate) fn new(engine: Engine, id: String, tracker: TaskTracker) -> Self {
        Self {
            engine,
            id,
            tracker,
            created: false,
        }
    }
}

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        let engine = self.engine.clone();
        let id = std::mem::take(&mut self.id);
        let created = self.created;
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            self.tracker.spawn_on(
                async move {
                    if !created {
                        // Removing a name the engine does not know (yet) succeeds: repeat it.
                        for delay in [0, 1, 2, 4] {
                            tokio::time::sleep(Duration::from_secs(delay)).await;
                            let _ = engine.remove(&id).await;
                        }
                    }
                    // Retried, so an engine restarting under us does not leave the container.
                    for delay in [1, 2, 4, 8, 0] {
                        match engine.remove(&id).await {
                            Ok(()) => return,
                            Err(e) if delay == 0 => {
                                tracing::warn!(container = %id, "could not remove sandbox container: {e}; the next start removes it");
                            }
                            Err(_) => tokio::time::sleep(Duration::from_secs(delay)).await,
                        }
                    }
                },
                &handle,
            );
        }
    }
}

type OutputStream = std::pin::Pin<
    Box<dyn futures::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>,
>;
type InputSink = std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>;

/// A created, attached and started container whose harness waits for its job. Dropping it
/// removes the container.
pub(crate) struct Started {
    pub(super) name: String,
    pub(super) output: OutputStream,
    pub(super) input: InputSink,
    pub(super) guard: ContainerGuard,
}

impl Started {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// False when the container has already ended or printed before its job: it must not be
    /// used (a pooled container is checked this way before it is handed out).
    pub(crate) fn is_waiting(&mut self) -> bool {
        use futures::FutureExt;
        self.output.next().now_or_never().is_none()
    }
}

/// Creates, attaches and starts a container made from `spec`. The guard comes first and
/// works by name: a create the engine carried out but whose answer was lost is still removed.
pub(crate) async fn start(
    engine: &Engine,
    spec: &SandboxSpec,
    name: &str,
    tracker: &TaskTracker,
) -> Result<Started, EngineError> {
    let mut guard = ContainerGuard::new(engine.clone(), name.to_string(), tracker.clone());
    let docker = engine.client();
    let opts = CreateContainerOptionsBuilder::default().name(name).build();
    let created = docker
        .create_container(Some(opts), container_body(spec))
        .await;
    guard.created = true;
    created.map_err(|e| EngineError::api("create a sandbox container", e))?;
    let attach = AttachContainerOptionsBuilder::default()
        .stdin(true)
        .stdout(true)
        .stderr(true)
        .stream(true)
        .build();
    let attached = docker
        .attach_container(name, Some(attach))
        .await
        .map_err(|e| EngineError::api("attach to a sandbox container", e))?;
    docker
        .start_container(name, None::<StartContainerOptions>)
        .await
        .map_err(|e| EngineError::api("start a sandbox container", e))?;
    Ok(Started {
        name: name.to_string(),
        output: attached.output,
        input: attached.input,
        guard,
    })
}

/// Where an execution's container comes from.
pub(crate) enum Source<'a> {
    /// Created now from this spec, under this name.
    Cold(&'a SandboxSpec, &'a str),
    /// Started ahead (the pool).
    Warm(Started),
}
