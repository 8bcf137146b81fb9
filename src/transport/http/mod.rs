//! Streamable HTTP at `/mcp`, plus `/health`. With bearer tokens it serves tenants (see
//! [`crate::transport::tenants`]); without tokens it serves one application on loopback
//! addresses only.
//!
//! It listens before the server has started, for the reason stdio answers at once
//! ([`crate::app::starting`]): a first start builds the image or copies its tree, and a client
//! (a compose user's, an agent's) meets a refused connection meanwhile. Each MCP session is a
//! [`Front`] over the start (the one app's, or its tenant's), which answers the handshake at
//! once and makes the rest wait; `/health` answers 503 saying the step ([`health`]).
//! Authentication needs no start: a missing or wrong token is refused at once ([`auth`]).
//!
//! A start that fails after the listener is bound is logged, and every request is answered
//! with it for [`FAILED_LINGER`]; then the server stops, ending with the failure, so that the
//! process exits non-zero and its supervisor (compose, systemd) restarts or reports it. The
//! server stops when its shutdown future resolves too: it asks a start still running to stop,
//! answers the requests in flight, and shuts the sandboxes down, which removes every container
//! it started.

mod auth;
mod health;
mod metadata;
mod owners;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

pub use health::probe_health;

use crate::app::{App, Shared, StartError, StartState, Starting};
use crate::config::Config;
use crate::mcp::{Front, Lobby};
use crate::oauth::Verifier;
use crate::tenancy::tokens::TokenTable;
use crate::transport::ServeError;
use crate::transport::authentication::Authenticator;
use crate::transport::tenants::Tenants;

/// How long a server whose start failed goes on answering every request with the failure
/// before it stops (requests in flight are answered at once).
pub const FAILED_LINGER: Duration = Duration::from_secs(5);

/// Who the HTTP endpoint serves, and the start it serves them during.
pub struct Access {
    config: Config,
    start: Start,
}

enum Start {
    /// No tokens configured: one application, no authentication, loopback addresses only.
    Open(Starting),
    /// Bearer tokens or OAuth: each request authenticates a tenant, opened at its first
    /// request over what every tenant shares.
    Tenants {
        shared: Starting<Arc<Shared>>,
        authenticator: Arc<Authenticator>,
    },
}

impl Access {
    /// One application that has started already (the tests' `App::start`).
    pub fn ready(app: Arc<App>) -> Self {
        Self {
            config: app.config().clone(),
            start: Start::Open(Starting::ready(app)),
        }
    }

    /// The end of the start (the one app's, or what tenants share), for a caller that wants
    /// a started server before it goes on: tests and benchmarks.
    pub fn started(&self) -> impl Future<Output = Result<(), Arc<StartError>>> + Send + 'static {
        let open = match &self.start {
            Start::Open(starting) => Ok(starting.clone()),
            Start::Tenants { shared, .. } => Err(shared.clone()),
        };
        async move {
            match open {
                Ok(app) => app.finished().await.map(drop),
                Err(shared) => shared.finished().await.map(drop),
            }
        }
    }
}

/// Begins what `config` asks for over HTTP, after the checks that need no engine (which
/// refuse at once): with tokens or OAuth, how callers authenticate and the start of the
/// shared parts (tenants open later); without, the start of one application. Neither has
/// started when this returns.
pub async fn http_access(config: Config) -> Result<Access, ServeError> {
    // Refused before anything starts (no pool to tear down again).
    if !config.has_tenants() && !config.transport.listen.ip().is_loopback() {
        return Err(ServeError::NotLoopback(config.transport.listen));
    }
    if !config.has_tenants() {
        let starting = App::begin(config.clone()).map_err(ServeError::Start)?;
        let start = Start::Open(starting);
        return Ok(Access { config, start });
    }
    let authenticator = Arc::new(authenticator(&config)?);
    let tenants = authenticator.tenants();
    // Tenants never share a sandbox uid: refused before anything starts, whoever runs it.
    crate::tenancy::uid::assign(
        tenants.iter().map(String::as_str),
        config.tenants.tenant_uid_range,
    )?;
    tracing::info!(
        "{} tenants configured: {}",
        tenants.len(),
        tenants.join(", ")
    );
    let shared = Shared::begin(config.clone()).map_err(ServeError::Start)?;
    let start = Start::Tenants {
        shared,
        authenticator,
    };
    Ok(Access { config, start })
}

