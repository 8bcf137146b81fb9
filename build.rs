//! Embeds what the project ships into the binary, so an installed binary (`cargo install`, a
//! packaged crate, a copy on another machine) serves the whole tool catalog and seeds the starter
//! skills from any directory with no source tree present: writes `$OUT_DIR/shipped.rs` with one
//! `include_bytes!` per file of `tools_registry/*.json` and `skills/*.{py,json}`. Cargo re-runs
//! this when either directory changes, so an added or edited file is picked up by the next build.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    let mut code = String::new();
    embed(
        &mut code,
        "TOOLS_REGISTRY",
        &root.join("tools_registry"),
        &["json"],
    );
    embed(
        &mut code,
        "STARTER_SKILLS",
        &root.join("skills"),
        &["py", "json"],
    );
    std::fs::write(out.join("shipped.rs"), code).expect("write shipped.rs");
}

/// `pub static NAME: &[ShippedFile]`: the directory's top-level files with these extensions, in
/// name order.
fn embed(code: &mut String, name: &str, dir: &Path, extensions: &[&str]) {
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut files: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("list a shipped directory").path())
        .filter(|path| path.is_file())
        .filter(|path| {
            path.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| extensions.contains(&e))
        })
        .map(|path| {
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            (file, path)
        })
        .collect();
    files.sort();
    writeln!(code, "pub static {name}: &[ShippedFile] = &[").unwrap();
    for (file, path) in files {
        writeln!(
            code,
            "    ShippedFile {{ name: {file:?}, bytes: include_bytes!({:?}) }},",
            path.display().to_string()
        )
        .unwrap();
    }
    writeln!(code, "];").unwrap();
}
