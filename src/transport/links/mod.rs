//! The link routes: `PUBLIC_URL/links/TOKEN` (the upload page, an upload by form or `PUT`, a
//! download with `HEAD` and ranges) and the page's script and stylesheet. Served beside
//! `/mcp` over HTTP, and on `--links-listen` for a stdio server ([`serve_links`]).
//!
//! A request needs no bearer token: the link is the credential. Its signature picks the
//! tenant; a request that carries a bearer token anyway must carry one of that tenant
//! (another tenant's is refused, 403). Every answer carries `X-Content-Type-Options:
//! nosniff`, `Referrer-Policy: no-referrer` and `Cache-Control: no-store`; pages carry a
//! policy that lets them load only their own script and stylesheet, files and JSON answers
//! `Content-Security-Policy: sandbox`. Browsers (an `Accept` naming `text/html`) are answered
//! with pages, other clients with JSON.

mod download;
mod upload;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;

use crate::app::links::ServerLinks;
use crate::app::{App, Shared, StartState};
use crate::links::{Kind, Link, LinkError, page};
use crate::transport::authentication::Authenticator;

/// The app of a link's tenant (none on a server without tenants).
pub type AppOf = Box<dyn Fn(Option<String>) -> BoxFuture<'static, LinkApp> + Send + Sync>;

/// Where a link's tenant stands on this server.
pub enum LinkApp {
    Ready(Arc<App>),
    /// Configured, still opening.
    Opening,
    /// Not a tenant this server serves (removed since, or the link is another server's).
    Unknown,
}

/// Where the link routes find the server's links and a link's tenant.
pub struct LinkHost {
    /// What every tenant shares, once started (the key is there).
    pub shared: Box<dyn Fn() -> StartState<Arc<Shared>> + Send + Sync>,
    /// The app of a link's tenant (none on a server without tenants), once open.
    pub app: AppOf,
    /// How bearer tokens are checked, on a server with tenants.
    pub authenticator: Option<Arc<Authenticator>>,
}

/// The link routes over `host`.
pub fn routes(host: Arc<LinkHost>) -> axum::Router {
    axum::Router::new()
        .route("/links/assets/upload.js", axum::routing::get(script))
        .route("/links/assets/upload.css", axum::routing::get(style))
        .route("/links/{token}", axum::routing::any(link))
        .route("/links/{token}/{name}", axum::routing::any(link_named))
        // Each route bounds its own body (the link's limit, counted as it streams).
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(host)
}

/// Serves the link routes of a stdio server on `addr` until `shutdown` resolves.
pub async fn serve_links(
    addr: SocketAddr,
    host: Arc<LinkHost>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), crate::transport::ServeError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| crate::transport::ServeError::Bind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(crate::transport::ServeError::Http)?;
    tracing::info!("serving upload and download links at http://{local}/links/");
    axum::serve(
        listener,
        routes(host).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
    .map_err(crate::transport::ServeError::Http)
}

async fn script() -> Response {
    asset("text/javascript; charset=utf-8", page::SCRIPT)
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", page::STYLE)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = ([(header::CONTENT_TYPE, content_type)], body).into_response();
    guard(response.headers_mut(), Guard::File);
    response
}

async fn link(
    State(host): State<Arc<LinkHost>>,
    Path(token): Path<String>,
    request: Request,
) -> Response {
    dispatch(host, token, None, request).await
}

async fn link_named(
    State(host): State<Arc<LinkHost>>,
    Path((token, name)): Path<(String, String)>,
    request: Request,
) -> Response {
    dispatch(host, token, Some(name), request).await
}

/// One request to a link: the link opened and its tenant found, then the page, the upload or
/// the download.
async fn dispatch(
    host: Arc<LinkHost>,
    token: String,
    name: Option<String>,
    request: Request,
) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .cloned();
    let html = wants_html(request.headers());
    let (app, links, link) = match open(&host, &token, request.headers(), html).await {
        Ok(opened) => opened,
        Err(response) => return response,
    };
    let client = peer.map_or_else(String::new, |ConnectInfo(addr)| {
        links.client_hash(addr.ip())
    });
    let method = request.method().clone();
    let refused = match (link.kind, &method) {
        (Kind::Upload, &Method::GET | &Method::HEAD) => match app.check_upload_link(&link) {
            Ok(()) => return upload::page(&link, method == Method::HEAD),
            Err(e) => e,
        },
        (Kind::Upload, &Method::POST | &Method::PUT) => {
            return upload::receive(&app, link, name, client, request, html).await;
        }
        (Kind::Download, &Method::GET | &Method::HEAD) if name.is_none() => {
            return download::send(app, link, client, request).await;
        }
        _ => {
            let allowed = match link.kind {
                Kind::Upload => "GET, HEAD, POST, PUT",
                Kind::Download => "GET, HEAD",
            };
            let mut response = answer(
                StatusCode::METHOD_NOT_ALLOWED,
                "Not allowed",
                &format!("this {} link takes {allowed}", link.kind.as_str()),
                html,
            );
            if let Ok(v) = HeaderValue::from_str(allowed) {
                response.headers_mut().insert(header::ALLOW, v);
            }
            return response;
        }
    };
    app.link_refused(&link, &refused, client).await;
    link_refusal(&refused, html)
}