/// The token table of `--tokens-file` and `CEM_TOKENS`, and the OAuth verifier of the
/// `--oauth-*` flags, whichever are configured.
fn authenticator(config: &Config) -> Result<Authenticator, ServeError> {
    let tokens = if config.tenants.has_tokens() {
        let env = config.tenants.tokens.as_ref().map(|t| t.0.clone());
        Some(TokenTable::load(
            config.tenants.tokens_file.as_deref(),
            env.as_deref(),
        )?)
    } else {
        None
    };
    let oauth = match config.oauth.settings()? {
        Some(settings) => {
            let verifier = Verifier::new(settings)?;
            verifier.prefetch();
            tracing::info!(
                "OAuth: protected resource {}, tokens of {} accepted, metadata at {}",
                verifier.resource().resource,
                config.oauth.oauth_issuers.join(", "),
                verifier.resource().metadata_url()
            );
            Some(Arc::new(verifier))
        }
        None => None,
    };
    Ok(Authenticator { tokens, oauth })
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
        // The public URL's host is the one clients use.
        let public = config.oauth.resource().map(|r| r.host());
        c.with_allowed_hosts(
            (config.transport.allowed_hosts.iter())
                .map(|h| h.trim().to_string())
                .chain(public),
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

/// The MCP streamable HTTP service of one start, with its own sessions: a [`Front`] each.
pub type McpService = StreamableHttpService<Front, LocalSessionManager>;

/// What serves the sessions of one start (the one app's, or a tenant's).
#[derive(Clone)]
struct Door {
    lobby: Arc<Lobby>,
    service: McpService,
    owners: Arc<owners::SessionOwners>,
}

impl Door {
    fn new(starting: Starting, config: StreamableHttpServerConfig, tenants: bool) -> Self {
        let lobby = Arc::new(Lobby::new(starting, tenants));
        let sessions = lobby.clone();
        let service = StreamableHttpService::new(
            move || Ok(Front::in_lobby(sessions.clone())),
            Default::default(),
            config,
        );
        Self {
            lobby,
            service,
            owners: Arc::default(),
        }
    }
}

/// Serves streamable HTTP at `http://ADDR/mcp` (and `GET /health`) until `shutdown` resolves
/// or the start fails. Returns the bound address through `bound` (useful with port 0); ends
/// with [`ServeError::Started`] when the start failed.
pub async fn serve_http(
    access: Access,
    addr: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
    bound: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
) -> Result<(), ServeError> {
    if let Start::Open(starting) = &access.start
        && !addr.ip().is_loopback()
    {
        if let StartState::Ready(app) = starting.cancel().await {
            app.shutdown_all().await;
        }
        return Err(ServeError::NotLoopback(addr));
    }
    let ct = CancellationToken::new();
    let state = Arc::new(HttpState::new(&access, &ct));
    let listening = async { Ok::<_, ServeError>((bind(addr).await?, metrics(&state).await?)) };
    let ((listener, local), _metrics) = match listening.await {
        Ok(listening) => listening,
        Err(e) => {
            state.shut_down().await;
            return Err(e);
        }
    };
    if matches!(access.start, Start::Open(_)) {
        tracing::warn!(
            "no bearer tokens configured: HTTP serves without authentication, on the loopback address {local} only (--tokens-file to serve other hosts)"
        );
    }
    let hosts = access.config.transport.allowed_hosts.join(",");
    tracing::info!(
        "serving MCP over streamable HTTP at http://{local}/mcp (Host headers allowed: {hosts}); health at /health"
    );
    if let Some(tx) = bound {
        let _ = tx.send(local);
    }
    let stop = stop_when(shutdown, state.clone(), ct);
    let routes = router(state.clone()).into_make_service_with_connect_info::<SocketAddr>();
    let result = axum::serve(listener, routes)
        .with_graceful_shutdown(stop)
        .await
        .map_err(ServeError::Http);
    state.shut_down().await;
    result?;
    state
        .failure()
        .map_or(Ok(()), |e| Err(ServeError::Started(e)))
}

/// The listener on `addr`, and the address it got.
async fn bind(addr: SocketAddr) -> Result<(tokio::net::TcpListener, SocketAddr), ServeError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let local = listener.local_addr().map_err(ServeError::Http)?;
    Ok((listener, local))
}

/// Resolves when the server is to stop: `shutdown` resolved, or the start failed
/// [`FAILED_LINGER`] ago. A start still running is asked to stop, and the MCP sessions end,
/// so that the requests in flight are answered.
async fn stop_when(
    shutdown: impl Future<Output = ()>,
    state: Arc<HttpState>,
    ct: CancellationToken,
) {
    tokio::select! {
        () = shutdown => {}
        () = state.failed() => tracing::error!(
            "stopping: the start failed (above); requests were answered with its failure for {} s",
            FAILED_LINGER.as_secs()
        ),
    }
    state.stop_starts();
    ct.cancel();
}

/// The metrics endpoint of `--metrics-listen`, when it is set: bound now, so that a taken
/// address refuses the start as it did before the server answered while it started; it
/// answers 503 until what every tenant shares is there.
async fn metrics(
    state: &Arc<HttpState>,
) -> Result<Option<crate::metrics::MetricsServer>, ServeError> {
    let Some(addr) = state.config.operations.metrics_listen else {
        return Ok(None);
    };
    let (for_shared, for_apps) = (state.clone(), state.clone());
    let shared: crate::metrics::SharedNow = Arc::new(move || match for_shared.shared_now() {
        StartState::Ready(shared) => Ok(shared),
        StartState::Working(step) => Err(format!("the server is still starting: {}", step.what)),
        StartState::Failed(e) => Err(format!("the server could not start: {e}")),
    });
    let apps: crate::metrics::OpenApps = Arc::new(move || for_apps.apps());
    Ok(Some(
        crate::metrics::serve_starting(addr, shared, apps).await?,
    ))
}

/// `/mcp` (its tenant found from the bearer token, its body checked), `/health`, the link
/// routes, and with OAuth the protected resource's metadata.
fn router(state: Arc<HttpState>) -> axum::Router {
    let router = match state.oauth() {
        Some(oauth) => metadata::routes(oauth.metadata(), &oauth.resource().prefix()),
        None => axum::Router::new(),
    };
    let links = crate::transport::links::routes(link_host(&state));
    router
        .route(
            "/mcp",
            axum::routing::any(auth::mcp_endpoint)
                .layer(axum::middleware::from_fn(
                    crate::transport::http_input::check_body,
                ))
                .layer(axum::middleware::from_fn_with_state(
                    state.clone(),
                    auth::authenticate,
                )),
        )
        .route("/health", axum::routing::get(health::health))
        .with_state(state)
        .merge(links)
}

/// Where the link routes find the key and a link's tenant: the one app, or a configured
/// tenant (opened at its first request, as for `/mcp`).
fn link_host(state: &Arc<HttpState>) -> Arc<crate::transport::links::LinkHost> {
    let (for_shared, for_apps) = (state.clone(), state.clone());
    let authenticator = match &state.endpoint {
        Endpoint::Tenants { authenticator, .. } => Some(authenticator.clone()),
        Endpoint::Open(_) => None,
    };
    Arc::new(crate::transport::links::LinkHost {
        shared: Box::new(move || for_shared.shared_now()),
        app: Box::new(move |tenant| {
            let state = for_apps.clone();
            Box::pin(async move {
                use crate::transport::links::LinkApp;
                let app = match (&state.endpoint, tenant) {
                    (Endpoint::Open(door), None) => match door.lobby.starting().now() {
                        StartState::Ready(app) => Some(app),
                        _ => None,
                    },
                    (
                        Endpoint::Tenants {
                            tenants,
                            authenticator,
                            ..
                        },
                        Some(name),
                    ) if authenticator.tenants().contains(&name) => tenants.get(&name).await.app(),
                    _ => return LinkApp::Unknown,
                };
                app.map_or(LinkApp::Opening, LinkApp::Ready)
            })
        }),
        authenticator,
    })
}

/// The MCP endpoint: one start's sessions, or the tenants', each with a start and sessions
/// of its own from its first request.
enum Endpoint {
    Open(Door),
    Tenants {
        shared: Starting<Arc<Shared>>,
        authenticator: Arc<Authenticator>,
        tenants: Tenants<Door>,
    },
}

struct HttpState {
    config: Config,
    endpoint: Endpoint,
    /// With `--shared-data`, the watch of the data directory `/health` also consults.
    storage: Option<Arc<crate::host::storage::StorageWatch>>,
}

impl HttpState {
    fn new(access: &Access, ct: &CancellationToken) -> Self {
        let config = &access.config;
        let sessions = mcp_config(config, ct);
        let endpoint = match &access.start {
            Start::Open(starting) => Endpoint::Open(Door::new(starting.clone(), sessions, false)),
            Start::Tenants {
                shared,
                authenticator,
            } => Endpoint::Tenants {
                shared: shared.clone(),
                authenticator: authenticator.clone(),
                tenants: Tenants::new(shared.clone(), move |starting| {
                    Door::new(starting, sessions.clone(), true)
                }),
            },
        };
        HttpState {
            config: config.clone(),
            endpoint,
            storage: config
                .storage
                .shared_data
                .then(|| crate::host::storage::StorageWatch::start(config.storage.data_dir())),
        }
    }

    /// The OAuth verifier, when OAuth authenticates callers.
    fn oauth(&self) -> Option<&Arc<Verifier>> {
        match &self.endpoint {
            Endpoint::Tenants { authenticator, .. } => authenticator.oauth.as_ref(),
            Endpoint::Open(_) => None,
        }
    }

    /// Where what every tenant shares is (the one app's start includes it).
    fn shared_now(&self) -> StartState<Arc<Shared>> {
        match &self.endpoint {
            Endpoint::Open(door) => door.lobby.starting().now().map(|app| app.shared().clone()),
            Endpoint::Tenants { shared, .. } => shared.now(),
        }
    }

    /// The applications open now: the one without tokens once started, else the tenants
    /// opened so far.
    fn apps(&self) -> Vec<Arc<App>> {
        match &self.endpoint {
            Endpoint::Open(door) => match door.lobby.starting().now() {
                StartState::Ready(app) => vec![app],
                _ => Vec::new(),
            },
            Endpoint::Tenants { tenants, .. } => tenants.opened(),
        }
    }

    /// Resolves [`FAILED_LINGER`] after the server's start failed (never if it starts): the
    /// one app's, or what tenants share (a tenant's own failure is its own).
    async fn failed(&self) {
        let result = match &self.endpoint {
            Endpoint::Open(door) => door.lobby.starting().finished().await.map(drop),
            Endpoint::Tenants { shared, .. } => shared.finished().await.map(drop),
        };
        match result {
            Ok(()) => std::future::pending().await,
            Err(_) => tokio::time::sleep(FAILED_LINGER).await,
        }
    }

    /// Why the server's start failed, if it did (a start stopped by the server's own stop is
    /// no failure).
    fn failure(&self) -> Option<Arc<StartError>> {
        match self.shared_now() {
            StartState::Failed(e) if !matches!(*e, StartError::Cancelled) => Some(e),
            _ => None,
        }
    }

    /// Asks the starts still running to stop (returns at once).
    fn stop_starts(&self) {
        match &self.endpoint {
            Endpoint::Open(door) => door.lobby.starting().stop(),
            Endpoint::Tenants { shared, .. } => shared.stop(),
        }
    }

    /// Stops a start still running, then shuts the one application down, or every tenant
    /// opened so far and what they share.
    async fn shut_down(&self) {
        match &self.endpoint {
            Endpoint::Open(door) => {
                if let StartState::Ready(app) = door.lobby.starting().cancel().await {
                    app.shutdown_all().await;
                }
            }
            Endpoint::Tenants { tenants, .. } => tenants.shutdown().await,
        }
    }
}

fn json_answer(status: StatusCode, body: serde_json::Value) -> Response {
    (status, axum::Json(body)).into_response()
}
