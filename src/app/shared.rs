//! What every tenant of a server shares, started once: the engine (orphans reaped, features
//! checked), the sandbox image (built on first start) and its host copy, the tool catalog, the server-wide
//! execution slots and pool budget, the upstream connections and the PII key.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::app::StartError;
use crate::app::open::engine_limits::EngineLimits;
use crate::app::starting::Progress;
use crate::config::Config;
use crate::discovery::Discovery;
use crate::discovery::semantic::Ranking;
use crate::gateway::{Gateway, UpstreamsFile};
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
    /// The package cache every tenant shares (`None`: `--packages off`), and who may install
    /// what (`--packages-policy`).
    pub(super) packages: Option<Arc<crate::packages::PackageSets>>,
    pub(super) package_policy: crate::packages::PolicyFile,
    /// Guarded egress, when the upstreams file has an `egress` object.
    pub(super) egress: Option<crate::app::open::egress::ServerEgress>,
    /// Upload and download links, when `--public-url` says where they point.
    pub(super) links: Option<Arc<crate::app::links::ServerLinks>>,
    /// Holds the copy (a shared lock) so no other server removes it while this one runs.
    _image_tree_hold: Option<crate::sandbox::image::tree::Prepared>,
}

impl Shared {
    /// Upload and download links, when the server makes them (`--public-url`).
    pub fn links(&self) -> Option<&Arc<crate::app::links::ServerLinks>> {
        self.links.as_ref()
    }

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

    /// The package cache's counts and size (`None`: `--packages off`).
    pub fn package_stats(&self) -> Option<crate::packages::PackageStats> {
        self.packages.as_ref().map(|p| p.stats())
    }

    /// Used containers waiting for an idle engine to be removed, server-wide.
    pub fn removal_backlog(&self) -> usize {
        self.removals.backlog()
    }
}

/// The engine's side of a start: connected, its description, and the runtime, paths and
/// seccomp profile its sandboxes use.
struct EngineSide {
    engine: Engine,
    info: EngineInfo,
    runtime_kind: RuntimeKind,
    host_paths: HostPaths,
    seccomp: Seccomp,
}

impl Shared {
    /// Connects to the engine, removes containers a crashed server left, makes sure the image
    /// exists (building it on first start) and loads the tool registry.
    pub async fn start(config: Config) -> Result<Arc<Self>, StartError> {
        Self::start_reporting(config, &Progress::<Arc<Self>>::silent()).await
    }

    /// The checks of a start that need neither the engine nor the network: the flags, the
    /// data directory's storage and the upstreams file. A server makes them before it answers
    /// anyone, so a mistake there stops it at once. Returns the upstreams file, read.
    pub fn check(config: &Config) -> Result<Option<UpstreamsFile>, StartError> {
        config.validate()?;
        check_storage(config)?;
        let Some(path) = &config.gateway.upstreams else {
            return Ok(None);
        };
        let file = crate::gateway::upstreams_file::read_file_for(path, config.pii.tokenizes())?;
        Ok(Some(file))
    }

