//! The `egress` entries of the upstreams file, parsed: which entry a host falls under and what
//! that entry lets through (port, scheme, method, path, policy), for one tenant.
//!
//! Why here and pure: every request the sandbox makes is checked against these rules at each
//! hop (a redirect is a new request, checked anew), so the decision must be cheap, the same
//! everywhere and testable without a network. The proxy asks [`EgressRules::entry_for`], then
//! [`EgressEntry::check_port`] and [`EgressEntry::decide`], then, once it has resolved the
//! name itself, `address::check_address` for each address it is about to connect to.
//!
//! The most specific key wins: an exact name or IP, else the longest `*.domain` that covers the
//! host, else `*`. An entry's invariants are checked when the rules are made
//! ([`EgressRules::new`]), not only when the file is read, because they guard secrets: headers
//! only on an entry that names one host, and never over plain HTTP; `*` never reaches private
//! addresses.

use std::fmt;
use std::time::Duration;

use http::{HeaderName, HeaderValue, Method};

use super::key::Pattern;
use super::path::{check_path, valid_pattern};
use crate::gateway::flow::FlowRule;
use crate::gateway::policy::{Decision, glob_match};

pub use super::host::Host;
pub use super::refused::Refused;

/// Headers the server sets itself on a forwarded request (framing, the connection, the
/// encoding it asks for so that a secret echoed back can be found): an entry may not set them.
pub const SERVER_HEADERS: [&str; 12] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "proxy-authorization",
    "proxy-connection",
    "proxy-authenticate",
    "accept-encoding",
];

/// How one execution's requests through the proxy are bounded (from `config::EgressConfig`,
/// so the gateway reads no `Config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EgressLimits {
    /// Requests per execution.
    pub max_requests: u32,
    /// Bytes received from hosts per execution (all responses together).
    pub max_bytes_in: u64,
    /// Bytes sent to hosts per execution (all request bodies together).
    pub max_bytes_out: u64,
    /// Connections one execution may hold open at once.
    pub max_connections: u32,
    /// Bytes of one response body.
    pub max_response_bytes: u64,
    /// Bytes of one body read whole for personal data (a response to tokenize, a request
    /// body whose tokens are restored).
    pub max_scanned_bytes: u64,
    /// A request's deadline, from its first byte to its response's last.
    pub timeout: Duration,
}

/// A key the rules cannot take, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadEntry {
    pub key: String,
    pub problem: String,
}

/// Every `egress` entry of the upstreams file (or a tenant's share of them).
#[derive(Debug, Clone, Default)]
pub struct EgressRules {
    entries: Vec<EgressEntry>,
    /// What each entry's key covers, in the same order.
    patterns: Vec<Pattern>,
}

impl EgressRules {
    /// The rules of `entries`, each checked: its key's form, its invariants (see the module
    /// docs), and no two keys naming the same host (`API.example.org` and `api.example.org`).
    pub fn new(entries: Vec<EgressEntry>) -> Result<EgressRules, BadEntry> {
        let mut patterns: Vec<Pattern> = Vec::with_capacity(entries.len());
        for entry in &entries {
            let bad = |problem: String| BadEntry {
                key: entry.key.clone(),
                problem,
            };
            let pattern = Pattern::parse(&entry.key).map_err(bad)?;
            check_entry(entry, &pattern).map_err(bad)?;
            if let Some(at) = patterns.iter().position(|p| *p == pattern) {
                return Err(bad(format!(
                    "names the same hosts as entry {:?}: keep one of them",
                    entries[at].key
                )));
            }
            patterns.push(pattern);
        }
        Ok(EgressRules { entries, patterns })
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries a tenant may use (`tenants` absent, or naming it); `None` = single-tenant
    /// server: all.
    pub fn for_tenant(&self, tenant: Option<&str>) -> EgressRules {
        let keep = |e: &EgressEntry| match (&e.tenants, tenant) {
            (None, _) | (Some(_), None) => true,
            (Some(list), Some(t)) => list.iter().any(|x| x == t),
        };
        let (entries, patterns) = (self.entries.iter().zip(&self.patterns))
            .filter(|(e, _)| keep(e))
            .map(|(e, p)| (e.clone(), p.clone()))
            .unzip();
        EgressRules { entries, patterns }
    }

    /// The entry for a host: exact name or IP > the longest matching `*.domain` > `*`.
    /// `*.example.org` matches `a.example.org` and `a.b.example.org`, not `example.org`.
    pub fn entry_for(&self, host: &Host) -> Option<&EgressEntry> {
        (self.entries.iter().zip(&self.patterns))
            .filter_map(|(e, p)| p.rank(host).map(|r| (r, e)))
            .max_by_key(|(r, _)| *r)
            .map(|(_, e)| e)
    }

    /// [`Self::entry_for`], or the refusal that says which key to add.
    pub fn entry_or_refuse(&self, host: &Host) -> Result<&EgressEntry, Refused> {
        self.entry_for(host).ok_or_else(|| Refused::no_entry(host))
    }

    pub fn entries(&self) -> &[EgressEntry] {
        &self.entries
    }
}

/// A method policy: the grammar of `mcpServers` policies, keyed by method
/// (`{"default": "allow", "methods": {"POST": "confirm"}}`). `plan` is not offered for HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodPolicy {
    /// For a method `methods` does not name: `allow` unless the file says otherwise (the
    /// entry's `methods` list already bounds what is sent).
    pub default: Decision,
    pub methods: Vec<(Method, Decision)>,
}

