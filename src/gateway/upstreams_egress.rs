//! The upstreams file's `egress` object, read into [`EgressRules`]: the HTTP hosts sandbox code
//! may reach through the server.
//!
//! ```json
//! "egress": {
//!   "api.github.com": {"methods": ["GET"], "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}},
//!   "crm.internal": {"methods": ["GET", "POST"], "private": true, "tenants": ["sales"],
//!                    "policy": {"default": "allow", "methods": {"POST": "confirm"}},
//!                    "pii": {"restore_from": ["user"], "otherwise": "refuse"}},
//!   "*": {}
//! }
//! ```
//!
//! Why beside `mcpServers`: an HTTP API is one more thing the code reaches through the server,
//! with the same `${VAR}` expansion for its secrets, the same `tenants`, the same policy words
//! (keyed by method instead of tool) and the same flow rules, in which an entry is the origin
//! `http:KEY`. A key or a value this server does not read stops the start naming it and its
//! line, as in `mcpServers`: an allowlist that silently drops a word is not one.
//!
//! Kept apart from `upstreams_file.rs`, which calls it: what it needs from there (variable
//! expansion, the tenant-name check) comes in as [`Context`].

use std::collections::BTreeMap;

use http::{HeaderName, HeaderValue, Method};
use serde::Deserialize;
use serde_json::Value;

use super::egress::rules::{EgressEntry, EgressRules, MethodPolicy, PLAN_REFUSED};
use super::flow::{FlowRule, RawFlow, RuleSource};
use super::policy::Decision;

/// Most `egress` entries one file may hold (each request looks through them).
pub const MAX_EGRESS_ENTRIES: usize = 1024;

/// One `egress` value as the file writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEgress {
    #[serde(default)]
    ports: Option<Vec<u16>>,
    #[serde(default)]
    http: bool,
    #[serde(default)]
    methods: Option<Vec<String>>,
    #[serde(default)]
    paths: Option<Vec<String>>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    private: bool,
    #[serde(default)]
    tenants: Option<Vec<String>>,
    /// Read by hand ([`policy`]): serde's untagged enums would hide which key was wrong.
    #[serde(default)]
    policy: Option<Value>,
    #[serde(default)]
    pii: Option<RawFlow>,
}

/// Whether an entry's `tenants` are tenant names, and if not, why.
pub(super) type TenantCheck = fn(Option<&[String]>) -> Result<(), String>;

/// What reading the entries needs from the rest of the file.
pub(super) struct Context<'a> {
    /// The file's text, for line numbers.
    pub text: &'a str,
    /// Every name a flow rule may use: the servers and `http:KEY` of every entry.
    pub names: &'a [&'a str],
    /// The rule beside `mcpServers`, for entries without their own.
    pub default_rule: &'a FlowRule,
    /// `${VAR}` expansion, as for `mcpServers` entries.
    pub expand: &'a dyn Fn(&str) -> Result<String, String>,
    /// The tenant-name check of `mcpServers` entries.
    pub check_tenants: TenantCheck,
}

/// An entry the file cannot have: its key, the line it starts on, why.
#[derive(Debug)]
pub(super) struct EgressProblem {
    pub key: String,
    pub line: Option<usize>,
    pub problem: String,
}

/// The `http:KEY` origin of every key, for flow rules.
pub(super) fn origins(raw: &BTreeMap<String, RawEgress>) -> Vec<String> {
    raw.keys().map(|k| format!("http:{k}")).collect()
}

/// Every entry read and checked, then the rules made of them.
pub(super) fn rules(
    raw: BTreeMap<String, RawEgress>,
    cx: &Context,
) -> Result<EgressRules, EgressProblem> {
    let problem = |key: &str, problem: String| EgressProblem {
        key: key.to_owned(),
        line: line_of_key(cx.text, key),
        problem,
    };
    let mut entries = Vec::with_capacity(raw.len());
    for (key, value) in raw {
        let entry = entry(&key, value, cx).map_err(|p| problem(&key, p))?;
        entries.push(entry);
    }
    EgressRules::new(entries).map_err(|bad| problem(&bad.key, bad.problem))
}

fn entry(key: &str, raw: RawEgress, cx: &Context) -> Result<EgressEntry, String> {
    (cx.check_tenants)(raw.tenants.as_deref())?;
    let mut entry = EgressEntry::new(key);
    entry.http = raw.http;
    entry.private = raw.private;
    entry.tenants = raw.tenants;
    if let Some(ports) = raw.ports {
        entry.ports = ports;
    }
    if let Some(methods) = raw.methods {
        entry.methods = methods
            .iter()
            .map(|m| method(m))
            .collect::<Result<_, _>>()?;
    }
    if let Some(paths) = raw.paths {
        entry.paths = paths;
    }
    entry.headers = headers(&raw.headers, cx.expand)?;
    if let Some(value) = raw.policy {
        entry.policy = policy(value)?;
    }
    entry.pii = match raw.pii {
        Some(rule) => rule.check(RuleSource::Entry, cx.names, cx.text)?,
        None => cx.default_rule.clone(),
    };
    Ok(entry)
}

