//! How clients reach the server: stdio (what desktop clients launch) and streamable HTTP at
//! `/mcp` (with bearer-token tenants, Host/Origin allowlists and `/health`), and the input
//! checks both share, so that every malformed message gets a JSON-RPC answer. The MCP handlers
//! ([`crate::mcp`]) do not know which transport carries them.

pub mod auth;
pub mod http_input;
pub mod jsonrpc_input;
mod serve;
pub mod stdio_transport;
pub mod tenants;

pub use serve::{
    Access, McpService, ServeError, http_access, probe_health, serve_http, serve_stdio,
    shutdown_signal,
};
