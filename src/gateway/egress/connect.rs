//! How the server reaches a host for a sandbox: it resolves the name itself, checks every
//! address (`address::check_address`: private ranges unless the entry allows them, and the
//! addresses it never reaches), and gives the request a client that connects to those checked
//! addresses only. So a name that resolves to a public address when checked and to a private
//! one a moment later (DNS rebinding) reaches nothing new: there is no second resolution.
//!
//! The client verifies the host's certificate against the system's roots and
//! `--egress-ca-file`'s, follows no redirect (the sandbox's code gets the 3xx and its next
//! request is checked anew), uses no proxy of the server's environment, and bounds the whole
//! request, body included, by `--egress-timeout-seconds`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::CertificateDer;

use super::EgressError;
use super::address::{Never, check_address};
use super::host::Host;
use super::rules::Refused;

/// How long the server waits for a host's name to resolve, or for a connection to it.
const CONNECT_WAIT: Duration = Duration::from_secs(10);

/// Why a request could not be sent.
#[derive(Debug)]
pub(super) enum Failure {
    /// The rules refuse it: a 403 the code reads.
    Refused(Refused),
    /// The host could not be resolved or reached: a 502.
    Unreachable(String),
}

impl From<Refused> for Failure {
    fn from(r: Refused) -> Self {
        Failure::Refused(r)
    }
}

pub struct Connector {
    tls: rustls::ClientConfig,
    never: Never,
    timeout: Duration,
    /// The operator's proxy the server goes through (the package installer's, from
    /// `HTTPS_PROXY`); tenants' requests never use one.
    proxy: Option<reqwest::Proxy>,
}

impl Connector {
    /// A connector trusting `roots` (with the system's when `system` says so); `timeout`
    /// bounds a request; `proxy`, the operator's proxy it goes through.
    pub fn new(
        extra_roots: Vec<CertificateDer<'static>>,
        system: bool,
        never: Never,
        timeout: Duration,
        proxy: Option<reqwest::Proxy>,
    ) -> Result<Self, EgressError> {
        let mut roots = if system {
            crate::system_roots()
        } else {
            rustls::RootCertStore::empty()
        };
        for cert in extra_roots {
            roots
                .add(cert)
                .map_err(|e| EgressError::Tls(e.to_string()))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| EgressError::Tls(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            tls,
            never,
            timeout,
            proxy,
        })
    }

    /// The addresses `host:port` may be reached at under the entry `key` (`private`: whether
    /// it allows private addresses): resolved here, each checked; the first refusal when none
    /// is left.
    pub(super) async fn addresses(
        &self,
        host: &Host,
        port: u16,
        private: bool,
        key: &str,
    ) -> Result<Vec<SocketAddr>, Failure> {
        let found: Vec<SocketAddr> = match host {
            Host::Ip(ip) => vec![SocketAddr::new(*ip, port)],
            Host::Name(name) => {
                let lookup = tokio::net::lookup_host((name.as_str(), port));
                match tokio::time::timeout(CONNECT_WAIT, lookup).await {
                    Ok(Ok(addrs)) => addrs.collect(),
                    Ok(Err(e)) => {
                        return Err(Failure::Unreachable(format!(
                            "egress: cannot resolve {name}: {e}"
                        )));
                    }
                    Err(_) => {
                        return Err(Failure::Unreachable(format!(
                            "egress: resolving {name} took over {} s",
                            CONNECT_WAIT.as_secs()
                        )));
                    }
                }
            }
        };
        let mut refused = None;
        let allowed: Vec<SocketAddr> = (found.into_iter())
            .filter(
                |addr| match check_address(*addr, private, &self.never, key) {
                    Ok(()) => true,
                    Err(r) => {
                        refused.get_or_insert(r);
                        false
                    }
                },
            )
            .collect();
        match (allowed.is_empty(), refused) {
            (false, _) => Ok(allowed),
            (true, Some(r)) => Err(Failure::Refused(r)),
            (true, None) => Err(Failure::Unreachable(format!(
                "egress: {host} has no address"
            ))),
        }
    }

    /// Whether requests go through the operator's proxy, which resolves names itself (a host
    /// behind one may not resolve them at all).
    pub(super) fn proxied(&self) -> bool {
        self.proxy.is_some()
    }

    /// A client that reaches `host` at `addrs` only (checked by [`Connector::addresses`]).
    pub(super) fn client(
        &self,
        host: &Host,
        addrs: &[SocketAddr],
    ) -> Result<reqwest::Client, Failure> {
        let mut builder = reqwest::Client::builder();
        builder = match &self.proxy {
            Some(proxy) => builder.proxy(proxy.clone()),
            None => builder.no_proxy(),
        };
        builder = builder
            .redirect(reqwest::redirect::Policy::none())
            .tls_backend_preconfigured(self.tls.clone())
            .connect_timeout(CONNECT_WAIT)
            .timeout(self.timeout)
            .http1_only()
            .tcp_nodelay(true);
        if let (Host::Name(name), false) = (host, addrs.is_empty()) {
            builder = builder.resolve_to_addrs(name, addrs);
        }
        builder
            .build()
            .map_err(|e| Failure::Unreachable(format!("egress: cannot make a client: {e}")))
    }
}
