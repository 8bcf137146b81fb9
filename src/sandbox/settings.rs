//! What a sandbox is made with: the settings fixed for the server's lifetime, and the identity
//! of this server process written on every container it creates (so a later start knows which
//! containers are its own and which a crashed server left behind).

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::Semaphore;

use super::cleanup::removal::Removals;
use super::container::spec;
use super::container::state_dir::StateDirs;
use super::image::tree as image_tree;
use super::pool::{PoolBudget, preload};
use super::run::channel::HarnessLimits;

/// Settings fixed for the server's lifetime.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    pub image: String,
    pub workspace: PathBuf,
    pub skills: Option<PathBuf>,
    /// The generated tools packages (one directory per version), mounted read-only at
    /// [`spec::SERVERS_MOUNT`].
    pub servers: Option<PathBuf>,
    /// The package cache's sets directory (as the engine names it), mounted read-only.
    pub packages: Option<PathBuf>,
    pub uid: u32,
    pub gid: u32,
    pub container: spec::ContainerOptions,
    pub limits: HarnessLimits,
    /// Executions of this sandbox (one tenant) that run at once.
    pub max_concurrency: usize,
    /// Executions that may wait for one of this sandbox's slots.
    pub max_queue: usize,
    /// The server-wide slots every tenant's sandbox also takes one of (`--max-concurrency`).
    pub server_slots: Arc<Semaphore>,
    /// Containers kept started ahead (0: every execution starts its own): the pool's base.
    pub pool_size: usize,
    /// The server-wide budget of pooled containers every tenant's pool grows within.
    pub pool_budget: Arc<PoolBudget>,
    /// How long the pool waits without an execution before it shrinks to `pool_idle_floor`.
    pub pool_idle: std::time::Duration,
    /// The pool's size when idle: `pool_size`, or 0 for an HTTP tenant.
    pub pool_idle_floor: usize,
    /// The server-wide backlog of stopped containers awaiting removal.
    pub removals: Arc<Removals>,
    /// The memory limit pooled containers carry (the default one).
    pub pool_memory_bytes: i64,
    /// The id `image` resolved to at start (pooled containers are made from the id).
    pub image_id: String,
    /// Longest wait for a container to be ready for its job (pool wait included).
    pub start_limit: std::time::Duration,
    /// What pooled containers import before their job arrives (`--preload`).
    pub preload: preload::Preload,
    /// How the seccomp profile reaches the engine.
    pub seccomp: spec::Seccomp,
    /// Whether the engine reports OOM kills
    /// ([`EngineInfo::reports_oom_kills`](super::EngineInfo::reports_oom_kills)).
    pub oom_reported: bool,
    /// The image's `/usr` served from the host ([`image_tree`]); used only while the pool's
    /// image is the one it was made from.
    pub image_tree: Option<image_tree::TreeMount>,
    /// Where containers' state directories are made (`container::state_dir`): the root on the
    /// host and as the engine names it. `None`: a session's state goes through the channel.
    pub state_dirs: Option<StateDirs>,
    /// Where containers' egress directories are made (`container::egress_dir`), with the
    /// certificate they hold. `None`: the tenant has no egress.
    pub egress_dirs: Option<super::container::egress_dir::EgressDirs>,
    /// The span the sandbox's own background work (pool starts, prepared containers, the
    /// engine watch) runs in, rather than that of the execution that happened to start it.
    /// The app gives its tenant's; the sandbox does not look inside.
    pub span: tracing::Span,
}

/// Identity of this server process, written on every container it creates.
#[derive(Debug, Clone)]
pub struct Instance {
    pub id: String,
    pub owner: String,
}

impl Instance {
    pub fn new() -> Self {
        Self {
            id: uuid::Uuid::new_v4().simple().to_string(),
            owner: spec::current_owner(),
        }
    }

    /// This instance's state directories under `root` (`SandboxSettings::state_dirs`), after those
    /// of servers that are gone are removed; `None` (logged) when they cannot be made.
    pub(crate) fn state_dirs(&self, root: Option<&StateDirs>) -> Option<StateDirs> {
        let root = root?;
        let opened = crate::host::blocking_here(|| {
            crate::sandbox::cleanup::reaper::reap_state_dirs(&root.host);
            StateDirs::open(&root.host, &root.engine, &self.id, &self.owner, root.gid)
        });
        opened
            .inspect_err(|e| {
                tracing::warn!(
                    "sessions' state goes through the channel: {}: {e}",
                    root.host.display()
                )
            })
            .ok()
    }
}

impl Default for Instance {
    fn default() -> Self {
        Self::new()
    }
}
