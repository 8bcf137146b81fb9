//! The gateway benches' server: the rmcp fixture upstream (`tests/upstream_fixture`, built by
//! `cargo build --release --example upstream-fixture`) and an in-process server whose
//! upstreams are ready before anything is timed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use code_execution_mcp::app::App;
use code_execution_mcp::config::Config;
use serde_json::{Value, json};

/// The fixture binary beside this bench's profile.
pub fn fixture() -> PathBuf {
    let exe = std::env::current_exe().expect("bench path");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps");
    let bin = profile.join("examples/upstream-fixture");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --release --example upstream-fixture` first",
        bin.display()
    );
    bin
}

/// A server in this process with the upstreams `servers` (an `mcpServers` object), its data in
/// `dir`, one pooled container, results up to 4 MiB, and `adjust` applied; once every upstream
/// is connected.
pub async fn app_with(dir: &Path, servers: Value, adjust: impl FnOnce(&mut Config)) -> Arc<App> {
    let upstreams = dir.join("upstreams.json");
    std::fs::write(&upstreams, json!({ "mcpServers": servers }).to_string()).unwrap();
    let mut c = Config::defaults();
    c.storage.data_dir = Some(dir.join("data"));
    c.storage.workspace_quota_mb = 0;
    c.pool.pool_size = 1;
    c.gateway.upstreams = Some(upstreams);
    c.limits.max_result_bytes = 4 << 20;
    adjust(&mut c);
    let app = Arc::new(
        App::start(c)
            .await
            .expect("server starts (is the image built?)"),
    );
    let gateway = app.shared().gateway().cloned().unwrap();
    assert!(
        gateway.settled(Duration::from_secs(60)).await,
        "upstreams ready"
    );
    app
}
