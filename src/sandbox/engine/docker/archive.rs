//! An image's files as a tar stream, and the engine's storage driver, for serving the image's
//! read-only tree from the host ([`crate::sandbox::image::tree`]). The files come from a
//! container created from the image and never started (the engine's archive API reads any
//! container's filesystem), removed again on every path; it carries the project's labels, so
//! the reaper removes it should this process die meanwhile.

use std::collections::HashMap;

use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, DownloadFromContainerOptionsBuilder,
    RemoveContainerOptionsBuilder,
};
use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::sandbox::engine::docker::Engine;
use crate::sandbox::engine::error::EngineError;

/// How the engine stores images and containers.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct EngineStorage {
    /// The storage driver (`overlay2`, `fuse-overlayfs`, `vfs`, `btrfs`, Podman's `overlay`).
    pub driver: String,
    /// Whether the engine runs rootless (its security options say `rootless`).
    pub rootless: bool,
}

impl Engine {
    /// The engine's storage driver and whether it runs rootless.
    pub async fn storage(&self) -> Result<EngineStorage, EngineError> {
        let info = self
            .docker
            .info()
            .await
            .map_err(|e| EngineError::api("report its storage driver", e))?;
        Ok(EngineStorage {
            driver: info.driver.unwrap_or_default(),
            rootless: (info.security_options.unwrap_or_default().iter())
                .any(|o| o.contains("rootless")),
        })
    }

    /// Sends `path` of `image`'s filesystem, as a tar whose entries start with the path's last
    /// component, to `sink` chunk by chunk. Stops early, without error, when `sink` is closed or
    /// `stop` is cancelled (the caller tells a whole stream from a cut one by `stop`); the
    /// container it reads from is removed either way.
    pub async fn image_archive(
        &self,
        image: &str,
        path: &str,
        labels: HashMap<String, String>,
        sink: mpsc::Sender<Bytes>,
        stop: &CancellationToken,
    ) -> Result<(), EngineError> {
        let name = format!("cem-tree-{}", uuid::Uuid::new_v4().simple());
        let body = ContainerCreateBody {
            image: Some(image.to_string()),
            // Never started; a command keeps engines that want one content.
            cmd: Some(vec!["true".into()]),
            network_disabled: Some(true),
            labels: Some(labels),
            ..Default::default()
        };
        let opts = CreateContainerOptionsBuilder::default().name(&name).build();
        self.docker
            .create_container(Some(opts), body)
            .await
            .map_err(|e| EngineError::api("create a container to read the image's files", e))?;
        let copied = async {
            let opts = DownloadFromContainerOptionsBuilder::default()
                .path(path)
                .build();
            let mut stream = self.docker.download_from_container(&name, Some(opts));
            loop {
                let next = tokio::select! {
                    () = stop.cancelled() => break,
                    next = stream.next() => next,
                };
                let Some(chunk) = next else { break };
                let chunk =
                    chunk.map_err(|e| EngineError::api("send the image's files as a tar", e))?;
                if sink.send(chunk).await.is_err() {
                    break;
                }
            }
            Ok(())
        }
        .await;
        let opts = RemoveContainerOptionsBuilder::default().force(true).build();
        if let Err(e) = self.docker.remove_container(&name, Some(opts)).await {
            tracing::warn!(
                "could not remove {name}, the container the image's files were read from: {e}; the next start removes it"
            );
        }
        copied
    }
}
