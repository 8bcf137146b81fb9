//! The assembled server: engine, sandbox image, workspace (with its quota), skills, tool
//! discovery, the PII engine, sandbox and stats, started in the right order and shut down
//! cleanly. Both transports and the tests share one
//! `App`; the MCP layer only holds an `Arc<App>`.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::config::{Config, PiiOutput, SANDBOX_UID};
use crate::discovery::Discovery;
use crate::execute_request::{self, ExecLimits, ExecuteRequest, InputError};
use crate::gateway::{Gateway, GatewayView, ToolCallRecord, ToolSession, UpstreamsError};
use crate::host_paths::{HostPathError, HostPaths};
use crate::pii::{KeyFileError, PiiEngine, PiiKey, Scope};
use crate::sandbox::image::{self, ImageError};
use crate::sandbox::seccomp_file;
use crate::sandbox::spec::Seccomp;
use crate::sandbox::stats::Stats;
use crate::sandbox::{
    Engine, EngineError, EngineInfo, Job, Outcome, Sandbox, SandboxError, SandboxSettings, reaper,
};
use crate::sandbox_calls::ServerCalls;
use crate::skills::{SkillError, SkillLimits, SkillStore};
use crate::workspace::quota::{self, QuotaMode};
use crate::workspace::{Workspace, WorkspaceError, WorkspaceLimits};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("invalid configuration: {0}")]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Image(#[from] ImageError),
    // The errors below embed their cause in the message and do not expose it as a source,
    // so `main`'s error chain does not print it two more times.
    #[error("workspace {path}: {error}")]
    Workspace {
        path: PathBuf,
        error: WorkspaceError,
    },
    #[error("workspace quota for {path}: {message}")]
    Quota { path: PathBuf, message: String },
    #[error(
        "skills directory {path}: {error}. Point --skills-dir (CEM_SKILLS_DIR) at a directory the server can read and write (it is created when missing), or move what is at that path away"
    )]
    Skills { path: PathBuf, error: SkillError },
    #[error(
        "tool registry {path}: {message}. Point --registry-dir (CEM_REGISTRY_DIR) at a directory of *.json registry files (they add to the catalog built into the server), or leave it out"
    )]
    Registry { path: PathBuf, message: String },
    #[error("PII engine: {0}")]
    Pii(String),
    #[error(transparent)]
    PiiKey(#[from] KeyFileError),
    #[error(transparent)]
    Upstreams(#[from] UpstreamsError),
    #[error(
        "tools package directory {path}: {source}. The server writes the generated `servers` package for sandboxes there (under --data-dir)"
    )]
    ToolsPackage {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    HostPath(HostPathError),
    #[error(
        "cannot write the seccomp profile for the engine to {path}: {source}. The server writes it under --data-dir (CEM_DATA_DIR) when the engine is Podman, whose Docker-compatible API takes the profile as a file; make that directory writable"
    )]
    SeccompFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the seccomp profile file {profile} is inside {mount}, which sandboxes mount, so their code could change it: point --workspace (CEM_WORKSPACE) and --skills-dir (CEM_SKILLS_DIR) at directories that do not contain --data-dir's `engine` directory (their defaults, under --data-dir, do not)"
    )]
    SeccompInMount { profile: PathBuf, mount: PathBuf },
    #[error(transparent)]
    Storage(#[from] crate::storage::StorageError),
}

/// Why an execution request did not run.
#[derive(Debug, thiserror::Error)]
pub enum ExecuteError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error("{0}")]
    Workspace(WorkspaceError),
    #[error(
        "cannot prepare the `servers` package for this execution: {0}. Check that the data directory is writable"
    )]
    ToolsPackage(std::io::Error),
}

/// What one execution gave: its outcome, the limits it ran under, and the upstream tool calls
/// its code made.
#[derive(Debug)]
pub struct Executed {
    pub outcome: Outcome,
    pub limits: ExecLimits,
    pub tool_calls: Vec<ToolCallRecord>,
    /// Images, resource links and the files the code created or changed.
    pub produced: crate::produced::Produced,
}

