//! What `cargo package` puts in the crate: the sentence model the binary embeds comes with its
//! license, notice and provenance, and with the files that remake it.

use std::process::Command;

#[test]
fn the_package_carries_the_model_with_its_license_and_notice() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["package", "--list", "--allow-dirty", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = String::from_utf8_lossy(&out.stdout);
    let files: Vec<&str> = listed.lines().collect();
    for wanted in [
        "tools_registry/model/all-MiniLM-L6-v2.q8",
        "tools_registry/model/catalog.vectors",
        "tools_registry/model/LICENSE",
        "tools_registry/model/NOTICE",
        "tools_registry/model/SOURCE.md",
        "tools_registry/model/convert.py",
        "tools_registry/model/embed_catalog.rs",
    ] {
        assert!(
            files.contains(&wanted),
            "{wanted} is not in the package: {files:?}"
        );
    }
    let license = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tools_registry/model/LICENSE"),
    )
    .unwrap();
    assert!(license.contains("Apache License") && license.contains("Version 2.0"));
}