/// The link's app, the server's links and the link, or the answer that refuses it.
async fn open(
    host: &LinkHost,
    token: &str,
    headers: &HeaderMap,
    html: bool,
) -> Result<(Arc<App>, Arc<ServerLinks>, Link), Response> {
    let unavailable = |why: &str| {
        let mut r = answer(StatusCode::SERVICE_UNAVAILABLE, "Not ready", why, html);
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        r
    };
    let shared = match (host.shared)() {
        StartState::Ready(shared) => shared,
        StartState::Working(step) => {
            return Err(unavailable(&format!(
                "the server is still starting ({}): try again in a few seconds",
                step.what
            )));
        }
        StartState::Failed(e) => {
            return Err(unavailable(&format!("the server could not start: {e}")));
        }
    };
    let Some(links) = shared.links().cloned() else {
        return Err(answer(
            StatusCode::NOT_FOUND,
            "No links here",
            "this server makes no links (it has no --public-url)",
            html,
        ));
    };
    let link = links
        .open_token(token)
        .map_err(|e| link_refusal(&e, html))?;
    if let Some(refusal) = foreign_token(host, headers, &link, html).await {
        return Err(refusal);
    }
    match (host.app)(link.tenant.clone()).await {
        LinkApp::Ready(app) => Ok((app, links, link)),
        LinkApp::Opening => Err(unavailable(
            "this workspace is being opened: try again in a few seconds",
        )),
        LinkApp::Unknown => Err(answer(
            StatusCode::NOT_FOUND,
            "Link not valid",
            "this link is for a workspace this server does not serve: ask the assistant for a new one",
            html,
        )),
    }
}

/// A bearer token on a link request must be one of the link's tenant.
async fn foreign_token(
    host: &LinkHost,
    headers: &HeaderMap,
    link: &Link,
    html: bool,
) -> Option<Response> {
    let header = headers.get(header::AUTHORIZATION)?;
    let refuse = |why: &str| Some(answer(StatusCode::FORBIDDEN, "Refused", why, html));
    let Some(authenticator) = &host.authenticator else {
        return refuse("this server takes no bearer tokens: send the link without one");
    };
    match authenticator.authenticate(Some(header.as_bytes())).await {
        Ok(caller) if Some(caller.tenant.as_str()) == link.tenant.as_deref() => None,
        Ok(_) => refuse(
            "this link is for another workspace than your token's: send it without a token, or ask for a link of your own",
        ),
        Err(_) => {
            refuse("the bearer token sent with this link is not valid: send the link without one")
        }
    }
}

/// Whether the client reads pages (a browser).
fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/html"))
}

/// The answer to a link that cannot be used.
fn link_refusal(e: &LinkError, html: bool) -> Response {
    let (status, title) = match e {
        LinkError::Invalid => (StatusCode::NOT_FOUND, "Link not valid"),
        LinkError::Expired(_) => (StatusCode::GONE, "Link expired"),
        LinkError::Used => (StatusCode::GONE, "Link used already"),
        LinkError::WrongKind(..) => (StatusCode::METHOD_NOT_ALLOWED, "Wrong kind of link"),
    };
    answer(status, title, &e.to_string(), html)
}

/// An error as a page (for a browser) or as JSON `{"error": …}`.
fn answer(status: StatusCode, title: &str, message: &str, html: bool) -> Response {
    if html {
        return html_page(status, page::error(title, message));
    }
    json(status, &serde_json::json!({ "error": message }))
}

fn html_page(status: StatusCode, body: String) -> Response {
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response();
    guard(response.headers_mut(), Guard::Page);
    response
}

fn json(status: StatusCode, body: &impl serde::Serialize) -> Response {
    let mut response = (status, axum::Json(body)).into_response();
    guard(response.headers_mut(), Guard::File);
    response
}

/// Which policy an answer gets.
#[derive(Clone, Copy)]
enum Guard {
    /// A page: its own script and stylesheet only.
    Page,
    /// A file or JSON: sandboxed, never a document with powers.
    File,
}

/// The headers every link answer carries.
fn guard(headers: &mut HeaderMap, kind: Guard) {
    let policy = match kind {
        Guard::Page => page::PAGE_POLICY,
        Guard::File => "sandbox",
    };
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(policy),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}
