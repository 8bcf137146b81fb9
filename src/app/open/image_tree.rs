//! At start: whether sandboxes read the image's `/usr` from a copy on the host
//! (`--image-tree`, [`crate::sandbox::image::tree`]), and that copy made or found, held, and
//! named as the engine sees it. Any failure is a warning that says why and leaves the sandboxes
//! on the engine's storage: a faster read is never a reason not to serve.

use tokio_util::sync::CancellationToken;

use crate::config::{Config, ImageTreeMode};
use crate::sandbox::Engine;
use crate::sandbox::engine::paths::HostPaths;
use crate::sandbox::image::tree::{Choice, Prepared, TreeError, TreeMount};

/// The tree sandboxes mount (none: the engine's storage), the lock that keeps it, and why.
pub struct Served {
    pub mount: Option<TreeMount>,
    pub hold: Option<Prepared>,
    pub reason: String,
}

/// Decides, then prepares the copy of `image_id` when it is to be served from the host; a copy
/// under way is abandoned once `stop` is cancelled (the start then stops at its next step).
pub async fn serve(
    config: &Config,
    engine: &Engine,
    (image_id, host_paths): (&str, &HostPaths),
    stop: &CancellationToken,
) -> Served {
    let choice = decide(config, engine).await;
    let on_engine = |reason: String| Served {
        mount: None,
        hold: None,
        reason,
    };
    if !choice.host {
        tracing::info!(
            "the sandbox image's /usr is read from the engine's storage: {}",
            choice.reason
        );
        return on_engine(choice.reason);
    }
    let dir = config.image_tree_dir();
    let prepared = match crate::sandbox::image::tree::prepare(engine, image_id, &dir, stop).await {
        Ok(p) => p,
        Err(e @ TreeError::Stopped) => return on_engine(e.to_string()),
        Err(e) => {
            tracing::warn!(
                "the sandbox image's /usr could not be copied to the host ({e}); sandboxes read it from the engine's storage, which is slower on this engine ({}). Check the directory (--image-tree-dir), or set --image-tree engine to stop trying",
                choice.reason
            );
            return on_engine(format!("the copy failed: {e}"));
        }
    };
    let canonical = prepared
        .root
        .canonicalize()
        .unwrap_or(prepared.root.clone());
    let root = match host_paths.to_engine(&canonical) {
        Ok(root) => root,
        Err(e) => {
            tracing::warn!(
                "the host copy of the sandbox image's /usr is not where the engine can mount it ({e}); sandboxes read it from the engine's storage"
            );
            return on_engine(format!("the copy is not mountable by the engine: {e}"));
        }
    };
    let dirs = match crate::sandbox::image::tree::mounted_dirs(&prepared.root) {
        Ok(dirs) => dirs,
        Err(e) => {
            tracing::warn!(
                "the host copy of the sandbox image's /usr in {} cannot be listed ({e}); sandboxes read it from the engine's storage",
                prepared.root.display()
            );
            return on_engine(format!("the copy cannot be listed: {e}"));
        }
    };
    if let Some(short) = crate::sandbox::image::tree::short_id(image_id) {
        crate::sandbox::image::tree::remove_unused(engine, &dir, short).await;
    }
    tracing::info!(
        "the sandbox image's /usr is served from {} ({})",
        prepared.root.display(),
        choice.reason
    );
    Served {
        mount: Some(TreeMount {
            image_id: image_id.to_string(),
            root,
            dirs,
        }),
        hold: Some(prepared),
        reason: choice.reason,
    }
}

/// `--image-tree` on this engine; `auto` stays on the engine's storage when the tree would sit
/// on shared storage (`--shared-data` without `--image-tree-dir`), which reads no faster.
pub async fn decide(config: &Config, engine: &Engine) -> Choice {
    let mode = config.sandbox.image_tree;
    let storage = match engine.storage().await {
        Ok(s) => s,
        Err(e) if mode == ImageTreeMode::Auto => {
            return Choice {
                host: false,
                reason: format!("the engine did not report its storage driver ({e})"),
            };
        }
        Err(_) => Default::default(),
    };
    let choice = crate::sandbox::image::tree::choose(mode, &storage);
    if mode == ImageTreeMode::Auto
        && choice.host
        && config.storage.shared_data
        && config.sandbox.image_tree_dir.is_none()
    {
        return Choice {
            host: false,
            reason: format!(
                "{}, but the data directory is shared storage (--shared-data): set --image-tree-dir to a local directory to serve it from the host",
                choice.reason
            ),
        };
    }
    choice
}