/// One tenant's server (the only one over stdio): its own workspace, skills, PII vault, stats
/// and sandbox, over the state every tenant shares.
pub struct App {
    pub config: Config,
    /// The engine, image, tool catalog and server-wide slots, shared with every tenant.
    pub shared: Arc<Shared>,
    pub workspace: Arc<Workspace>,
    pub workspace_path: PathBuf,
    pub quota: QuotaMode,
    pub skills_dir: PathBuf,
    pub skills: Arc<SkillStore>,
    pub pii: Arc<PiiEngine>,
    pub sandbox: Arc<Sandbox>,
    pub stats: Arc<Stats>,
    /// This tenant's upstream MCP servers (`--upstreams`), their tools and package.
    pub gateway: Option<Arc<GatewayView>>,
}

/// What every tenant of a server shares: the engine, the sandbox image, the tool catalog, the
/// server-wide execution slots and the translation of paths for the engine.
pub struct Shared {
    pub config: Config,
    pub engine: Engine,
    pub engine_info: EngineInfo,
    pub image: String,
    pub image_id: String,
    pub registry_dir: PathBuf,
    pub discovery: Arc<Discovery>,
    /// Executions running at once in the whole server (`--max-concurrency`).
    pub slots: Arc<Semaphore>,
    pub host_paths: HostPaths,
    /// How the seccomp profile reaches the engine (a file's path as this process sees it).
    pub seccomp: Seccomp,
    /// The upstream MCP servers of `--upstreams`, connecting in the background.
    pub gateway: Option<Arc<Gateway>>,
    /// The budget every tenant's pool grows within (`--pool-max`).
    pub pool_budget: Arc<crate::sandbox::PoolBudget>,
    /// Used containers waiting for an idle engine to be removed (`--removal-backlog`).
    pub removals: Arc<crate::sandbox::Removals>,
    /// The key of `--pii-key-file`, which every tenant's PII secret and vault file derive from.
    pub pii_key: Option<PiiKey>,
}

impl Shared {
    /// The node this server runs on, for `get_execution_stats`: `--node-name`, else the
    /// engine's host name.
    pub fn node_name(&self) -> &str {
        self.config
            .storage
            .node_name
            .as_deref()
            .unwrap_or(&self.engine_info.host_name)
    }
}

impl Shared {
    /// Connects to the engine, removes containers a crashed server left, makes sure the image
    /// exists (building it on first start) and loads the tool registry.
    pub async fn start(config: Config) -> Result<Arc<Self>, StartError> {
        config.validate()?;
        if config.storage.shared_data {
            let storage = crate::storage::require_shared(&config.storage.data_dir())?;
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
        if let Some(runtime) = &config.sandbox.runtime {
            let registered = engine.runtimes().await?;
            if !registered.contains(runtime) {
                return Err(crate::config::ConfigError::RuntimeNotRegistered {
                    runtime: runtime.clone(),
                    registered: registered.join(", "),
                }
                .into());
            }
        }
        let host_paths = HostPaths::detect(&engine)
            .await
            .map_err(StartError::HostPath)?;
        let seccomp_dir = config.storage.data_dir().join(seccomp_file::DIR_NAME);
        let seccomp =
            seccomp_file::for_engine(&engine_info.kind, &seccomp_dir).map_err(|source| {
                StartError::SeccompFile {
                    path: seccomp_dir.clone(),
                    source,
                }
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
                let upstreams = crate::gateway::config::read(path)?;
                check_upstream_tenants(&upstreams)?;
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
        }))
    }
}

impl Shared {
    /// Stops what every tenant shares: the upstream connections (stdio upstreams are killed).
    pub async fn shutdown(&self) {
        if let Some(gateway) = &self.gateway {
            gateway.shutdown().await;
        }
    }
}

/// Longest tenant name.
pub(crate) const MAX_TENANT_CHARS: usize = 32;

/// Whether `name` may name a tenant (it becomes a directory name): 1 to 32 of lowercase ASCII
/// letters, digits, `_` and `-`, starting with a letter or digit.
pub fn valid_tenant_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TENANT_CHARS
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        && name.as_bytes()[0].is_ascii_alphanumeric()
}

