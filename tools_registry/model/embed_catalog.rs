//! Writes `tools_registry/model/catalog.vectors`: the built-in sentence model's vector for
//! every tool of the shipped catalog (see `src/discovery/semantic/vectors.rs`).
//!
//! Run after changing the catalog or the model: `cargo run --release --example embed-catalog`.
//! A unit test fails until the file matches the catalog again.

use std::path::Path;
use std::time::Instant;

use code_execution_mcp::discovery::Registry;
use code_execution_mcp::discovery::semantic::{SentenceModel, ShippedVectors};
use code_execution_mcp::shipped;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let model = SentenceModel::builtin().expect("the built-in model loads");
    let registry = Registry::load_over(
        shipped::TOOLS_REGISTRY,
        &root.join("target/no-such-registry-dir"),
    )
    .expect("the shipped catalog loads");
    let started = Instant::now();
    let bytes = ShippedVectors::write(&model, registry.tools());
    let out = root.join("tools_registry/model/catalog.vectors");
    std::fs::write(&out, &bytes).expect("write the vectors");
    println!(
        "{} tools embedded in {:.1} s: {} ({} bytes)",
        registry.total_tools(),
        started.elapsed().as_secs_f64(),
        out.display(),
        bytes.len()
    );
}
