//! A sandbox image with the user's own packages: `image build --requirements FILE` builds it
//! on top of a sandbox image (the profile's, or `--from`), installing the pinned packages of
//! FILE with pip, binary wheels only (`--only-binary=:all:`: nothing is compiled, no setup.py
//! runs), into /opt/sandbox/packages, which the harness puts on sys.path. The network is used
//! at build time only; with `--wheels DIR` the wheels come from DIR alone (`--no-index`), so
//! the build needs no network at all. Containers run from it exactly as from the base image:
//! the hardening is the server's, at run time.
//!
//! FILE is checked before anything is built: every requirement must be pinned (`name==version`,
//! optionally with extras, a marker and `--hash` options); anything else (URLs, paths, `-e`,
//! other pip options) is refused with the line that holds it.

use std::collections::HashMap;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::sandbox::engine::docker::{BuildFailure, Engine};
use crate::sandbox::image::{IMAGE_REPO, ImageError, image_id, tar_of};

/// Where the packages go inside the image (the harness adds it to sys.path).
pub const PACKAGES_DIR: &str = "/opt/sandbox/packages";
/// Largest requirements file and wheel directory accepted.
const MAX_REQUIREMENTS_BYTES: usize = 256 * 1024;
const MAX_WHEELS_BYTES: u64 = 2 * 1024 * 1024 * 1024;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequirementsError {
    #[error("{file}: cannot read it: {why}")]
    Unreadable { file: String, why: String },
    #[error(
        "{file}, line {line}: `{text}` is not a pinned requirement. Write NAME==VERSION (extras, a `;` marker and --hash=sha256:... are allowed); URLs, paths, -e and other pip options are not"
    )]
    NotPinned {
        file: String,
        line: usize,
        text: String,
    },
    #[error("{file} names no package")]
    Empty { file: String },
    #[error("--wheels {dir}: {why}")]
    Wheels { dir: String, why: String },
}

/// The package names of a requirements file, after checking that every line is pinned.
pub fn check_requirements(file: &str, text: &str) -> Result<Vec<String>, RequirementsError> {
    let mut names = Vec::new();
    // Continuation lines (a trailing backslash) join the next line, as pip reads them.
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    for (i, raw) in joined.lines().enumerate() {
        let line = raw.split(" #").next().unwrap_or("").trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || RequirementsError::NotPinned {
            file: file.into(),
            line: i + 1,
            text: crate::text::prefix_chars(line, 120).to_owned(),
        };
        // Options may only be hashes; the rest is the requirement and its marker.
        let (options, words): (Vec<&str>, Vec<&str>) =
            line.split_whitespace().partition(|w| w.starts_with('-'));
        let options_ok = options.iter().all(|o| o.starts_with("--hash=sha256:"));
        let words = words.join(" ");
        let spec: String = words
            .split(';')
            .next()
            .unwrap_or("")
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let (name_extras, version) = spec.split_once("==").ok_or_else(bad)?;
        let name = name_extras.split('[').next().unwrap_or("");
        let name_ok = !name.is_empty()
            && name.len() <= 100
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
            && name.starts_with(|c: char| c.is_ascii_alphanumeric());
        let version_ok = !version.is_empty()
            && version.len() <= 64
            && version
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._+!-".contains(c));
        if !(options_ok && name_ok && version_ok) {
            return Err(bad());
        }
        names.push(name.to_string());
    }
    if names.is_empty() {
        return Err(RequirementsError::Empty { file: file.into() });
    }
    Ok(names)
}

/// The user's packages: the requirements file and the wheels to install from, if any.
pub struct Packages {
    pub requirements_name: String,
    pub requirements: Vec<u8>,
    /// (file name, bytes) of each `.whl` in `--wheels DIR`.
    pub wheels: Option<Vec<(String, Vec<u8>)>>,
    pub names: Vec<String>,
}

