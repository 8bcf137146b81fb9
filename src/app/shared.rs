//! What every tenant of a server shares, started once: the engine (orphans reaped, features
//! checked), the sandbox image (built on first start) and its host copy, the tool catalog, the server-wide
//! execution slots and pool budget, the upstream connections and the PII key.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::app::StartError;
use crate::app::open::engine_limits::EngineLimits;
use crate::config::Config;
use crate::discovery::Discovery;
use crate::gateway::Gateway;
use crate::pii::PiiKey;
use crate::sandbox::cleanup::reaper;
use crate::sandbox::container::runtime::RuntimeKind;
use crate::sandbox::container::seccomp_file;
use crate::sandbox::container::spec::Seccomp;
use crate::sandbox::engine::paths::HostPaths;
use crate::sandbox::image;
use crate::sandbox::image::tree::TreeMount;
use crate::sandbox::{Engine, EngineError, EngineInfo};

/// What every tenant of a server shares: the engine, the sandbox image, the tool catalog, the
/// server-wide execution slots and the translation of paths for the engine. Its fields are
/// for opening tenants (`app`'s own modules); the rest of the server reads the few facts it
/// needs through the methods below, and never gets the engine or the PII key.
pub struct Shared {
    pub(super) config: Config,
    pub(super) engine: Engine,
    pub(super) engine_info: EngineInfo,
    pub(super) image: String,
    pub(super) image_id: String,
    pub(super) registry_dir: PathBuf,
    pub(super) discovery: Arc<Discovery>,
    /// Executions running at once in the whole server (`--max-concurrency`).
    pub(super) slots: Arc<Semaphore>,
    pub(super) host_paths: HostPaths,
    /// How the seccomp profile reaches the engine (a file's path as this process sees it).
    pub(super) seccomp: Seccomp,
    /// What kind of runtime `--runtime` names (gVisor changes the profile, the pids limit and
    /// the start limit: `sandbox::runtime`).
    pub(super) runtime_kind: RuntimeKind,
    /// The upstream MCP servers of `--upstreams`, connecting in the background.
    pub(super) gateway: Option<Arc<Gateway>>,
    /// The budget every tenant's pool grows within (`--pool-max`).
    pub(super) pool_budget: Arc<crate::sandbox::PoolBudget>,
    /// Used containers waiting for an idle engine to be removed (`--removal-backlog`).
    pub(super) removals: Arc<crate::sandbox::Removals>,
    /// The key of `--pii-key-file`, which every tenant's PII secret and vault file derive from.
    pub(super) pii_key: Option<PiiKey>,
    /// The host copy of the image's `/usr` sandboxes mount (`--image-tree`), if any, and why
    /// or why not.
    pub(super) image_tree: Option<TreeMount>,
    pub(super) image_tree_reason: String,
    /// Whether the engine is rootless and which limits it does not enforce (accepted with
    /// `--allow-unenforced-limits`).
    pub(super) engine_limits: EngineLimits,
    /// Holds the copy (a shared lock) so no other server removes it while this one runs.
    _image_tree_hold: Option<crate::sandbox::image::tree::Prepared>,
}

impl Shared {
    /// The configuration this server runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The node this server runs on, for `get_execution_stats`: `--node-name`, else the
    /// engine's host name.
    pub fn node_name(&self) -> &str {
        self.config
            .storage
            .node_name
            .as_deref()
            .unwrap_or(&self.engine_info.host_name)
    }

    /// The engine the sandboxes run on, as it described itself at start.
    pub fn engine_info(&self) -> &EngineInfo {
        &self.engine_info
    }

    /// Whether the engine answers a ping within `limit` (`/health`, the metrics).
    pub async fn engine_answers(&self, limit: Duration) -> bool {
        self.engine.ping(limit).await
    }

    /// What kind of runtime the sandboxes run under (`--runtime`).
    pub fn runtime_kind(&self) -> RuntimeKind {
        self.runtime_kind
    }

    /// The host copy of the image's `/usr` that sandboxes mount (`--image-tree`), if served.
    pub fn image_tree(&self) -> Option<&TreeMount> {
        self.image_tree.as_ref()
    }

    /// Why the image's `/usr` is, or is not, served from a host copy.
    pub fn image_tree_reason(&self) -> &str {
        &self.image_tree_reason
    }

    /// Which limits the engine does not enforce, and a note for the model about them.
    pub fn engine_limits(&self) -> &EngineLimits {
        &self.engine_limits
    }

    /// The upstream MCP servers of `--upstreams`, when there are any.
    pub fn gateway(&self) -> Option<&Arc<Gateway>> {
        self.gateway.as_ref()
    }

    /// Used containers waiting for an idle engine to be removed, server-wide.
    pub fn removal_backlog(&self) -> usize {
        self.removals.backlog()
    }
}