/// Every tenant an upstream names must be a valid tenant name (it is matched against the
/// tokens file's tenants, which are checked by the same rule).
fn check_upstream_tenants(
    upstreams: &[crate::gateway::UpstreamConfig],
) -> Result<(), crate::config::ConfigError> {
    for u in upstreams {
        for t in u.tenants.iter().flatten() {
            if !valid_tenant_name(t) {
                return Err(crate::config::ConfigError::Invalid {
                    flag: "--upstreams",
                    problem: format!(
                        "file: upstream `{}` names {t:?} as a tenant, which is not a tenant name (1 to {MAX_TENANT_CHARS} lowercase letters, digits, '_' or '-')",
                        u.name
                    ),
                });
            }
        }
    }
    Ok(())
}

/// One tenant's directories.
#[derive(Debug, Clone)]
pub struct TenantDirs {
    pub workspace: PathBuf,
    pub skills: PathBuf,
    /// Where the generated `servers` package is written (mounted read-only in sandboxes).
    pub servers: PathBuf,
    /// The encrypted PII vault file (used with `--pii-key-file`).
    pub pii_vault: PathBuf,
}

impl TenantDirs {
    /// The single tenant of stdio, and of HTTP without tokens: `--workspace`, `--skills-dir`.
    pub fn single(config: &Config) -> Self {
        Self {
            workspace: config.storage.workspace_dir(),
            skills: config.storage.skills_dir(),
            servers: config.storage.data_dir().join("servers"),
            pii_vault: config.storage.data_dir().join("pii").join("vault"),
        }
    }

    /// Tenant `name`'s directories under `--data-dir` (the name is allowlisted by
    /// [`valid_tenant_name`]).
    pub fn tenant(config: &Config, name: &str) -> Self {
        assert!(valid_tenant_name(name), "tenant names are checked");
        let root = config.storage.data_dir().join("tenants").join(name);
        Self {
            workspace: root.join("workspace"),
            skills: root.join("skills"),
            servers: root.join("servers"),
            pii_vault: root.join("pii").join("vault"),
        }
    }
}

impl App {
    /// A single-tenant server: [`Shared::start`], then [`App::open`] on `--workspace` and
    /// `--skills-dir`.
    pub async fn start(config: Config) -> Result<Self, StartError> {
        let shared = Shared::start(config).await?;
        let dirs = TenantDirs::single(&shared.config);
        Self::open(shared, dirs, None).await
    }

    /// One tenant of a started server: prepares its workspace (with its quota) and skills, and
    /// starts its PII engine, stats and sandbox (whose pool starts filling now). `tenant` names
    /// it in logs, and limits it to `--tenant-max-concurrency` executions at once.
    pub async fn open(
        shared: Arc<Shared>,
        dirs: TenantDirs,
        tenant: Option<&str>,
    ) -> Result<Self, StartError> {
        let config = shared.config.clone();
        let TenantDirs {
            workspace: workspace_path,
            skills: skills_dir,
            servers: servers_dir,
            pii_vault,
        } = dirs;
        if let Some(name) = tenant {
            tracing::info!("opening tenant {name}: {}", workspace_path.display());
            if let Some(parent) = workspace_path.parent() {
                create_private_dir(parent)
                    .await
                    .map_err(|source| StartError::Workspace {
                        path: workspace_path.clone(),
                        error: WorkspaceError::Io {
                            context: format!("cannot create {}", parent.display()),
                            source,
                        },
                    })?;
            }
        }
        let quota = if config.storage.workspace_quota_mb == 0 {
            QuotaMode::Soft {
                reason: "no quota configured (--workspace-quota-mb 0)".into(),
            }
        } else if let HostPaths::InContainer { .. } = shared.host_paths {
            // A loop mount made in the server's container is invisible to the engine.
            QuotaMode::Soft {
                reason: "the server runs in a container, where a loop-mounted quota image would be invisible to the Docker engine".into(),
            }
        } else {
            let path = workspace_path.clone();
            let bytes = config.storage.workspace_quota_bytes();
            tokio::task::spawn_blocking(move || quota::ensure(&path, bytes))
                .await
                .expect("quota setup does not panic")
                .map_err(|e| StartError::Quota {
                    path: workspace_path.clone(),
                    message: e.to_string(),
                })?
        };
        if let QuotaMode::Soft { reason } = &quota
            && config.storage.workspace_quota_mb > 0
        {
            tracing::warn!(
                "workspace quota is enforced between executions only: {reason} (see docs/deploying.md, \"Workspace quota\")"
            );
        }
        let quota_bytes = config.storage.workspace_quota_bytes();
        let ws_limits = WorkspaceLimits {
            max_file_bytes: config.storage.max_file_mb * 1024 * 1024,
            // No quota configured: a limit nothing reaches.
            quota_bytes: if quota_bytes == 0 {
                u64::MAX
            } else {
                quota_bytes
            },
            soft_quota: quota_bytes > 0 && !quota.kernel_enforced(quota_bytes),
            ..WorkspaceLimits::default()
        };
        let workspace = Workspace::open(&workspace_path, ws_limits).map_err(|source| {
            StartError::Workspace {
                path: workspace_path.clone(),
                error: source,
            }
        })?;
        let user = workspace
            .prepare_for_sandbox(SANDBOX_UID)
            .map_err(|source| StartError::Workspace {
                path: workspace_path.clone(),
                error: source,
            })?;
        let workspace = Arc::new(workspace);
        // Temp files of a server killed mid-write: removed in the background (a walk of a
        // large workspace should not delay the start; only dead writers' files are touched).
        let sweep = workspace.clone();
        tokio::task::spawn_blocking(move || match sweep.remove_stale_temps() {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!("removed {n} temp files a stopped server left in the workspace")
            }
            Err(e) => tracing::warn!("could not look for stale temp files in the workspace: {e}"),
        });

