//! One `Config` for the whole server, built from command-line flags and their environment
//! variables (clap), with defaults that work for a user who starts the binary from any directory.
//!
//! Mutable data (the workspace, saved skills) lives under `$XDG_DATA_HOME/code-execution-mcp`
//! (or `~/.local/share/code-execution-mcp`); data the project ships (the tool registry, the
//! starter skills) is looked up next to the installed binary and in the source tree it was
//! built from.

pub use crate::sandbox::image::ImageProfile;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

/// Upper bounds for the flags whose values size buffers or deadlines.
const MAX_TIMEOUT_SECS: u64 = 86_400;
const MAX_START_TIMEOUT_SECS: u64 = 600;
const MAX_CODE_BYTES: usize = 4 * 1024 * 1024;
const MAX_RESULT_BYTES: usize = 64 * 1024 * 1024;

/// The sandbox image's non-root user. A workspace owned by another non-root user runs the
/// sandbox as that user instead (see `workspace::Workspace::prepare_for_sandbox`).
pub const SANDBOX_UID: u32 = 10001;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    /// MCP over the process's stdin/stdout (what Claude Desktop and Claude Code launch).
    Stdio,
    /// MCP streamable HTTP, served at /mcp.
    Http,
}

/// What happens to personal data in what `execute_code` returns to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PiiOutput {
    /// Printed lines, the result and error text pass through the PII engine: values become
    /// tokens like [EMAIL_ab12cd34] (workspace files and the code itself keep real values).
    Tokenize,
    /// Output is returned as the code produced it.
    Off,
}

/// Everything `serve` needs. Each flag has an environment variable of the same meaning.
#[derive(Debug, Clone, Args)]
pub struct Config {
    /// Transport to serve MCP on.
    #[arg(long, env = "CEM_TRANSPORT", value_enum, default_value_t = Transport::Stdio)]
    pub transport: Transport,

    /// Address for `--transport http` (streamable HTTP at /mcp).
    #[arg(long, env = "CEM_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Directory of the server's mutable data: the workspace and saved skills, or with tokens
    /// each tenant's under tenants/NAME/ [default: $XDG_DATA_HOME/code-execution-mcp].
    #[arg(long, env = "CEM_DATA_DIR")]
    pub data_dir: Option<PathBuf>,

    /// The data directory is the volume every node of a swarm mounts: refuse to start when it
    /// is on local storage (a shared mount that did not come up), and fail `/health` while reads
    /// of it fail or hang past a minute. See docs/deploying.md, "Scale out".
    #[arg(long, env = "CEM_SHARED_DATA")]
    pub shared_data: bool,

    /// This server's node, as `get_execution_stats` reports it [default: the engine's host
    /// name].
    #[arg(long, env = "CEM_NODE_NAME")]
    pub node_name: Option<String>,

    /// Host directory bind-mounted at /workspace in every sandbox [default: DATA_DIR/workspace].
    /// Not with tokens: each tenant has DATA_DIR/tenants/NAME/workspace.
    #[arg(long, env = "CEM_WORKSPACE")]
    pub workspace: Option<PathBuf>,

    /// Workspace disk quota in MiB (0 = no quota).
    #[arg(long, env = "CEM_WORKSPACE_QUOTA_MB", default_value_t = 1024)]
    pub workspace_quota_mb: u64,

    /// Directory of saved skills [default: DATA_DIR/skills]. Not with tokens: each tenant has
    /// DATA_DIR/tenants/NAME/skills.
    #[arg(long, env = "CEM_SKILLS_DIR")]
    pub skills_dir: Option<PathBuf>,

    /// Directory of tool registry files added to the catalog built into the binary; a tool id
    /// defined here overrides the built-in definition [default: DATA_DIR/tools_registry].
    #[arg(long, env = "CEM_REGISTRY_DIR")]
    pub registry_dir: Option<PathBuf>,

    /// Sandbox image to run [default: the image of --image-profile,
    /// code-execution-mcp-sandbox:PROFILE-<hash of the embedded images/python>, built on first
    /// start when missing]. An image made by `image build --requirements` goes here.
    #[arg(long, env = "CEM_IMAGE")]
    pub image: Option<String>,

