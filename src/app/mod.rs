//! The assembled server: one [`App`] per tenant (the only one over stdio) over the [`Shared`]
//! state every tenant uses. [`App::open`] assembles a tenant in named steps, each in its own
//! room: its directories ([`crate::tenancy`]), the workspace and its quota ([`workspace`]),
//! the skills store, the PII vault ([`vault`]), the gateway's view of the upstreams, and the
//! sandbox from the configuration's groups ([`sandbox`]). Both transports and the tests share
//! it; the MCP layer holds an `Arc<App>` and reaches it through the methods below only
//! ([`stats`] assembles what `get_execution_stats` reports).

mod errors;
pub mod events;
pub mod execution;
pub mod links;
pub mod open;
mod shared;
pub mod starting;
pub mod stats;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tracing::Instrument;

pub use errors::{ExecuteError, StartError};
pub use execution::Executed;
pub use execution::sessions::SessionArg;
pub use open::image_tree::decide as decide_image_tree;
pub use shared::Shared;
pub use starting::{StartState, Starting};

use crate::app::execution::calls::ServerCalls;
use crate::config::Config;
use crate::discovery::Discovery;
use crate::gateway::GatewayView;
use crate::pii::PiiEngine;
use crate::privacy::Privacy;
use crate::sandbox::EngineInfo;
use crate::sandbox::Sandbox;
use crate::sandbox::stats::{Stats, StatsSnapshot};
use crate::skills::{SkillLimits, SkillStore};
use crate::tenancy::TenantDirs;
use crate::workspace::quota::QuotaMode;
use crate::workspace::{SandboxUser, Workspace};