        let skills = SkillStore::open(&skills_dir, SkillLimits::default()).map_err(|source| {
            StartError::Skills {
                path: skills_dir.clone(),
                error: source,
            }
        })?;
        match skills.seed_from(crate::shipped::STARTER_SKILLS) {
            Ok(0) => {}
            Ok(n) => tracing::info!("added {n} starter skills to {}", skills_dir.display()),
            Err(e) => tracing::warn!("could not add the starter skills: {e}"),
        }
        let skills = Arc::new(skills);
        let pii = Arc::new(
            match shared.pii_key.clone() {
                None => PiiEngine::with_random_secret(config.pii.pii_vault_size),
                // Replaying a large vault file takes a while: off the async threads.
                // A vault file that cannot be opened (the shared volume failing over, a symlink
                // planted at its path) does not keep the tenant out: it is served with the same
                // tokens from memory, and the log says why the file is not used.
                Some(key) => {
                    let (size, tenant) = (config.pii.pii_vault_size, tenant.map(str::to_string));
                    tokio::task::spawn_blocking(move || {
                        let scope = Scope::of(tenant.as_deref());
                        PiiEngine::with_key(&key, scope, size, &pii_vault).or_else(|e| {
                            tracing::error!(
                                "the PII vault file {} cannot be used ({e}): tokens of this tenant minted before are not restored by this server, and new ones last until it stops",
                                pii_vault.display()
                            );
                            Ok(PiiEngine::new(key.token_secret(scope), size))
                        })
                    })
                    .await
                    .expect("opening the PII vault does not panic")
                }
            }
            .map_err(|e| StartError::Pii(e.to_string()))?,
        );
        let calls = Arc::new(ServerCalls::new(skills.clone(), pii.clone()));

        let gateway =
            match &shared.gateway {
                None => None,
                Some(g) => Some(g.view(tenant, &servers_dir).map_err(|source| {
                    StartError::ToolsPackage {
                        path: servers_dir.clone(),
                        source,
                    }
                })?),
            };