    /// Which sandbox image to build and run when --image is not given: `data` (numpy, pandas,
    /// pyarrow where available, scipy, matplotlib, openpyxl, ...) or `minimal` (the standard
    /// library only: a smaller image, faster to build).
    #[arg(long, env = "CEM_IMAGE_PROFILE", value_enum, default_value_t = ImageProfile::Data)]
    pub image_profile: ImageProfile,

    /// Modules pooled containers import before their job arrives, comma-separated, so code that
    /// uses them does not wait for the import [default: numpy,pandas with the data profile, none
    /// with minimal]. `none` turns it off. Each module costs idle memory and start-up CPU.
    #[arg(long, env = "CEM_PRELOAD", value_delimiter = ',')]
    pub preload: Option<Vec<String>>,

    /// Base image to build the sandbox image on when it is missing, instead of the pinned
    /// python:3.13-slim-trixie digest (e.g. the offline base of images/offline-base.sh).
    #[arg(long, env = "CEM_BASE_IMAGE")]
    pub base_image: Option<String>,

    /// Timeout of an execution when the caller gives none, in seconds.
    #[arg(long, env = "CEM_DEFAULT_TIMEOUT_SECS", default_value_t = 30)]
    pub default_timeout_secs: u64,

    /// Largest timeout a caller may ask for, in seconds; larger requests are clamped.
    #[arg(long, env = "CEM_MAX_TIMEOUT_SECS", default_value_t = 300)]
    pub max_timeout_secs: u64,

    /// Longest wait for a sandbox container to be ready for an execution (taken from the pool,
    /// or created and started), in seconds; past it the call fails saying the engine is slow.
    /// The code's own timeout starts after this.
    #[arg(long, env = "CEM_START_TIMEOUT_SECS", default_value_t = 30)]
    pub start_timeout_secs: u64,

    /// Memory limit of an execution when the caller gives none, in MiB (swap is not allowed).
    #[arg(long, env = "CEM_DEFAULT_MEMORY_MB", default_value_t = 500)]
    pub default_memory_mb: u64,

    /// Largest memory limit a caller may ask for, in MiB; larger requests are clamped.
    #[arg(long, env = "CEM_MAX_MEMORY_MB", default_value_t = 4096)]
    pub max_memory_mb: u64,

    /// Executions that run at once in the whole server; further ones wait in a queue.
    #[arg(long, env = "CEM_MAX_CONCURRENCY", default_value_t = 4)]
    pub max_concurrency: usize,

    /// Executions one tenant may run at once (HTTP with tokens), so that one tenant cannot take
    /// every slot [default: half of --max-concurrency, at least 1].
    #[arg(long, env = "CEM_TENANT_MAX_CONCURRENCY")]
    pub tenant_max_concurrency: Option<usize>,

    /// Containers kept started ahead, each used for one execution only (0: every execution
    /// starts its own container). The default matches --max-concurrency's: a burst of that many
    /// parallel calls finds a container ready for each (each idle one costs about 20 MiB). With
    /// tokens, each tenant has a pool of this size, started at its first request.
    #[arg(long, env = "CEM_POOL_SIZE", default_value_t = 4)]
    pub pool_size: usize,

    /// The most pooled containers (waiting or starting) the whole server holds, every tenant's
    /// pool together: the pool's memory budget (a waiting container holds about 20 MiB, more
    /// with --preload). Under bursts a pool grows past --pool-size up to its share of this (the
    /// budget divided among the pools in use).
    #[arg(long, env = "CEM_POOL_MAX", default_value_t = 16)]
    pub pool_max: usize,

    /// Seconds without an execution after which a pool falls back to --pool-size, removing what
    /// it grew by; an HTTP tenant's pool gives back every container (0: never shrink).
    #[arg(long, env = "CEM_POOL_IDLE_SECS", default_value_t = 120)]
    pub pool_idle_secs: u64,

    /// Used containers (all their processes ended) whose removal may wait until the engine is
    /// idle, so that removals do not slow down the executions of a burst. Past it, removals go
    /// on during executions (0: remove each container at once). Shutdown removes the backlog.
    #[arg(long, env = "CEM_REMOVAL_BACKLOG", default_value_t = 32)]
    pub removal_backlog: usize,

    /// Executions that may wait for a free slot (per tenant); beyond that a call fails with
    /// "busy".
    #[arg(long, env = "CEM_MAX_QUEUE", default_value_t = 32)]
    pub max_queue: usize,

