//! The upstreams file: the `mcpServers` object users already have in Claude Desktop and Claude
//! Code configs, read as is, plus two keys of this server's (`policy`, `tenants`), and beside it
//! the `egress` object of HTTP hosts sandbox code may reach (`upstreams_egress.rs`).
//!
//! ```json
//! {"mcpServers": {
//!   "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "${TZ:-UTC}"}},
//!   "crm":  {"type": "http", "url": "https://crm.example/mcp",
//!            "headers": {"Authorization": "Bearer ${CRM_TOKEN}"},
//!            "policy": {"default": "allow", "tools": {"delete_*": "deny", "update_*": "confirm"}},
//!            "tenants": ["sales"]}
//! }}
//! ```
//!
//! `${VAR}` and `${VAR:-default}` are expanded from the server's environment in `command`,
//! `args`, `env`, `cwd`, `url` and `headers`, when the file is read; a variable that is unset
//! and has no default is an error naming it, never an empty string sent to an upstream.
//! Everything here stays on the host: no part of it is ever written where a sandbox can read it.
//! Server names become module names and `server/tool` addresses, so they are checked by
//! allowlist. An entry with `"disabled": true` is skipped, as Claude Code does.
//!
//! `pii` (in an entry, or beside `mcpServers` as the default of every entry, `egress` entries
//! too) is a flow rule (`flow.rs`); a name in it that is neither a server of the file, nor
//! `http:KEY` for a key of `egress`, nor an origin stops the start, naming its line. A file with
//! only `egress` is valid.
//!
//! Unknown keys stop the start with an error naming the key, the accepted ones and the line: a
//! key this server does not read would otherwise be dropped without a word. Other MCP clients' settings ([`CLIENT_KEYS`]: a server entry's
//! `description`, `timeout`, `alwaysAllow`, `autoApprove`, `envFile`; Claude Desktop's
//! `globalShortcut` beside `mcpServers`) are accepted, so their configs are read as they are,
//! and each one is named in a warning at start: this server ignores them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::egress::rules::EgressRules;
use super::flow::{FlowRule, RawFlow, RuleSource};
use super::policy::{Decision, Policy};
use super::upstreams_egress::{self, MAX_EGRESS_ENTRIES, RawEgress};
use crate::tenancy::{MAX_TENANT_CHARS, valid_tenant_name};

/// An upstreams file larger than this is not an upstreams file.
const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Longest server name: it is a directory and module name in every sandbox.
pub const MAX_SERVER_NAME_CHARS: usize = 64;
/// Most upstreams one server connects to.
pub const MAX_UPSTREAMS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum UpstreamsError {
    #[error(
        "cannot read the upstreams file {path}: {source}. Point --upstreams (CEM_UPSTREAMS) at a readable JSON file"
    )]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the upstreams file {0} is over 1 MiB")]
    TooLarge(PathBuf),
    #[error(
        "the upstreams file {path} is not valid JSON: {source}. Expected {{\"mcpServers\": {{\"NAME\": {{\"command\": …}} or {{\"url\": …}}}}}}"
    )]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(
        "the upstreams file {path}: {source}. Write only the keys of docs/gateway.md and docs/egress.md (other MCP clients' settings there are ignored with a warning)"
    )]
    Shape {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("upstream `{server}`: {problem}")]
    Server { server: String, problem: String },
    #[error("egress entry {key:?}{}: {problem}", line.map_or(String::new(), |l| format!(" (line {l})")))]
    Egress {
        key: String,
        line: Option<usize>,
        problem: String,
    },
    /// A problem of one entry, with the file it is in.
    #[error("the upstreams file {path}: {problem}")]
    InFile {
        path: PathBuf,
        problem: Box<UpstreamsError>,
    },
    #[error(
        "the upstreams file {path} sets pii rules (for {servers}), which only hold with tokens: with --pii-output off (CEM_PII_OUTPUT) values reach the model and the sandbox as they are, and every upstream receives them. Remove the rules, or run with --pii-output tokenize (the default)"
    )]
    RulesNeedTokens { path: PathBuf, servers: String },
    #[error("the upstreams file's default rule (\"pii\" beside \"mcpServers\"): {0}")]
    DefaultRule(String),
    #[error("the upstreams file has {0} servers; at most {MAX_UPSTREAMS} are supported")]
    TooMany(usize),
    #[error(
        "the upstreams file has {0} egress entries; at most {MAX_EGRESS_ENTRIES} are supported: cover hosts under one domain with a \"*.domain\" key"
    )]
    TooManyEgress(usize),
}

