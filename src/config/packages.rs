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
pub const PIP_VARIABLES: &[&str] = &[
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "PIP_TRUSTED_HOST",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// Where Debian (and the distributions that follow it) keep the system's certificate bundle.
const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

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

    /// A PEM bundle of the certificates the installer trusts, for an index reached through a
    /// TLS-inspecting proxy or with a private CA [default: PIP_CERT, else the host's
    /// /etc/ssl/certs/ca-certificates.crt when present].
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

    /// The engine network the installer's container joins to reach the index [default: the
    /// engine's `bridge`]. Not a flag: a test serves its own index inside a network namespace
    /// it made and joins the installer to it (`container:ID`), so that its traffic stays on
    /// that namespace's loopback and never crosses the host's bridge.
    #[arg(skip)]
    pub installer_network: Option<String>,
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

    /// The certificate bundle the installer trusts, if any: the flag, PIP_CERT, the system's.
    pub fn ca_file(&self) -> Option<PathBuf> {
        let offline = self.packages_wheelhouse.is_some();
        (!offline).then(|| {
            (self.packages_ca_file.clone())
                .filter(|f| !f.as_os_str().is_empty())
                .or_else(|| {
                    std::env::var_os("PIP_CERT")
                        .filter(|v| !v.is_empty())
                        .map(PathBuf::from)
                })
                .or_else(|| {
                    let system = PathBuf::from(SYSTEM_CA_BUNDLE);
                    system.is_file().then_some(system)
                })
        })?
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