    /// Largest accepted `code` argument, in bytes.
    #[arg(long, env = "CEM_MAX_CODE_BYTES", default_value_t = 1024 * 1024)]
    pub max_code_bytes: usize,

    /// Output kept per stream (stdout, stderr) of an execution, in bytes; the rest is dropped
    /// and the response says it was truncated.
    #[arg(long, env = "CEM_MAX_OUTPUT_BYTES", default_value_t = 128 * 1024)]
    pub max_output_bytes: usize,

    /// Largest `result` value returned, in bytes of JSON; larger ones are truncated.
    #[arg(long, env = "CEM_MAX_RESULT_BYTES", default_value_t = 256 * 1024)]
    pub max_result_bytes: usize,

    /// Images one execution may return (show_image, matplotlib figures); more are dropped and
    /// the result says so. 0 turns images off.
    #[arg(long, env = "CEM_MAX_IMAGES", default_value_t = 8)]
    pub max_images: usize,

    /// Longest side of a returned image, in pixels; larger images are scaled down to it.
    #[arg(long, env = "CEM_IMAGE_MAX_SIDE", default_value_t = 1568)]
    pub image_max_side: u32,

    /// Largest returned image, in KiB of PNG; a larger one is scaled down until it fits.
    #[arg(long, env = "CEM_IMAGE_MAX_KB", default_value_t = 1024)]
    pub image_max_kb: u32,

    /// Processes and threads one sandbox may have at once.
    #[arg(long, env = "CEM_PIDS_LIMIT", default_value_t = 128)]
    pub pids_limit: i64,

    /// Size of the sandbox's writable /tmp (tmpfs), in MiB; counts against its memory limit.
    #[arg(long, env = "CEM_TMPFS_MB", default_value_t = 64)]
    pub tmpfs_mb: u64,

    /// Personal data in execute_code's output to the model: tokenized (default) or left as is.
    #[arg(long, env = "CEM_PII_OUTPUT", value_enum, default_value_t = PiiOutput::Tokenize)]
    pub pii_output: PiiOutput,

    /// PII tokens the server remembers for restore_pii (oldest forgotten first).
    #[arg(long, env = "CEM_PII_VAULT_SIZE", default_value_t = 100_000)]
    pub pii_vault_size: usize,

    /// File holding the PII key: 32 bytes as 64 hex digits (`openssl rand -hex 32`; in a swarm,
    /// a Docker secret). With it, each tenant's tokens are keyed by a secret derived from the key
    /// and its vault is kept, encrypted, in its data directory, so servers sharing the key and
    /// the storage restore each other's tokens (a tenant keeps them when it moves to another
    /// server). Without it, a random secret per run and a vault in memory.
    #[arg(long, env = "CEM_PII_KEY_FILE")]
    pub pii_key_file: Option<PathBuf>,

    /// Largest file the workspace tools read or write, in MiB.
    #[arg(long, env = "CEM_MAX_FILE_MB", default_value_t = 10)]
    pub max_file_mb: u64,

    /// File of bearer tokens for HTTP, one `TENANT:TOKEN` per line (`#` starts a comment). Each
    /// tenant gets its own workspace, skills, PII vault and stats; a tenant may have several
    /// tokens. Without tokens, HTTP listens on loopback addresses only.
    #[arg(long, env = "CEM_TOKENS_FILE")]
    pub tokens_file: Option<PathBuf>,

    /// Bearer tokens for HTTP as `TENANT:TOKEN,TENANT:TOKEN` (prefer --tokens-file: an
    /// environment variable is visible to whoever can inspect the process or its container).
    #[arg(long = "tokens", env = "CEM_TOKENS", hide_env_values = true)]
    pub tokens: Option<Secret>,