/// One MCP session's count in [`App::mcp_sessions`], released on drop.
pub struct McpSessionGuard(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for McpSessionGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// One tenant's server: its own workspace, skills, PII vault, stats and sandbox, over the
/// state every tenant shares.
pub struct App {
    config: Config,
    shared: Arc<Shared>,
    workspace: Arc<Workspace>,
    workspace_path: PathBuf,
    quota: QuotaMode,
    skills_dir: PathBuf,
    skills: Arc<SkillStore>,
    pii: Arc<PiiEngine>,
    /// What sandbox code may hold in clear under the flow rules (`open::flow`).
    may_hold: Option<crate::privacy::MayHold>,
    /// What the model is shown: through `pii` unless `--pii-output off`.
    privacy: Privacy,
    sandbox: Arc<Sandbox>,
    stats: Arc<Stats>,
    /// This tenant's upstream MCP servers (`--upstreams`), their tools and package.
    gateway: Option<Arc<GatewayView>>,
    /// The hosts this tenant's code may reach through the server (the `egress` object).
    egress: Option<open::egress::TenantEgress>,
    /// State carried across calls (`execute_code`'s `session`).
    sessions: Arc<execution::sessions::Sessions>,
    /// Executions waiting for a 2026-07-28 client's answer to a question.
    paused: Arc<execution::paused::PausedTable>,
    /// Executions run as tasks (the tasks extension). Held here, not by the MCP session:
    /// a tenant's tasks outlive the request, and the HTTP session, that started them.
    tasks: rmcp::task_manager::TaskManager,
    /// This tenant's changes, for `subscriptions/listen` streams.
    events: Arc<events::Events>,
    /// Upload and download links' markers, budget, counters and known hashes.
    links: links::TenantLinks,
    /// The tenant's name (none on a server without tenants).
    tenant: Option<String>,
    /// Whether its sandboxes run as the tenant's own uid (`--tenant-uid-range`).
    own_uid: bool,
    /// This tenant's audit trail on this node (`--audit`).
    audit: Option<Arc<crate::audit::AuditLog>>,
    /// MCP sessions open on this tenant (each `CodeExecutionServer` holds one count).
    mcp_sessions: Arc<std::sync::atomic::AtomicUsize>,
    /// The span naming the tenant, which its background work (pool starts, sweeps, timers)
    /// runs in ([`crate::logging::tenant_span`]).
    span: tracing::Span,
}

impl App {
    /// A single-tenant server: [`Shared::start`], then [`App::open`] on `--workspace` and
    /// `--skills-dir`.
    pub async fn start(config: Config) -> Result<Self, StartError> {
        Self::start_reporting(config, &starting::Progress::silent()).await
    }

    /// [`App::start`], naming each step to `progress` (see [`starting`]).
    async fn start_reporting(
        config: Config,
        progress: &starting::Progress,
    ) -> Result<Self, StartError> {
        let shared = Shared::start_reporting(config, progress).await?;
        let step = progress.step(
            "opening the workspace, skills and sandbox pool",
            starting::OPEN_TENANT,
            std::time::Duration::ZERO,
        );
        if let Err(stopped) = step {
            // Its upstream connections are running already.
            shared.shutdown().await;
            return Err(stopped);
        }
        let dirs = shared.config.storage.single_tenant_dirs();
        Self::open(shared, dirs, None).await
    }

    /// One tenant of a started server: prepares its workspace (with its quota) and skills, and
    /// starts its PII engine, stats and sandbox (whose pool starts filling now). `tenant` names
    /// it in logs (its opening and its background work run in its span), and limits it to
    /// `--tenant-max-concurrency` executions at once.
    pub async fn open(
        shared: Arc<Shared>,
        dirs: TenantDirs,
        tenant: Option<&str>,
    ) -> Result<Self, StartError> {
        let span = crate::logging::tenant_span(tenant);
        Self::assemble(shared, dirs, tenant, span.clone())
            .instrument(span)
            .await
    }

    /// [`App::open`]'s steps, in the tenant's `span`.
    async fn assemble(
        shared: Arc<Shared>,
        dirs: TenantDirs,
        tenant: Option<&str>,
        span: tracing::Span,
    ) -> Result<Self, StartError> {
        if let Some(name) = tenant {
            tracing::info!("opening tenant {name}: {}", dirs.workspace.display());
            create_tenant_root(&dirs.workspace).await?;
        }
        let own_user = open::tenant_user::own_user(&shared.config, tenant);
        let opened = open::workspace::open(&shared, &dirs.workspace, own_user).await?;
        let skills = Arc::new(open_skills(&dirs.skills)?);
        let pii = Arc::new(open::vault::open(&shared, tenant, dirs.pii_vault.clone()).await?);
        let gateway = gateway_view(&shared, tenant, &dirs)?;
        if let Some(user) = own_user {
            close_to_group(&dirs, gateway.as_deref(), user)?;
        }
        let stats = Arc::new(Stats::new());
        let events = events::Events::open(gateway.as_ref());
        let (sessions, state_dirs) = open_sessions(&shared, &dirs, own_user, &events);
        let tokenizes = shared.config.pii.tokenizes();
        let (egress, egress_dirs) = open::egress::for_tenant(
            &shared,
            tenant,
            own_user.map(|u| u.gid),
            tokenizes.then(|| pii.clone()),
        );
        let may_hold = open::flow::sandbox_may_hold(&shared, gateway.as_deref(), egress.as_ref());
        let sandbox = open::sandbox::start(
            &shared,
            open::sandbox::Mounts {
                workspace: &dirs.workspace,
                skills: &dirs.skills,
                gateway: gateway.as_deref(),
                user: opened.user,
                state_dirs,
                egress_dirs,
            },
            tenant.is_some(),
            Arc::new(ServerCalls::new(
                skills.clone(),
                pii.clone(),
                may_hold.clone(),
            )),
            stats.clone(),
            span.clone(),
        )?;
        let mut privacy = Privacy::new(pii.clone(), tokenizes);
        if let Some(may_hold) = may_hold.clone() {
            privacy = privacy.with_flow(may_hold);
        }
        sweep_sessions(&sessions, &span);
        let paused =
            execution::paused::PausedTable::new(tenant, shared.config.gateway.confirm_wait());
        let audit = execution::audit::open(&shared, tenant);
        let links = links::TenantLinks::new(&shared, dirs.links.clone());
        Ok(Self {
            links,
            tenant: tenant.map(str::to_string),
            own_uid: own_user.is_some(),
            audit,
            mcp_sessions: Default::default(),
            config: shared.config.clone(),
            shared,
            workspace: opened.workspace,
            workspace_path: dirs.workspace,
            quota: opened.quota,
            skills_dir: dirs.skills,
            skills,
            privacy,
            pii,
            may_hold,
            sandbox,
            stats,
            events,
            gateway,
            egress,
            sessions,
            paused,
            tasks: rmcp::task_manager::TaskManager::new(),
            span,
        })
    }

    /// This tenant's egress counters, when it has `egress` entries.
    pub fn egress_stats(&self) -> Option<&Arc<crate::gateway::egress::stats::EgressStats>> {
        self.egress.as_ref().map(|e| &e.stats)
    }

    /// The tenant's name (none on a server without tenants).
    pub fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// Whether this tenant's sandboxes run as its own uid, derived from its name within
    /// `--tenant-uid-range` (the uid itself is in the sandbox's settings).
    pub fn has_own_uid(&self) -> bool {
        self.own_uid
    }

    /// This tenant's audit trail on this node, when it is kept.
    pub fn audit(&self) -> Option<&Arc<crate::audit::AuditLog>> {
        self.audit.as_ref()
    }

    /// Counts an MCP session open on this tenant until the guard is dropped.
    pub fn mcp_session(&self) -> McpSessionGuard {
        self.mcp_sessions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        McpSessionGuard(self.mcp_sessions.clone())
    }

    /// MCP sessions open on this tenant.
    pub fn mcp_sessions(&self) -> usize {
        self.mcp_sessions.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The PII engine, for counts only (what the model sees goes through [`App::privacy`]).
    pub fn pii_tokenized(&self) -> Vec<(crate::pii::PiiKind, u64)> {
        self.pii.tokenized_by_kind()
    }

    /// The span naming the tenant, for work that runs apart from any request.
    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// This tenant's executions paused on a question.
    pub fn paused(&self) -> &Arc<execution::paused::PausedTable> {
        &self.paused
    }

    /// This tenant's executions run as tasks.
    pub fn tasks(&self) -> &rmcp::task_manager::TaskManager {
        &self.tasks
    }

    /// This tenant's sessions: how many, their size, the bounds.
    pub fn session_counts(&self) -> crate::sessions::SessionCounts {
        self.sessions.counts()
    }

    /// What session `handle` of this tenant holds (no container is started to tell).
    pub async fn session_view(
        &self,
        handle: String,
    ) -> Result<crate::sessions::view::SessionView, crate::sessions::SessionError> {
        // The snapshot of a call that has just answered is still on its way.
        self.sessions
            .settle(&handle, std::time::Duration::from_secs(10))
            .await;
        let sessions = self.sessions.clone();
        crate::host::blocking_here(move || sessions.view(&handle))
    }

    /// Removes the sessions idle past `--session-idle-secs` now (the server does so every
    /// minute), their blobs once nothing names them, and their prepared containers.
    pub async fn sweep_sessions(&self) {
        let sessions = self.sessions.clone();
        crate::host::blocking_here(move || sessions.sweep());
    }

    /// The handles of this tenant's sessions.
    pub fn session_handles(&self) -> Vec<String> {
        crate::host::blocking_here(|| self.sessions.handles())
    }

    /// The configuration this server runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// What every tenant of the server shares, for a transport's metrics and the tenants it
    /// opens beside this one: its facts only, through [`Shared`]'s methods.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The tool catalog (the shipped one and `--registry-dir`'s files).
    pub fn discovery(&self) -> &Arc<Discovery> {
        &self.shared.discovery
    }

    /// The current tool catalog; a reload after a file change (tens of ms) runs off the
    /// async workers.
    pub async fn registry(&self) -> Arc<crate::discovery::Registry> {
        let discovery = self.discovery().clone();
        match tokio::task::spawn_blocking(move || discovery.current()).await {
            Ok(registry) => registry,
            Err(_) => self.discovery().current(),
        }
    }

    /// This tenant's view of the upstream MCP servers, with `--upstreams`.
    pub fn gateway(&self) -> Option<&Arc<GatewayView>> {
        self.gateway.as_ref()
    }

    /// This tenant's change events: workspace files and its `tools/list`.
    pub fn events(&self) -> &Arc<events::Events> {
        &self.events
    }

    pub fn skills(&self) -> &Arc<SkillStore> {
        &self.skills
    }

    pub fn skills_dir(&self) -> &Path {
        &self.skills_dir
    }

    pub fn workspace_path(&self) -> &Path {
        &self.workspace_path
    }

    /// How the workspace quota is enforced.
    pub fn quota(&self) -> &QuotaMode {
        &self.quota
    }

    /// This tenant's PII engine (its tokens and vault).
    pub(crate) fn pii(&self) -> &Arc<PiiEngine> {
        &self.pii
    }

    /// The one door to the model: every tool response is made by it.
    pub fn privacy(&self) -> &Privacy {
        &self.privacy
    }

    pub fn sandbox(&self) -> &Arc<Sandbox> {
        &self.sandbox
    }

    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    /// This tenant's executions so far, with its pool now and the server's removal backlog.
    pub fn execution_stats(&self) -> StatsSnapshot {
        let mut snapshot = self.stats.snapshot();
        snapshot.pool = self.sandbox.pool_snapshot();
        snapshot.pool_ready = snapshot.pool.ready;
        snapshot.removal_backlog = self.shared.removals.backlog();
        snapshot
    }

    /// Which limits the engine does not enforce, and the note on them for the model.
    pub fn engine_limits(&self) -> &open::engine_limits::EngineLimits {
        &self.shared.engine_limits
    }

    /// The engine the sandboxes run on.
    pub fn engine_info(&self) -> &EngineInfo {
        &self.shared.engine_info
    }

    /// The node this server runs on (`--node-name`, else the engine's host name).
    pub fn node_name(&self) -> &str {
        self.shared.node_name()
    }

    /// The sandbox image: its tag and the id the tag resolved to at start.
    pub fn image(&self) -> (&str, &str) {
        (&self.shared.image, &self.shared.image_id)
    }

    /// The directory whose registry files add to the shipped catalog.
    pub fn registry_dir(&self) -> &Path {
        &self.shared.registry_dir
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
        self.paused.cancel_all();
        self.tasks.shutdown();
        self.sandbox.shutdown().await;
    }

    /// Shuts this tenant's sandbox down, then what every tenant shares (for the single
    /// tenant of stdio and of HTTP without tokens).
    pub async fn shutdown_all(&self) {
        self.shutdown().await;
        self.shared.shutdown().await;
    }
}

/// Creates the tenant's directory (the parent of its workspace), private to the server.
async fn create_tenant_root(workspace: &Path) -> Result<(), StartError> {
    let Some(parent) = workspace.parent() else {
        return Ok(());
    };
    crate::tenancy::create_private_dir(parent)
        .await
        .map_err(|source| StartError::Workspace {
            path: workspace.to_path_buf(),
            error: crate::workspace::WorkspaceError::Io {
                context: format!("cannot create {}", parent.display()),
                source,
            },
        })
}

/// This tenant's view of the upstream MCP servers and its `servers` package, with
/// `--upstreams`.
fn gateway_view(
    shared: &Shared,
    tenant: Option<&str>,
    dirs: &TenantDirs,
) -> Result<Option<Arc<GatewayView>>, StartError> {
    let Some(gateway) = &shared.gateway else {
        return Ok(None);
    };
    let view = gateway
        .view(tenant, &dirs.servers)
        .map_err(|source| StartError::ToolsPackage {
            path: dirs.servers.clone(),
            source,
        })?;
    Ok(Some(view))
}

/// What the sandboxes of a tenant with its own uid only read (its skills and its `servers`
/// package): its group's alone.
fn close_to_group(
    dirs: &TenantDirs,
    gateway: Option<&GatewayView>,
    user: SandboxUser,
) -> Result<(), StartError> {
    let package = gateway.map(|view| view.tree_root().to_path_buf());
    for dir in std::iter::once(dirs.skills.clone()).chain(package) {
        crate::host::blocking_here(|| open::tenant_user::close_to_group(&dir, user))?;
    }
    Ok(())
}

/// The tenant's sessions: their store (readable by its sandbox user's group), and where its
/// containers' state directories go (`.mounts` beside the sessions, as the engine sees it
/// too), into which a session's blobs are linked.
fn open_sessions(
    shared: &Shared,
    dirs: &TenantDirs,
    own_user: Option<SandboxUser>,
    events: &Arc<events::Events>,
) -> (
    Arc<execution::sessions::Sessions>,
    Option<crate::sandbox::StateDirs>,
) {
    let gid = own_user.map(|user| user.gid);
    let store =
        crate::sessions::SessionStore::new(dirs.sessions.clone(), shared.config.sessions.limits())
            .with_reader_group(gid);
    let root = crate::host::blocking_here(|| store.ensure_dir()?.canonicalize());
    let state_dirs = match root {
        Ok(dir) => {
            (shared.host_paths.to_engine(&dir).ok()).map(|engine| crate::sandbox::StateDirs {
                host: dir.join(".mounts"),
                engine: engine.join(".mounts"),
                gid,
            })
        }
        Err(e) => {
            tracing::warn!("sessions directory {}: {e}", dirs.sessions.display());
            None
        }
    };
    let sessions = Arc::new(execution::sessions::Sessions::new(store, events.clone()));
    (sessions, state_dirs)
}

/// Opens the skills store and adds the starter skills it lacks.
fn open_skills(dir: &Path) -> Result<SkillStore, StartError> {
    let skills =
        SkillStore::open(dir, SkillLimits::default()).map_err(|source| StartError::Skills {
            path: dir.to_path_buf(),
            error: source,
        })?;
    match skills.seed_from(crate::shipped::STARTER_SKILLS) {
        Ok(0) => {}
        Ok(n) => tracing::info!("added {n} starter skills to {}", dir.display()),
        Err(e) => tracing::warn!("could not add the starter skills: {e}"),
    }
    Ok(skills)
}

/// Removes expired sessions now and every minute while the tenant's `App` lives.
fn sweep_sessions(sessions: &Arc<execution::sessions::Sessions>, span: &tracing::Span) {
    let weak = Arc::downgrade(sessions);
    let sweep = async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(60));
        loop {
            tick.tick().await;
            let Some(sessions) = weak.upgrade() else {
                return;
            };
            crate::host::blocking_here(|| sessions.sweep());
        }
    };
    tokio::spawn(sweep.instrument(span.clone()));
}
