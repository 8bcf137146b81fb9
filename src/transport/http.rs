//! Streamable HTTP at `/mcp` over the shared [`CodeExecutionServer`], plus `/health`. With
//! bearer tokens it serves tenants (see [`crate::transport::tenants`]); without tokens it
//! serves one application on loopback addresses only. It stops when its shutdown future
//! resolves and then shuts the sandboxes down, which removes every container this server
//! started.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::app::{App, Shared};
use crate::config::Config;
use crate::mcp::CodeExecutionServer;
use crate::tenancy::tokens::{AuthFailure, TokenTable};
use crate::transport::ServeError;
use crate::transport::tenants::{TenantError, Tenants};

/// Who the HTTP endpoint serves.
pub enum Access {
    /// No tokens configured: one application, no authentication, loopback addresses only.
    Open(Arc<App>),
    /// Bearer tokens: each authenticates a tenant, opened at its first request.
    Tokens {
        shared: Arc<Shared>,
        tokens: TokenTable,
    },
}

impl Access {
    fn config(&self) -> &Config {
        match self {
            Access::Open(app) => app.config(),
            Access::Tokens { shared, .. } => shared.config(),
        }
    }

    fn shared(&self) -> &Arc<Shared> {
        match self {
            Access::Open(app) => app.shared(),
            Access::Tokens { shared, .. } => shared,
        }
    }
}

/// The MCP streamable HTTP service of one application, with its own sessions.
pub type McpService = StreamableHttpService<CodeExecutionServer, LocalSessionManager>;

/// Starts what `config` asks for over HTTP: with tokens, the shared parts and the token table
/// (tenants open later); without, one application.
pub async fn http_access(config: Config) -> Result<Access, ServeError> {
    // Refused before anything starts (no pool to tear down again).
    if !config.tenants.has_tokens() && !config.transport.listen.ip().is_loopback() {
        return Err(ServeError::NotLoopback(config.transport.listen));
    }
    if !config.tenants.has_tokens() {
        let app = App::start(config).await.map_err(ServeError::Start)?;
        return Ok(Access::Open(Arc::new(app)));
    }
    let env = config.tenants.tokens.as_ref().map(|t| t.0.clone());
    let tokens = TokenTable::load(config.tenants.tokens_file.as_deref(), env.as_deref())?;
    // Tenants never share a sandbox uid: refused before anything starts, whoever runs it.
    crate::tenancy::uid::assign(tokens.tenants(), config.tenants.tenant_uid_range)?;
    tracing::info!(
        "bearer tokens configured for {} tenants: {}",
        tokens.tenants().len(),
        tokens.tenants().join(", ")
    );
    let shared = Shared::start(config).await.map_err(ServeError::Start)?;
    Ok(Access::Tokens { shared, tokens })
}

/// rmcp's HTTP settings from ours: Host and Origin allowlists and the message bound.
fn mcp_config(config: &Config, ct: &CancellationToken) -> StreamableHttpServerConfig {
    let mut c = StreamableHttpServerConfig::default()
        .with_cancellation_token(ct.child_token())
        // The same message bound as stdio (rmcp's own default, 4 MiB, would refuse a 10 MiB
        // file).
        .with_max_request_body_bytes(crate::transport::jsonrpc_input::MAX_MESSAGE_BYTES);
    c = if config
        .transport
        .allowed_hosts
        .iter()
        .any(|h| h.trim() == "*")
    {
        c.disable_allowed_hosts()
    } else {
        c.with_allowed_hosts(
            config
                .transport
                .allowed_hosts
                .iter()
                .map(|h| h.trim().to_string()),
        )
    };
    let origins: Vec<String> = config
        .transport
        .allowed_origins
        .iter()
        .map(|o| o.trim().to_string())
        .filter(|o| !o.is_empty())
        .collect();
    if origins.is_empty() {
        c.enforce_origin_validation()
    } else {
        c.with_allowed_origins(origins)
    }
}

fn mcp_service(app: Arc<App>, config: StreamableHttpServerConfig) -> McpService {
    StreamableHttpService::new(
        move || Ok(CodeExecutionServer::new(app.clone())),
        Default::default(),
        config,
    )
}

