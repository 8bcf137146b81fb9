//! code-execution-mcp: an MCP server whose `execute_code` runs agent-written Python in a fresh,
//! locked-down Docker container per execution, with tool discovery, skills, PII tokenization and
//! path-safe workspace tools around it, in-process, and a gateway through which that code calls
//! the user's own MCP servers.
//!
//! The library holds all logic; `main.rs` only parses the command line. ARCHITECTURE.md is the
//! layout map; dependencies point down the list below, never back up.
//!
//! # Layout
//!
//! One bullet per block of `mod` lines below, top to bottom (`tests/layers.rs` holds this list
//! to them):
//!
//! - [`transport`]: how clients reach the server (stdio, streamable HTTP with tenants and
//!   `/health`) and the JSON-RPC input checks both share.
//! - [`metrics`]: the Prometheus endpoint (`--metrics-listen`), read from every tenant's
//!   statistics at scrape time.
//! - [`cli`]: the binary's other commands (`doctor`, `image`, `audit`); [`mcp`]: the tools, a
//!   thin layer of argument shapes and responses over [`app`]; every answer is made by
//!   [`privacy`].
//! - [`app`]: the assembled server, one [`app::App`] per tenant over [`app::Shared`], opened in
//!   named steps; [`app::execution`] puts one request's checks, calls from sandbox code,
//!   progress and what it produced (pictures, links, changed files) around a sandbox run.
//! - [`config`]: the command line in groups, one per subsystem.
//! - [`privacy`]: what the model may see, as types only it makes.
//! - [`gateway`]: the user's own MCP servers as Python functions in the sandbox, and the
//!   HTTP APIs the `egress` entries list, reached through the server (guarded egress).
//! - The subsystems, which do not know each other: [`audit`]: the audit trail's records, files
//!   and reader; [`discovery`]: the tool catalog and its ranked search;
//!   [`links`]: upload and download links (signed, single use, budgeted per tenant) and the
//!   upload page; [`oauth`]: OAuth 2.1 access tokens checked as a resource server (metadata,
//!   JWT signatures, introspection, claims); [`packages`]:
//!   requirements resolved and installed outside the sandbox into a shared, content-named
//!   cache that sandboxes mount read-only; [`pii`]: detection and reversible tokenization of
//!   personal data; [`sandbox`]: one fresh container per execution (the engine seam, its
//!   Docker implementation, the execution state machine, the pool, the reaper, the images);
//!   [`sessions`]: session handles and their snapshots on disk; [`skills`]: the saved-skill
//!   store and its Agent Skills form (`skill://` URIs); [`workspace`]: path-safe files under
//!   the workspace root, its quota and its `workspace:///` URIs.
//! - [`tenancy`]: tenant names, their directories, the tokens that name them and each tenant's
//!   sandbox uid (the gateway, the audit trail and the package cache use them).
//! - [`shipped`]: the catalog and starter skills built into the binary.
//! - [`host`]: the machine underneath: engine paths, storage, processes, link-safe files;
//!   [`logging`]: the log on stderr (`--log-format`), human lines or JSON lines with the
//!   tenant, execution and request ids of the spans around each event; `text`: cutting text
//!   on character boundaries (internal).

// No unsafe code: the server's memory safety is the compiler's, all of it (libc and rustix
// calls go through their safe wrappers).
#![forbid(unsafe_code)]
// A function past 80 lines (clippy.toml) does more than one thing: split it into named
// steps. `#[allow]` only on a table (a list or a literal), with a comment saying so.
#![deny(clippy::too_many_lines)]
// Privacy by type: what reaches the model is made by `privacy` only, and clippy.toml names
// rmcp's ways around it. Denied for the whole crate; `privacy` allows them, and any other
// `allow` says on the line above why it is safe (tests/privacy_lints.rs checks both).
#![deny(clippy::disallowed_types, clippy::disallowed_methods)]

// The layers, top to bottom (`tests/layers.rs` checks them): a module uses only modules of
// the layers below its own, never one above and never another of its own layer.

// How clients reach the server, and the metrics endpoint beside it.
pub mod transport;

pub mod metrics;

// The tools, and the binary's other commands.
pub mod cli;
pub mod mcp;

// The assembled server.
pub mod app;

// The command line, converted into each subsystem's settings.
pub mod config;

// What the model may see.
pub mod privacy;

// The user's own MCP servers.
pub mod gateway;

// The subsystems, which do not know each other.
pub mod audit;
pub mod discovery;
pub mod links;
pub mod oauth;
pub mod packages;
pub mod pii;
pub mod sandbox;
pub mod sessions;
pub mod skills;
pub mod workspace;

// Tenant names and directories.
pub mod tenancy;

// What the binary carries.
pub mod shipped;

// The machine underneath, the log, and text cut on character boundaries.
pub mod host;
pub mod logging;
mod text;

/// Installs the TLS crypto provider (rustls with ring) that HTTPS clients of this process use:
/// the clients of HTTPS upstreams, and any other reqwest client. Without one, building a client
/// panics. Idempotent; `gateway::Gateway::start` calls it.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The system's root certificates, for the server's own HTTPS clients (guarded egress, the
/// authorization servers). A root rustls cannot parse is one host less, not a reason to stop.
pub(crate) fn system_roots() -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    roots
}