impl Packages {
    /// Reads and checks FILE and the wheels of DIR.
    pub fn read(requirements: &Path, wheels: Option<&Path>) -> Result<Self, RequirementsError> {
        let file = requirements.display().to_string();
        let unreadable = |why: String| RequirementsError::Unreadable {
            file: file.clone(),
            why,
        };
        let bytes = std::fs::read(requirements).map_err(|e| unreadable(e.to_string()))?;
        if bytes.len() > MAX_REQUIREMENTS_BYTES {
            return Err(unreadable(format!("over {MAX_REQUIREMENTS_BYTES} bytes")));
        }
        let text = String::from_utf8(bytes.clone()).map_err(|_| unreadable("not UTF-8".into()))?;
        let names = check_requirements(&file, &text)?;
        let wheels = wheels.map(read_wheels).transpose()?;
        Ok(Self {
            requirements_name: file,
            requirements: bytes,
            wheels,
            names,
        })
    }

    /// Hex sha256 of everything that goes into the image besides its base.
    fn hash(&self, base_id: &str) -> String {
        let mut h = Sha256::new();
        h.update(base_id.as_bytes());
        h.update((self.requirements.len() as u64).to_le_bytes());
        h.update(&self.requirements);
        for (name, data) in self.wheels.iter().flatten() {
            h.update(name.as_bytes());
            h.update((data.len() as u64).to_le_bytes());
            h.update(data);
        }
        hex::encode(h.finalize())
    }
}