impl Default for MethodPolicy {
    fn default() -> Self {
        MethodPolicy {
            default: Decision::Allow,
            methods: Vec::new(),
        }
    }
}

impl MethodPolicy {
    pub fn decide(&self, method: &Method) -> Decision {
        (self.methods.iter())
            .find(|(m, _)| m == method)
            .map_or(self.default, |(_, d)| *d)
    }
}

/// One `egress` entry, its variables expanded.
#[derive(Clone)]
pub struct EgressEntry {
    /// The key as the file writes it (also in `http:KEY`, the origin of its responses' values).
    pub key: String,
    pub ports: Vec<u16>,
    /// Plain `http://` allowed on `ports` (HTTPS always is).
    pub http: bool,
    pub methods: Vec<Method>,
    /// Globs on the request's path (`*` any run of characters, `/` included; `?` one).
    pub paths: Vec<String>,
    /// Added by the server to every request (expanded: secrets; never shown by `Debug`).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Whether the host may resolve to a loopback, private, link-local or reserved address.
    pub private: bool,
    pub tenants: Option<Vec<String>>,
    pub policy: MethodPolicy,
    pub pii: FlowRule,
}

impl EgressEntry {
    /// An entry for `key` with every default: port 443, HTTPS only, GET and HEAD, every path,
    /// no headers, public addresses only, every tenant, `allow`, the built-in flow rule.
    pub fn new(key: impl Into<String>) -> Self {
        EgressEntry {
            key: key.into(),
            ports: vec![443],
            http: false,
            methods: vec![Method::GET, Method::HEAD],
            paths: vec!["*".into()],
            headers: Vec::new(),
            private: false,
            tenants: None,
            policy: MethodPolicy::default(),
            pii: FlowRule::default(),
        }
    }

    /// `http:KEY`: the origin of this entry's responses' values in flow rules, apart from any
    /// server name (which has no `:`) and from `*`.
    pub fn origin(&self) -> String {
        format!("http:{}", self.key)
    }

    /// The port is one of `ports`, and plain HTTP only where `http` is on.
    pub fn check_port(&self, port: u16, tls: bool) -> Result<(), Refused> {
        if !self.ports.contains(&port) {
            let ports: Vec<String> = self.ports.iter().map(u16::to_string).collect();
            return Err(self.refused(
                "port",
                format!(
                    "egress: port {port} is not allowed by entry {:?} (it allows {}): add it to \"ports\" in the upstreams file's egress entry",
                    self.key,
                    ports.join(", ")
                ),
            ));
        }
        if !tls && !self.http {
            return Err(self.refused(
                "scheme",
                format!(
                    "egress: plain http:// is not allowed by entry {:?} (it takes https:// only): use https://, or set \"http\": true on the entry (never together with \"headers\")",
                    self.key
                ),
            ));
        }
        Ok(())
    }

