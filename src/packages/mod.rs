//! Packages on demand, with the sandbox still offline. An execution names requirements
//! (`packages`); they are resolved and installed outside the sandbox, by an [`Installer`] that
//! reaches the index and nothing else (through the server), binary wheels only, pinned by the hashes the
//! index published (a wheel whose link has none, or whose bytes do not match it, is refused).
//! The result is checked ([`tree`]), named by its content (the wheels and their sha256) and
//! kept in a cache on disk ([`store`]) that every sandbox mounts read-only; the job names the
//! set, and the harness puts it on `sys.path` behind the standard library and the harness's
//! own modules.
//!
//! A request resolved once is reused by every execution, session and tenant that asks for the
//! same requirements on the same image (the cache is shared and read-only); concurrent requests
//! for one set install it once. The cache is bounded: the least recently used sets go first,
//! never one a running execution holds ([`Lease`]).

pub mod installer;
pub mod policy;
pub mod requirement;
pub mod store;
pub mod tree;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, FutureExt, Shared};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use installer::{InstallFailure, Installer};
pub use policy::{PackagePolicy, PolicyFile, PolicyRefusal};
pub use requirement::{Requirement, RequirementError};
pub use store::SetMeta;
pub use tree::{TreeError, TreeLimits};

/// One distribution of a resolved set, as the installer reported it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Resolved {
    pub name: String,
    pub version: String,
    /// Of the wheel file, as the index published it and the installer checked it.
    pub sha256: String,
    /// The wheel's file name.
    pub file: String,
}

/// Why packages could not be made available; the code does not run.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PackageError {
    #[error(
        "packages are turned off on this server (--packages off): the code cannot install any. Use what the image has (the data image: numpy, pandas, scipy, matplotlib, ...), or ask the administrator"
    )]
    Disabled,
    #[error("{0}")]
    Requirement(#[from] RequirementError),
    #[error("{0}")]
    Policy(#[from] PolicyRefusal),
    #[error("{0}")]
    Install(#[from] InstallFailure),
    #[error("{0}")]
    Tree(#[from] TreeError),
    #[error("the package cache failed: {0}. Check the data directory's free space and permissions")]
    Cache(String),
}

impl PackageError {
    /// The outcome as the audit trail and the metrics name it.
    pub fn outcome(&self) -> &'static str {
        match self {
            PackageError::Requirement(_) | PackageError::Policy(_) | PackageError::Disabled => {
                "refused"
            }
            PackageError::Install(InstallFailure::TimedOut { .. }) => "timed_out",
            PackageError::Install(InstallFailure::Unreachable { .. }) => "unreachable",
            PackageError::Tree(_)
            | PackageError::Install(
                InstallFailure::HashMismatch { .. } | InstallFailure::Unhashed { .. },
            ) => "refused",
            _ => "failed",
        }
    }
}

/// The cache's settings.
#[derive(Debug, Clone)]
pub struct PackageSettings {
    /// `<data>/packages`.
    pub root: PathBuf,
    pub tree: TreeLimits,
    /// Total bytes of the cache; least recently used sets are removed past it.
    pub cache_bytes: u64,
    /// Where packages come from (the index or the wheelhouse): part of every request's key.
    pub source: String,
}

/// A set some execution is using: the cache does not remove it until every lease is dropped.
pub struct Lease {
    set: String,
    leases: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut leases = self.leases.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = leases.get_mut(&self.set) {
            *n -= 1;
            if *n == 0 {
                leases.remove(&self.set);
            }
        }
    }
}

/// A set ready to mount.
pub struct Installed {
    pub meta: Arc<SetMeta>,
    pub requested: Vec<Requirement>,
    pub from_cache: bool,
    pub took: Duration,
    pub lease: Lease,
}

/// Counts since start, for `get_execution_stats` and the metrics.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PackageStats {
    /// Installs by outcome (`ok`, `failed`, `refused`, `unreachable`, `timed_out`).
    pub installs: std::collections::BTreeMap<String, u64>,
    pub cache_hits: u64,
    pub cache_sets: u64,
    pub cache_bytes: u64,
    pub cache_evictions: u64,
}

type Flight = Shared<BoxFuture<'static, Result<Arc<SetMeta>, PackageError>>>;

