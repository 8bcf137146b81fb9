//! What resolves and installs a set, as a trait: the server's implementation runs
//! `images/installer/driver.py` in a container of its own (`app::packages`); the cache's logic
//! is tested against a fake. Also the driver's one-line answer, read into a result.

use std::path::Path;

use serde::Deserialize;

use super::Resolved;

/// The driver program, run as `python3 -I -c DRIVER REQUIREMENT...` in the installer container.
pub const DRIVER: &str = include_str!("../../images/installer/driver.py");

/// Why an install failed, as the installer found it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstallFailure {
    #[error("the package index has no `{name}` that fits (the index answered: {said})")]
    NotFound { name: String, said: String },
    #[error(
        "`{name}` has no wheel for the sandbox's Python and platform, only source: building one would run the package's own code, so it is refused. Bake it into an image with `code-execution-mcp image build --requirements FILE` (where a wheel can be built and checked by you)"
    )]
    SourceOnly { name: String },
    #[error(
        "the package index did not answer ({said}); check --packages-index, the proxy and --packages-ca-file, or try again"
    )]
    Unreachable { said: String },
    #[error(
        "the package index served {file} with other bytes than the sha256 it published for it ({said}): the file changed after its hash was published, or something on the way (a proxy, a mirror) altered it, so nothing was installed. Tell the index's operator, or use an index you trust (--packages-index)"
    )]
    HashMismatch { file: String, said: String },
    #[error(
        "the package index published no sha256 for {file}, so what it served cannot be checked and nothing was installed. Use an index whose links carry `#sha256=` (PyPI and its mirrors do; --packages-index), or a wheelhouse of wheels you checked (--packages-wheelhouse)"
    )]
    Unhashed { file: String },
    #[error("installing took over {secs} s and was stopped (--packages-timeout-secs)")]
    TimedOut { secs: u64 },
    #[error("installing failed: {said}")]
    Failed { said: String },
}

/// What an install put in its directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstallAnswer {
    pub resolved: Vec<Resolved>,
    /// Those of `resolved` the image has too, in another version.
    pub replaces: Vec<String>,
}

/// Resolves `requirements` for the sandbox image and installs them into `staging`, a directory
/// the caller made for this install alone.
#[async_trait::async_trait]
pub trait Installer: Send + Sync + 'static {
    async fn install(
        &self,
        requirements: &[String],
        staging: &Path,
    ) -> Result<InstallAnswer, InstallFailure>;
}

#[derive(Deserialize)]
struct DriverAnswer {
    ok: bool,
    #[serde(default)]
    resolved: Vec<Resolved>,
    #[serde(default)]
    replaces: Vec<String>,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    said: String,
}

/// Reads the driver's answer (its last line of standard output); `exit` is the container's
/// exit code, `stderr` what it wrote there (the cause when there is no answer).
pub fn read_answer(
    stdout: &str,
    exit: Option<i64>,
    stderr: &str,
) -> Result<InstallAnswer, InstallFailure> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'));
    let Some(answer) = line.and_then(|l| serde_json::from_str::<DriverAnswer>(l).ok()) else {
        let tail = last_chars(stderr.trim(), 600);
        return Err(InstallFailure::Failed {
            said: format!("the installer ended with exit code {exit:?} and no answer: {tail}"),
        });
    };
    if answer.ok {
        for r in &answer.resolved {
            let hex = r.sha256.len() == 64 && r.sha256.bytes().all(|b| b.is_ascii_hexdigit());
            if !hex || r.name.is_empty() || r.version.is_empty() {
                return Err(InstallFailure::Failed {
                    said: format!(
                        "the installer reported {:?}, which is not a resolved wheel",
                        r.name
                    ),
                });
            }
        }
        return Ok(InstallAnswer {
            resolved: answer.resolved,
            replaces: answer.replaces,
        });
    }
    let said = crate::text::prefix_chars(&answer.said, 1000).to_owned();
    Err(match answer.kind.as_str() {
        "not_found" => InstallFailure::NotFound {
            name: answer.name,
            said,
        },
        "source_only" => InstallFailure::SourceOnly { name: answer.name },
        "unreachable" => InstallFailure::Unreachable { said },
        "hash_mismatch" => InstallFailure::HashMismatch {
            file: answer.name,
            said,
        },
        "unhashed" => InstallFailure::Unhashed { file: answer.name },
        _ => InstallFailure::Failed { said },
    })
}

/// The last `n` characters of `s`.
fn last_chars(s: &str, n: usize) -> &str {
    let skip = s.chars().count().saturating_sub(n);
    s.char_indices().nth(skip).map_or("", |(i, _)| &s[i..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drivers_answers_become_results() {
        let ok = r#"{"ok": true, "resolved": [{"name": "humanize", "version": "4.12.3", "sha256": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "file": "humanize-4.12.3-py3-none-any.whl"}]}"#;
        let set = read_answer(&format!("noise\n{ok}\n"), Some(0), "").unwrap();
        assert_eq!(set.resolved[0].version, "4.12.3");
        let missing = r#"{"ok": false, "kind": "not_found", "name": "nope==9", "said": "ERROR: No matching distribution found for nope==9"}"#;
        assert!(matches!(
            read_answer(missing, Some(0), ""),
            Err(InstallFailure::NotFound { name, .. }) if name == "nope==9"
        ));
        let source = r#"{"ok": false, "kind": "source_only", "name": "pkg"}"#;
        let err = read_answer(source, Some(0), "").unwrap_err();
        assert!(
            err.to_string().contains("image build --requirements"),
            "{err}"
        );
        let err = read_answer("", Some(137), "Killed").unwrap_err();
        assert!(
            err.to_string().contains("137") && err.to_string().contains("Killed"),
            "{err}"
        );
        let tampered = r#"{"ok": false, "kind": "hash_mismatch", "name": "x-1-py3-none-any.whl", "said": "published sha256 aa, served bb"}"#;
        let err = read_answer(tampered, Some(0), "").unwrap_err();
        assert!(
            matches!(&err, InstallFailure::HashMismatch { file, .. } if file == "x-1-py3-none-any.whl")
        );
        assert!(err.to_string().contains("served bb"), "{err}");
        let unhashed = r#"{"ok": false, "kind": "unhashed", "name": "x-1-py3-none-any.whl"}"#;
        let err = read_answer(unhashed, Some(0), "").unwrap_err();
        assert!(
            err.to_string()
                .contains("no sha256 for x-1-py3-none-any.whl"),
            "{err}"
        );
        let forged = r#"{"ok": true, "resolved": [{"name": "x", "version": "1", "sha256": "zz", "file": "x.whl"}]}"#;
        assert!(read_answer(forged, Some(0), "").is_err());
    }
}
