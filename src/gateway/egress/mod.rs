//! Guarded egress: sandbox code reaches the HTTP APIs the upstreams file lists, through this
//! server, while the sandbox itself keeps no network interface but `lo`.
//!
//! The sandbox's proxy variables point at a forwarder inside it that carries each connection
//! over a Unix socket only its execution holds (`sandbox::run::egress`); here the server
//! speaks HTTP/1.1 proxy on it ([`proxy`]): a `CONNECT` is answered, its TLS terminated with a
//! certificate of this server's own authority ([`ca`]), and each request inside is checked
//! against the tenant's `egress` entries ([`rules`]), its addresses against the private ranges
//! ([`address`]), then sent on by the server's own verified connection ([`connect`],
//! [`forward`]) with the entry's headers added. A refusal is an answer the code can read (403,
//! naming the rule and the key to change); nothing refused leaves the machine.
//!
//! The server-wide part is [`Egress`] (the authority, the roots, the bounds); one execution's
//! part is a [`Grant`]. The decisions themselves are pure and tested without a network:
//!
//! ```text
//! rules.rs     the parsed entries: which entry a host falls under, its ports, methods, paths
//!              and policy, for one tenant; the bounds of one execution's requests
//! address.rs   addresses never reached (cloud metadata, this server's listeners) and the
//!              private ranges an entry must opt into
//! host.rs      a request's host in one canonical form (numeric and mapped IPv4 forms
//!              normalised), so that no spelling of a host escapes its entry
//! key.rs       what a key covers: one host, the names under a domain, any host
//! path.rs      a request path's form, and the encodings of `..` that are refused
//! refused.rs   why a request is refused, worded for the 403 body a model reads
//! personal.rs  personal data under the flow rules: responses tokenized as `http:KEY`, the
//!              tokens of a request restored as its entry allows
//! ```
//!
//! The rest carries bytes: [`proxy`] the sandbox's connections, `forward.rs` one request
//! through its checks, `outgoing.rs` a request body (streamed, or held for the user's question
//! or its tokens), `streaming.rs` a response body through the bounds and the secrets'
//! scrubber, `tokenized.rs` a response held whole and tokenized, `reply.rs` the proxy's own
//! answers and the headers it passes on.

pub mod address;
pub mod ca;
pub mod connect;
mod forward;
pub mod grant;
mod host;
pub mod installer;
mod key;
mod outgoing;
mod path;
pub mod personal;
mod proxy;
pub mod record;
mod refused;
mod reply;
pub mod rules;
pub mod stats;
mod streaming;
mod tokenized;

use rustls::pki_types::CertificateDer;

pub use grant::Grant;
pub use proxy::serve;
pub use rules::EgressLimits;

#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    #[error(transparent)]
    Ca(#[from] ca::CaError),
    #[error(
        "the egress proxy cannot build its TLS client: {0}. Check --egress-ca-file (CEM_EGRESS_CA_FILE)"
    )]
    Tls(String),
}

/// The server's egress: its authority, the roots it trusts for the hosts it connects to, the
/// addresses it never connects to, and the bounds every grant has.
pub struct Egress {
    pub(crate) ca: ca::EgressCa,
    pub(crate) connector: std::sync::Arc<connect::Connector>,
    pub(crate) limits: EgressLimits,
}

impl std::fmt::Debug for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Egress")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Egress {
    /// A new authority, and a TLS client trusting the system's roots and `extra_roots`.
    pub fn new(
        limits: EgressLimits,
        extra_roots: Vec<CertificateDer<'static>>,
        never: address::Never,
    ) -> Result<Self, EgressError> {
        Ok(Self {
            ca: ca::EgressCa::new()?,
            connector: std::sync::Arc::new(connect::Connector::new(
                extra_roots,
                true,
                never,
                limits.timeout,
                None,
            )?),
            limits,
        })
    }

    /// The authority's certificate: the only root a sandbox's bundle holds.
    pub fn ca_pem(&self) -> &str {
        self.ca.cert_pem()
    }
}
