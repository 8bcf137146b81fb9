//! Server configurations in a temporary directory, for tests and benches (benches/common
//! includes this file too).

use std::path::{Path, PathBuf};

use code_execution_mcp::config::Config;

/// The defaults, with the data, workspace and skills in `dir` and no workspace quota: what
/// every test or bench server starts from.
pub fn defaults_in(dir: &Path) -> Config {
    let mut c = Config::defaults();
    c.storage.data_dir = Some(dir.join("data"));
    c.storage.workspace = Some(dir.join("workspace"));
    c.storage.skills_dir = Some(dir.join("skills"));
    c.storage.workspace_quota_mb = 0;
    c
}

/// A test server's configuration: [`defaults_in`] `dir`, with the pool, preloading and
/// image-tree settings that keep tests light (a test about them sets its own).
pub fn config_in(dir: &Path) -> Config {
    let mut c = defaults_in(dir);
    // The pool is exercised in every test, at a size that keeps parallel tests light on the
    // engine (tests about the pool set their own).
    c.pool.pool_size = 1;
    // A fixed pool: tests count containers and pooled executions, which a pool growing under
    // their bursts would change (`TestApp::start_with` keeps it at the test's pool size).
    c.pool.pool_max = c.pool.pool_size;
    // Pooled containers import nothing ahead: preloading pandas into every pooled container
    // costs a core-second each, which hundreds of test executions would pay for nothing (the
    // tests of preloading set it).
    c.sandbox.preload = Some(vec!["none".into()]);
    // The host copies of the image's /usr (`--image-tree`) are made once for every test, not
    // once per temp data directory (a test about them sets its own).
    if c.sandbox.image_tree_dir.is_none() {
        c.sandbox.image_tree_dir = Some(shared_image_trees());
    }
    c
}

/// The image-tree directory every test server shares: `CEM_IMAGE_TREE_DIR`, else one under
/// the target directory, kept between runs.
pub fn shared_image_trees() -> PathBuf {
    std::env::var_os("CEM_IMAGE_TREE_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("image-trees"))
}
