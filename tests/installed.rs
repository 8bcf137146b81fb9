//! The binary as a user installs it: `cargo package` makes the crate, `cargo install` builds it
//! from the unpacked crate into a temporary prefix, the unpacked source is then deleted, and the
//! installed binary, started from an unrelated directory with a fresh home, serves the whole
//! tool catalog, seeds the starter skills and runs code in the sandbox image, exits cleanly when
//! its client leaves, and builds that image from the context it carries (forced: the image
//! exists already), under the very tag the other tests run on.
//!
//! The build goes to `target/install-test`, a target directory of its own (the one `cargo test`
//! uses is locked while the tests run), in the dev profile and offline: the crates are the ones
//! this build already fetched. A new one is seeded with the dependencies this test's own build
//! compiled (same versions, features and profile, so cargo's fingerprints take them), and the
//! install compiles only the crate itself: a minute on two cores instead of several.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::json;
use tokio::process::Command;

use common::call_tool;

const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");
const CRATE: &str = concat!(env!("CARGO_PKG_NAME"), "-", env!("CARGO_PKG_VERSION"));

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_installed_binary_serves_tools_skills_and_executions_without_its_source_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let target = Path::new(MANIFEST_DIR).join("target/install-test");
    let installed = install(&target, tmp.path()).await;

    // From a directory that has nothing of the project, with a home of its own.
    let elsewhere = tmp.path().join("elsewhere");
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    use rmcp::ServiceExt;
    let mut child = Command::new(&installed)
        .args(["serve", "--pool-size", "0", "--workspace-quota-mb", "0"])
        .current_dir(&elsewhere)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("CEM_IMAGE_PROFILE", "minimal")
        .envs(std::env::var_os("DOCKER_HOST").map(|h| ("DOCKER_HOST", h)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start the installed binary");
    let pid = child.id().unwrap();
    let stdout = child.stdout.take().unwrap();
    let stdin = child.stdin.take().unwrap();
    let client = ().serve((stdout, stdin)).await.expect("MCP handshake");
    common::wait_started(&client).await;

    let (err, v) = call_tool(&client, "get_execution_stats", json!({})).await;
    assert!(!err, "{v}");
    assert_eq!(v["tool_registry"]["total_tools"], 5558, "{v}");
    let (err, v) = call_tool(
        &client,
        "search_tools",
        json!({"query": "create an issue on github", "detail_level": "name"}),
    )
    .await;
    assert!(!err, "{v}");
    // The tools that create a GitHub issue lead (`issue_write` creates or updates one), ranked
    // by the sentence model the binary carries.
    let top: Vec<&str> = v["tools"].as_array().unwrap()[..5]
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(top[0], "github/issue_write", "{v}");
    assert!(top.contains(&"github/create_issue"), "{v}");
    let (_, stats) = call_tool(&client, "get_execution_stats", json!({})).await;
    assert_eq!(
        stats["tool_registry"]["ranking"]["ranker"], "semantic",
        "{stats}"
    );

    let (err, v) = call_tool(&client, "list_skills", json!({})).await;
    assert!(!err, "{v}");
    let names: Vec<&str> = v["skills"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert!(names.contains(&"filter_high_risk"), "{names:?}");
    assert!(
        home.join(".local/share/code-execution-mcp/skills/filter_high_risk.py")
            .is_file(),
        "the starter skills are seeded into the default data directory"
    );

    let (err, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": "from skills import filter_high_risk\nresult = len(filter_high_risk([{'severity': 'high'}, {'severity': 'low'}]))"}),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(v["result"], 1, "{v}");

    client
        .cancel()
        .await
        .expect("the client closes the session");
    let status = tokio::time::timeout(std::time::Duration::from_secs(30), child.wait())
        .await
        .expect("the server exits within 30 s of its client leaving")
        .expect("the server's exit status");
    assert!(
        status.success(),
        "the installed server exited with {status}"
    );
    assert!(
        common::containers_of(pid).await.is_empty(),
        "the installed server left containers behind"
    );

    // The build context it carries: a forced build from it (the layers are cached, so this is
    // quick) makes the very tag the other tests run on.
    let out = Command::new(&installed)
        .args([
            "image",
            "build",
            "--profile",
            "minimal",
            "--force",
            "--base",
        ])
        .arg(common::images::sandbox_base())
        .current_dir(&elsewhere)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .envs(std::env::var_os("DOCKER_HOST").map(|h| ("DOCKER_HOST", h)))
        .output()
        .await
        .expect("run the installed binary's image build");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "image build failed: {stderr}");
    use code_execution_mcp::sandbox::image;
    let tag = image::default_tag(image::ImageProfile::Minimal);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), tag, "{stderr}");
    assert!(stderr.contains(&format!("built {tag}")), "{stderr}");
}

