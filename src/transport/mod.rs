//! How clients reach the server: stdio (what desktop clients launch) and streamable HTTP at
//! `/mcp` (with bearer-token tenants, Host/Origin allowlists and `/health`), and the input
//! checks both share, so that every malformed message gets a JSON-RPC answer. The MCP handlers
//! ([`crate::mcp`]) do not know which transport carries them.

pub mod authentication;
mod http;
pub mod http_input;
pub mod jsonrpc_input;
pub mod links;
pub mod stdio;
pub mod tenants;

use std::net::SocketAddr;

pub use http::{Access, McpService, http_access, probe_health, serve_http};
pub use stdio::serve_stdio;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("MCP session over stdio failed: {0}")]
    Stdio(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(
        "refusing to serve HTTP on {0} without authentication: configure bearer tokens (--tokens-file or CEM_TOKENS) or OAuth (--oauth-issuer) to listen on other addresses, or listen on a loopback address such as 127.0.0.1:8080"
    )]
    NotLoopback(SocketAddr),
    #[error("bearer tokens: {0}")]
    Tokens(#[from] crate::tenancy::tokens::TokenError),
    #[error("OAuth: {0}")]
    OAuth(#[from] crate::oauth::OAuthError),
    #[error("OAuth tenants: {0}")]
    OAuthTenants(#[from] crate::tenancy::claim_map::ClaimMapError),
    #[error("tenants: {0}")]
    TenantUids(#[from] crate::tenancy::uid::UidCollision),
    #[error("cannot start: {0}")]
    Start(crate::app::StartError),
    /// The start that ran in the background while the server answered its client failed.
    #[error("cannot start: {0}")]
    Started(std::sync::Arc<crate::app::StartError>),
    #[error("unhealthy: {0}")]
    Health(String),
    /// `/health` says the server is still starting: not healthy yet, and not broken.
    #[error("not healthy yet: the server is still starting: {0}")]
    HealthStarting(String),
    #[error("HTTP server failed: {0}")]
    Http(std::io::Error),
    #[error(transparent)]
    Metrics(#[from] crate::metrics::MetricsError),
}

/// The metrics endpoint of `--metrics-listen`, when it is set, over the tenants `apps` lists.
pub(crate) async fn metrics_endpoint(
    shared: &std::sync::Arc<crate::app::Shared>,
    apps: crate::metrics::OpenApps,
) -> Result<Option<crate::metrics::MetricsServer>, ServeError> {
    let Some(addr) = shared.config().operations.metrics_listen else {
        return Ok(None);
    };
    Ok(Some(
        crate::metrics::serve(addr, shared.clone(), apps).await?,
    ))
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