        let stats = Arc::new(Stats::new());
        let for_engine = |path: &PathBuf| {
            let canonical = path.canonicalize().unwrap_or(path.clone());
            shared
                .host_paths
                .to_engine(&canonical)
                .map_err(StartError::HostPath)
        };
        let seccomp = match &shared.seccomp {
            Seccomp::Inline => Seccomp::Inline,
            Seccomp::File(profile) => {
                let real = |p: &PathBuf| p.canonicalize().unwrap_or(p.clone());
                let tools = gateway.as_ref().map(|view| view.tree_root().to_path_buf());
                let mounts: Vec<PathBuf> = [workspace_path.clone(), skills_dir.clone()]
                    .into_iter()
                    .chain(tools)
                    .collect();
                let real_mounts: Vec<PathBuf> = mounts.iter().map(real).collect();
                outside_mounts(&real(profile), real_mounts.iter().map(PathBuf::as_path))?;
                // And as the engine sees them (a server in a container translates both).
                let on_engine = for_engine(profile)?;
                let mounts_on_engine =
                    (mounts.iter().map(for_engine)).collect::<Result<Vec<_>, _>>()?;
                outside_mounts(&on_engine, mounts_on_engine.iter().map(PathBuf::as_path))?;
                Seccomp::File(on_engine)
            }
        };
        let settings = SandboxSettings {
            image: shared.image.clone(),
            workspace: for_engine(&workspace_path)?,
            skills: Some(for_engine(&skills_dir)?),
            servers: match &gateway {
                Some(view) => Some(for_engine(&view.tree_root().to_path_buf())?),
                None => None,
            },
            uid: user.uid,
            gid: user.gid,
            container: config.sandbox.container(),
            limits: config.limits.harness_limits(),
            max_concurrency: if tenant.is_some() {
                config.tenant_max_concurrency()
            } else {
                config.pool.max_concurrency
            },
            server_slots: shared.slots.clone(),
            max_queue: config.pool.max_queue,
            pool_size: config.pool.pool_size,
            pool_budget: shared.pool_budget.clone(),
            pool_idle: std::time::Duration::from_secs(config.pool.pool_idle_secs),
            // An HTTP tenant that has gone idle gives its containers back.
            pool_idle_floor: if tenant.is_some() {
                0
            } else {
                config.pool.pool_size
            },
            removals: shared.removals.clone(),
            pool_memory_bytes: (config.limits.default_memory_mb * 1024 * 1024) as i64,
            image_id: shared.image_id.clone(),
            start_limit: config.sandbox.start_timeout(),
            preload: config.sandbox.preload_modules(),
            seccomp,
            oom_reported: shared.engine_info.reports_oom_kills(),
        };
        let sandbox = Arc::new(Sandbox::new(
            Arc::new(shared.engine.clone()),
            settings,
            calls,
            stats.clone(),
        ));
        sandbox.refill();
        sandbox.watch_engine();
        Ok(Self {
            config,
            shared,
            workspace,
            workspace_path,
            quota,
            skills_dir,
            skills,
            pii,
            sandbox,
            stats,
            gateway,
        })
    }

    /// Checks and clamps the request, then runs it in a fresh container. With a tap, each
    /// output chunk is also offered to it as it arrives (for progress reports; see
    /// `progress`).
    pub async fn execute(
        &self,
        request: ExecuteRequest,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<Executed, ExecuteError> {
        let call_started = std::time::Instant::now();
        let executed = self.execute_timed(request, cancel).await;
        self.stats
            .phase(crate::sandbox::stats::Phase::Call, call_started.elapsed());
        executed
    }

    async fn execute_timed(
        &self,
        request: ExecuteRequest,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<Executed, ExecuteError> {
        let ExecuteRequest {
            code,
            context_vars,
            timeout_seconds,
            memory_mb,
            tap,
            confirm,
        } = request;
        execute_request::check_code(&code, self.config.limits.max_code_bytes)?;
        execute_request::check_context_vars(context_vars.as_ref())?;
        let context_vars = context_vars.unwrap_or(serde_json::Value::Null);
        execute_request::check_job_size(&code, &context_vars)?;
        let limits = execute_request::clamp(
            timeout_seconds,
            memory_mb,
            &self.config.limits.execute_bounds(),
        )?;
        // One trip to a blocking thread: the soft quota, then what the workspace holds (to
        // tell what the code produced).
        let before = self
            .with_workspace(|ws| ws.check_quota().map(|()| ws.snapshot().ok()))
            .await
            .map_err(ExecuteError::Workspace)?;
        let session = match &self.gateway {
            None => None,
            Some(view) => {
                view.first_connections().await;
                let view = view.clone();
                let limits = self.config.gateway.call_limits();
                let pii =
                    (self.config.pii.pii_output == PiiOutput::Tokenize).then(|| self.pii.clone());
                let session = tokio::task::spawn_blocking(move || {
                    ToolSession::new(view, limits, confirm, pii)
                })
                .await
                .expect("package generation does not panic")
                .map_err(ExecuteError::ToolsPackage)?;
                Some(Arc::new(session))
            }
        };
        let job = Job {
            code,
            context_vars,
            timeout: limits.timeout,
            memory_bytes: limits.memory_bytes,
            tap,
            servers: session
                .as_ref()
                .and_then(|s| s.tree_version().map(str::to_string)),
            calls: session.as_ref().map(|s| {
                Arc::new(
                    ServerCalls::new(self.skills.clone(), self.pii.clone()).with_tools(s.clone()),
                ) as Arc<dyn crate::sandbox::CallHandler>
            }),
        };
        let ran = self.sandbox.run(job, cancel).await;
        let tool_calls = session.as_ref().map(|s| s.records()).unwrap_or_default();
        if let Some(view) = &self.gateway {
            drop(session);
            view.collect_unused();
        }
        let mut outcome = ran?;
        if let Some(error) = outcome.error.as_mut()
            && mentions_no_space(error)
        {
            error.push_str(&format!(". {}", self.no_space_hint()));
        }
        // One trip to a blocking thread: redaction, then the images and files produced.
        let pii = (self.config.pii.pii_output == PiiOutput::Tokenize).then(|| self.pii.clone());
        let (workspace, bounds) = (self.workspace.clone(), self.config.limits.image_bounds());
        let (outcome, produced) = tokio::task::spawn_blocking(move || {
            if let Some(pii) = pii {
                crate::privacy::redact_outcome(&pii, &mut outcome);
            }
            let returned = std::mem::take(&mut outcome.returned);
            let produced = crate::produced::prepare(returned, bounds, &workspace, before.as_ref());
            (outcome, produced)
        })
        .await
        .expect("redaction and preparing images and files do not panic");
        Ok(Executed {
            outcome,
            limits,
            tool_calls,
            produced,
        })
    }

    /// What to do when code ran out of space: which limits apply and how to free space.
    fn no_space_hint(&self) -> String {
        let workspace = if self.config.storage.workspace_quota_mb > 0 {
            format!(
                "/workspace holds at most {} MiB (the workspace quota)",
                self.config.storage.workspace_quota_mb
            )
        } else {
            "/workspace is on the host's disk (no quota), which is full".to_string()
        };
        format!(
            "No space left: {workspace} and /tmp at most {} MiB. Delete files you no longer need (delete_file in code, or the delete_workspace_file tool) or write less",
            self.config.sandbox.tmpfs_mb
        )
    }

    /// Text on its way to the model: tokenized when `--pii-output tokenize` is in force.
    pub fn for_model(&self, text: String) -> String {
        match self.config.pii.pii_output {
            PiiOutput::Tokenize => blocking_here(|| self.pii.sanitize(&text).text),
            PiiOutput::Off => text,
        }
    }

    /// [`App::for_model`] of `text` cut to `max_chars` characters, with `…` where it was cut.
    /// The PII engine reads past the cut, so a value the cut splits becomes its token whole
    /// (which may end past `max_chars`) rather than leave its first part in clear.
    pub fn for_model_cut(&self, text: String, max_chars: usize) -> String {
        let Some((cut, _)) = text.char_indices().nth(max_chars) else {
            return self.for_model(text);
        };
        let shown = match self.config.pii.pii_output {
            PiiOutput::Tokenize => blocking_here(|| self.pii.sanitize_cut(&text, cut)),
            PiiOutput::Off => text[..cut].to_string(),
        };
        format!("{shown}…")
    }

    /// Text coming from the model into a tool call: tokens this server minted become their
    /// values again when `--pii-output tokenize` is in force (so a file listed as
    /// `[EMAIL_ab12cd34].json` can be read under that name).
    pub fn from_model(&self, text: String) -> String {
        match self.config.pii.pii_output {
            PiiOutput::Tokenize
                if text.contains('[') && crate::privacy::check_restore_budget(&text).is_ok() =>
            {
                blocking_here(|| self.pii.restore(&text).text)
            }
            _ => text,
        }
    }

    /// Runs blocking workspace I/O off the async threads.
    pub async fn with_workspace<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Workspace) -> T + Send + 'static,
    ) -> T {
        let ws = self.workspace.clone();
        tokio::task::spawn_blocking(move || f(&ws))
            .await
            .expect("workspace operations do not panic")
    }

    pub async fn shutdown(&self) {
        self.sandbox.shutdown().await;
    }

    /// Shuts this tenant's sandbox down, then what every tenant shares (for the single
    /// tenant of stdio and of HTTP without tokens).
    pub async fn shutdown_all(&self) {
        self.shutdown().await;
        self.shared.shutdown().await;
    }
}

