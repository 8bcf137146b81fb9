//! Prometheus metrics at `http://ADDR/metrics` (`--metrics-listen`), for stdio and HTTP servers
//! alike, on a listener of its own: it answers nothing else, needs no token, and is meant for a
//! private address (README's "Monitoring"). What it serves is read at scrape time
//! ([`collect`]) and written in the text format ([`exposition`]). An HTTP server binds it
//! before its start is done, so that a taken address stops the server at once as it did
//! before the server listened while starting ([`serve_starting`]); until the start is done a
//! scrape is answered 503 with its step, which Prometheus counts as the target down.

pub mod collect;
pub mod exposition;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::app::{App, Shared};

/// The tenants open now (one for stdio, those that have called for HTTP with tokens).
pub type OpenApps = Arc<dyn Fn() -> Vec<Arc<App>> + Send + Sync>;

/// What every tenant shares, once the server has started; before, why there is nothing to
/// read yet (a scrape is answered 503 with it).
pub type SharedNow = Arc<dyn Fn() -> Result<Arc<Shared>, String> + Send + Sync>;

#[derive(Debug, thiserror::Error)]
#[error("cannot serve metrics on {addr} (--metrics-listen): {source}. Choose a free address")]
pub struct MetricsError {
    pub addr: SocketAddr,
    #[source]
    pub source: std::io::Error,
}

/// The running endpoint; dropping it stops it.
pub struct MetricsServer {
    pub addr: SocketAddr,
    _stop: DropGuard,
}

/// Serves `/metrics` on `addr` until the returned server is dropped.
pub async fn serve(
    addr: SocketAddr,
    shared: Arc<Shared>,
    apps: OpenApps,
) -> Result<MetricsServer, MetricsError> {
    serve_starting(addr, Arc::new(move || Ok(shared.clone())), apps).await
}

/// [`serve`] for a server that may still be starting: bound now (a taken address refuses the
/// start at once), answering 503 until `shared` is there.
pub async fn serve_starting(
    addr: SocketAddr,
    shared: SharedNow,
    apps: OpenApps,
) -> Result<MetricsServer, MetricsError> {
    let err = |source| MetricsError { addr, source };
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(err)?;
    let local = listener.local_addr().map_err(err)?;
    let stop = CancellationToken::new();
    let router = axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || {
                let (shared, apps) = (shared.clone(), apps.clone());
                async move { scrape(&shared, &apps).await }
            }),
        )
        .fallback(|| async {
            (
                StatusCode::NOT_FOUND,
                "this listener serves Prometheus metrics at /metrics only\n",
            )
        });
    let stopped = stop.clone();
    tokio::spawn(async move {
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(stopped.cancelled_owned())
            .await;
        if let Err(e) = served {
            tracing::error!("the metrics endpoint stopped: {e}");
        }
    });
    tracing::info!("serving Prometheus metrics at http://{local}/metrics");
    Ok(MetricsServer {
        addr: local,
        _stop: stop.drop_guard(),
    })
}

async fn scrape(shared: &SharedNow, apps: &OpenApps) -> Response {
    match shared() {
        Ok(shared) => {
            let body = collect::render(&shared, &apps()).await;
            ([(header::CONTENT_TYPE, exposition::CONTENT_TYPE)], body).into_response()
        }
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")).into_response(),
    }
}