    /// Method in `methods`, path matching `paths`, then the policy: Ok(Allow | Confirm), deny →
    /// Err.
    ///
    /// `path` is the request target's path; a query (`?…`) is cut off first. The globs match
    /// the path as sent, not percent-decoded, so a pattern names encoded characters as they
    /// travel. A path whose segments would climb (`.`/`..`, also hidden as `%2e`, `%252e`,
    /// behind `%2f`/`%5c`/`\` separators or a `;param`) is refused, never normalised: servers
    /// disagree on how to read such a path, and what was matched must be what is sent.
    pub fn decide(&self, method: &Method, path: &str) -> Result<Decision, Refused> {
        if !self.methods.contains(method) {
            let allowed: Vec<&str> = self.methods.iter().map(Method::as_str).collect();
            return Err(self.refused(
                "method",
                format!(
                    "egress: {method} is not allowed by entry {:?} (it allows {}): add it to \"methods\" in the upstreams file's egress entry",
                    self.key,
                    allowed.join(", ")
                ),
            ));
        }
        let path = path.split_once('?').map_or(path, |(p, _)| p);
        if let Err(why) = check_path(path) {
            return Err(self.refused(
                "path",
                format!(
                    "egress: the path {:?} is refused: {why}",
                    crate::text::cut_chars(path, 120)
                ),
            ));
        }
        if !self.paths.iter().any(|p| glob_match(p, path)) {
            return Err(self.refused(
                "path",
                format!(
                    "egress: the path {:?} is not allowed by entry {:?} (it allows {}): add a pattern for it to \"paths\" in the upstreams file's egress entry",
                    crate::text::cut_chars(path, 120),
                    self.key,
                    quoted_list(&self.paths)
                ),
            ));
        }
        match self.policy.decide(method) {
            d @ (Decision::Allow | Decision::Confirm) => Ok(d),
            Decision::Deny | Decision::Plan => Err(self.refused(
                "policy",
                format!(
                    "egress: {method} is denied by the policy of entry {:?}: change \"policy\" in the upstreams file's egress entry if it should be sent",
                    self.key
                ),
            )),
        }
    }

    fn refused(&self, rule: &'static str, message: String) -> Refused {
        Refused::new(rule, Some(&self.key), message)
    }
}

impl fmt::Debug for EgressEntry {
    /// Every field but the headers' values, which are secrets: their names only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("EgressEntry")
            .field("key", &self.key)
            .field("ports", &self.ports)
            .field("http", &self.http)
            .field("methods", &self.methods)
            .field("paths", &self.paths)
            .field("headers", &header_names)
            .field("private", &self.private)
            .field("tenants", &self.tenants)
            .field("policy", &self.policy)
            .field("pii", &self.pii)
            .finish()
    }
}

fn quoted_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    quoted.join(", ")
}

/// The invariants of an entry that the file's grammar alone cannot hold.
fn check_entry(entry: &EgressEntry, pattern: &Pattern) -> Result<(), String> {
    if entry.ports.is_empty() || entry.ports.contains(&0) {
        return Err("\"ports\" must list ports from 1 to 65535 (default [443])".into());
    }
    if entry.methods.is_empty() {
        return Err("\"methods\" lists no method: name the ones to send, e.g. [\"GET\"]".into());
    }
    if entry.paths.is_empty() {
        return Err("\"paths\" lists no pattern: leave it out to allow every path".into());
    }
    if let Some(bad) = entry.paths.iter().find(|p| !valid_pattern(p)) {
        return Err(format!(
            "the path pattern {bad:?} must start with '/' or '*' and hold visible ASCII only (write characters percent-encoded, as they are sent)"
        ));
    }
    if let Some((m, _)) = (entry.policy.methods.iter()).find(|(m, _)| !entry.methods.contains(m)) {
        return Err(format!(
            "\"policy\" names {m}, which \"methods\" does not list: a method outside \"methods\" is never sent; add it there, or drop it from the policy"
        ));
    }
    let decisions =
        std::iter::once(entry.policy.default).chain(entry.policy.methods.iter().map(|(_, d)| *d));
    if decisions.into_iter().any(|d| d == Decision::Plan) {
        return Err(PLAN_REFUSED.into());
    }
    check_secrets(entry, pattern)
}

/// Why `plan` is refused in an egress policy.
pub const PLAN_REFUSED: &str = "\"plan\" is not offered for HTTP requests: use \"confirm\" (the user is asked before each request) or \"deny\"";

/// Headers go to one named host over TLS only; `*` never reaches private addresses.
fn check_secrets(entry: &EgressEntry, pattern: &Pattern) -> Result<(), String> {
    if !entry.headers.is_empty() {
        if !matches!(pattern, Pattern::Exact(_)) {
            return Err("\"headers\" are refused on \"*\" and \"*.domain\" keys, so that a secret goes to one host: give the host its own entry".into());
        }
        if entry.http {
            return Err("\"headers\" and \"http\": true do not go together: a header added to plain HTTP travels in clear; use https://".into());
        }
    }
    if let Some((name, _)) =
        (entry.headers.iter()).find(|(n, _)| SERVER_HEADERS.contains(&n.as_str()))
    {
        return Err(format!(
            "the header {:?} is one the server sets itself ({}): remove it",
            name.as_str(),
            SERVER_HEADERS.join(", ")
        ));
    }
    if entry.private && *pattern == Pattern::Any {
        return Err("\"private\": true is refused on \"*\", which would open every private address of this network: give the private host its own entry".into());
    }
    Ok(())
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
