//! code-execution-mcp: an MCP server whose `execute_code` runs agent-written Python in a fresh,
//! locked-down Docker container per execution, with tool discovery, skills, PII tokenization and
//! path-safe workspace tools around it, in-process, and a gateway through which that code calls
//! the user's own MCP servers.
//!
//! The library holds all logic; `main.rs` only parses the command line. ARCHITECTURE.md draws
//! the layers; dependencies point down the list below, never back up.
//!
//! # Layout
//!
//! - [`transport`]: how clients reach the server — stdio, streamable HTTP (tenants, `/health`),
//!   and the JSON-RPC input checks both share.
//! - [`mcp`]: the tools (the original's thirteen names and two more), a thin layer of
//!   argument shapes and responses over [`app`].
//! - [`app`]: the assembled server ([`app::App`], one per tenant, over [`app::Shared`]): start
//!   order, `execute` (checks, sandbox run, redaction), shutdown.
//! - [`execute_request`]: an `execute_code` request, its checks and the clamping of its limits.
//! - [`produced`]: what an execution returns besides text — images made safe by [`images`],
//!   resource links, the files it created or changed — and [`resources`]: the workspace as
//!   `workspace:///` MCP resources (URIs, paging).
//! - [`gateway`]: the user's own MCP servers ("upstreams") as Python functions in the sandbox —
//!   connections, the generated `servers` package, one execution's calls, policy.
//! - [`sandbox`]: one fresh container per execution — the engine seam ([`sandbox::Backend`]),
//!   its Docker implementation, the execution state machine, the pool, the reaper, the image
//!   profiles and images with the user's packages.
//! - [`discovery`]: the tool catalog and its ranked search; [`shipped`]: the catalog and the
//!   starter skills embedded in the binary, so it runs from any directory.
//! - [`skills`]: the saved-skill store.
//! - [`workspace`]: path-safe file operations under the workspace root, and its quota.
//! - [`pii`]: detection and reversible tokenization of personal data, and with a key file the
//!   per-tenant secrets derived from it and the encrypted vault log on disk; [`privacy`] applies
//!   it to what the tools show the model.
//! - [`config`]: the command line and environment; [`doctor`]: the engine and host checks.
//! - Internal: `sandbox_calls` (what sandbox code may call on the server), `progress`
//!   (progress notifications of long executions), `host_paths` (paths as the engine sees them
//!   when the server runs in a container), `safe_fs` (the file primitives the workspace and the
//!   skills store share: atomic writes, temp files, bounded reads, never following a link),
//!   `process` (a process's start time and liveness, for owner labels and temp files).

pub mod app;
pub mod config;
pub mod discovery;
pub mod doctor;
pub mod execute_request;
pub mod gateway;
mod host_paths;
pub mod images;
pub mod mcp;
pub mod pii;
pub mod privacy;
mod process;
pub mod produced;
mod progress;
pub mod resources;
mod safe_fs;
pub mod sandbox;
mod sandbox_calls;
pub mod shipped;
pub mod skills;
pub mod storage;
pub mod tenancy;
mod text;
pub mod transport;
pub mod workspace;

/// Installs the TLS crypto provider (rustls with ring) that HTTPS clients of this process use:
/// the clients of HTTPS upstreams, and any other reqwest client. Without one, building a client
/// panics. Idempotent; `gateway::Gateway::start` calls it.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