/// Everything the upstreams file configures.
#[derive(Debug, Clone, Default)]
pub struct UpstreamsFile {
    /// `mcpServers`, disabled entries left out.
    pub servers: Vec<UpstreamConfig>,
    /// `egress`: the HTTP hosts sandbox code may reach through the server.
    pub egress: EgressRules,
}

/// How the server reaches one upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamTransport {
    /// A child process speaking MCP on its stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    /// MCP streamable HTTP.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

/// One upstream server, its name checked and its variables expanded.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamConfig {
    pub name: String,
    pub transport: UpstreamTransport,
    pub policy: Policy,
    /// The tenants that may use it (HTTP with tokens); `None`: every tenant. The names are
    /// checked against the tenant-name rule when the server starts (`app`).
    pub tenants: Option<Vec<String>>,
    /// Which origins' personal data it receives restored (`flow.rs`).
    pub pii: FlowRule,
}

impl UpstreamConfig {
    /// Where the upstream is, for logs and error messages: the command, or the URL without
    /// user info, query and fragment (which may carry credentials). Never the environment or
    /// headers.
    pub fn describe(&self) -> String {
        match &self.transport {
            UpstreamTransport::Stdio { command, .. } => format!("command `{command}`"),
            UpstreamTransport::Http { url, .. } => shown_url(url),
        }
    }
}

/// A URL without its user info, query and fragment.
pub fn shown_url(url: &str) -> String {
    let base = url.split(['?', '#']).next().unwrap_or(url);
    match base.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            format!("{scheme}://{host}{path}")
        }
        None => base.to_string(),
    }
}

/// Keys of other MCP clients' configs this server accepts and ignores, with a warning: in a
/// server entry (Claude Code, Claude Desktop, Cursor, VS Code, Cline), then beside `mcpServers`
/// (Claude Desktop).
pub const CLIENT_KEYS: [&str; 6] = [
    "description",
    "timeout",
    "alwaysAllow",
    "autoApprove",
    "envFile",
    "globalShortcut",
];

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an object with \"mcpServers\" or \"egress\""
)]
struct File {
    #[serde(rename = "mcpServers")]
    mcp_servers: Option<BTreeMap<String, RawServer>>,
    #[serde(default)]
    egress: Option<BTreeMap<String, RawEgress>>,
    #[serde(rename = "globalShortcut", default)]
    global_shortcut: Option<IgnoredAny>,
    /// The flow rule of every entry without its own.
    #[serde(default)]
    pii: Option<RawFlow>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    #[serde(default)]
    default: Option<Decision>,
    #[serde(default)]
    tools: BTreeMap<String, Decision>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum PolicyField {
    One(Decision),
    Detailed(RawPolicy),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    disabled: bool,
    #[serde(default)]
    policy: Option<PolicyField>,
    #[serde(default)]
    tenants: Option<Vec<String>>,
    #[serde(default)]
    pii: Option<RawFlow>,
    // Other clients' settings (`CLIENT_KEYS`), read to be named in a warning.
    #[serde(default)]
    description: Option<IgnoredAny>,
    #[serde(default)]
    timeout: Option<IgnoredAny>,
    #[serde(default, rename = "alwaysAllow")]
    always_allow: Option<IgnoredAny>,
    #[serde(default, rename = "autoApprove")]
    auto_approve: Option<IgnoredAny>,
    #[serde(default, rename = "envFile")]
    env_file: Option<IgnoredAny>,
}

impl RawServer {
    /// The other clients' keys the entry sets.
    fn client_keys(&self) -> Vec<&'static str> {
        let set = [
            self.description.is_some(),
            self.timeout.is_some(),
            self.always_allow.is_some(),
            self.auto_approve.is_some(),
            self.env_file.is_some(),
        ];
        CLIENT_KEYS
            .iter()
            .zip(set)
            .filter(|(_, s)| *s)
            .map(|(k, _)| *k)
            .collect()
    }
}

/// Warns that `keys`, other clients' settings, are ignored.
fn warn_ignored(place: &str, keys: &[&str]) {
    if !keys.is_empty() {
        tracing::warn!(
            "the upstreams file sets {} {place}: settings of other MCP clients, which this server ignores",
            keys.join(", ")
        );
    }
}