/// Installs of different sets running at once; more wait their turn (each installer container
/// may use a gigabyte of memory and twice the set's bound in /tmp).
const MAX_INSTALLS_AT_ONCE: usize = 2;

/// The shared cache of installed sets and the installs in flight.
pub struct PackageSets {
    store: Arc<store::Store>,
    settings: PackageSettings,
    installer: Arc<dyn Installer>,
    flights: Mutex<HashMap<String, Flight>>,
    leases: Arc<Mutex<HashMap<String, usize>>>,
    stats: Arc<Mutex<PackageStats>>,
    installs: Arc<tokio::sync::Semaphore>,
}

impl PackageSets {
    pub fn open(
        settings: PackageSettings,
        installer: Arc<dyn Installer>,
    ) -> Result<Self, PackageError> {
        let store = store::Store::open(&settings.root).map_err(PackageError::Cache)?;
        Ok(Self {
            store: Arc::new(store),
            settings,
            installer,
            flights: Mutex::new(HashMap::new()),
            leases: Arc::new(Mutex::new(HashMap::new())),
            stats: Arc::new(Mutex::new(PackageStats::default())),
            installs: Arc::new(tokio::sync::Semaphore::new(MAX_INSTALLS_AT_ONCE)),
        })
    }

    /// The directory every sandbox mounts read-only at `/mnt/packages`.
    pub fn sets_dir(&self) -> PathBuf {
        self.store.sets_dir()
    }

    /// Makes `requested` importable for `image_id` under `policy`: from the cache, or installed
    /// now (once, however many ask at the same time).
    pub async fn ensure(
        &self,
        image_id: &str,
        requested: Vec<Requirement>,
        policy: &PackagePolicy,
    ) -> Result<Installed, PackageError> {
        let started = Instant::now();
        let (meta, from_cache) = self.ensure_checked(image_id, &requested, policy).await?;
        crate::host::blocking_here(|| self.store.touch(&meta.set));
        Ok(Installed {
            lease: self.lease(&meta.set),
            meta,
            requested,
            from_cache,
            took: started.elapsed(),
        })
    }

    async fn ensure_checked(
        &self,
        image_id: &str,
        requested: &[Requirement],
        policy: &PackagePolicy,
    ) -> Result<(Arc<SetMeta>, bool), PackageError> {
        let refused = |e: PolicyRefusal| {
            self.count(|s| *s.installs.entry("refused".into()).or_default() += 1);
            PackageError::Policy(e)
        };
        policy.check_requested(requested).map_err(refused)?;
        let key = self.request_key(image_id, requested);
        let (meta, from_cache) = match crate::host::blocking_here(|| self.store.lookup(&key)) {
            Some(meta) => {
                self.count(|s| s.cache_hits += 1);
                (Arc::new(meta), true)
            }
            None => (self.install_once(key, requested).await?, false),
        };
        policy.check_resolved(&meta.resolved).map_err(refused)?;
        Ok((meta, from_cache))
    }

    /// The request's key: the image, where packages come from, and the requirements.
    fn request_key(&self, image_id: &str, requested: &[Requirement]) -> String {
        let mut h = Sha256::new();
        for part in [image_id, &self.settings.source] {
            h.update(part.as_bytes());
            h.update(b"\n");
        }
        for r in requested {
            h.update(r.text.as_bytes());
            h.update(b"\n");
        }
        hex::encode(h.finalize())[..32].to_string()
    }

    /// Joins the install of `key` in flight, or starts it. The install runs as a task of its
    /// own: a caller that goes away does not stop it for the others.
    async fn install_once(
        &self,
        key: String,
        requested: &[Requirement],
    ) -> Result<Arc<SetMeta>, PackageError> {
        let flight = {
            let mut flights = self.flights.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(f) = flights.get(&key) {
                f.clone()
            } else {
                let job = Install {
                    store: self.store.clone(),
                    installer: self.installer.clone(),
                    limits: self.settings.tree,
                    texts: requested.iter().map(|r| r.text.clone()).collect(),
                    key: key.clone(),
                    stats: self.stats.clone(),
                    turn: self.installs.clone(),
                };
                let task = tokio::spawn(job.run());
                let f = async move {
                    task.await.unwrap_or_else(|e| {
                        Err(PackageError::Cache(format!("the install stopped: {e}")))
                    })
                }
                .boxed()
                .shared();
                flights.insert(key.clone(), f.clone());
                f
            }
        };
        let result = flight.await;
        self.flights
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        if let Ok(meta) = &result {
            self.evict(&meta.set);
        }
        result
    }

