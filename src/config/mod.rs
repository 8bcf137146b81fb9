//! One `Config` for the whole server, built from command-line flags and their environment
//! variables (clap), in groups of one subsystem each ([`TransportConfig`], [`TenantsConfig`],
//! [`OAuthConfig`], [`StorageConfig`], [`SandboxConfig`], [`LimitsConfig`], [`PoolConfig`], [`PiiConfig`],
//! [`GatewayConfig`], [`EgressConfig`], [`LinksConfig`], [`OperationsConfig`]). Each group checks its own flags and converts them into its subsystem's
//! settings; ranges of a single flag are clap value parsers, so a bad value is refused while
//! parsing, naming the flag. [`Config::validate`] adds the checks that span groups.
//!
//! The defaults work for a user who starts the binary from any directory: mutable data lives
//! under the data directory ([`storage::data_home`]), the tool registry and starter skills are
//! built into the binary.

mod discovery;
mod egress;
mod gateway;
mod limits;
mod links;
mod oauth;
mod operations;
mod packages;
mod pii;
mod pool;
mod range;
mod sandbox;
mod sessions;
mod storage;
mod tenants;
mod transport;

use clap::Args;

pub use discovery::{DiscoveryConfig, Ranker};
pub use egress::{EgressConfig, pem_roots};
pub use gateway::GatewayConfig;
pub use limits::{LimitsConfig, MIN_MEMORY_MB};
pub use links::LinksConfig;
pub use oauth::OAuthConfig;
pub use operations::OperationsConfig;
pub use packages::{PackagesConfig, PackagesMode};
pub use pii::{PiiConfig, PiiOutput};
pub use pool::PoolConfig;
pub use sandbox::{ImageProfile, ImageTreeMode, SandboxConfig};
pub use sessions::SessionsConfig;
pub use storage::{StorageConfig, data_home};
pub use tenants::TenantsConfig;
pub use transport::{Transport, TransportConfig};

/// The sandbox image's non-root user. A workspace owned by another non-root user runs the
/// sandbox as that user instead (see `workspace::Workspace::prepare_for_sandbox`).
pub const SANDBOX_UID: u32 = 10001;

/// Flags that do not fit: the message says which flag to change and how.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// One flag's value outside what it may take.
    #[error("{flag} {value} must be {allowed}")]
    OutOfRange {
        flag: &'static str,
        value: u64,
        allowed: String,
    },
    /// One flag's value has the wrong form.
    #[error("{flag} {problem}")]
    Invalid { flag: &'static str, problem: String },
    /// Flags that do not go together.
    #[error("{0}")]
    Conflict(String),
    /// `--runtime` names a runtime the engine does not have.
    #[error(
        "--runtime {runtime} is not registered with the Docker engine (registered: {registered}). Register it under \"runtimes\" in /etc/docker/daemon.json and restart the engine, or choose one of those"
    )]
    RuntimeNotRegistered { runtime: String, registered: String },
}

/// Everything `serve` needs. Each flag has an environment variable of the same meaning.
#[derive(Debug, Clone, Args)]
pub struct Config {
    #[command(flatten, next_help_heading = "Transport")]
    pub transport: TransportConfig,
    #[command(flatten, next_help_heading = "Tenants (HTTP with tokens)")]
    pub tenants: TenantsConfig,
    #[command(flatten, next_help_heading = "OAuth 2.1 (HTTP)")]
    pub oauth: OAuthConfig,
    #[command(flatten, next_help_heading = "Storage")]
    pub storage: StorageConfig,
    #[command(flatten, next_help_heading = "Tool discovery")]
    pub discovery: DiscoveryConfig,
    #[command(flatten, next_help_heading = "Sandbox containers")]
    pub sandbox: SandboxConfig,
    #[command(flatten, next_help_heading = "Execution limits")]
    pub limits: LimitsConfig,
    #[command(flatten, next_help_heading = "Concurrency and pool")]
    pub pool: PoolConfig,
    #[command(flatten, next_help_heading = "Sessions")]
    pub sessions: SessionsConfig,
    #[command(flatten, next_help_heading = "Packages on demand")]
    pub packages: PackagesConfig,
    #[command(flatten, next_help_heading = "Personal data")]
    pub pii: PiiConfig,
    #[command(flatten, next_help_heading = "Upstream MCP servers")]
    pub gateway: GatewayConfig,
    #[command(
        flatten,
        next_help_heading = "Guarded egress (HTTP through the server)"
    )]
    pub egress: EgressConfig,
    #[command(
        flatten,
        next_help_heading = "Upload and download links (files in and out by URL)"
    )]
    pub links: LinksConfig,
    #[command(flatten, next_help_heading = "Operations (metrics, audit trail)")]
    pub operations: OperationsConfig,
}