/// Serves streamable HTTP at `http://ADDR/mcp` (and `GET /health`) until `shutdown` resolves.
/// Returns the bound address through `bound` (useful with port 0).
pub async fn serve_http(
    access: Access,
    addr: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
    bound: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
) -> Result<(), ServeError> {
    if let Access::Open(app) = &access
        && !addr.ip().is_loopback()
    {
        app.shutdown_all().await;
        return Err(ServeError::NotLoopback(addr));
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let local = listener.local_addr().map_err(ServeError::Http)?;
    let ct = CancellationToken::new();
    let state = Arc::new(HttpState::new(&access, endpoint(&access, local, &ct)));
    let metrics_state = state.clone();
    let metrics =
        super::metrics_endpoint(access.shared(), Arc::new(move || metrics_state.apps())).await;
    let _metrics = match metrics {
        Ok(metrics) => metrics,
        Err(e) => {
            shut_down(&access, &state).await;
            return Err(e);
        }
    };
    let hosts = access.config().transport.allowed_hosts.join(",");
    tracing::info!(
        "serving MCP over streamable HTTP at http://{local}/mcp (Host headers allowed: {hosts}); health at /health"
    );
    if let Some(tx) = bound {
        let _ = tx.send(local);
    }
    let stop = ct.clone();
    let result = axum::serve(listener, router(state.clone()))
        .with_graceful_shutdown(async move {
            shutdown.await;
            stop.cancel();
        })
        .await
        .map_err(ServeError::Http);
    shut_down(&access, &state).await;
    result
}

/// The MCP endpoint `access` asks for: one service, or the tenants, each opened with a
/// service of its own at its first request.
fn endpoint(access: &Access, local: SocketAddr, ct: &CancellationToken) -> Endpoint {
    match access {
        Access::Open(app) => {
            tracing::warn!(
                "no bearer tokens configured: HTTP serves without authentication, on the loopback address {local} only (--tokens-file to serve other hosts)"
            );
            Endpoint::Open(mcp_service(app.clone(), mcp_config(app.config(), ct)))
        }
        Access::Tokens { shared, tokens } => {
            let service_config = mcp_config(shared.config(), ct);
            Endpoint::Tokens(Tenants::new(shared.clone(), tokens.clone(), move |app| {
                mcp_service(app, service_config.clone())
            }))
        }
    }
}

/// `/mcp` (its tenant found from the bearer token, its body checked) and `/health`.
fn router(state: Arc<HttpState>) -> axum::Router {
    axum::Router::new()
        .route(
            "/mcp",
            axum::routing::any(mcp_endpoint)
                .layer(axum::middleware::from_fn(
                    crate::transport::http_input::check_body,
                ))
                .layer(axum::middleware::from_fn_with_state(
                    state.clone(),
                    authenticate,
                )),
        )
        .route("/health", axum::routing::get(health))
        .with_state(state)
}

/// Shuts the one application down, or every tenant opened so far.
async fn shut_down(access: &Access, state: &HttpState) {
    match (access, &state.endpoint) {
        (Access::Open(app), _) => app.shutdown_all().await,
        (_, Endpoint::Tokens(tenants)) => tenants.shutdown().await,
        _ => {}
    }
}

enum Endpoint {
    Open(McpService),
    Tokens(Tenants<McpService>),
}

struct HttpState {
    endpoint: Endpoint,
    /// The one application of a server without tokens.
    open_app: Option<Arc<App>>,
    /// What every tenant shares: the engine `/health` pings.
    shared: Arc<Shared>,
    /// With `--shared-data`, the watch of the data directory `/health` also consults.
    storage: Option<Arc<crate::host::storage::StorageWatch>>,
}

impl HttpState {
    fn new(access: &Access, endpoint: Endpoint) -> Self {
        let config = access.config();
        HttpState {
            open_app: match access {
                Access::Open(app) => Some(app.clone()),
                Access::Tokens { .. } => None,
            },
            endpoint,
            shared: access.shared().clone(),
            storage: config
                .storage
                .shared_data
                .then(|| crate::host::storage::StorageWatch::start(config.storage.data_dir())),
        }
    }

    /// The applications open now: the one without tokens, else the tenants that have called.
    fn apps(&self) -> Vec<Arc<App>> {
        match &self.endpoint {
            Endpoint::Open(_) => self.open_app.iter().cloned().collect(),
            Endpoint::Tokens(tenants) => (tenants.opened().into_iter())
                .map(|t| t.app.clone())
                .collect(),
        }
    }
}

/// The MCP service a request is for, found by [`authenticate`].
#[derive(Clone)]
struct Target(McpService);

/// Finds the request's tenant from its bearer token (before its body is read), or answers 401.
/// The request carries the tenant's service and its [`crate::privacy::Privacy`], which reads the
/// errors the body check answers with.
async fn authenticate(
    State(state): State<Arc<HttpState>>,
    mut request: Request,
    next: Next,
) -> Response {
    let (service, privacy) = match &state.endpoint {
        Endpoint::Open(service) => match &state.open_app {
            Some(app) => (service.clone(), app.privacy().clone()),
            None => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        },
        Endpoint::Tokens(tenants) => {
            let header = request
                .headers()
                .get(header::AUTHORIZATION)
                .map(|v| v.as_bytes());
            match tenants.get(header).await {
                Ok(tenant) => (tenant.service.clone(), tenant.app.privacy().clone()),
                Err(TenantError::Auth(failure)) => return unauthorized(failure),
                Err(e @ TenantError::Open(_)) => {
                    return json_answer(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        serde_json::json!({"error": "tenant_unavailable", "message": e.to_string()}),
                    );
                }
            }
        }
    };
    request.extensions_mut().insert(Target(service));
    request.extensions_mut().insert(privacy);
    next.run(request).await
}

async fn mcp_endpoint(request: Request) -> Response {
    let Some(Target(service)) = request.extensions().get::<Target>().cloned() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let delete = request.method() == Method::DELETE;
    let response = service.handle(request).await.into_response();
    if delete {
        session_ended(response)
    } else {
        response
    }
}

/// A DELETE that ended a legacy session, answered 204 No Content. rmcp answers it 202 Accepted,
/// which says the work is still to be done; the session is gone by then, and clients read 202 as
/// a failure (the MCP Python SDK logs "Session termination failed: 202", expecting 200 or 204).
/// Other answers (no such session, no session id) pass as they are.
fn session_ended(response: Response) -> Response {
    if response.status() == StatusCode::ACCEPTED {
        StatusCode::NO_CONTENT.into_response()
    } else {
        response
    }
}

/// `GET /health`: 200 while the Docker engine answers (and, with `--shared-data`, the data
/// directory's watch has no failed or hung read), 503 otherwise. Unauthenticated, and
/// tells nothing about tenants.
async fn health(State(state): State<Arc<HttpState>>) -> Response {
    let unavailable = |reason: &str| {
        json_answer(
            StatusCode::SERVICE_UNAVAILABLE,
            serde_json::json!({"status": "unavailable", "reason": reason}),
        )
    };
    if !state
        .shared
        .engine_answers(std::time::Duration::from_secs(3))
        .await
    {
        return unavailable("the Docker engine does not answer");
    }
    if let Some(Err(reason)) = state.storage.as_ref().map(|w| w.verdict()) {
        return unavailable(&reason);
    }
    // A failing audit trail: unavailable when executions wait for it (--audit-required), a
    // warning otherwise. Tenant names only: no paths.
    let mut warnings = Vec::new();
    for app in state.apps() {
        let Some(log) = app.audit() else { continue };
        let health = log.health();
        if health.ok {
            continue;
        }
        let whose = app
            .tenant()
            .map_or(String::new(), |t| format!(" of tenant {t}"));
        let reason = format!(
            "the audit trail{whose} cannot be written: {}",
            health.error.unwrap_or_default()
        );
        if log.settings().required {
            return unavailable(&format!(
                "{reason}; executions are refused (--audit-required)"
            ));
        }
        warnings.push(format!("{reason}; executions go on unrecorded"));
    }
    if warnings.is_empty() {
        json_answer(StatusCode::OK, serde_json::json!({"status": "ok"}))
    } else {
        json_answer(
            StatusCode::OK,
            serde_json::json!({"status": "ok", "warnings": warnings}),
        )
    }
}

/// Asks `GET /health` of a server listening on `listen` (loopback for an unspecified address);
/// `Ok` with the status line when it answers 200.
pub async fn probe_health(listen: SocketAddr) -> Result<String, ServeError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut addr = listen;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    let failed = |what: String| ServeError::Health(format!("http://{addr}/health: {what}"));
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await?;
        let mut answer = Vec::new();
        stream.take(64 * 1024).read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    let answer = tokio::time::timeout(std::time::Duration::from_secs(10), exchange)
        .await
        .map_err(|_| failed("no answer within 10 s".into()))?
        .map_err(|e| failed(e.to_string()))?;
    let text = String::from_utf8_lossy(&answer);
    let status = text.lines().next().unwrap_or_default().trim().to_string();
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default().trim();
    if status.split_whitespace().nth(1) == Some("200") {
        Ok(format!("{status} {body}"))
    } else {
        Err(failed(format!("{status} {body}")))
    }
}

fn unauthorized(failure: AuthFailure) -> Response {
    let challenge = match failure {
        AuthFailure::Missing => r#"Bearer realm="code-execution-mcp""#,
        AuthFailure::Invalid => r#"Bearer realm="code-execution-mcp", error="invalid_token""#,
    };
    let mut response = json_answer(
        StatusCode::UNAUTHORIZED,
        serde_json::json!({"error": "unauthorized", "message": failure.to_string()}),
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(challenge),
    );
    response
}

fn json_answer(status: StatusCode, body: serde_json::Value) -> Response {
    (status, axum::Json(body)).into_response()
}
