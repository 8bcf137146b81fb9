//! Packages on demand (`execute_code`'s `packages`): where they come from, how large a set and
//! the cache may grow, how long an install may take, and who may install what.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::ConfigError;
use super::range::Range;

const PACKAGES_MAX_MB: Range = Range::new("--packages-max-mb", 1, 16384);
const PACKAGES_CACHE_MB: Range = Range::new("--packages-cache-mb", 1, 1 << 20);
const PACKAGES_TIMEOUT_SECS: Range = Range::new("--packages-timeout-secs", 5, 3600);

/// The pip settings the installer is given, as pip itself reads them from the environment.
/// The proxy variables are not among them: the server reaches the index for the installer
/// (through the operator's proxy when they name one, [`PackagesConfig::proxy`]).
pub const PIP_VARIABLES: &[&str] = &[
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "PIP_TRUSTED_HOST",
];

/// PyPI's simple index: pip's default.
const PYPI_SIMPLE: &str = "https://pypi.org/simple";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PackagesMode {
    On,
    Off,
}

#[derive(Debug, Clone, Args)]
pub struct PackagesConfig {
    /// Whether `execute_code` may install packages (`packages`): resolved and installed
    /// outside the sandbox, which stays offline, and mounted read-only into it.
    #[arg(
        long = "packages",
        env = "CEM_PACKAGES",
        value_enum,
        default_value = "on"
    )]
    pub mode: PackagesMode,

    /// The package index (a PEP 503 simple index URL) [default: PIP_INDEX_URL, else PyPI].
    /// A credential in it reaches the installer's container only, never a sandbox.
    #[arg(long, env = "CEM_PACKAGES_INDEX")]
    pub packages_index: Option<String>,

    /// A PEM bundle of the certificates the server trusts for the package index, instead of the
    /// system's roots, for an index reached through a TLS-inspecting proxy or with a private CA
    /// [default: PIP_CERT, else the system's roots].
    #[arg(long, env = "CEM_PACKAGES_CA_FILE")]
    pub packages_ca_file: Option<PathBuf>,

    /// A directory of wheels to install from, with no index and no network at all (air-gapped
    /// hosts): every package and dependency must be in it.
    #[arg(long, env = "CEM_PACKAGES_WHEELHOUSE")]
    pub packages_wheelhouse: Option<PathBuf>,

    /// The largest installed set, in MB (the packages of one request and their dependencies).
    #[arg(long, env = "CEM_PACKAGES_MAX_MB", default_value_t = 1024, value_parser = PACKAGES_MAX_MB.parser::<u64>())]
    pub packages_max_mb: u64,

    /// The package cache's size, in MB: past it, the least recently used sets are removed
    /// (never one a running execution uses).
    #[arg(long, env = "CEM_PACKAGES_CACHE_MB", default_value_t = 8192, value_parser = PACKAGES_CACHE_MB.parser::<u64>())]
    pub packages_cache_mb: u64,

    /// Seconds an install may take before it is stopped.
    #[arg(long, env = "CEM_PACKAGES_TIMEOUT_SECS", default_value_t = 300, value_parser = PACKAGES_TIMEOUT_SECS.parser::<u64>())]
    pub packages_timeout_secs: u64,

    /// A JSON file of allow and deny lists, with a tenant's own under "tenants" (docs/packages.md).
    #[arg(long, env = "CEM_PACKAGES_POLICY")]
    pub packages_policy: Option<PathBuf>,
}

impl PackagesConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        PACKAGES_MAX_MB.check(self.packages_max_mb)?;
        PACKAGES_CACHE_MB.check(self.packages_cache_mb)?;
        PACKAGES_TIMEOUT_SECS.check(self.packages_timeout_secs)?;
        if self.packages_max_mb > self.packages_cache_mb {
            return Err(ConfigError::Conflict(format!(
                "--packages-max-mb {} is larger than the whole cache (--packages-cache-mb {}): raise the cache or lower the set bound",
                self.packages_max_mb, self.packages_cache_mb
            )));
        }
        if let Some(url) = self.index()
            && !(url.starts_with("https://") || url.starts_with("http://"))
        {
            return Err(ConfigError::Invalid {
                flag: "--packages-index",
                problem: "must be an http:// or https:// URL of a simple index".into(),
            });
        }
        if let Some(dir) = &self.packages_wheelhouse
            && !dir.is_dir()
        {
            return Err(ConfigError::Invalid {
                flag: "--packages-wheelhouse",
                problem: format!("{} is not a directory", dir.display()),
            });
        }
        Ok(())
    }

    /// `--packages-index`, when set to something (compose passes an empty value for unset).
    fn index(&self) -> Option<&str> {
        self.packages_index.as_deref().filter(|u| !u.is_empty())
    }

    pub fn enabled(&self) -> bool {
        self.mode == PackagesMode::On
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.packages_timeout_secs)
    }

    /// The certificates the server trusts for the package index instead of the system's roots,
    /// if any: the flag, else PIP_CERT. None with a wheelhouse (no index).
    pub fn ca_file(&self) -> Option<PathBuf> {
        if self.packages_wheelhouse.is_some() {
            return None;
        }
        (self.packages_ca_file.clone())
            .filter(|f| !f.as_os_str().is_empty())
            .or_else(|| {
                std::env::var_os("PIP_CERT")
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
            })
    }

    /// The installer's environment: pip's own variables as this process has them, the index
    /// of `--packages-index` over PIP_INDEX_URL. None with a wheelhouse (no network).
    pub fn installer_env(&self) -> Vec<String> {
        if self.packages_wheelhouse.is_some() {
            return Vec::new();
        }
        let mut env: Vec<String> = PIP_VARIABLES
            .iter()
            .filter(|name| !(self.index().is_some() && **name == "PIP_INDEX_URL"))
            .filter_map(|name| {
                let value = std::env::var(name).ok().filter(|v| !v.is_empty())?;
                Some(format!("{name}={value}"))
            })
            .collect();
        if let Some(index) = self.index() {
            env.push(format!("PIP_INDEX_URL={index}"));
        }
        env
    }

    /// The index URLs pip may reach (the index, extra indexes, http(s) find-links), for the
    /// installer's way out; none with a wheelhouse.
    pub fn index_urls(&self) -> Vec<String> {
        if self.packages_wheelhouse.is_some() {
            return Vec::new();
        }
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let index = (self.index().map(str::to_string))
            .or_else(|| env("PIP_INDEX_URL"))
            .unwrap_or_else(|| PYPI_SIMPLE.into());
        let more = ["PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"]
            .into_iter()
            .filter_map(env)
            .flat_map(|v| v.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .filter(|u| u.starts_with("http://") || u.starts_with("https://"));
        std::iter::once(index).chain(more).collect()
    }

    /// The operator's proxy the server reaches the index through (`HTTPS_PROXY`, else
    /// `HTTP_PROXY`, either case), with `NO_PROXY`'s exceptions.
    pub fn proxy(&self) -> Option<String> {
        ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"]
            .into_iter()
            .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    /// Where packages come from, for the cache's keys: a change of index or wheelhouse is a
    /// new resolution. Hashed there, never shown.
    pub fn source(&self) -> String {
        match &self.packages_wheelhouse {
            Some(dir) => format!("wheelhouse:{}", dir.display()),
            None => {
                let index = self.installer_env().into_iter().filter(|v| {
                    ["PIP_INDEX_URL=", "PIP_EXTRA_INDEX_URL=", "PIP_FIND_LINKS="]
                        .iter()
                        .any(|p| v.starts_with(p))
                });
                format!("index:{}", index.collect::<Vec<_>>().join("\n"))
            }
        }
    }
}