impl Config {
    /// The configuration of `serve` with no flag: the `CEM_*` environment variables still apply,
    /// as for the binary. The tests build their servers on it, which is how a suite runs under
    /// `CEM_RUNTIME`, `CEM_IMAGE_TREE` or `CEM_IMAGE_PROFILE` (`tests/common/placement.rs`
    /// checks the first two took).
    pub fn defaults() -> Self {
        Self::try_from_args::<&str>([]).expect("the defaults parse")
    }

    /// The configuration of `serve ARGS` (environment variables apply as for the binary).
    pub fn try_from_args<S: Into<std::ffi::OsString> + Clone>(
        args: impl IntoIterator<Item = S>,
    ) -> Result<Self, clap::Error> {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrapper {
            #[command(flatten)]
            config: Config,
        }
        let args =
            std::iter::once("code-execution-mcp".into()).chain(args.into_iter().map(Into::into));
        Wrapper::try_parse_from(args).map(|w| w.config)
    }

    /// Where the host copies of sandbox images' /usr live: `--image-tree-dir`, else
    /// DATA_DIR/image-trees.
    pub fn image_tree_dir(&self) -> std::path::PathBuf {
        (self.sandbox.image_tree_dir.clone()).unwrap_or_else(|| {
            (self.storage.data_dir()).join(crate::sandbox::image::tree::DIR_NAME)
        })
    }

    /// Executions one tenant may run at once.
    pub fn tenant_max_concurrency(&self) -> usize {
        (self.tenants).max_concurrency(self.pool.max_concurrency, self.has_tenants())
    }

    /// Whether HTTP serves tenants: bearer tokens or OAuth authenticate its clients.
    pub fn has_tenants(&self) -> bool {
        self.tenants.has_tokens() || self.oauth.enabled()
    }

    /// Checks each group's flags, then the flags of different groups against each other.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.transport.validate()?;
        self.tenants.validate()?;
        self.oauth.validate()?;
        self.sandbox.validate()?;
        self.limits.validate()?;
        self.pool.validate()?;
        self.sessions.validate()?;
        self.packages.validate()?;
        self.pii.validate()?;
        self.gateway.validate()?;
        self.egress.validate()?;
        self.operations.validate()?;
        self.links.validate()?;
        if self.storage.shared_data
            && self
                .egress
                .socket_dir()
                .starts_with(self.storage.data_dir())
        {
            return Err(ConfigError::Conflict(format!(
                "--egress-socket-dir {} is inside the shared data directory {}: sockets are local to one machine, so give each node a directory on its own disk (the default is $XDG_RUNTIME_DIR/code-execution-mcp)",
                self.egress.socket_dir().display(),
                self.storage.data_dir().display()
            )));
        }
        if self.has_tenants() {
            if self.transport.transport == Transport::Stdio {
                return Err(ConfigError::Conflict("--tokens-file, CEM_TOKENS and --oauth-issuer authenticate HTTP clients, and stdio has one client (the process that started the server): remove them, or serve with --transport http".into()));
            }
            if self.storage.workspace.is_some() || self.storage.skills_dir.is_some() {
                return Err(ConfigError::Conflict("--workspace and --skills-dir name one tenant's directories; with tokens or OAuth each tenant has DATA_DIR/tenants/NAME/{workspace,skills}: set --data-dir (CEM_DATA_DIR) instead".into()));
            }
        }
        self.validate_links()
    }

    /// Where the link routes are served: beside /mcp over HTTP; on --links-listen, a loopback
    /// address --public-url names, with stdio.
    fn validate_links(&self) -> Result<(), ConfigError> {
        if self.transport.transport == Transport::Stdio
            && self.oauth.public_url().is_some()
            && self.links.links_listen.is_none()
        {
            return Err(ConfigError::Conflict("--public-url with stdio names where upload and download links point, which only --links-listen serves: add --links-listen ADDR (the address --public-url names), or remove --public-url".into()));
        }
        if let Some(addr) = self.links.links_listen {
            if self.transport.transport != Transport::Stdio {
                return Err(ConfigError::Conflict("--links-listen serves the link routes of a stdio server; over HTTP they are served beside /mcp: remove it".into()));
            }
            if self.oauth.public_url().is_none() {
                return Err(ConfigError::Conflict(format!(
                    "--links-listen {addr} needs --public-url: the address a browser reaches it at, which links are built on (http://{addr} when the browser runs on this machine)"
                )));
            }
            if !addr.ip().is_loopback() {
                return Err(ConfigError::Conflict(format!(
                    "--links-listen {addr} is not a loopback address: a stdio server has no tokens to guard other hosts with, so serve links on 127.0.0.1 (behind a proxy if others must reach them), or serve over HTTP with tokens"
                )));
            }
        }
        Ok(())
    }
}

/// A value that must not appear in logs or `Debug` output (bearer tokens).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_string()))
    }
}

#[cfg(test)]
mod tests;