/// Whether a header carries credentials by its name: `Authorization`, `Cookie`, and names
/// that speak of a key, a token, a secret, a password or auth (`X-Api-Key`, `Private-Token`).
fn names_a_credential(name: &HeaderName) -> bool {
    let name = name.as_str();
    ["authorization", "proxy-authorization", "cookie"].contains(&name)
        || [
            "key",
            "token",
            "secret",
            "pass",
            "auth",
            "session",
            "signature",
        ]
        .iter()
        .any(|word| name.contains(word))
}

/// A method as HTTP sends it: capitals, a token; not one the server cannot check.
fn method(name: &str) -> Result<Method, String> {
    let method = Method::from_bytes(name.as_bytes())
        .map_err(|_| format!("{name:?} is not an HTTP method"))?;
    if name != name.to_ascii_uppercase() {
        return Err(format!(
            "write the method {name:?} as HTTP sends it: {:?} (methods are case-sensitive)",
            name.to_ascii_uppercase()
        ));
    }
    match method {
        Method::CONNECT => Err("CONNECT is refused: it opens a tunnel whose requests the server cannot check".into()),
        Method::TRACE => Err("TRACE is refused: the host would echo the request back to the sandbox, with the headers the server adds".into()),
        m => Ok(m),
    }
}

/// The headers, names checked and values expanded. A message never holds a value: after
/// expansion it is a secret.
fn headers(
    raw: &BTreeMap<String, String>,
    expand: &dyn Fn(&str) -> Result<String, String>,
) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
    let mut out: Vec<(HeaderName, HeaderValue)> = Vec::with_capacity(raw.len());
    for (name, written) in raw {
        let parsed = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("{name:?} is not a header name"))?;
        if out.iter().any(|(n, _)| *n == parsed) {
            return Err(format!(
                "the header {name:?} is given twice (header names ignore case): keep one"
            ));
        }
        let expanded = expand(written).map_err(|p| format!("header {name:?}: {p}"))?;
        let mut value = HeaderValue::from_str(&expanded).map_err(|_| {
            format!("the value of header {name:?} (after ${{VAR}} expansion) holds a line break or another character a header cannot carry")
        })?;
        // A secret: what a variable expanded to, or a header that carries credentials by its
        // name. Others (`Accept`, an API version) are not looked for in what the host answers.
        value.set_sensitive(written.contains("${") || names_a_credential(&parsed));
        out.push((parsed, value));
    }
    Ok(out)
}

/// `"allow"`, or `{"default": "allow", "methods": {"POST": "confirm"}}`.
fn policy(value: Value) -> Result<MethodPolicy, String> {
    const SHAPE: &str = "\"policy\" is \"allow\", \"confirm\", \"deny\", or {\"default\": \"allow\", \"methods\": {\"POST\": \"confirm\"}}";
    let map = match value {
        Value::String(word) => {
            return Ok(MethodPolicy {
                default: decision(&word)?,
                methods: Vec::new(),
            });
        }
        Value::Object(map) => map,
        _ => return Err(SHAPE.into()),
    };
    let mut policy = MethodPolicy::default();
    for (key, value) in map {
        match (key.as_str(), value) {
            ("default", Value::String(word)) => policy.default = decision(&word)?,
            ("methods", Value::Object(methods)) => {
                for (name, value) in methods {
                    let Value::String(word) = value else {
                        return Err(SHAPE.into());
                    };
                    policy.methods.push((method(&name)?, decision(&word)?));
                }
            }
            ("tools", _) => {
                return Err(
                    "an egress \"policy\" is keyed by method: write \"methods\", not \"tools\""
                        .into(),
                );
            }
            ("default" | "methods", _) => return Err(SHAPE.into()),
            (other, _) => {
                return Err(format!(
                    "\"policy\" has the unknown key {other:?}; it takes \"default\" and \"methods\""
                ));
            }
        }
    }
    Ok(policy)
}

fn decision(word: &str) -> Result<Decision, String> {
    match word {
        "allow" => Ok(Decision::Allow),
        "confirm" => Ok(Decision::Confirm),
        "deny" => Ok(Decision::Deny),
        "plan" => Err(PLAN_REFUSED.into()),
        other => Err(format!(
            "{other:?} is not a policy decision: use \"allow\", \"confirm\" or \"deny\""
        )),
    }
}

/// The line (from 1) of `"key":` inside the `egress` object, as near as plain text tells.
fn line_of_key(text: &str, key: &str) -> Option<usize> {
    let quoted = serde_json::to_string(key).ok()?;
    let is_key = |line: &str, name: &str| {
        line.match_indices(name)
            .any(|(at, _)| line[at + name.len()..].trim_start().starts_with(':'))
    };
    let mut inside = false;
    for (i, line) in text.lines().enumerate() {
        if !inside && is_key(line, "\"egress\"") {
            inside = true;
            let after = &line[line.find("\"egress\"").unwrap_or(0)..];
            if is_key(after, &quoted) {
                return Some(i + 1);
            }
            continue;
        }
        if inside && is_key(line, &quoted) {
            return Some(i + 1);
        }
    }
    None
}

#[cfg(test)]
#[path = "upstreams_egress_tests.rs"]
mod tests;
