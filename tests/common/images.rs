//! The images the deployment tests build on (tests/compose.rs, tests/swarm, benches/swarm).

use std::process::Command;

/// The base the minimal sandbox image was built on (its `org.opencontainers.image.base.name`
/// label): the pinned one, or the offline base without a registry. The server image is built
/// on it too.
pub fn sandbox_base() -> String {
    use code_execution_mcp::sandbox::image;
    let tag = image::default_tag(image::ImageProfile::Minimal);
    let out = Command::new("docker")
        .args([
            "image",
            "inspect",
            "-f",
            "{{index .Config.Labels \"org.opencontainers.image.base.name\"}}",
            &tag,
        ])
        .output()
        .expect("docker image inspect");
    let base = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success() && !base.is_empty(),
        "the sandbox image {tag} is missing: build it first (`code-execution-mcp image build --profile minimal`, see README)"
    );
    base
}