    fn count(&self, change: impl FnOnce(&mut PackageStats)) {
        change(&mut self.stats.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn lease(&self, set: &str) -> Lease {
        *self
            .leases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(set.to_string())
            .or_default() += 1;
        Lease {
            set: set.to_string(),
            leases: self.leases.clone(),
        }
    }

    /// Removes the least recently used sets that no execution holds until the cache is within
    /// its bound.
    fn evict(&self, newest: &str) {
        let mut sets = self.store.sets();
        let mut total: u64 = sets.iter().map(|s| s.bytes).sum();
        if total <= self.settings.cache_bytes {
            return;
        }
        sets.sort_by_key(|s| s.last_used);
        let leased = self
            .leases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for s in sets {
            if total <= self.settings.cache_bytes {
                break;
            }
            if leased.contains_key(&s.set) || s.set == newest {
                continue;
            }
            self.store.remove(&s.set);
            total -= s.bytes;
            self.stats
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .cache_evictions += 1;
            tracing::info!(set = %s.set, bytes = s.bytes, "package set evicted from the cache");
        }
    }

    /// Counts since start, and the cache as it is now.
    pub fn stats(&self) -> PackageStats {
        let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let sets = self.store.sets();
        stats.cache_sets = sets.len() as u64;
        stats.cache_bytes = sets.iter().map(|s| s.bytes).sum();
        stats
    }
}

/// One install: staging directory, installer, check, commit.
struct Install {
    store: Arc<store::Store>,
    installer: Arc<dyn Installer>,
    limits: TreeLimits,
    texts: Vec<String>,
    key: String,
    stats: Arc<Mutex<PackageStats>>,
    turn: Arc<tokio::sync::Semaphore>,
}

impl Install {
    /// Installs once, and counts the install by its outcome (however many waited for it).
    async fn run(self) -> Result<Arc<SetMeta>, PackageError> {
        let _turn = self.turn.clone().acquire_owned().await;
        let result = match self.store.new_staging() {
            Err(e) => Err(PackageError::Cache(e)),
            Ok(staging) => {
                let result = self.install_into(&staging).await;
                if result.is_err() {
                    self.store.discard(&staging);
                }
                result
            }
        };
        let outcome = result.as_ref().map_or_else(|e| e.outcome(), |_| "ok");
        let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        *stats.installs.entry(outcome.to_string()).or_default() += 1;
        drop(stats);
        result
    }

    async fn install_into(&self, staging: &std::path::Path) -> Result<Arc<SetMeta>, PackageError> {
        let installer::InstallAnswer { resolved, replaces } =
            self.installer.install(&self.texts, staging).await?;
        let (store, limits, staging) = (self.store.clone(), self.limits, staging.to_path_buf());
        let key = self.key.clone();
        tokio::task::spawn_blocking(move || {
            let size = tree::check(&staging, limits)?;
            let meta = SetMeta {
                set: set_name(&resolved),
                resolved,
                bytes: size.bytes,
                files: size.files,
                replaces,
            };
            store
                .commit(&staging, &meta, &key)
                .map_err(PackageError::Cache)?;
            Ok(Arc::new(meta))
        })
        .await
        .unwrap_or_else(|e| Err(PackageError::Cache(format!("the check stopped: {e}"))))
    }
}

/// A set's name: the sha256 of its wheels (name, version, sha256), sorted.
pub fn set_name(resolved: &[Resolved]) -> String {
    let mut lines: Vec<String> = resolved
        .iter()
        .map(|r| {
            format!(
                "{} {} {}",
                requirement::normalize_name(&r.name),
                r.version,
                r.sha256
            )
        })
        .collect();
    lines.sort();
    let mut h = Sha256::new();
    for l in lines {
        h.update(l.as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())[..32].to_string()
}

#[cfg(test)]
mod tests;
