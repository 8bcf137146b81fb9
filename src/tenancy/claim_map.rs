//! Which tenant an OAuth identity belongs to: `--oauth-tenants FILE`, one `TENANT = VALUE[,
//! VALUE…]` per line. A token whose tenant claim equals one of a line's values (for a
//! list-valued claim such as groups: contains one) belongs to that tenant. Tenants stay a closed
//! set known at start, as with the tokens file; a value that two tenants list is refused at
//! start, so that one identity never reaches two tenants' data.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::{MAX_TENANT_CHARS, valid_tenant_name};

/// A tenants file larger than this is not a tenants file.
const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Longest claim value a line may list.
const MAX_VALUE_CHARS: usize = 256;

#[derive(Debug, thiserror::Error)]
pub enum ClaimMapError {
    #[error(
        "cannot read the OAuth tenants file {path}: {source}. Point --oauth-tenants (CEM_OAUTH_TENANTS) at a readable file of `TENANT = VALUE, VALUE` lines"
    )]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the OAuth tenants file {path} is over 1 MiB: it should hold one `TENANT = VALUE, VALUE` line per tenant"
    )]
    TooLarge { path: PathBuf },
    #[error("{path} line {line}: {problem}")]
    Line {
        path: PathBuf,
        line: usize,
        problem: String,
    },
    #[error(
        "no tenants in the OAuth tenants file {0}: add `TENANT = VALUE` lines naming the tenant claim's values"
    )]
    Empty(PathBuf),
}

/// Claim values and the tenant each names.
#[derive(Debug, Clone, Default)]
pub struct ClaimMap {
    values: BTreeMap<String, String>,
}

impl ClaimMap {
    /// Reads `path`. A malformed line, or a value two tenants list, fails the whole map.
    pub fn load(path: &Path) -> Result<Self, ClaimMapError> {
        let read_err = |source| ClaimMapError::Read {
            path: path.to_owned(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(read_err)?;
        if meta.len() > MAX_FILE_BYTES {
            return Err(ClaimMapError::TooLarge {
                path: path.to_owned(),
            });
        }
        let text = std::fs::read_to_string(path).map_err(read_err)?;
        let map = Self::parse(&text).map_err(|(line, problem)| ClaimMapError::Line {
            path: path.to_owned(),
            line,
            problem,
        })?;
        if map.values.is_empty() {
            return Err(ClaimMapError::Empty(path.to_owned()));
        }
        Ok(map)
    }

    /// The map of a file's text; an error names the line (1-based) and what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, (usize, String)> {
        let mut values: BTreeMap<String, String> = BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (tenant, listed) = parse_line(line).map_err(|p| (n + 1, p))?;
            for value in listed {
                if let Some(other) = values.get(&value)
                    && *other != tenant
                {
                    return Err((
                        n + 1,
                        format!(
                            "the value {value:?} is listed for tenants {other} and {tenant}: one claim value names one tenant"
                        ),
                    ));
                }
                values.insert(value, tenant.clone());
            }
        }
        Ok(Self { values })
    }

    /// The tenant a claim value names, if any.
    pub fn tenant_of(&self, value: &str) -> Option<&str> {
        self.values.get(value).map(String::as_str)
    }

    /// The tenants, each once, sorted.
    pub fn tenants(&self) -> Vec<&str> {
        let set: BTreeSet<&str> = self.values.values().map(String::as_str).collect();
        set.into_iter().collect()
    }
}

/// `TENANT = VALUE[, VALUE…]`.
fn parse_line(line: &str) -> Result<(String, Vec<String>), String> {
    let Some((tenant, values)) = line.split_once('=') else {
        return Err("expected `TENANT = VALUE[, VALUE…]`".into());
    };
    let tenant = tenant.trim();
    if !valid_tenant_name(tenant) {
        return Err(format!(
            "tenant name {tenant:?} is not allowed: use 1 to {MAX_TENANT_CHARS} of a-z, 0-9, '_' and '-', starting with a letter or digit"
        ));
    }
    let mut listed = Vec::new();
    for value in values.split(',').map(str::trim) {
        if value.is_empty() || value.chars().count() > MAX_VALUE_CHARS {
            return Err(format!(
                "tenant {tenant}: every value is 1 to {MAX_VALUE_CHARS} characters, comma-separated"
            ));
        }
        if value.chars().any(char::is_control) {
            return Err(format!(
                "tenant {tenant}: a value holds a control character"
            ));
        }
        listed.push(value.to_string());
    }
    Ok((tenant.to_string(), listed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_name_their_tenant() {
        let map =
            ClaimMap::parse("# teams\nteam-a = eng, staff\n\nteam-b=ops\nteam-a = mcp-users\n")
                .unwrap();
        assert_eq!(map.tenant_of("eng"), Some("team-a"));
        assert_eq!(map.tenant_of("mcp-users"), Some("team-a"));
        assert_eq!(map.tenant_of("ops"), Some("team-b"));
        assert_eq!(map.tenant_of("Ops"), None);
        assert_eq!(map.tenants(), vec!["team-a", "team-b"]);
    }

    #[test]
    fn bad_lines_name_their_line() {
        for (text, line, expected) in [
            ("team-a eng", 1, "expected"),
            ("\nTeam = eng", 2, "tenant name"),
            ("a = eng,,x", 1, "1 to 256"),
            ("a = eng\nb = ops, eng", 2, "listed for tenants a and b"),
            ("a = e\u{7}g", 1, "control"),
        ] {
            let (n, problem) = ClaimMap::parse(text).unwrap_err();
            assert_eq!(n, line, "{text}: {problem}");
            assert!(problem.contains(expected), "{text}: {problem}");
        }
        // The same value twice for one tenant is no conflict.
        assert!(ClaimMap::parse("a = eng\na = eng").is_ok());
    }

    #[test]
    fn files_are_bounded_and_not_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tenants");
        std::fs::write(&path, "# nothing yet\n").unwrap();
        let err = ClaimMap::load(&path).unwrap_err().to_string();
        assert!(err.contains("no tenants"), "{err}");
        std::fs::write(&path, "a = x\n".repeat(200_000)).unwrap();
        let err = ClaimMap::load(&path).unwrap_err().to_string();
        assert!(err.contains("over 1 MiB"), "{err}");
        let err = ClaimMap::load(&dir.path().join("missing")).unwrap_err();
        assert!(err.to_string().contains("--oauth-tenants"), "{err}");
    }
}