/// Reads and checks an upstreams file; variables come from this process's environment.
pub fn read_file(path: &Path) -> Result<UpstreamsFile, UpstreamsError> {
    let read_error = |source| UpstreamsError::Read {
        path: path.to_owned(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(read_error)?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(UpstreamsError::TooLarge(path.to_owned()));
    }
    let text = std::fs::read_to_string(path).map_err(read_error)?;
    parse_file(&text, &|name| std::env::var(name).ok()).map_err(|e| match e {
        UpstreamsError::Json { source, .. } => UpstreamsError::Json {
            path: path.to_owned(),
            source,
        },
        UpstreamsError::Shape { source, .. } => UpstreamsError::Shape {
            path: path.to_owned(),
            source,
        },
        entry @ (UpstreamsError::Server { .. } | UpstreamsError::Egress { .. }) => {
            UpstreamsError::InFile {
                path: path.to_owned(),
                problem: Box::new(entry),
            }
        }
        other => other,
    })
}

/// [`read_file`], and the file's rules checked against `--pii-output`: rules only hold where
/// values reach the code as tokens (`tokenizes`), so a file with any refuses to start without
/// them.
pub fn read_file_for(path: &Path, tokenizes: bool) -> Result<UpstreamsFile, UpstreamsError> {
    let file = read_file(path)?;
    let servers = (file.servers.iter())
        .filter(|u| u.pii.source != RuleSource::BuiltIn)
        .map(|u| format!("`{}`", u.name));
    let entries = (file.egress.entries().iter())
        .filter(|e| e.pii.source != RuleSource::BuiltIn)
        .map(|e| format!("`{}`", e.origin()));
    let ruled: Vec<String> = servers.chain(entries).collect();
    if !ruled.is_empty() && !tokenizes {
        return Err(UpstreamsError::RulesNeedTokens {
            path: path.to_owned(),
            servers: ruled.join(", "),
        });
    }
    Ok(file)
}

/// The servers of [`read_file`].
pub fn read(path: &Path) -> Result<Vec<UpstreamConfig>, UpstreamsError> {
    read_file(path).map(|f| f.servers)
}

/// The servers of [`read_file_for`].
pub fn read_for(path: &Path, tokenizes: bool) -> Result<Vec<UpstreamConfig>, UpstreamsError> {
    read_file_for(path, tokenizes).map(|f| f.servers)
}

/// The servers of [`parse_file`].
pub fn parse(
    text: &str,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<UpstreamConfig>, UpstreamsError> {
    parse_file(text, var).map(|f| f.servers)
}

/// Parses the text of an upstreams file, looking variables up with `var`.
pub fn parse_file(
    text: &str,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<UpstreamsFile, UpstreamsError> {
    let file: File = serde_json::from_str(text).map_err(|source| {
        let path = PathBuf::new();
        match source.classify() {
            serde_json::error::Category::Data => UpstreamsError::Shape { path, source },
            _ => UpstreamsError::Json { path, source },
        }
    })?;
    if file.global_shortcut.is_some() {
        warn_ignored("beside mcpServers", &["globalShortcut"]);
    }
    let servers = file.mcp_servers.unwrap_or_default();
    if servers.len() > MAX_UPSTREAMS {
        return Err(UpstreamsError::TooMany(servers.len()));
    }
    let egress = file.egress.unwrap_or_default();
    if egress.len() > MAX_EGRESS_ENTRIES {
        return Err(UpstreamsError::TooManyEgress(egress.len()));
    }
    // What a flow rule may name: the servers, and each egress entry as `http:KEY`.
    let owned: Vec<String> = (servers.keys().cloned())
        .chain(upstreams_egress::origins(&egress))
        .collect();
    let names: Vec<&str> = owned.iter().map(String::as_str).collect();
    let default_rule = match file.pii {
        Some(raw) => raw
            .check(RuleSource::FileDefault, &names, text)
            .map_err(UpstreamsError::DefaultRule)?,
        None => FlowRule::default(),
    };
    let expand = |s: &str| {
        expand_vars(s, var).map_err(|e| match e {
            UpstreamsError::Server { problem, .. } => problem,
            other => other.to_string(),
        })
    };
    let cx = upstreams_egress::Context {
        text,
        names: &names,
        default_rule: &default_rule,
        expand: &expand,
        check_tenants: check_tenant_names,
    };
    Ok(UpstreamsFile {
        servers: servers_of(servers, &cx, var)?,
        egress: upstreams_egress::rules(egress, &cx).map_err(|p| UpstreamsError::Egress {
            key: p.key,
            line: p.line,
            problem: p.problem,
        })?,
    })
}

/// The `mcpServers` entries, checked, disabled ones left out.
fn servers_of(
    servers: BTreeMap<String, RawServer>,
    cx: &upstreams_egress::Context,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<UpstreamConfig>, UpstreamsError> {
    let mut out = Vec::new();
    for (name, raw) in servers {
        let problem = |problem: String| UpstreamsError::Server {
            server: name.clone(),
            problem,
        };
        check_server_name(&name).map_err(problem)?;
        warn_ignored(&format!("in upstream `{name}`"), &raw.client_keys());
        if raw.disabled {
            tracing::info!(upstream = %name, "upstream disabled in the upstreams file");
            continue;
        }
        check_tenant_names(raw.tenants.as_deref()).map_err(problem)?;
        let expand = |s: &str| expand_vars(s, var);
        let transport = transport(&raw, &expand).map_err(problem)?;
        let policy = match raw.policy {
            None => Policy::default(),
            Some(PolicyField::One(d)) => Policy::new(Some(d), BTreeMap::new()),
            Some(PolicyField::Detailed(p)) => Policy::new(p.default, p.tools),
        };
        let pii = match raw.pii {
            Some(rule) => rule
                .check(RuleSource::Entry, cx.names, cx.text)
                .map_err(problem)?,
            None => cx.default_rule.clone(),
        };
        out.push(UpstreamConfig {
            name,
            transport,
            policy,
            tenants: raw.tenants,
            pii,
        });
    }
    Ok(out)
}

/// Every tenant an upstream names must be a valid tenant name: it is matched against the
/// tokens file's tenants, which are checked by the same rule.
fn check_tenant_names(tenants: Option<&[String]>) -> Result<(), String> {
    match tenants
        .into_iter()
        .flatten()
        .find(|t| !valid_tenant_name(t))
    {
        Some(t) => Err(format!(
            "names {t:?} as a tenant, which is not a tenant name (1 to {MAX_TENANT_CHARS} lowercase letters, digits, '_' or '-')"
        )),
        None => Ok(()),
    }
}

fn transport(
    raw: &RawServer,
    expand: &dyn Fn(&str) -> Result<String, UpstreamsError>,
) -> Result<UpstreamTransport, String> {
    let unwrap = |r: Result<String, UpstreamsError>| {
        r.map_err(|e| match e {
            UpstreamsError::Server { problem, .. } => problem,
            other => other.to_string(),
        })
    };
    let kind = raw.kind.as_deref().map(str::to_ascii_lowercase);
    match (kind.as_deref(), &raw.command, &raw.url) {
        (Some("sse"), ..) => Err(
            "the SSE transport is not supported: use the server's streamable HTTP endpoint (\"type\": \"http\")".into(),
        ),
        (Some("stdio") | None, Some(command), None) => {
            if command.trim().is_empty() {
                return Err("\"command\" is empty".into());
            }
            Ok(UpstreamTransport::Stdio {
                command: unwrap(expand(command))?,
                args: raw
                    .args
                    .iter()
                    .map(|a| unwrap(expand(a)))
                    .collect::<Result<_, _>>()?,
                env: raw
                    .env
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), unwrap(expand(v))?)))
                    .collect::<Result<_, String>>()?,
                cwd: raw
                    .cwd
                    .as_deref()
                    .map(|c| unwrap(expand(c)).map(PathBuf::from))
                    .transpose()?,
            })
        }
        (Some("http" | "streamable-http" | "streamablehttp") | None, None, Some(url)) => {
            let url = unwrap(expand(url))?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!(
                    "\"url\" must start with http:// or https://, not {:?}",
                    crate::text::prefix_chars(&url, 40)
                ));
            }
            Ok(UpstreamTransport::Http {
                url,
                headers: raw
                    .headers
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), unwrap(expand(v))?)))
                    .collect::<Result<_, String>>()?,
            })
        }
        (_, Some(_), Some(_)) => Err("has both \"command\" and \"url\"; give one".into()),
        (_, None, None) => Err("has neither \"command\" (stdio) nor \"url\" (HTTP)".into()),
        (Some(other), ..) => Err(format!(
            "\"type\": {other:?} does not match its fields; use \"stdio\" with \"command\" or \"http\" with \"url\""
        )),
    }
}

/// Server names: letters, digits, `_` and `-`, starting with a letter or digit.
pub fn check_server_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.chars().count() <= MAX_SERVER_NAME_CHARS
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "the server name must be 1-{MAX_SERVER_NAME_CHARS} letters, digits, '_' or '-', starting with a letter or digit"
        ))
    }
}

/// Expands `${VAR}` and `${VAR:-default}`; `$` not followed by `{` stays as it is.
pub fn expand_vars(
    s: &str,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<String, UpstreamsError> {
    let fail = |problem: String| UpstreamsError::Server {
        server: String::new(),
        problem,
    };
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let end = after.find('}').ok_or_else(|| {
            fail(format!(
                "unclosed ${{ in {:?}",
                crate::text::prefix_chars(s, 60)
            ))
        })?;
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(fail(format!("${{{inner}}} is not a variable name")));
        }
        match (var(name), default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => {
                return Err(fail(format!(
                    "the environment variable {name} is not set (used as ${{{name}}}); set it for the server, or write ${{{name}:-default}}"
                )));
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
#[path = "upstreams_file_tests.rs"]
mod tests;
