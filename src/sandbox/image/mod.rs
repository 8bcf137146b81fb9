//! The sandbox image: built from images/python (embedded in the binary, so an installed server
//! needs no source tree) through the engine's build API with a tar context, and tagged with the
//! profile and a content hash of that directory and the profile, so a changed harness or lock
//! file means a new tag and an unchanged one is reused.
//!
//! Two profiles ([`ImageProfile`]): `minimal` (the standard library) and `data` (numpy, pandas,
//! matplotlib and the rest). The Dockerfile's base is the pinned python:3.13-slim-trixie digest,
//! on which the data profile installs the hash-locked wheels of requirements-data.lock. Where no
//! registry is reachable (this project's CI, air-gapped installs) the build falls back to a
//! local base made from Debian's archive by images/offline-base.sh, whose data variant already
//! holds Debian's packages of the same libraries.

pub mod derived;
pub mod tree;

use std::collections::HashMap;
use std::io::Write;

use sha2::{Digest, Sha256};

use crate::sandbox::engine::backend::Backend;
use crate::sandbox::engine::docker::{BuildFailure, Engine};
use crate::sandbox::engine::error::EngineError;

/// The sandbox image profiles (see images/python/Dockerfile).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImageProfile {
    /// The standard library only.
    Minimal,
    /// numpy, pandas, pyarrow where available, scipy, matplotlib, pillow, openpyxl and more.
    Data,
}

impl ImageProfile {
    pub fn as_str(self) -> &'static str {
        match self {
            ImageProfile::Minimal => "minimal",
            ImageProfile::Data => "data",
        }
    }
}

/// The files of images/python, embedded. `tests` checks this list against the directory.
pub const CONTEXT: &[(&str, &[u8])] = &[
    (
        "Dockerfile",
        include_bytes!("../../../images/python/Dockerfile"),
    ),
    (
        "SECCOMP.md",
        include_bytes!("../../../images/python/SECCOMP.md"),
    ),
    (
        "cem_egress.py",
        include_bytes!("../../../images/python/cem_egress.py"),
    ),
    (
        "cem_helpers.py",
        include_bytes!("../../../images/python/cem_helpers.py"),
    ),
    (
        "cem_matplotlib.py",
        include_bytes!("../../../images/python/cem_matplotlib.py"),
    ),
    (
        "cem_state.py",
        include_bytes!("../../../images/python/cem_state.py"),
    ),
    (
        "harness.py",
        include_bytes!("../../../images/python/harness.py"),
    ),
    (
        "requirements-data.lock",
        include_bytes!("../../../images/python/requirements-data.lock"),
    ),
    (
        "seccomp.json",
        include_bytes!("../../../images/python/seccomp.json"),
    ),
];

/// The base the Dockerfile pins.
pub const PINNED_BASE: &str = "python:3.13-slim-trixie@sha256:9d2e5553305c7c7b0097999bb17187c69b921ccd6bc9d40e4bb5ebe652c00285";
/// The base images/offline-base.sh builds from Debian's archive (profile minimal).
pub const OFFLINE_BASE: &str = "code-execution-mcp/python-base:3.13-trixie";
/// The base `images/offline-base.sh --profile data` builds: also Debian's data libraries.
pub const OFFLINE_DATA_BASE: &str = "code-execution-mcp/python-base:3.13-trixie-data";

/// The offline base of a profile.
pub fn offline_base(profile: ImageProfile) -> &'static str {
    match profile {
        ImageProfile::Minimal => OFFLINE_BASE,
        ImageProfile::Data => OFFLINE_DATA_BASE,
    }
}
const OFFLINE_BASE_SCRIPT: &str = include_str!("../../../images/offline-base.sh");

/// Repository part of the sandbox image's tag.
pub const IMAGE_REPO: &str = "code-execution-mcp-sandbox";

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("building the sandbox image failed: {0}")]
    Build(String),
    #[error(
        "no base image: the pinned {PINNED_BASE} could not be pulled ({pull_error}) and the offline base could not be built: {offline_error}. Run images/offline-base.sh by hand (with --profile data for the data profile; needs root and debootstrap) or pass --base IMAGE"
    )]
    NoBase {
        pull_error: String,
        offline_error: String,
    },
}

/// Hex sha256 of the embedded images/python (names and contents) and the profile.
pub fn context_hash(profile: ImageProfile) -> String {
    let mut h = Sha256::new();
    h.update(profile.as_str().as_bytes());
    for (name, content) in CONTEXT {
        h.update((name.len() as u64).to_le_bytes());
        h.update(name.as_bytes());
        h.update((content.len() as u64).to_le_bytes());
        h.update(content);
    }
    hex::encode(h.finalize())
}

/// `code-execution-mcp-sandbox:<profile>-<first 16 hex digits of the context hash>`.
pub fn default_tag(profile: ImageProfile) -> String {
    format!(
        "{IMAGE_REPO}:{}-{}",
        profile.as_str(),
        &context_hash(profile)[..16]
    )
}

/// The build context as an uncompressed tar.
pub fn context_tar() -> Vec<u8> {
    tar_of(CONTEXT.iter().map(|(name, content)| (*name, *content)))
}

/// An uncompressed tar of (name, content) files, mode 0644, time 0 (so equal files give equal
/// bytes).
pub(super) fn tar_of<'a>(files: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, content) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_cksum();
        builder
            .append_data(&mut header, name, content)
            .expect("writing a tar to memory cannot fail");
    }
    builder
        .into_inner()
        .expect("writing a tar to memory cannot fail")
}

/// The image's id when the engine has it.
pub async fn image_id(engine: &Engine, name: &str) -> Result<Option<String>, EngineError> {
    engine.image_id(name).await
}