    /// [`Shared::start`], naming each step to `progress` as it enters it, and stopping where
    /// stopping leaves nothing behind once `progress` is asked to stop.
    pub async fn start_reporting<T: Clone + Send + Sync>(
        config: Config,
        progress: &Progress<T>,
    ) -> Result<Arc<Self>, StartError> {
        let upstreams = Self::check(&config)?;
        let pii_key = match &config.pii.pii_key_file {
            Some(path) => Some(PiiKey::from_file(path)?),
            None => None,
        };
        progress.step("connecting to the engine", SECOND, AFTER_IMAGE)?;
        let side = progress.unless_stopped(prepare_engine(&config)).await?;
        let image = sandbox_image(&config, &side.engine, progress);
        let (image, image_id) = progress.unless_stopped(image).await?;
        progress.step(
            "checking that the engine enforces the sandbox's limits",
            LIMITS,
            AFTER_IMAGE - LIMITS,
        )?;
        let engine_limits = crate::app::open::engine_limits::check(
            &config,
            side.runtime_kind,
            &side.engine,
            &side.info,
            &image,
        )
        .await?;
        progress.step(
            "copying the image's /usr for the sandboxes (--image-tree)",
            TREE,
            AFTER_IMAGE - LIMITS - TREE,
        )?;
        let tree = crate::app::open::image_tree::serve(
            &config,
            &side.engine,
            (&image_id, &side.host_paths),
            progress.stop_signal(),
        )
        .await;
        progress.step("loading the tool catalog", SECOND, 2 * SECOND)?;
        let registry_dir = config.storage.registry_dir();
        // One ranking, so the catalog and the upstreams' live tools share one model.
        let ranking = config.discovery.ranking();
        let discovery = Arc::new(open_discovery(&registry_dir, ranking.clone())?);
        progress.step("opening the package cache", SECOND, SECOND)?;
        let rules = (upstreams.as_ref()).map_or_else(Default::default, |f| f.egress.clone());
        let egress = crate::app::open::egress::open(&config, rules, &side.host_paths)?;
        let (packages, package_policy) =
            open_packages(&config, &side, &image, &engine_limits, egress.as_ref())?;
        let links = crate::app::links::ServerLinks::open(config.links.settings(
            config.oauth.resource().map(|r| r.public_url),
            &config.storage.data_dir(),
        ))
        .map_err(|e| StartError::Links(e.to_string()))?
        .map(Arc::new);
        Ok(Arc::new(Self {
            links,
            packages,
            package_policy,
            gateway: start_gateway(&config, upstreams, ranking),
            egress,
            pool_budget: crate::sandbox::PoolBudget::new(config.pool.pool_max),
            pii_key,
            removals: crate::sandbox::Removals::new(
                Arc::new(side.engine.clone()),
                config.pool.removal_backlog,
            ),
            slots: Arc::new(Semaphore::new(config.pool.max_concurrency)),
            config,
            engine: side.engine,
            engine_info: side.info,
            image,
            image_id,
            registry_dir,
            discovery,
            host_paths: side.host_paths,
            seccomp: side.seccomp,
            engine_limits,
            runtime_kind: side.runtime_kind,
            image_tree: tree.mount,
            image_tree_reason: tree.reason,
            _image_tree_hold: tree.hold,
        }))
    }
}

/// How long a start's steps usually take, for the "about how long" of a client that asks
/// while it runs (measured on a 2-core machine; a guide, not a promise).
const SECOND: Duration = Duration::from_secs(1);
/// A first build of the sandbox image, with its offline base when no registry answers.
const IMAGE_BUILD: Duration = Duration::from_secs(240);
/// The probes of the memory and pids limits.
const LIMITS: Duration = Duration::from_secs(5);
/// A first copy of the image's `/usr` into the data directory.
const TREE: Duration = Duration::from_secs(15);
/// Everything after the image: the limits' probes, the tree, the catalog, the packages and
/// the tenant.
const AFTER_IMAGE: Duration = Duration::from_secs(5 + 15 + 3);

/// The package cache and its policy file.
fn open_packages(
    config: &Config,
    side: &EngineSide,
    image: &str,
    engine_limits: &EngineLimits,
    egress: Option<&crate::app::open::egress::ServerEgress>,
) -> Result<
    (
        Option<Arc<crate::packages::PackageSets>>,
        crate::packages::PolicyFile,
    ),
    StartError,
> {
    let own = (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    );
    let from = crate::app::open::packages::PackagesFrom {
        engine: &side.engine,
        image,
        host_paths: &side.host_paths,
        seccomp: &side.seccomp,
        ids: engine_limits.sandbox_ids(own),
        egress,
    };
    let sets = crate::app::open::packages::open(config, from)?;
    let policy = match &config.packages.packages_policy {
        Some(path) => crate::packages::PolicyFile::read(path)
            .map_err(|e| StartError::Packages(e.to_string()))?,
        None => crate::packages::PolicyFile::default(),
    };
    Ok((sets, policy))
}