    /// Host names (or host:port) HTTP requests may carry in their Host header, comma-separated,
    /// or `*` for any. The default accepts loopback names only, against DNS rebinding; a
    /// deployment names the hosts its clients use.
    #[arg(
        long,
        env = "CEM_ALLOWED_HOSTS",
        value_delimiter = ',',
        default_value = "localhost,127.0.0.1,::1"
    )]
    pub allowed_hosts: Vec<String>,

    /// Browser origins (scheme://host:port, `:*` for any port) allowed to call the HTTP
    /// endpoint, comma-separated. Default: none, so requests carrying an Origin header (made by
    /// a web page) are refused; MCP clients that are not browsers send none.
    #[arg(long, env = "CEM_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub allowed_origins: Vec<String>,

    /// OCI runtime the sandbox containers run under, as registered with the engine (runsc for
    /// gVisor, crun, kata-runtime). Default: the engine's default runtime (usually runc).
    #[arg(long, env = "CEM_RUNTIME")]
    pub runtime: Option<String>,

    /// JSON file of upstream MCP servers that sandbox code may call as Python functions: the
    /// `mcpServers` object of a Claude Desktop or Claude Code config (`command`/`args`/`env`/
    /// `cwd`, or `url`/`headers`; `${VAR}` expanded), plus optional `policy` and `tenants`.
    #[arg(long, env = "CEM_UPSTREAMS")]
    pub upstreams: Option<PathBuf>,

    /// Upstream tool calls one execution may make.
    #[arg(long, env = "CEM_MAX_TOOL_CALLS", default_value_t = 5000)]
    pub max_tool_calls: u32,

    /// Longest wait for one upstream tool call, in seconds.
    #[arg(long, env = "CEM_TOOL_CALL_TIMEOUT_SECS", default_value_t = 60)]
    pub tool_call_timeout_secs: u64,

    /// Largest upstream tool result passed to sandbox code, in MiB (at most 6: a reply
    /// travels to the sandbox as one 8 MiB channel frame).
    #[arg(long, env = "CEM_MAX_TOOL_RESULT_MB", default_value_t = 4)]
    pub max_tool_result_mb: u64,

    /// Upstream tool calls one execution may have in flight at once (from threads).
    #[arg(long, env = "CEM_MAX_CONCURRENT_TOOL_CALLS", default_value_t = 8)]
    pub max_concurrent_tool_calls: usize,

    /// Longest wait for an upstream to answer `initialize` and list its tools, in seconds.
    #[arg(long, env = "CEM_UPSTREAM_CONNECT_TIMEOUT_SECS", default_value_t = 30)]
    pub upstream_connect_timeout_secs: u64,
}

impl Config {
    /// The sandbox image to run: `--image`, else the profile's default tag.
    pub fn image_tag(&self) -> String {
        self.image
            .clone()
            .unwrap_or_else(|| crate::sandbox::image::default_tag(self.image_profile))
    }

    /// The modules pooled containers import ahead (see `--preload`).
    pub fn preload_modules(&self) -> Vec<String> {
        // An empty value (CEM_PRELOAD= in a compose file) means the default, like no value.
        let given = self
            .preload
            .as_ref()
            .filter(|list| list.iter().any(|m| !m.trim().is_empty()));
        match given {
            None => self
                .image_profile
                .default_preload()
                .iter()
                .map(|m| m.to_string())
                .collect(),
            Some(list) if list.iter().any(|m| m.trim() == "none") => Vec::new(),
            Some(list) => list
                .iter()
                .map(|m| m.trim().to_string())
                .filter(|m| !m.is_empty())
                .collect(),
        }
    }

    /// The image bounds of returned images.
    pub fn image_bounds(&self) -> crate::images::Bounds {
        crate::images::Bounds {
            max_side: self.image_max_side,
            max_bytes: self.image_max_kb as usize * 1024,
        }
    }

    /// Defaults as if no flag and no environment variable were given (used by tests).
    pub fn defaults() -> Self {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrapper {
            #[command(flatten)]
            config: Config,
        }
        Wrapper::parse_from(["code-execution-mcp"]).config
    }

    pub fn data_dir(&self) -> PathBuf {
        self.data_dir.clone().unwrap_or_else(data_home)
    }

    pub fn workspace_dir(&self) -> PathBuf {
        self.workspace
            .clone()
            .unwrap_or_else(|| self.data_dir().join("workspace"))
    }

    pub fn skills_dir(&self) -> PathBuf {
        self.skills_dir
            .clone()
            .unwrap_or_else(|| self.data_dir().join("skills"))
    }

    /// Executions one tenant may run at once.
    pub fn tenant_max_concurrency(&self) -> usize {
        let default = if self.has_tokens() {
            (self.max_concurrency / 2).max(1)
        } else {
            self.max_concurrency
        };
        self.tenant_max_concurrency
            .unwrap_or(default)
            .min(self.max_concurrency)
    }

