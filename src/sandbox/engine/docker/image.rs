//! Image builds and pulls on the Docker Engine API, for the sandbox image pipeline
//! ([`crate::sandbox::image`]), which decides what to build from what.

use std::collections::HashMap;
use std::time::Duration;

use bollard::query_parameters::{BuildImageOptionsBuilder, CreateImageOptionsBuilder};
use futures::StreamExt;

use crate::sandbox::engine::docker::Engine;
use crate::sandbox::engine::error::EngineError;

/// Why a build did not produce its image.
#[derive(Debug, thiserror::Error)]
pub enum BuildFailure {
    /// The build ran and failed (a Dockerfile step, a missing base): the builder's words.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl Engine {
    /// Builds `context` (a tar with a Dockerfile) as `tag`, with build arguments and labels,
    /// handing each line of the builder's output to `progress`.
    pub async fn build_image(
        &self,
        tag: &str,
        buildargs: &HashMap<&str, &str>,
        labels: &HashMap<&str, &str>,
        context: Vec<u8>,
        mut progress: impl FnMut(&str),
    ) -> Result<(), BuildFailure> {
        let opts = BuildImageOptionsBuilder::default()
            .t(tag)
            .rm(true)
            .forcerm(true)
            .buildargs(buildargs)
            .labels(labels)
            .build();
        let mut stream =
            self.docker
                .build_image(opts, None, Some(bollard::body_full(context.into())));
        while let Some(item) = stream.next().await {
            let info = item.map_err(|e| match e {
                bollard::errors::Error::DockerStreamError { error } => BuildFailure::Refused(error),
                other => BuildFailure::Engine(EngineError::api("build the sandbox image", other)),
            })?;
            if let Some(detail) = info.error_detail {
                return Err(BuildFailure::Refused(detail.message.unwrap_or_default()));
            }
            if let Some(line) = info.stream {
                progress(&line);
            }
        }
        Ok(())
    }

    /// Pulls `image` from its registry, giving up after 10 minutes without completion.
    pub async fn pull_image(&self, image: &str) -> Result<(), String> {
        let opts = CreateImageOptionsBuilder::default()
            .from_image(image)
            .build();
        let mut stream = self.docker.create_image(Some(opts), None, None);
        let pulling = async {
            while let Some(item) = stream.next().await {
                let info = item.map_err(|e| e.to_string())?;
                if let Some(detail) = info.error_detail {
                    return Err(detail.message.unwrap_or_default());
                }
            }
            Ok(())
        };
        tokio::time::timeout(Duration::from_secs(600), pulling)
            .await
            .map_err(|_| "no progress within 10 minutes".to_string())?
    }
}