fn read_wheels(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, RequirementsError> {
    let err = |why: String| RequirementsError::Wheels {
        dir: dir.display().to_string(),
        why,
    };
    let mut wheels = Vec::new();
    let mut total = 0u64;
    for entry in std::fs::read_dir(dir).map_err(|e| err(e.to_string()))? {
        let entry = entry.map_err(|e| err(e.to_string()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".whl") || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let ok = name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+-!".contains(c));
        if !ok {
            return Err(err(format!("{name:?} is not a wheel file name")));
        }
        let data = std::fs::read(entry.path()).map_err(|e| err(format!("{name}: {e}")))?;
        total += data.len() as u64;
        if total > MAX_WHEELS_BYTES {
            return Err(err(format!(
                "over {} GiB of wheels",
                MAX_WHEELS_BYTES >> 30
            )));
        }
        wheels.push((name, data));
    }
    if wheels.is_empty() {
        return Err(err("holds no .whl file".into()));
    }
    wheels.sort();
    Ok(wheels)
}

/// The Dockerfile of the derived image.
fn dockerfile(from: &str, offline: bool) -> String {
    let source = if offline {
        "--no-index --find-links /tmp/cem-packages/wheels"
    } else {
        ""
    };
    format!(
        r#"FROM {from}
USER root
COPY . /tmp/cem-packages/
RUN set -eu; \
    if python3 -I -m pip --version >/dev/null 2>&1; then pip="python3 -I -m pip"; \
    else pip="python3 -I $(ls /usr/share/python-wheels/pip-*.whl 2>/dev/null | head -n 1)/pip"; fi; \
    $pip --version >/dev/null 2>&1 || {{ echo "the sandbox image has no pip to install packages with" >&2; exit 1; }}; \
    $pip install --no-cache-dir --disable-pip-version-check --no-warn-script-location \
        --only-binary=:all: --target {PACKAGES_DIR} {source} -r /tmp/cem-packages/requirements.txt; \
    python3 -I -m compileall -q -j 0 {PACKAGES_DIR}; \
    chmod -R a+rX {PACKAGES_DIR}; \
    rm -rf /tmp/cem-packages
ENV PYTHONPATH=/opt/sandbox/lib:{PACKAGES_DIR}
USER 10001:10001
"#
    )
}

fn context_tar(packages: &Packages, from: &str) -> Vec<u8> {
    let dockerfile = dockerfile(from, packages.wheels.is_some());
    let wheels: Vec<(String, &[u8])> = packages
        .wheels
        .iter()
        .flatten()
        .map(|(name, data)| (format!("wheels/{name}"), data.as_slice()))
        .collect();
    tar_of(
        [
            ("Dockerfile", dockerfile.as_bytes()),
            ("requirements.txt", packages.requirements.as_slice()),
        ]
        .into_iter()
        .chain(wheels.iter().map(|(name, data)| (name.as_str(), *data))),
    )
}

/// Builds (or finds, when already built) the image of `packages` on top of `from`; returns
/// its tag, `code-execution-mcp-sandbox:user-<hash of base and packages>`.
pub async fn build(engine: &Engine, from: &str, packages: &Packages) -> Result<String, ImageError> {
    let base_id = image_id(engine, from).await?.ok_or_else(|| {
        ImageError::Build(format!(
            "the sandbox image {from} is not on the engine: build it first with `code-execution-mcp image build`"
        ))
    })?;
    let hash = packages.hash(&base_id);
    let tag = format!("{IMAGE_REPO}:user-{}", &hash[..16]);
    if image_id(engine, &tag).await?.is_some() {
        eprintln!("{tag} is already built");
        return Ok(tag);
    }
    eprintln!(
        "code-execution-mcp: building {tag} from {from} with {} ({})",
        packages.requirements_name,
        packages.names.join(", ")
    );
    let labels = HashMap::from([
        ("io.code-execution-mcp.requirements-sha256", hash.as_str()),
        ("io.code-execution-mcp.base", from),
    ]);
    let mut errors: Vec<String> = Vec::new();
    let mut stderr = std::io::stderr();
    let progress = |line: &str| {
        use std::io::Write;
        let _ = write!(stderr, "  {line}");
        if line.trim_start().starts_with("ERROR:") && errors.len() < 10 {
            errors.push(line.trim().to_string());
        }
    };
    let built = engine
        .build_image(
            &tag,
            &HashMap::new(),
            &labels,
            context_tar(packages, from),
            progress,
        )
        .await;
    match built {
        Ok(()) => Ok(tag),
        Err(BuildFailure::Engine(e)) => Err(ImageError::Engine(e)),
        Err(BuildFailure::Refused(why)) => Err(ImageError::Build(install_failure(
            &packages.requirements_name,
            &errors,
            &why,
        ))),
    }
}

/// What to tell the user when pip failed: pip's own ERROR lines (which name the package and
/// why), and what the rules are.
fn install_failure(file: &str, errors: &[String], why: &str) -> String {
    let said = if errors.is_empty() {
        why.trim().to_string()
    } else {
        errors.join(" ")
    };
    format!(
        "installing the packages of {file} failed: {said}. Only binary wheels are installed (no source builds): a package needs a wheel for Linux, this machine's architecture and Python 3.13; with --wheels, every package and dependency must be in that directory"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_requirements_pass_and_name_their_packages() {
        let text = "# tools\nrequests==2.32.3  # http\nPyYAML[extra]==6.0.2 ; python_version >= '3.8'\nattrs==24.2.0 \\\n    --hash=sha256:abc\n\n";
        assert_eq!(
            check_requirements("r.txt", text).unwrap(),
            vec!["requests", "PyYAML", "attrs"]
        );
    }

    #[test]
    fn anything_unpinned_is_refused_with_its_line() {
        for (text, line) in [
            ("requests\n", 1),
            ("a==1\nrequests>=2\n", 2),
            ("-e git+https://example.com/x.git\n", 1),
            ("https://example.com/x.whl\n", 1),
            ("./local.whl\n", 1),
            ("--index-url https://evil.example/simple\na==1\n", 1),
            ("a==1 --global-option=x\n", 1),
            ("a==$(id)\n", 1),
        ] {
            match check_requirements("r.txt", text) {
                Err(RequirementsError::NotPinned { line: l, .. }) => assert_eq!(l, line, "{text}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
        assert!(matches!(
            check_requirements("r.txt", "# nothing\n"),
            Err(RequirementsError::Empty { .. })
        ));
    }

    #[test]
    fn the_failure_names_what_pip_said() {
        let msg = install_failure(
            "r.txt",
            &["ERROR: No matching distribution found for nope==1.0".into()],
            "The command returned a non-zero code: 1",
        );
        assert!(
            msg.contains("nope==1.0") && msg.contains("binary wheels"),
            "{msg}"
        );
    }
}