    /// Whether bearer tokens are configured (HTTP then serves tenants).
    pub fn has_tokens(&self) -> bool {
        self.tokens_file.is_some() || self.tokens.as_ref().is_some_and(|t| !t.0.trim().is_empty())
    }

    /// The directory whose registry files add to (and override) the built-in catalog.
    pub fn registry_dir(&self) -> PathBuf {
        self.registry_dir
            .clone()
            .unwrap_or_else(|| self.data_dir().join("tools_registry"))
    }

    pub fn workspace_quota_bytes(&self) -> u64 {
        self.workspace_quota_mb.saturating_mul(1024 * 1024)
    }

    /// How each execution's upstream tool calls are bounded.
    pub fn call_limits(&self) -> crate::gateway::CallLimits {
        crate::gateway::CallLimits {
            max_calls: self.max_tool_calls,
            timeout: Duration::from_secs(self.tool_call_timeout_secs),
            max_result_bytes: (self.max_tool_result_mb * 1024 * 1024) as usize,
            max_concurrent: self.max_concurrent_tool_calls,
        }
    }

    /// How upstream connections are bounded.
    pub fn upstream_limits(&self) -> crate::gateway::UpstreamLimits {
        crate::gateway::UpstreamLimits {
            connect_timeout: Duration::from_secs(self.upstream_connect_timeout_secs),
            // Results over the limit but under this get a clear error instead of a timeout.
            max_message_bytes: 64 * 1024 * 1024,
        }
    }

    pub fn start_timeout(&self) -> Duration {
        Duration::from_secs(self.start_timeout_secs)
    }

    /// The bounds `execute_code` requests are clamped to.
    pub fn execute_bounds(&self) -> crate::execute_request::Bounds {
        crate::execute_request::Bounds {
            default_timeout_secs: self.default_timeout_secs,
            max_timeout_secs: self.max_timeout_secs,
            default_memory_mb: self.default_memory_mb,
            max_memory_mb: self.max_memory_mb,
        }
    }

