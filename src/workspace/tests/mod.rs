//! Tests of the workspace: every safety test runs through both resolvers (`openat2` and the
//! component walk), against a workspace beside an "outside" directory whose canary must never
//! change. Split by topic; the fixture and helpers shared by all of them are here.

mod changes;
mod files;
mod links;
mod listing;
mod owner;
mod path;
mod renewal;
mod root;
mod upload;

use super::*;
use proptest::prelude::*;
use rustix::fs::{self as rfs, Mode, OFlags};
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, symlink};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

const CANARY: &[u8] = b"CANARY: host secret";

/// A workspace at `<tmp>/ws` and a directory `<tmp>/outside` holding `secret` (the canary).
struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        let outside = tmp.path().join("outside");
        fs::create_dir(&root).unwrap();
        fs::create_dir(&outside).unwrap();
        fs::write(outside.join("secret"), CANARY).unwrap();
        Self {
            _tmp: tmp,
            root,
            outside,
        }
    }

    /// The same workspace through both resolvers, so every safety test covers the fallback.
    fn both(&self, limits: WorkspaceLimits) -> Vec<Workspace> {
        [Resolver::Openat2, Resolver::Walk]
            .into_iter()
            .map(|r| Workspace::open_with(&self.root, limits, Some(r)).unwrap())
            .collect()
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The outside directory holds exactly `names`, and the canary is unchanged.
    fn assert_outside_untouched(&self, names: &[&str]) {
        assert_eq!(fs::read(self.outside.join("secret")).unwrap(), CANARY);
        let found: BTreeSet<String> = fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let want: BTreeSet<String> = names.iter().map(|s| s.to_string()).collect();
        assert_eq!(found, want, "the outside directory changed");
    }
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// For a test marked `#[ignore = "needs root: …"]`: asked for without root, it fails saying so.
pub(crate) fn require_root(what: &str) {
    assert!(
        is_root(),
        "{what} needs root: run the tests that need it as root with `cargo test -- --include-ignored`"
    );
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}
