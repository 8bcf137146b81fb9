//! The [`Backend`] seam on the Docker Engine API: each container verb the sandbox needs, as
//! one bollard call, with the engine's "already gone" answers turned into success where the
//! sandbox's cleanup expects them.

use std::collections::HashMap;

use bollard::container::LogOutput;
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, EventsOptionsBuilder,
    InspectContainerOptions, KillContainerOptionsBuilder, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder, StartContainerOptions, WaitContainerOptionsBuilder,
};
use futures::StreamExt;

use crate::sandbox::container::spec::{LABEL_INSTANCE, SandboxSpec, container_body};
use crate::sandbox::engine::backend::{
    Attached, Backend, EngineEvent, EventFilter, EventStream, ExitState, Labelled, Output,
};
use crate::sandbox::engine::docker::Engine;
use crate::sandbox::engine::error::EngineError;

/// How often, and how far apart, a call that failed on Podman's transient `stopped` state is
/// made again (2 s in all).
const STOPPED_RETRIES: u32 = 20;
const STOPPED_RETRY_DELAY: std::time::Duration = std::time::Duration::from_millis(100);

/// Makes `call` (a container list or inspect) until its answer decodes. Podman's compatible API
/// can name the transient state `stopped`, which the Docker API (and so bollard) does not
/// define, failing the whole answer (podman#28359, podman#17728); it passes within moments.
async fn past_transient_state<T, F: Future<Output = Result<T, bollard::errors::Error>>>(
    mut call: impl FnMut() -> F,
) -> Result<T, bollard::errors::Error> {
    let mut attempts = 0;
    loop {
        match call().await {
            Err(bollard::errors::Error::JsonDataError { message, .. })
                if attempts < STOPPED_RETRIES && message.contains("unknown variant `stopped`") =>
            {
                attempts += 1;
                tokio::time::sleep(STOPPED_RETRY_DELAY).await;
            }
            other => return other,
        }
    }
}

/// The engine's answer "no such container" (404), or "already in that state / removal in
/// progress" (409).
fn is_status(err: &bollard::errors::Error, codes: &[u16]) -> bool {
    matches!(err, bollard::errors::Error::DockerResponseServerError { status_code, .. } if codes.contains(status_code))
}

#[async_trait::async_trait]
impl Backend for Engine {
    async fn create(&self, name: &str, spec: &SandboxSpec) -> Result<(), EngineError> {
        let opts = CreateContainerOptionsBuilder::default().name(name).build();
        self.docker
            .create_container(Some(opts), container_body(spec))
            .await
            .map(|_| ())
            .map_err(|e| EngineError::api("create a sandbox container", e))
    }

    async fn attach(&self, name: &str) -> Result<Attached, EngineError> {
        let opts = AttachContainerOptionsBuilder::default()
            .stdin(true)
            .stdout(true)
            .stderr(true)
            .stream(true)
            .build();
        let attached = self
            .docker
            .attach_container(name, Some(opts))
            .await
            .map_err(|e| EngineError::api("attach to a sandbox container", e))?;
        let output = attached
            .output
            .filter_map(|item| {
                std::future::ready(match item {
                    Ok(LogOutput::StdOut { message } | LogOutput::Console { message }) => {
                        Some(Ok(Output::Stdout(message)))
                    }
                    Ok(LogOutput::StdErr { message }) => Some(Ok(Output::Stderr(message))),
                    Ok(LogOutput::StdIn { .. }) => None,
                    Err(e) => Some(Err(EngineError::api("stream sandbox output", e))),
                })
            })
            .boxed();
        Ok(Attached {
            output,
            input: attached.input,
        })
    }

    async fn start(&self, name: &str) -> Result<(), EngineError> {
        self.docker
            .start_container(name, None::<StartContainerOptions>)
            .await
            .map_err(|e| EngineError::api("start a sandbox container", e))
    }

    async fn kill(&self, name: &str) -> Result<(), EngineError> {
        let opts = KillContainerOptionsBuilder::default()
            .signal("SIGKILL")
            .build();
        match self.docker.kill_container(name, Some(opts)).await {
            Err(e) if !is_status(&e, &[404, 409]) => {
                Err(EngineError::api("kill a sandbox container", e))
            }
            _ => Ok(()),
        }
    }