/// Packages the crate, unpacks it into `dir/src`, installs from there into `dir/prefix`, deletes
/// the unpacked source, and returns the installed binary.
async fn install(target: &Path, dir: &Path) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run(
        Command::new(&cargo)
            .args(["package", "--no-verify", "--allow-dirty", "--offline"])
            .env("CARGO_TARGET_DIR", target)
            .current_dir(MANIFEST_DIR),
        "cargo package",
    )
    .await;
    let packaged = target.join("package").join(format!("{CRATE}.crate"));
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    run(
        Command::new("tar")
            .arg("-xzf")
            .arg(&packaged)
            .arg("-C")
            .arg(&src),
        "unpack the crate",
    )
    .await;
    let prefix = dir.join("prefix");
    seed_dependencies(target);
    run(
        Command::new(&cargo)
            .args(["install", "--debug", "--locked", "--offline", "--path"])
            .arg(src.join(CRATE))
            .arg("--root")
            .arg(&prefix)
            .env("CARGO_TARGET_DIR", target),
        "cargo install",
    )
    .await;
    std::fs::remove_dir_all(&src).unwrap();
    let bin = prefix.join("bin").join(env!("CARGO_PKG_NAME"));
    assert!(bin.is_file(), "{} was not installed", bin.display());
    bin
}

/// Copies the compiled dependencies of the build this test binary belongs to into `target`'s
/// dev profile, once, when `target` has none yet. Only libraries, their metadata and build
/// script outputs: the test binaries beside them are not needed. Copies, not hard links, so a
/// rebuild in one directory never writes into the other's files.
fn seed_dependencies(target: &Path) {
    let seeded = target.join("debug");
    if seeded.exists() {
        return;
    }
    let exe = std::env::current_exe().expect("this test's path");
    // <target>/debug/deps/installed-<hash>
    let this_build = exe
        .parent()
        .and_then(Path::parent)
        .expect("a build directory");
    let library = |p: &Path| {
        (p.extension().and_then(|e| e.to_str()))
            .is_some_and(|e| ["rlib", "rmeta", "so", "d"].contains(&e))
    };
    copy_tree(&this_build.join("deps"), &seeded.join("deps"), &library);
    copy_tree(&this_build.join("build"), &seeded.join("build"), &|_| true);
    copy_tree(
        &this_build.join(".fingerprint"),
        &seeded.join(".fingerprint"),
        &|_| true,
    );
}

/// Copies the regular files under `from` that `keep` accepts to the same places under `to`,
/// with their modification times.
fn copy_tree(from: &Path, to: &Path, keep: &dyn Fn(&Path) -> bool) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let entry = entry.unwrap();
        let (path, kind) = (entry.path(), entry.file_type().unwrap());
        if kind.is_dir() {
            copy_tree(&path, &to.join(entry.file_name()), keep);
        } else if kind.is_file() && keep(&path) {
            let copy = to.join(entry.file_name());
            std::fs::copy(&path, &copy).unwrap_or_else(|e| panic!("copy {}: {e}", path.display()));
            // cargo judges freshness by these times too: a copy newer than what was built
            // on it would make everything above it stale.
            let modified = entry.metadata().and_then(|m| m.modified()).unwrap();
            (std::fs::File::options().write(true).open(&copy))
                .and_then(|f| f.set_modified(modified))
                .unwrap_or_else(|e| panic!("keep the time of {}: {e}", copy.display()));
        }
    }
}

async fn run(command: &mut Command, what: &str) {
    let out = command
        .output()
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
