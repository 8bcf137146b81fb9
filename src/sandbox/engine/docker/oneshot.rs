//! A container that runs one program to its end (the package installer): created from a body
//! of its own, attached before it starts, waited for within a limit, killed past it, and removed
//! on every path, its output kept up to a bound.

use std::time::Duration;

use bollard::container::LogOutput;
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{AttachContainerOptionsBuilder, CreateContainerOptionsBuilder};
use futures::StreamExt;

use crate::sandbox::engine::backend::Backend;
use crate::sandbox::engine::docker::Engine;
use crate::sandbox::engine::error::EngineError;

/// How a one-shot container ended.
#[derive(Debug, Clone, Default)]
pub struct Finished {
    /// `None` when it was killed at the limit.
    pub exit_code: Option<i64>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Engine {
    /// Runs the container `body` as `name` until it ends or `limit` passes, keeping at most
    /// `max_output` bytes of each stream (the last ones of stderr, the first of stdout).
    pub async fn run_to_end(
        &self,
        name: &str,
        body: ContainerCreateBody,
        limit: Duration,
        max_output: usize,
    ) -> Result<Finished, EngineError> {
        let result = self.run_inner(name, body, limit, max_output).await;
        // Removed on every path (a removal of a container never made is no error).
        let _ = Backend::remove(self, name).await;
        result
    }

    async fn run_inner(
        &self,
        name: &str,
        body: ContainerCreateBody,
        limit: Duration,
        max_output: usize,
    ) -> Result<Finished, EngineError> {
        let opts = CreateContainerOptionsBuilder::default().name(name).build();
        self.docker
            .create_container(Some(opts), body)
            .await
            .map_err(|e| EngineError::api("create the package installer's container", e))?;
        let attach = AttachContainerOptionsBuilder::default()
            .stdout(true)
            .stderr(true)
            .stream(true)
            .build();
        let mut output = self
            .docker
            .attach_container(name, Some(attach))
            .await
            .map_err(|e| EngineError::api("attach to the package installer", e))?
            .output;
        Backend::start(self, name).await?;
        let mut done = Finished::default();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let read = async {
            while let Some(Ok(chunk)) = output.next().await {
                match chunk {
                    LogOutput::StdOut { message } | LogOutput::Console { message } => {
                        let room = max_output.saturating_sub(out.len());
                        out.extend_from_slice(&message[..message.len().min(room)]);
                    }
                    LogOutput::StdErr { message } => {
                        err.extend_from_slice(&message);
                        if err.len() > max_output {
                            err.drain(..err.len() - max_output);
                        }
                    }
                    LogOutput::StdIn { .. } => {}
                }
            }
        };
        if tokio::time::timeout(limit, read).await.is_err() {
            done.timed_out = true;
            Backend::kill(self, name).await?;
        } else {
            Backend::wait_stopped(self, name).await;
            done.exit_code = Backend::exit_state(self, name).await?.exit_code;
        }
        done.stdout = String::from_utf8_lossy(&out).into_owned();
        done.stderr = String::from_utf8_lossy(&err).into_owned();
        Ok(done)
    }
}
