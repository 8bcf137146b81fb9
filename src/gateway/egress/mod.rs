//! Guarded egress: sandbox code reaches the HTTP APIs the upstreams file's `egress` object
//! lists, through this server, while the sandbox itself keeps no network.
//!
//! ```text
//! rules.rs     the parsed entries: which entry a host falls under, its ports, methods, paths
//!              and policy, for one tenant; the bounds of one execution's requests
//! address.rs   addresses never reached (cloud metadata, this server's listeners, the
//!              engine's API) and the private ranges an entry must opt into
//! host.rs      a request's host in one canonical form (numeric and mapped IPv4 forms
//!              normalised), so that no spelling of a host escapes its entry
//! key.rs       what a key covers: one host, the names under a domain, any host
//! path.rs      a request path's form, and the encodings of `..` that are refused
//! refused.rs   why a request is refused, worded for the 403 body a model reads
//! ```
//!
//! Everything here is pure: no sockets, no TLS, no clock. What checks a request in flight
//! (the proxy) is built on [`rules::EgressRules`] and [`address::check_address`], so a
//! decision can be tested without a network and stays the same at every hop.

pub mod address;
mod host;
mod key;
mod path;
mod refused;
pub mod rules;
