//! Which packages a tenant may install: an allow list and a deny list of names with optional
//! version ranges (`--packages-policy FILE`), checked against what was asked for before
//! anything is resolved, and against every distribution of the resolved set, dependencies
//! included, before the set is used. A deny entry wins over an allow entry; an empty allow
//! list allows any package the index has.
//!
//! The file is JSON: `{"allow": [...], "deny": [...], "tenants": {"NAME": {"allow": [...],
//! "deny": [...]}}}`. A tenant's entry replaces the top-level lists for that tenant.

use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;

use pep508_rs::pep440_rs::{Version, VersionSpecifiers};
use pep508_rs::{Requirement as Pep508, VersionOrUrl};
use serde::Deserialize;

use super::Resolved;
use super::requirement::Requirement;

/// A policy file larger than this is not a policy file.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum PolicyFileError {
    #[error(
        "cannot read the packages policy file {path}: {why}. Point --packages-policy at a readable JSON file"
    )]
    Read { path: String, why: String },
    #[error(
        "the packages policy file {path}: {why}. Expected {{\"allow\": [\"NAME\", \"NAME>=1.0\"], \"deny\": [...], \"tenants\": {{\"TENANT\": {{\"allow\": [...], \"deny\": [...]}}}}}}"
    )]
    Invalid { path: String, why: String },
}

/// One entry: a package name and, optionally, the versions it covers.
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    versions: Option<VersionSpecifiers>,
    text: String,
}

impl Entry {
    fn parse(text: &str) -> Result<Self, String> {
        let parsed = Pep508::<pep508_rs::VerbatimUrl>::from_str(text.trim())
            .map_err(|e| format!("`{text}`: {}", e.to_string().lines().next().unwrap_or("")))?;
        let versions = match parsed.version_or_url {
            None => None,
            Some(VersionOrUrl::VersionSpecifier(v)) => Some(v),
            Some(VersionOrUrl::Url(_)) => return Err(format!("`{text}`: a URL is not a package")),
        };
        Ok(Self {
            name: parsed.name.to_string(),
            versions,
            text: text.trim().to_string(),
        })
    }

    /// Whether the entry covers this name at any version (versions unknown yet).
    fn names(&self, name: &str) -> bool {
        self.name == name
    }

    /// Whether the entry covers this distribution.
    fn covers(&self, name: &str, version: &str) -> bool {
        self.name == name
            && match (&self.versions, Version::from_str(version)) {
                (None, _) => true,
                (Some(range), Ok(v)) => range.contains(&v),
                (Some(_), Err(_)) => false,
            }
    }
}

/// One tenant's lists.
#[derive(Debug, Clone, Default)]
pub struct PackagePolicy {
    allow: Vec<Entry>,
    deny: Vec<Entry>,
}

/// Why the policy refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyRefusal {
    #[error(
        "the package `{name}` is denied by this server's package policy (entry `{entry}`); ask the administrator, or do without it"
    )]
    Denied { name: String, entry: String },
    #[error(
        "the package `{name}`{version} is not on this server's allow list ({allowed}); ask the administrator to allow it"
    )]
    NotAllowed {
        name: String,
        version: String,
        allowed: String,
    },
}

impl PackagePolicy {
    /// Refuses a request whose names are denied outright (an entry without versions), before
    /// anything is resolved; version ranges wait for the resolved set.
    pub fn check_requested(&self, requested: &[Requirement]) -> Result<(), PolicyRefusal> {
        for r in requested {
            if let Some(e) = self
                .deny
                .iter()
                .find(|e| e.versions.is_none() && e.names(&r.name))
            {
                return Err(PolicyRefusal::Denied {
                    name: r.name.clone(),
                    entry: e.text.clone(),
                });
            }
            if !self.allow.is_empty() && !self.allow.iter().any(|e| e.names(&r.name)) {
                return Err(self.not_allowed(&r.name, ""));
            }
        }
        Ok(())
    }

    /// Checks every distribution of a resolved set.
    pub fn check_resolved(&self, resolved: &[Resolved]) -> Result<(), PolicyRefusal> {
        for d in resolved {
            let name = super::requirement::normalize_name(&d.name);
            if let Some(e) = self.deny.iter().find(|e| e.covers(&name, &d.version)) {
                return Err(PolicyRefusal::Denied {
                    name: format!("{name}=={}", d.version),
                    entry: e.text.clone(),
                });
            }
            if !self.allow.is_empty() && !self.allow.iter().any(|e| e.covers(&name, &d.version)) {
                return Err(self.not_allowed(&name, &format!(" {}", d.version)));
            }
        }
        Ok(())
    }