/// Refuses a seccomp profile file inside a directory sandboxes mount: their code could rewrite
/// it for the next container. The paths are compared as given (canonical, or as the engine
/// names them).
fn outside_mounts<'a>(
    profile: &std::path::Path,
    mounts: impl IntoIterator<Item = &'a std::path::Path>,
) -> Result<(), StartError> {
    match mounts.into_iter().find(|mount| profile.starts_with(mount)) {
        Some(mount) => Err(StartError::SeccompInMount {
            profile: profile.to_path_buf(),
            mount: mount.to_path_buf(),
        }),
        None => Ok(()),
    }
}

/// Creates `dir` and its missing parents with mode 0700, and makes `dir` and its parent (the
/// tenants directory) 0700: other users of the host have no business in tenants' data. The
/// engine binds the workspaces as root, so sandboxes are unaffected.
///
/// On a volume several nodes share (GlusterFS), a `mkdir` that another node makes at the same
/// moment can fail with EIO, or with EEXIST before the directory shows here (servers opening
/// their first tenants at once all create `tenants/`): such failures are retried for about a
/// couple of seconds.
async fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    let mut attempt = 0;
    loop {
        match blocking_here(|| create_private_dir_once(dir)) {
            Err(e) if attempt < 6 && matches!(e.raw_os_error(), Some(libc::EIO | libc::EEXIST)) => {
                attempt += 1;
                tracing::debug!("creating {} failed ({e}); retrying", dir.display());
                tokio::time::sleep(std::time::Duration::from_millis(15 << attempt)).await;
            }
            done => return done,
        }
    }
}