    /// Checks the flags against each other; the message says which flag to change.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(runtime) = &self.runtime {
            let allowed = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
            if runtime.is_empty() || runtime.len() > 64 || !runtime.chars().all(allowed) {
                return Err(format!(
                    "--runtime {runtime:?} is not a runtime name (letters, digits, '.', '_', '-'; at most 64)"
                ));
            }
        }
        for module in self.preload_modules() {
            let ok = module.len() <= 100
                && module.split('.').all(|part| {
                    part.chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                        && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                });
            if !ok {
                return Err(format!(
                    "--preload: {module:?} is not a module name (dotted Python identifiers, such as pandas or matplotlib.pyplot; `none` for no preloading)"
                ));
            }
        }
        for (flag, value, min, max) in [
            ("--max-images", self.max_images as u64, 0, 64),
            ("--image-max-side", self.image_max_side as u64, 64, 8192),
            ("--image-max-kb", self.image_max_kb as u64, 16, 5 * 1024),
            ("--max-tool-calls", self.max_tool_calls as u64, 1, 1_000_000),
            (
                "--tool-call-timeout-secs",
                self.tool_call_timeout_secs,
                1,
                MAX_TIMEOUT_SECS,
            ),
            ("--max-tool-result-mb", self.max_tool_result_mb, 1, 6),
            (
                "--max-concurrent-tool-calls",
                self.max_concurrent_tool_calls as u64,
                1,
                64,
            ),
            (
                "--upstream-connect-timeout-secs",
                self.upstream_connect_timeout_secs,
                1,
                600,
            ),
        ] {
            if !(min..=max).contains(&value) {
                return Err(format!("{flag} {value} must be between {min} and {max}"));
            }
        }
        if self.default_timeout_secs == 0 || self.default_timeout_secs > self.max_timeout_secs {
            return Err(format!(
                "--default-timeout-secs {} must be between 1 and --max-timeout-secs {}",
                self.default_timeout_secs, self.max_timeout_secs
            ));
        }
        if self.default_memory_mb < crate::execute_request::MIN_MEMORY_MB
            || self.default_memory_mb > self.max_memory_mb
        {
            return Err(format!(
                "--default-memory-mb {} must be between {} and --max-memory-mb {}",
                self.default_memory_mb,
                crate::execute_request::MIN_MEMORY_MB,
                self.max_memory_mb
            ));
        }
        if self.start_timeout_secs == 0 || self.start_timeout_secs > MAX_START_TIMEOUT_SECS {
            return Err(format!(
                "--start-timeout-secs {} must be between 1 and {MAX_START_TIMEOUT_SECS}",
                self.start_timeout_secs
            ));
        }
        if self.max_timeout_secs > MAX_TIMEOUT_SECS {
            return Err(format!(
                "--max-timeout-secs {} is over {MAX_TIMEOUT_SECS} (a day)",
                self.max_timeout_secs
            ));
        }
        if self.max_code_bytes > MAX_CODE_BYTES {
            return Err(format!(
                "--max-code-bytes {} is over {MAX_CODE_BYTES}: code travels to the sandbox in one 8 MiB frame",
                self.max_code_bytes
            ));
        }
        if self.max_result_bytes > MAX_RESULT_BYTES || self.max_output_bytes > MAX_RESULT_BYTES {
            return Err(format!(
                "--max-result-bytes and --max-output-bytes must be at most {MAX_RESULT_BYTES}"
            ));
        }
        if self.pool_size > 64 {
            return Err(format!("--pool-size {} is over 64", self.pool_size));
        }
        if self.pool_max > 256 {
            return Err(format!("--pool-max {} is over 256", self.pool_max));
        }
        if self.pool_max < self.pool_size {
            return Err(format!(
                "--pool-max {} is below --pool-size {}: the budget must hold at least one full pool",
                self.pool_max, self.pool_size
            ));
        }
        if self.removal_backlog > 1024 {
            return Err(format!(
                "--removal-backlog {} is over 1024",
                self.removal_backlog
            ));
        }
        if self.max_concurrency == 0 {
            return Err("--max-concurrency must be at least 1".into());
        }
        if let Some(bad) = self
            .allowed_hosts
            .iter()
            .map(|h| h.trim())
            .find(|h| *h != "*" && (h.is_empty() || h.contains(['*', '/', ' '])))
        {
            return Err(format!(
                "--allowed-hosts entry {bad:?} is not a host name or host:port (use `*` alone to allow any Host)"
            ));
        }
        if self.tenant_max_concurrency == Some(0) {
            return Err("--tenant-max-concurrency must be at least 1".into());
        }
        if self.has_tokens() {
            if self.transport == Transport::Stdio {
                return Err("--tokens-file and CEM_TOKENS authenticate HTTP clients, and stdio has one client (the process that started the server): remove them, or serve with --transport http".into());
            }
            if self.workspace.is_some() || self.skills_dir.is_some() {
                return Err("--workspace and --skills-dir name one tenant's directories; with tokens each tenant has DATA_DIR/tenants/NAME/{workspace,skills}: set --data-dir (CEM_DATA_DIR) instead".into());
            }
        }
        if self.max_code_bytes == 0 || self.max_output_bytes == 0 || self.max_result_bytes == 0 {
            return Err(
                "--max-code-bytes, --max-output-bytes and --max-result-bytes must be positive"
                    .into(),
            );
        }
        if self.pids_limit < 16 {
            return Err(
                "--pids-limit must be at least 16 (Python and its helpers need a few)".into(),
            );
        }
        if self.pii_vault_size == 0 {
            return Err("--pii-vault-size must be at least 1".into());
        }
        if self.tmpfs_mb == 0 {
            return Err("--tmpfs-mb must be positive".into());
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

/// `$XDG_DATA_HOME/code-execution-mcp`, else `~/.local/share/code-execution-mcp`, else
/// `/var/lib/code-execution-mcp` (a service account without a home).
pub fn data_home() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("code-execution-mcp");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(home).join(".local/share/code-execution-mcp");
    }
    PathBuf::from("/var/lib/code-execution-mcp")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_match_the_original_limits() {
        let c = Config::defaults();
        c.validate().unwrap();
        assert_eq!(c.default_timeout_secs, 30);
        assert_eq!(c.default_memory_mb, 500);
        assert_eq!(c.start_timeout(), crate::sandbox::DEFAULT_START_LIMIT);
        assert_eq!(c.transport, Transport::Stdio);
        assert_eq!(c.pii_output, PiiOutput::Tokenize, "privacy by default");
        assert_eq!(c.workspace_quota_bytes(), 1 << 30);
    }

    #[test]
    fn preload_follows_the_profile_unless_given_and_is_checked() {
        let mut c = Config::defaults();
        c.preload = None;
        c.image_profile = ImageProfile::Data;
        assert_eq!(c.preload_modules(), vec!["numpy", "pandas"]);
        c.image_profile = ImageProfile::Minimal;
        assert!(c.preload_modules().is_empty());
        c.preload = Some(vec![String::new()]);
        assert!(c.preload_modules().is_empty(), "empty means the default");
        c.preload = Some(vec!["none".into()]);
        c.image_profile = ImageProfile::Data;
        assert!(c.preload_modules().is_empty());
        c.preload = Some(vec![" matplotlib.pyplot ".into(), "scipy".into()]);
        assert_eq!(c.preload_modules(), vec!["matplotlib.pyplot", "scipy"]);
        c.validate().unwrap();
        for bad in ["os; rm -rf /", "1abc", "a..b", "a-b"] {
            c.preload = Some(vec![bad.into()]);
            let err = c.validate().unwrap_err();
            assert!(err.contains("--preload"), "{bad}: {err}");
        }
    }

    #[test]
    fn validate_names_the_flag_to_change() {
        let mut c = Config::defaults();
        c.runtime = Some("../runsc".into());
        assert!(c.validate().unwrap_err().contains("--runtime"));
        let mut c = Config::defaults();
        c.default_timeout_secs = 900;
        assert!(c.validate().unwrap_err().contains("--default-timeout-secs"));
        let mut c = Config::defaults();
        c.max_concurrency = 0;
        assert!(c.validate().unwrap_err().contains("--max-concurrency"));
        let mut c = Config::defaults();
        c.start_timeout_secs = 0;
        assert!(c.validate().unwrap_err().contains("--start-timeout-secs"));
    }

    #[test]
    fn tokens_need_http_and_the_data_dir() {
        let tokens = Some(Secret("alice:".to_string() + &"a".repeat(40)));
        let mut c = Config::defaults();
        c.tokens = tokens.clone();
        let err = c.validate().unwrap_err();
        assert!(err.contains("--transport http"), "{err}");
        c.transport = Transport::Http;
        c.validate().unwrap();
        c.workspace = Some("/srv/ws".into());
        let err = c.validate().unwrap_err();
        assert!(err.contains("--data-dir"), "{err}");
        // The secret never shows in Debug output.
        assert!(!format!("{c:?}").contains(&"a".repeat(40)));
        let mut c = Config::defaults();
        c.data_dir = Some("/srv/cem".into());
        assert_eq!(c.workspace_dir(), PathBuf::from("/srv/cem/workspace"));
        assert_eq!(c.skills_dir(), PathBuf::from("/srv/cem/skills"));
        assert!(!c.has_tokens());
    }

    #[test]
    fn the_tenant_limit_defaults_to_and_never_exceeds_the_server_limit() {
        let mut c = Config::defaults();
        assert_eq!(c.tenant_max_concurrency(), c.max_concurrency);
        c.tokens = Some(Secret("alice:".to_string() + &"a".repeat(40)));
        assert_eq!(c.tenant_max_concurrency(), c.max_concurrency / 2);
        c.tenant_max_concurrency = Some(2);
        assert_eq!(c.tenant_max_concurrency(), 2);
        c.tenant_max_concurrency = Some(64);
        assert_eq!(c.tenant_max_concurrency(), c.max_concurrency);
        c.tenant_max_concurrency = Some(0);
        assert!(
            c.validate()
                .unwrap_err()
                .contains("--tenant-max-concurrency")
        );
    }

    #[test]
    fn allowed_hosts_are_names_or_a_lone_star() {
        let mut c = Config::defaults();
        c.allowed_hosts = vec!["mcp.example.com".into(), "10.0.0.5:8080".into()];
        c.validate().unwrap();
        c.allowed_hosts = vec!["*".into()];
        c.validate().unwrap();
        for bad in ["mcp.example.com:*", "", "http://x"] {
            c.allowed_hosts = vec![bad.into()];
            assert!(
                c.validate().unwrap_err().contains("--allowed-hosts"),
                "{bad}"
            );
        }
    }
}