    fn not_allowed(&self, name: &str, version: &str) -> PolicyRefusal {
        let allowed: Vec<&str> = self
            .allow
            .iter()
            .take(20)
            .map(|e| e.text.as_str())
            .collect();
        PolicyRefusal::NotAllowed {
            name: name.into(),
            version: version.into(),
            allowed: allowed.join(", "),
        }
    }
}

/// The policy file: top-level lists and each tenant's own.
#[derive(Debug, Clone, Default)]
pub struct PolicyFile {
    default: PackagePolicy,
    tenants: HashMap<String, PackagePolicy>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Lists {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    tenants: HashMap<String, Lists>,
}

impl PolicyFile {
    pub fn read(path: &Path) -> Result<Self, PolicyFileError> {
        let shown = path.display().to_string();
        let read = |why: String| PolicyFileError::Read {
            path: shown.clone(),
            why,
        };
        let size = std::fs::metadata(path)
            .map_err(|e| read(e.to_string()))?
            .len();
        if size > MAX_FILE_BYTES {
            return Err(read("over 1 MiB".into()));
        }
        let text = std::fs::read_to_string(path).map_err(|e| read(e.to_string()))?;
        Self::parse(&text).map_err(|why| PolicyFileError::Invalid { path: shown, why })
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let raw: RawFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let lists = |allow: &[String], deny: &[String]| -> Result<PackagePolicy, String> {
            Ok(PackagePolicy {
                allow: allow
                    .iter()
                    .map(|t| Entry::parse(t))
                    .collect::<Result<_, _>>()?,
                deny: deny
                    .iter()
                    .map(|t| Entry::parse(t))
                    .collect::<Result<_, _>>()?,
            })
        };
        let default = lists(&raw.allow, &raw.deny)?;
        let mut tenants = HashMap::new();
        for (name, l) in &raw.tenants {
            if !crate::tenancy::valid_tenant_name(name) {
                return Err(format!("`{name}` is not a tenant name"));
            }
            tenants.insert(name.clone(), lists(&l.allow, &l.deny)?);
        }
        Ok(Self { default, tenants })
    }

    /// The policy of one tenant (`None`: the single tenant of stdio or HTTP without tokens).
    pub fn for_tenant(&self, tenant: Option<&str>) -> PackagePolicy {
        tenant
            .and_then(|t| self.tenants.get(t))
            .unwrap_or(&self.default)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packages::requirement::parse_all;

    fn resolved(name: &str, version: &str) -> Resolved {
        Resolved {
            name: name.into(),
            version: version.into(),
            sha256: "0".repeat(64),
            file: format!("{name}-{version}-py3-none-any.whl"),
        }
    }

    #[test]
    fn deny_wins_and_ranges_apply_to_resolved_versions() {
        let file = PolicyFile::parse(
            r#"{"deny": ["requests", "urllib3<2"], "tenants": {"alice": {"allow": ["humanize>=4.10"]}}}"#,
        )
        .unwrap();
        let default = file.for_tenant(None);
        let refused = default.check_requested(&parse_all(&["requests"]).unwrap());
        assert!(
            matches!(refused, Err(PolicyRefusal::Denied { .. })),
            "{refused:?}"
        );
        // A range waits for the resolved version.
        default
            .check_requested(&parse_all(&["urllib3"]).unwrap())
            .unwrap();
        assert!(
            default
                .check_resolved(&[resolved("urllib3", "1.26.20")])
                .is_err()
        );
        default
            .check_resolved(&[resolved("urllib3", "2.2.3")])
            .unwrap();

        let alice = file.for_tenant(Some("alice"));
        alice
            .check_requested(&parse_all(&["Humanize"]).unwrap())
            .unwrap();
        assert!(
            alice
                .check_requested(&parse_all(&["orjson"]).unwrap())
                .is_err()
        );
        assert!(
            alice
                .check_resolved(&[resolved("humanize", "4.9.0")])
                .is_err()
        );
        alice
            .check_resolved(&[resolved("humanize", "4.12.3")])
            .unwrap();
    }

    #[test]
    fn bad_files_are_refused_with_the_cause() {
        assert!(PolicyFile::parse(r#"{"allow": ["x @ https://e.com/x.whl"]}"#).is_err());
        assert!(PolicyFile::parse(r#"{"alow": []}"#).is_err());
        assert!(PolicyFile::parse(r#"{"tenants": {"../x": {}}}"#).is_err());
        assert!(PolicyFile::parse(r#"{"deny": ["a>=>1"]}"#).is_err());
    }
}
