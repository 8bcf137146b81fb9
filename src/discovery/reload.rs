//! `Discovery`: the registry as the server holds it, reloaded when its files change.
//!
//! Users add tools by dropping a file into the registry directory; they should not have to
//! restart the server. Watching the file system (inotify and friends) would need a thread and a
//! platform dependency and still misses edits on network mounts; instead, `current()` looks at
//! the directory at most once per interval (one second by default), and only by `stat`: the
//! listing's paths, sizes and modification times hashed together (`files::fingerprint`).
//!
//! When the fingerprint changed, the caller that noticed builds the new `Registry` outside any
//! lock (tens of milliseconds for the shipped catalog) and swaps the `Arc`; every other reader
//! meanwhile gets the previous registry at once (a `try_lock` elects the one checker), and a
//! search that holds an `Arc<Registry>` keeps a consistent catalog to the end. If the directory
//! becomes unreadable, the previous registry stays in service and the error is logged.
//!
//! The server's default ([`Discovery::shipped_and`]) layers the directory over the catalog
//! embedded in the binary: dropped-in files add tools and override shipped definitions by id.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, TryLockError};
use std::time::{Duration, Instant};

use super::error::DiscoveryError;
use super::files;
use super::registry::Registry;
use super::semantic::Ranking;
use crate::shipped::{self, ShippedFile};

pub const DEFAULT_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// The current registry of a directory, rebuilt when the directory changes.
#[derive(Debug)]
pub struct Discovery {
    /// Loaded before the directory's files: the embedded catalog, or nothing.
    base: &'static [ShippedFile],
    dir: PathBuf,
    ranking: Ranking,
    check_every: Duration,
    current: RwLock<Arc<Registry>>,
    /// When the directory was last looked at; locked by the one caller doing the check.
    last_check: Mutex<Instant>,
}