impl Shared {
    /// Connects to the engine, removes containers a crashed server left, makes sure the image
    /// exists (building it on first start) and loads the tool registry.
    pub async fn start(config: Config) -> Result<Arc<Self>, StartError> {
        config.validate()?;
        if config.storage.shared_data {
            let storage = crate::host::storage::require_shared(&config.storage.data_dir())?;
            tracing::info!("tenant data on shared storage: {storage}");
        }
        let pii_key = match &config.pii.pii_key_file {
            Some(path) => Some(PiiKey::from_file(path)?),
            None => None,
        };
        let engine = Engine::connect().await?;
        let engine_info = engine.info().await?;
        match engine.features().await {
            Ok(features) => {
                for (feature, what_to_do) in features.problems() {
                    tracing::warn!(
                        "the engine lacks {feature}: {what_to_do}; `code-execution-mcp doctor` checks it"
                    );
                }
            }
            Err(e) => tracing::warn!("the engine did not report its features: {e}"),
        }
        if !engine_info.reports_oom_kills() {
            tracing::warn!(
                "{} {} does not report OOM kills: an execution that reaches its memory limit ends as a SIGKILL (exit 137) reported as a likely memory-limit kill. Podman 5 reports them",
                engine_info.kind,
                engine_info.version
            );
        }
        reaper::reap_orphans(&engine).await?;
        let runtime_kind = match &config.sandbox.runtime {
            None => RuntimeKind::Native,
            Some(runtime) => runtime_kind(&engine, runtime).await?,
        };
        let host_paths = HostPaths::detect(&engine)
            .await
            .map_err(StartError::HostPath)?;
        let seccomp_dir = config.storage.data_dir().join(seccomp_file::DIR_NAME);
        let seccomp = seccomp_file::for_engine(&engine_info.kind, runtime_kind, &seccomp_dir)
            .map_err(|source| StartError::SeccompFile {
                path: seccomp_dir.clone(),
                source,
            })?;

        let image = config.sandbox.image_tag();
        let image_id = if config.sandbox.image.is_some() {
            image::image_id(&engine, &image)
                .await?
                .ok_or_else(|| EngineError::ImageMissing(image.clone()))?
        } else {
            image::ensure(
                &engine,
                &image,
                config.sandbox.base_image.as_deref(),
                config.sandbox.image_profile,
            )
            .await?
        };
        let engine_limits = crate::app::open::engine_limits::check(
            &config,
            runtime_kind,
            &engine,
            &engine_info,
            &image,
        )
        .await?;
        let tree =
            crate::app::open::image_tree::serve(&config, &engine, &image_id, &host_paths).await;
        let registry_dir = config.storage.registry_dir();
        let discovery =
            Arc::new(
                Discovery::shipped_and(&registry_dir).map_err(|e| StartError::Registry {
                    path: registry_dir.clone(),
                    message: e.to_string(),
                })?,
            );
        let gateway = match &config.gateway.upstreams {
            None => None,
            Some(path) => {
                let upstreams = crate::gateway::upstreams_file::read(path)?;
                tracing::info!(
                    upstreams = upstreams.len(),
                    file = %path.display(),
                    "connecting to upstream MCP servers"
                );
                Some(Gateway::start(upstreams, config.gateway.upstream_limits()))
            }
        };
        Ok(Arc::new(Self {
            gateway,
            pool_budget: crate::sandbox::PoolBudget::new(config.pool.pool_max),
            pii_key,
            removals: crate::sandbox::Removals::new(
                Arc::new(engine.clone()),
                config.pool.removal_backlog,
            ),
            slots: Arc::new(Semaphore::new(config.pool.max_concurrency)),
            config,
            engine,
            engine_info,
            image,
            image_id,
            registry_dir,
            discovery,
            host_paths,
            seccomp,
            engine_limits,
            runtime_kind,
            image_tree: tree.mount,
            image_tree_reason: tree.reason,
            _image_tree_hold: tree.hold,
        }))
    }
}

/// The kind of the registered runtime `name`; refuses one that is not registered, or whose
/// registration would break a guarantee, and logs what it should change otherwise.
async fn runtime_kind(engine: &Engine, name: &str) -> Result<RuntimeKind, StartError> {
    let registered = engine.runtimes().await?;
    let Some(registration) = registered.get(name) else {
        let mut names: Vec<&str> = registered.keys().map(String::as_str).collect();
        names.sort_unstable();
        return Err(crate::config::ConfigError::RuntimeNotRegistered {
            runtime: name.to_string(),
            registered: names.join(", "),
        }
        .into());
    };
    for problem in registration.problems() {
        if problem.fatal {
            return Err(StartError::Runtime {
                what: problem.what,
                fix: problem.fix,
            });
        }
        tracing::warn!("{}; {}", problem.what, problem.fix);
    }
    let kind = registration.kind();
    tracing::info!(runtime = name, kind = ?kind, path = %registration.path, "sandbox runtime");
    Ok(kind)
}

impl Shared {
    /// Stops what every tenant shares: the upstream connections (stdio upstreams are killed).
    pub async fn shutdown(&self) {
        if let Some(gateway) = &self.gateway {
            gateway.shutdown().await;
        }
    }
}