/// Makes sure `tag` exists, building it (of `profile`) when missing. Returns the image id.
/// `base` replaces the pinned base (e.g. the offline base); empty means none.
pub async fn ensure(
    engine: &Engine,
    tag: &str,
    base: Option<&str>,
    profile: ImageProfile,
) -> Result<String, ImageError> {
    if let Some(id) = image_id(engine, tag).await? {
        return Ok(id);
    }
    // Servers (or test processes) starting together build once: the others wait, then reuse.
    let _lock = build_lock().await;
    if let Some(id) = image_id(engine, tag).await? {
        return Ok(id);
    }
    eprintln!("code-execution-mcp: sandbox image {tag} not found; building it (once)");
    build(engine, tag, base.filter(|b| !b.trim().is_empty()), profile).await
}

/// An exclusive lock on a file in the temp directory, held while the image is built. Without
/// one (no writable temp dir) builds simply are not serialised.
async fn build_lock() -> Option<std::fs::File> {
    let path = std::env::temp_dir().join("code-execution-mcp-image-build.lock");
    tokio::task::spawn_blocking(move || {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .ok()?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).ok()?;
        Some(file)
    })
    .await
    .ok()
    .flatten()
}

/// Builds the sandbox image of `profile` as `tag` on `base` (default: pinned, else offline).
/// Progress goes to stderr, never stdout (stdout carries MCP in stdio mode).
pub async fn build(
    engine: &Engine,
    tag: &str,
    base: Option<&str>,
    profile: ImageProfile,
) -> Result<String, ImageError> {
    let base = match base {
        Some(b) => b.to_string(),
        None => choose_base(engine, profile).await?,
    };
    eprintln!(
        "code-execution-mcp: building {tag} (profile {}) from {base}",
        profile.as_str()
    );
    let buildargs = HashMap::from([("BASE", base.as_str()), ("PROFILE", profile.as_str())]);
    let hash = context_hash(profile);
    let labels = HashMap::from([
        ("io.code-execution-mcp.context-sha256", hash.as_str()),
        ("io.code-execution-mcp.base", base.as_str()),
    ]);
    let mut stderr = std::io::stderr();
    let progress = |line: &str| {
        let _ = write!(stderr, "  {line}");
    };
    engine
        .build_image(tag, &buildargs, &labels, context_tar(), progress)
        .await
        .map_err(|e| match e {
            BuildFailure::Refused(why) => ImageError::Build(why),
            BuildFailure::Engine(e) => ImageError::Engine(e),
        })?;
    image_id(engine, tag)
        .await?
        .ok_or_else(|| ImageError::Build(format!("the engine reported success but has no {tag}")))
}

/// The pinned base if present or pullable, else the profile's offline base (built when
/// missing).
async fn choose_base(engine: &Engine, profile: ImageProfile) -> Result<String, ImageError> {
    if image_id(engine, PINNED_BASE).await?.is_some() {
        return Ok(PINNED_BASE.into());
    }
    let pull_error = match engine.pull_image(PINNED_BASE).await {
        Ok(()) => return Ok(PINNED_BASE.into()),
        Err(e) => e,
    };
    let offline = offline_base(profile);
    eprintln!(
        "code-execution-mcp: cannot pull {PINNED_BASE} ({pull_error}); using the offline base {offline}"
    );
    if image_id(engine, offline).await?.is_some() {
        return Ok(offline.into());
    }
    build_offline_base(profile)
        .await
        .map_err(|offline_error| ImageError::NoBase {
            pull_error,
            offline_error,
        })?;
    Ok(offline.into())
}

/// Runs the embedded images/offline-base.sh (debootstrap + docker import).
async fn build_offline_base(profile: ImageProfile) -> Result<(), String> {
    let offline = offline_base(profile);
    eprintln!(
        "code-execution-mcp: building the offline base {offline} with debootstrap (one to three minutes)"
    );
    let status = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(OFFLINE_BASE_SCRIPT)
        .arg("offline-base.sh")
        .args(["--profile", profile.as_str(), offline])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::from(std::io::stderr()))
        .status()
        .await
        .map_err(|e| format!("cannot run bash: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("images/offline-base.sh exited with {status}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_context_matches_the_images_python_directory() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("images/python");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "__pycache__")
            .collect();
        on_disk.sort();
        let embedded: Vec<&str> = CONTEXT.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            on_disk, embedded,
            "add new files of images/python to CONTEXT"
        );
        for (name, content) in CONTEXT {
            assert_eq!(std::fs::read(dir.join(name)).unwrap(), *content);
        }
    }

    #[test]
    fn tag_is_stable_and_derived_from_content_and_profile() {
        for profile in [ImageProfile::Minimal, ImageProfile::Data] {
            assert_eq!(default_tag(profile), default_tag(profile));
            assert!(
                default_tag(profile)
                    .starts_with(&format!("code-execution-mcp-sandbox:{}-", profile.as_str()))
            );
            assert_eq!(context_hash(profile).len(), 64);
        }
        assert_ne!(
            context_hash(ImageProfile::Minimal),
            context_hash(ImageProfile::Data)
        );
    }

    #[test]
    fn context_tar_holds_every_file() {
        let tar = context_tar();
        let mut archive = tar::Archive::new(&tar[..]);
        let names: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), CONTEXT.len());
        assert!(names.contains(&"Dockerfile".to_string()));
    }

    #[test]
    fn dockerfile_pins_the_base_by_digest() {
        let dockerfile = std::str::from_utf8(CONTEXT[0].1).unwrap();
        assert!(dockerfile.contains(&format!("ARG BASE={PINNED_BASE}")));
    }
}