/// With `--shared-data`, refuses a data directory that is not on storage every node mounts.
fn check_storage(config: &Config) -> Result<(), StartError> {
    if config.storage.shared_data {
        let storage = crate::host::storage::require_shared(&config.storage.data_dir())?;
        tracing::info!("tenant data on shared storage: {storage}");
    }
    Ok(())
}

/// Connects to the engine, warns of what it lacks, removes the containers a crashed server
/// left, and settles the runtime, the path translation and the seccomp profile.
async fn prepare_engine(config: &Config) -> Result<EngineSide, StartError> {
    let engine = Engine::connect().await?;
    let info = engine.info().await?;
    warn_of_engine_gaps(&engine, &info).await;
    reaper::reap_orphans(&engine).await?;
    let runtime_kind = match &config.sandbox.runtime {
        None => RuntimeKind::Native,
        Some(runtime) => runtime_kind(&engine, runtime).await?,
    };
    let host_paths = HostPaths::detect(&engine)
        .await
        .map_err(StartError::HostPath)?;
    let seccomp_dir = config.storage.data_dir().join(seccomp_file::DIR_NAME);
    let seccomp =
        seccomp_file::for_engine(&info.kind, runtime_kind, &seccomp_dir).map_err(|source| {
            StartError::SeccompFile {
                path: seccomp_dir.clone(),
                source,
            }
        })?;
    Ok(EngineSide {
        engine,
        info,
        runtime_kind,
        host_paths,
        seccomp,
    })
}

/// Logs the features the engine lacks, and that it does not report OOM kills when it does not.
async fn warn_of_engine_gaps(engine: &Engine, info: &EngineInfo) {
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
    if !info.reports_oom_kills() {
        tracing::warn!(
            "{} {} does not report OOM kills: an execution that reaches its memory limit ends as a SIGKILL (exit 137) reported as a likely memory-limit kill. Podman 5 reports them",
            info.kind,
            info.version
        );
    }
}

/// The sandbox image's tag and the id it resolves to: `--image` must exist; the server's own
/// image is built on first start.
async fn sandbox_image<T: Clone>(
    config: &Config,
    engine: &Engine,
    progress: &Progress<T>,
) -> Result<(String, String), StartError> {
    let image = config.sandbox.image_tag();
    let present = image::image_id(engine, &image).await?;
    if config.sandbox.image.is_some() {
        let id = present.ok_or_else(|| EngineError::ImageMissing(image.clone()))?;
        return Ok((image, id));
    }
    if present.is_none() {
        progress.step(
            "building the sandbox image (first start)",
            IMAGE_BUILD,
            AFTER_IMAGE,
        )?;
    }
    let image_id = image::ensure(
        engine,
        &image,
        config.sandbox.base_image.as_deref(),
        config.sandbox.image_profile,
    )
    .await?;
    Ok((image, image_id))
}

/// The shipped tool catalog and `--registry-dir`'s files.
fn open_discovery(registry_dir: &Path, ranking: Ranking) -> Result<Discovery, StartError> {
    Discovery::shipped_and(registry_dir, ranking).map_err(|e| StartError::Registry {
        path: registry_dir.to_path_buf(),
        message: e.to_string(),
    })
}

/// Starts connecting to the upstream MCP servers of the upstreams file, in the background.
fn start_gateway(
    config: &Config,
    file: Option<UpstreamsFile>,
    ranking: Ranking,
) -> Option<Arc<Gateway>> {
    let file = file?;
    tracing::info!(
        upstreams = file.servers.len(),
        file = %config.gateway.upstreams.as_deref().unwrap_or(Path::new("")).display(),
        "connecting to upstream MCP servers"
    );
    Some(Gateway::start(
        file,
        config.gateway.upstream_limits(),
        ranking,
    ))
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