fn create_private_dir_once(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    for d in [Some(dir), dir.parent()].into_iter().flatten() {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Runs `f`, which may block on storage (the PII vault file's append and sync, a directory on a
/// shared volume), from an async context without stalling the runtime: on a multi-threaded
/// runtime the worker hands its other tasks to a new worker first. Why: a shared volume stalls
/// every read and write for seconds when one of its servers goes (GlusterFS's ping-timeout);
/// two workers blocked there would leave `/health` unanswered and the proxy would take a healthy
/// node out. On a current-thread runtime (tests) `f` simply runs.
pub(crate) fn blocking_here<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Whether an execution's error is Python's "no space left" (ENOSPC) or "disk quota exceeded"
/// (EDQUOT), as `OSError` puts it.
fn mentions_no_space(error: &str) -> bool {
    error.contains("[Errno 28]") || error.contains("[Errno 122]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seccomp_profile_inside_a_sandbox_mount_is_refused() {
        let data = tempfile::tempdir().unwrap();
        let profile = data.path().join("engine/seccomp-0123.json");
        let (ws, skills) = (data.path().join("workspace"), data.path().join("skills"));
        assert!(outside_mounts(&profile, [ws.as_path(), skills.as_path()]).is_ok());
        // --workspace pointed at the data directory itself.
        let err = outside_mounts(&profile, [data.path(), skills.as_path()]).unwrap_err();
        assert!(
            matches!(&err, StartError::SeccompInMount { mount, .. } if mount == data.path()),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("point --workspace (CEM_WORKSPACE)"),
            "{err}"
        );
    }

    #[test]
    fn no_space_errors_are_recognised() {
        assert!(mentions_no_space("[Errno 28] No space left on device"));
        assert!(mentions_no_space(
            "[Errno 122] Disk quota exceeded: '/workspace/x'"
        ));
        assert!(!mentions_no_space("[Errno 2] No such file or directory"));
        assert!(!mentions_no_space("division by zero"));
    }

    #[test]
    fn upstream_tenants_follow_the_tenant_name_rule() {
        let file = |tenants: &str| {
            crate::gateway::config::parse(
                &format!(r#"{{"mcpServers": {{"a": {{"command": "x", "tenants": {tenants}}}}}}}"#),
                &|_| None,
            )
            .unwrap()
        };
        assert!(check_upstream_tenants(&file(r#"["sales", "ops-2"]"#)).is_ok());
        let e = check_upstream_tenants(&file(r#"["../x"]"#))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("upstream `a`") && e.contains("not a tenant name"),
            "{e}"
        );
    }
}