    async fn wait_stopped(&self, name: &str) {
        let opts = WaitContainerOptionsBuilder::default()
            .condition("not-running")
            .build();
        // A non-zero exit arrives as an error item; either way the container has stopped.
        let _ = self.docker.wait_container(name, Some(opts)).next().await;
    }

    async fn exit_state(&self, name: &str) -> Result<ExitState, EngineError> {
        let inspect = || {
            self.docker
                .inspect_container(name, None::<InspectContainerOptions>)
        };
        let c = past_transient_state(inspect)
            .await
            .map_err(|e| EngineError::api("inspect a sandbox container", e))?;
        let state = c.state.unwrap_or_default();
        Ok(ExitState {
            oom_killed: state.oom_killed.unwrap_or(false),
            exit_code: state.exit_code,
        })
    }

    async fn set_memory_limit(&self, name: &str, bytes: i64) -> Result<(), EngineError> {
        let body = bollard::models::ContainerUpdateBody {
            memory: Some(bytes),
            memory_swap: Some(bytes),
            ..Default::default()
        };
        match self.docker.update_container(name, body).await {
            // No such endpoint (Podman 4's compatible API has none); a missing container is
            // a 404 with a message naming it.
            Err(e) if is_status(&e, &[404]) && !e.to_string().contains(name) => Err(
                EngineError::Unsupported("updating a container's memory limit"),
            ),
            other => {
                other.map_err(|e| EngineError::api("set a sandbox container's memory limit", e))
            }
        }
    }

    async fn container_id(&self, name: &str) -> Result<Option<String>, EngineError> {
        let inspect = self
            .docker
            .inspect_container(name, None::<InspectContainerOptions>)
            .await;
        match inspect {
            Ok(c) => Ok(c.id),
            Err(e) if is_status(&e, &[404]) => Ok(None),
            Err(e) => Err(EngineError::api("inspect a sandbox container", e)),
        }
    }

    async fn remove(&self, name: &str) -> Result<(), EngineError> {
        let opts = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        match self.docker.remove_container(name, Some(opts)).await {
            // 404: already gone; 409: removal already in progress (another path got there).
            Err(e) if !is_status(&e, &[404, 409]) => {
                Err(EngineError::api("remove a sandbox container", e))
            }
            _ => Ok(()),
        }
    }

    async fn list_labelled(&self, labels: &[String]) -> Result<Vec<Labelled>, EngineError> {
        let filters = HashMap::from([("label".to_string(), labels.to_vec())]);
        let opts = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        let list = past_transient_state(|| self.docker.list_containers(Some(opts.clone())))
            .await
            .map_err(|e| EngineError::api("list sandbox containers", e))?;
        Ok(list
            .into_iter()
            .filter_map(|c| {
                Some(Labelled {
                    id: c.id?,
                    labels: c.labels.unwrap_or_default(),
                })
            })
            .collect())
    }

    async fn image_id(&self, image: &str) -> Result<Option<String>, EngineError> {
        match self.docker.inspect_image(image).await {
            Ok(img) => Ok(img.id),
            Err(e) if is_status(&e, &[404]) => Ok(None),
            Err(e) => Err(EngineError::api("inspect an image", e)),
        }
    }

    fn events(&self, filter: &EventFilter) -> EventStream {
        let instance;
        let filters = match filter {
            EventFilter::Oom { instance: id } => {
                instance = format!("{LABEL_INSTANCE}={id}");
                HashMap::from([
                    ("type", vec!["container"]),
                    ("event", vec!["oom"]),
                    ("label", vec![instance.as_str()]),
                ])
            }
            EventFilter::Images => HashMap::from([("type", vec!["image"])]),
        };
        let opts = EventsOptionsBuilder::default().filters(&filters).build();
        let images = *filter == EventFilter::Images;
        self.docker
            .events(Some(opts))
            .filter_map(move |item| {
                std::future::ready(match item {
                    Err(e) => Some(Err(EngineError::api("follow engine events", e))),
                    Ok(_) if images => Some(Ok(EngineEvent::Image)),
                    Ok(event) => event
                        .actor
                        .and_then(|a| a.attributes)
                        .and_then(|mut a| a.remove("name"))
                        .map(|container| Ok(EngineEvent::Oom { container })),
                })
            })
            .boxed()
    }
}
