//! The two transports, each a few lines over the shared [`CodeExecutionServer`]: stdio (what
//! desktop clients launch) and streamable HTTP at `/mcp`. Both stop on SIGINT/SIGTERM (or the
//! end of stdin) and then shut the sandbox down, which removes every container this server
//! started.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::mcp::CodeExecutionServer;

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
        "refusing to serve HTTP on {0}: this server has no authentication yet, so it listens on loopback addresses only (use e.g. 127.0.0.1:8080 and a reverse proxy that authenticates)"
    )]
    NotLoopback(SocketAddr),
    #[error("HTTP server failed: {0}")]
    Http(std::io::Error),
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

/// Serves MCP on stdin/stdout until the client closes stdin or `shutdown` resolves.
pub async fn serve_stdio(
    app: Arc<App>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let server = CodeExecutionServer::new(app.clone());
    let running = server
        .serve(crate::stdio_transport::stdio())
        .await
        .map_err(|e| ServeError::Stdio(e.to_string()))?;
    let cancel = running.cancellation_token();
    let result = tokio::select! {
        r = running.waiting() => r.map(|_| ()).map_err(|e| ServeError::Stdio(e.to_string())),
        _ = shutdown => { cancel.cancel(); Ok(()) }
    };
    app.shutdown().await;
    result
}

/// Serves streamable HTTP at `http://ADDR/mcp` until `shutdown` resolves. Returns the bound
/// address through `bound` (useful with port 0).
pub async fn serve_http(
    app: Arc<App>,
    addr: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
    bound: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
) -> Result<(), ServeError> {
    if !addr.ip().is_loopback() {
        return Err(ServeError::NotLoopback(addr));
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let local = listener.local_addr().map_err(ServeError::Http)?;
    let ct = CancellationToken::new();
    // The same message bound as stdio (rmcp's own default, 4 MiB, would refuse a 10 MiB file).
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(ct.child_token())
        .with_max_request_body_bytes(crate::jsonrpc_input::MAX_MESSAGE_BYTES);
    let factory_app = app.clone();
    let service: StreamableHttpService<CodeExecutionServer, LocalSessionManager> =
        StreamableHttpService::new(
            move || Ok(CodeExecutionServer::new(factory_app.clone())),
            Default::default(),
            config,
        );
    let router = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(crate::http_input::check_body));
    tracing::info!("serving MCP over streamable HTTP at http://{local}/mcp");
    if let Some(tx) = bound {
        let _ = tx.send(local);
    }
    let stop = ct.clone();
    let result = axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            stop.cancel();
        })
        .await
        .map_err(ServeError::Http);
    app.shutdown().await;
    result
}
