//! The proxy the sandbox's HTTP clients talk to, one connection of the execution's socket at a
//! time: HTTP/1.1, where `CONNECT host:port` opens a tunnel whose TLS the proxy terminates
//! with a certificate for that host ([`super::ca`]), and a plain `http://` request in absolute
//! form is taken as it is. Each request, inside a tunnel or plain, is decided and sent by
//! [`super::forward`].
//!
//! A tunnel to a host no entry lists is opened all the same: its requests are then answered
//! with the proxy's 403, which a client shows as the response, where a refused `CONNECT` would
//! be an opaque "tunnel connection failed".

use std::convert::Infallible;
use std::sync::Arc;

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;

use super::forward::{Target, forward};
use super::grant::Grant;
use super::host::Host;
use super::reply::{ProxyBody, answer};

/// The sandbox's side of a grant: each connection to the execution's proxy socket.
impl crate::sandbox::run::egress::EgressHandler for Grant {
    fn serve(self: Arc<Self>, stream: UnixStream) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(serve(self, stream))
    }

    fn plain_http(&self) -> bool {
        Grant::plain_http(self)
    }
}

/// A tunnel a `CONNECT` opened: its host and the upgrade that hands over the connection.
type Opened = (Arc<Target>, hyper::upgrade::OnUpgrade);

/// Serves one connection the sandbox opened, until it closes. A `CONNECT`'s tunnel runs in
/// this same future, after the proxy's answer: it holds the connection's slot, and ends when
/// the execution's socket is closed (the listener aborts what it serves).
pub async fn serve(grant: Arc<Grant>, stream: UnixStream) {
    let slot = grant.connection();
    let (opened_tx, opened) = tokio::sync::oneshot::channel::<Opened>();
    let opened_tx = Arc::new(std::sync::Mutex::new(Some(opened_tx)));
    let (g, refused) = (grant.clone(), slot.as_ref().err().cloned());
    let service = service_fn(move |request| {
        let (grant, opened_tx, refused) = (g.clone(), opened_tx.clone(), refused.clone());
        async move {
            Ok::<_, Infallible>(match refused {
                // Over the execution's connections: every request here is told why.
                Some(why) => super::forward::refuse(&grant, &request, why),
                None => outer(grant, request, &opened_tx).await,
            })
        }
    });
    let served = http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades()
        .await;
    if let Err(e) = served {
        tracing::debug!("an egress connection ended: {e}");
    }
    if let Ok((target, upgrade)) = opened.await {
        match upgrade.await {
            Ok(upgraded) => tunnel(grant, target, upgraded).await,
            Err(e) => tracing::debug!("an egress tunnel did not open: {e}"),
        }
    }
    drop(slot);
}

/// A request on the proxy connection itself: `CONNECT` (whose tunnel is handed to
/// [`serve`] through `opened`), or a plain request in absolute form.
async fn outer(
    grant: Arc<Grant>,
    mut request: Request<Incoming>,
    opened: &std::sync::Mutex<Option<tokio::sync::oneshot::Sender<Opened>>>,
) -> Response<ProxyBody> {
    let authority = request.uri().authority().cloned();
    let Some(authority) = authority else {
        return answer(
            StatusCode::BAD_REQUEST,
            Some("scheme"),
            "egress: this is the sandbox's HTTP proxy: send requests through it as a proxy (HTTPS_PROXY is set for this), not to it".into(),
        );
    };
    let tls = request.method() == Method::CONNECT;
    if !tls && request.uri().scheme_str() != Some("http") {
        return answer(
            StatusCode::BAD_REQUEST,
            Some("scheme"),
            "egress: only https:// (through CONNECT) and http:// URLs go through the proxy".into(),
        );
    }
    let host = match Host::parse(authority.host()) {
        Ok(host) => host,
        Err(refused) => return super::forward::refuse(&grant, &request, refused),
    };
    let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let target = Arc::new(Target::new(host, port, tls));
    if !tls {
        return forward(grant, target, request).await;
    }
    let sender = opened.lock().expect("never poisoned").take();
    if let Some(sender) = sender {
        let _ = sender.send((target, hyper::upgrade::on(&mut request)));
    }
    Response::new(http_body_util::BodyExt::boxed_unsync(
        http_body_util::BodyExt::map_err(http_body_util::Empty::new(), |never| match never {}),
    ))
}

/// The TLS inside a `CONNECT`, terminated with a certificate for its host, and the requests
/// in it.
async fn tunnel(grant: Arc<Grant>, target: Arc<Target>, upgraded: hyper::upgrade::Upgraded) {
    let config = match grant.egress.ca.server_config(&target.host) {
        Ok(config) => config,
        Err(e) => {
            tracing::warn!("egress: {e}");
            return;
        }
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let tls = match acceptor.accept(TokioIo::new(upgraded)).await {
        Ok(tls) => tls,
        Err(e) => {
            tracing::debug!("the sandbox's TLS to {} did not complete: {e}", target.host);
            return;
        }
    };
    let service = service_fn(move |request| {
        let (grant, target) = (grant.clone(), target.clone());
        async move { Ok::<_, Infallible>(forward(grant, target, request).await) }
    });
    if let Err(e) = http1::Builder::new()
        .serve_connection(TokioIo::new(tls), service)
        .await
    {
        tracing::debug!("an egress tunnel ended: {e}");
    }
}