impl Discovery {
    /// Loads `dir` now; changes are picked up by later `current()` calls.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Discovery, DiscoveryError> {
        Discovery::open_with_interval(dir, DEFAULT_CHECK_INTERVAL)
    }

    /// The catalog embedded in the binary, with the files under `dir` (which need not exist)
    /// adding tools and overriding definitions; changes under `dir` are picked up like
    /// [`Discovery::open`]'s.
    /// Searches rank as `ranking` says.
    pub fn shipped_and(
        dir: impl Into<PathBuf>,
        ranking: Ranking,
    ) -> Result<Discovery, DiscoveryError> {
        Discovery::layered(
            shipped::TOOLS_REGISTRY,
            dir.into(),
            ranking,
            DEFAULT_CHECK_INTERVAL,
        )
    }

    /// Like [`Discovery::open`], checking the directory at most once per `check_every`.
    pub fn open_with_interval(
        dir: impl Into<PathBuf>,
        check_every: Duration,
    ) -> Result<Discovery, DiscoveryError> {
        Discovery::layered(&[], dir.into(), Ranking::lexical(), check_every)
    }

    fn layered(
        base: &'static [ShippedFile],
        dir: PathBuf,
        ranking: Ranking,
        check_every: Duration,
    ) -> Result<Discovery, DiscoveryError> {
        let registry = Registry::load_over(base, &dir)?.ranked_by(ranking.clone());
        Ok(Discovery {
            base,
            dir,
            ranking,
            check_every,
            current: RwLock::new(Arc::new(registry)),
            last_check: Mutex::new(Instant::now()),
        })
    }

    /// The registry to use for one request; reloads first if the directory changed and the
    /// last check is older than the interval.
    pub fn current(&self) -> Arc<Registry> {
        let checker = match self.last_check.try_lock() {
            Ok(last) => Some(last),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None, // another caller is checking
        };
        if let Some(mut last) = checker
            && last.elapsed() >= self.check_every
        {
            self.reload_if_changed();
            *last = Instant::now();
        }
        self.snapshot()
    }

    /// Checks the directory now, whatever the interval, and returns the registry after it.
    pub fn refresh(&self) -> Arc<Registry> {
        let mut last = self.last_check.lock().unwrap_or_else(|e| e.into_inner());
        self.reload_if_changed();
        *last = Instant::now();
        drop(last);
        self.snapshot()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the catalog embedded in the binary is loaded under the directory's files.
    pub fn has_built_in(&self) -> bool {
        !self.base.is_empty()
    }

    fn snapshot(&self) -> Arc<Registry> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn reload_if_changed(&self) {
        if files::fingerprint(&self.dir) == self.snapshot().fingerprint {
            return;
        }
        match Registry::load_over(self.base, &self.dir) {
            Ok(fresh) => {
                let fresh = fresh.ranked_by(self.ranking.clone());
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(fresh);
            }
            Err(e) => tracing::error!("tool registry not reloaded, keeping the previous one: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::fs;

    fn write_tool(dir: &Path, file: &str, id: &str, description: &str) {
        let doc = json!({"categories": {"misc": {"description": "d", "tools": {id: {"description": description}}}}});
        fs::write(dir.join(file), doc.to_string()).unwrap();
    }

    fn ids(reg: &Registry) -> Vec<String> {
        reg.tools().iter().map(|t| t.id.clone()).collect()
    }

    #[test]
    fn picks_up_added_changed_and_removed_files() {
        let d = tempfile::tempdir().unwrap();
        write_tool(d.path(), "a.json", "s/first", "one");
        let disc = Discovery::open_with_interval(d.path(), Duration::ZERO).unwrap();
        assert_eq!(ids(&disc.current()), ["s/first"]);

        write_tool(d.path(), "b.json", "s/second", "two");
        assert_eq!(ids(&disc.current()), ["s/first", "s/second"]);

        write_tool(
            d.path(),
            "b.json",
            "s/second",
            "a longer description of two",
        );
        assert_eq!(
            disc.current().get("s/second", None).unwrap().description,
            "a longer description of two"
        );

        fs::remove_file(d.path().join("a.json")).unwrap();
        assert_eq!(ids(&disc.current()), ["s/second"]);
    }

    #[test]
    fn does_not_look_again_within_the_interval_but_refresh_does() {
        let d = tempfile::tempdir().unwrap();
        let disc = Discovery::open_with_interval(d.path(), Duration::from_secs(3600)).unwrap();
        write_tool(d.path(), "a.json", "s/t", "x");
        assert_eq!(disc.current().total_tools(), 0);
        assert_eq!(disc.refresh().total_tools(), 1);
    }

    #[test]
    fn an_unchanged_directory_keeps_the_same_registry() {
        let d = tempfile::tempdir().unwrap();
        write_tool(d.path(), "a.json", "s/t", "x");
        let disc = Discovery::open_with_interval(d.path(), Duration::ZERO).unwrap();
        let a = disc.current();
        assert!(Arc::ptr_eq(&a, &disc.current()));
    }

    #[test]
    fn a_directory_created_later_is_picked_up() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("registry");
        let disc = Discovery::open_with_interval(&dir, Duration::ZERO).unwrap();
        assert_eq!(disc.current().total_tools(), 0);
        fs::create_dir(&dir).unwrap();
        write_tool(&dir, "a.json", "s/t", "x");
        assert_eq!(disc.current().total_tools(), 1);
    }

    #[test]
    fn concurrent_readers_see_whole_registries() {
        let d = tempfile::tempdir().unwrap();
        write_tool(d.path(), "a.json", "s/t", "x");
        let disc = Arc::new(Discovery::open_with_interval(d.path(), Duration::ZERO).unwrap());
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let disc = disc.clone();
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let n = disc.current().total_tools();
                        assert!(n == 1 || n == 2);
                    }
                })
            })
            .collect();
        write_tool(d.path(), "b.json", "s/u", "y");
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(disc.refresh().total_tools(), 2);
    }
}
