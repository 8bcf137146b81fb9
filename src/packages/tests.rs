//! The cache's logic against a fake installer (what a real install does is tested against
//! PyPI in tests/packages.rs).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// Writes one file per requirement, of `bytes` bytes, after a short wait; fails on "missing".
struct Fake {
    calls: AtomicUsize,
    bytes: usize,
}

#[async_trait::async_trait]
impl Installer for Fake {
    async fn install(
        &self,
        reqs: &[String],
        staging: &Path,
    ) -> Result<installer::InstallAnswer, InstallFailure> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut out = Vec::new();
        for r in reqs {
            if r == "missing" {
                std::fs::write(staging.join("partial.py"), "").unwrap();
                return Err(InstallFailure::NotFound {
                    name: r.clone(),
                    said: "no".into(),
                });
            }
            let (name, version) = r.split_once("==").unwrap_or((r, "1.0"));
            std::fs::write(staging.join(format!("{name}.py")), vec![b'#'; self.bytes]).unwrap();
            out.push(Resolved {
                name: name.into(),
                version: version.into(),
                sha256: format!("{:064x}", r.len()),
                file: format!("{name}-{version}-py3-none-any.whl"),
            });
        }
        Ok(installer::InstallAnswer {
            resolved: out,
            replaces: Vec::new(),
        })
    }
}

fn sets(dir: &Path, cache_bytes: u64, bytes: usize) -> (PackageSets, Arc<Fake>) {
    let fake = Arc::new(Fake {
        calls: AtomicUsize::new(0),
        bytes,
    });
    let settings = PackageSettings {
        root: dir.join("packages"),
        tree: TreeLimits {
            max_bytes: 1 << 20,
            max_files: 1000,
        },
        cache_bytes,
        source: "https://pypi.org/simple".into(),
    };
    (PackageSets::open(settings, fake.clone()).unwrap(), fake)
}

fn reqs(texts: &[&str]) -> Vec<Requirement> {
    requirement::parse_all(texts).unwrap()
}

#[tokio::test]
async fn concurrent_requests_for_one_set_install_it_once_then_hit_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let (sets, fake) = sets(dir.path(), 1 << 30, 10);
    let policy = PackagePolicy::default();
    let (a, b) = tokio::join!(
        sets.ensure("img", reqs(&["humanize"]), &policy),
        sets.ensure("img", reqs(&["humanize"]), &policy)
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(fake.calls.load(Ordering::SeqCst), 1);
    assert_eq!(a.meta.set, b.meta.set);
    assert!(
        sets.sets_dir()
            .join(&a.meta.set)
            .join("humanize.py")
            .is_file()
    );
    let again = sets
        .ensure("img", reqs(&["humanize"]), &policy)
        .await
        .unwrap();
    assert!(again.from_cache);
    assert_eq!(fake.calls.load(Ordering::SeqCst), 1);
    // Another image is another request.
    sets.ensure("img2", reqs(&["humanize"]), &policy)
        .await
        .unwrap();
    assert_eq!(fake.calls.load(Ordering::SeqCst), 2);
    let stats = sets.stats();
    assert_eq!(stats.cache_hits, 1);
    assert_eq!(stats.installs.get("ok"), Some(&2), "{stats:?}");
    // A new PackageSets on the same directory (a restart) finds the set without installing.
    let (reopened, fake2) = self::sets(dir.path(), 1 << 30, 10);
    assert!(
        reopened
            .ensure("img", reqs(&["humanize"]), &policy)
            .await
            .unwrap()
            .from_cache
    );
    assert_eq!(fake2.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_failed_install_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let (sets, _) = sets(dir.path(), 1 << 30, 10);
    let err = sets
        .ensure("img", reqs(&["missing"]), &PackagePolicy::default())
        .await
        .err()
        .unwrap();
    assert!(matches!(
        err,
        PackageError::Install(InstallFailure::NotFound { .. })
    ));
    let staging = dir.path().join("packages/staging");
    assert_eq!(std::fs::read_dir(staging).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(sets.sets_dir()).unwrap().count(), 0);
    assert_eq!(sets.stats().installs.get("failed"), Some(&1));
}

#[tokio::test]
async fn a_set_over_its_bound_is_refused_and_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (sets, _) = sets(dir.path(), 1 << 30, 2 << 20);
    let err = sets
        .ensure("img", reqs(&["big"]), &PackagePolicy::default())
        .await
        .err()
        .unwrap();
    assert!(
        matches!(err, PackageError::Tree(TreeError::TooLarge { .. })),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(sets.sets_dir()).unwrap().count(), 0);
}

#[tokio::test]
async fn the_policy_applies_to_cached_sets_too() {
    let dir = tempfile::tempdir().unwrap();
    let (sets, _) = sets(dir.path(), 1 << 30, 10);
    sets.ensure("img", reqs(&["humanize==4.9.0"]), &PackagePolicy::default())
        .await
        .unwrap();
    let strict = PolicyFile::parse(r#"{"deny": ["humanize<4.10"]}"#)
        .unwrap()
        .for_tenant(None);
    let err = sets
        .ensure("img", reqs(&["humanize==4.9.0"]), &strict)
        .await
        .err()
        .unwrap();
    assert!(matches!(err, PackageError::Policy(_)), "{err}");
}

#[tokio::test]
async fn the_least_recently_used_set_goes_first_never_a_leased_one() {
    let dir = tempfile::tempdir().unwrap();
    // Each set is about 8 KiB on disk (two blocks of a 5000-byte file); the cache holds two.
    let (sets, _) = sets(dir.path(), 20_000, 5000);
    let policy = PackagePolicy::default();
    let held = sets.ensure("img", reqs(&["a"]), &policy).await.unwrap();
    let b = sets.ensure("img", reqs(&["b"]), &policy).await.unwrap();
    let (b_set, a_set) = (b.meta.set.clone(), held.meta.set.clone());
    drop(b);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let c = sets.ensure("img", reqs(&["c"]), &policy).await.unwrap();
    // a is older than b but leased: b goes.
    assert!(sets.sets_dir().join(&a_set).is_dir());
    assert!(!sets.sets_dir().join(&b_set).exists());
    assert!(sets.sets_dir().join(&c.meta.set).is_dir());
    assert_eq!(sets.stats().cache_evictions, 1);
}
