//! The audit trail's records: one per `execute_code` call ([`AuditRecord`]) and one per file
//! that came in or went out through a link ([`TransferRecord`], told apart by its `kind`).
//! Field names are stable (docs/operations.md lists them); new fields may be added, none
//! renamed.

use serde::{Deserialize, Serialize};

/// One `execute_code` call as the audit trail keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// When the call ended: RFC 3339, UTC, milliseconds.
    pub time: String,
    /// The tenant (none on a server without tenants).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The node that ran it (`--node-name`, else the engine's host name).
    pub node: String,
    /// The execution's id, as its log lines name it.
    pub execution_id: String,
    /// The MCP client's name, as it introduced itself (tokenized).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// The user whose OAuth access token the call came with: its subject (`sub`), tokenized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth_subject: Option<String>,
    /// The OAuth client the token was issued to (`client_id`, else `azp`, `cid` or `appid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth_client_id: Option<String>,
    /// The `session` handle the call ran in, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// SHA-256 (hex) of the code as the client sent it.
    pub code_sha256: String,
    /// The code, tokenized (only with `--audit-code`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// ok, error, timeout, memory_limit, output_limit, cancelled; `refused` when the call
    /// never ran (its checks failed, or the server was busy or shutting down) and
    /// `engine_failure` when the engine failed it.
    pub status: String,
    /// The Python exception's type, for status `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    /// The call's time in the server, milliseconds.
    pub duration_ms: f64,
    /// The upstream tool calls the code made (the first 1,000).
    #[serde(default)]
    pub calls: Vec<AuditCall>,
    /// Workspace files the code created or changed (tokenized names, at most the listing's
    /// bound); `files_truncated` when there were more.
    #[serde(default)]
    pub files_changed: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub files_truncated: bool,
    /// The packages the call asked for (or its session kept), and what became of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packages: Option<AuditPackages>,
    /// The plan the code made (calls to `plan` tools), the user's answer and each call's
    /// outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<AuditPlan>,
    /// The HTTP requests the code made through the server (guarded egress; the first 200):
    /// never a header value, a body or a query.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub http: Vec<AuditHttp>,
    /// How many more it made than `http` lists.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub http_more: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One request through the egress proxy, as the audit trail keeps it and as the execution's
/// response lists it (`http_requests`): never a header value, a body or a query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditHttp {
    pub method: String,
    /// The `egress` key that decided; absent when none matched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    pub host: String,
    /// The path without its query.
    pub path: String,
    /// The host's status, or the proxy's own (403 refused, 502 unreachable, 504 too slow).
    pub status: u16,
    pub bytes_out: u64,
    pub bytes_in: u64,
    pub duration_ms: f64,
    /// sent, refused or failed.
    pub decision: String,
    /// The rule that refused it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The names of the headers the server added (never their values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers_added: Vec<String>,
    /// Why a request that was sent failed (the host unreachable, too slow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The personal-data tokens in what the code sent (path, query, headers, body), by type
    /// and origin: restored, withheld by the entry's flow rule, or never issued.
    #[serde(default, skip_serializing_if = "AuditTokens::is_empty")]
    pub tokens: AuditTokens,
    /// The response entered the sandbox with its personal data as tokens of origin
    /// `http:KEY` (some flow rule withholds this entry's values).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tokenized: bool,
}

/// An execution's plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditPlan {
    /// `plan_` and 16 hex digits, as the execution's response names it.
    pub id: String,
    /// applied, stopped, applied_with_errors, declined, cancelled, expired, not_asked, refused.
    pub status: String,
    /// accept, decline or cancel; absent when no answer came (or the user was not asked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    pub stop_on_error: bool,
    /// Every planned call, in order.
    pub calls: Vec<AuditPlanCall>,
}

/// One planned call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditPlanCall {
    pub server: String,
    pub tool: String,
    /// SHA-256 (hex) of the arguments as the code passed them (as for [`AuditCall`]).
    pub arguments_sha256: String,
    /// ok, error, timeout, not_sent.
    pub outcome: String,
    pub duration_ms: f64,
}

/// An execution's packages: what was asked, what was resolved (every wheel with its sha256),
/// and how it went: `installed` (now), `cached` (an installed set reused), else why not
/// (`refused`, `failed`, `unreachable`, `timed_out`; the code did not run then).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditPackages {
    pub requested: Vec<String>,
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<String>,
    #[serde(default)]
    pub resolved: Vec<AuditWheel>,
    pub duration_ms: f64,
}

/// One resolved wheel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditWheel {
    pub name: String,
    pub version: String,
    pub sha256: String,
}

/// One upstream tool call of an execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditCall {
    pub server: String,
    pub tool: String,
    /// ok, error, denied, declined, timeout, refused.
    pub outcome: String,
    /// allow, deny, confirm_accepted, confirm_declined, confirm_failed; absent when the call
    /// was refused before the policy was consulted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// SHA-256 (hex) of the arguments as the code passed them (JSON with sorted keys; personal
    /// data as tokens). Equal arguments give equal digests; the values are not kept.
    pub arguments_sha256: String,
    pub duration_ms: f64,
    /// The personal-data tokens in the arguments and what the upstream's flow rule did with
    /// them; absent when there were none.
    #[serde(default, skip_serializing_if = "AuditTokens::is_empty")]
    pub tokens: AuditTokens,
}

/// The tokens of one call's arguments, counted by type and origin: never a value, nor a token.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditTokens {
    /// Replaced by their values before the call was sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restored: Vec<TokenCount>,
    /// Of an origin the rule does not allow: sent as token text, or the call refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<TokenCount>,
    /// Shaped like tokens but never issued by this server's vault (forged, another server's,
    /// forgotten): never restored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<TokenCount>,
}

impl AuditTokens {
    pub fn is_empty(&self) -> bool {
        self.restored.is_empty() && self.withheld.is_empty() && self.unknown.is_empty()
    }
}

/// How many tokens of one type and origin.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct TokenCount {
    /// EMAIL, PHONE, SSN, CREDIT_CARD, IP_ADDRESS, API_KEY, IBAN.
    #[serde(rename = "type")]
    pub kind: String,
    /// Where the value entered: `user`, `workspace`, `sandbox`, `SERVER/TOOL`, several joined
    /// by `, `, or `unknown origin`; absent for unknown tokens.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub origin: String,
    pub count: u64,
}

/// The current time as the trail writes it.
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// SHA-256 (hex) of `code`.
pub fn code_digest(code: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(code.as_bytes()))
}

/// A record of an `ok` execution of `print(1)` at `time`, for the audit tests.
#[cfg(test)]
pub(crate) fn sample(tenant: Option<&str>, time: &str, execution_id: &str) -> AuditRecord {
    AuditRecord {
        time: time.into(),
        tenant: tenant.map(str::to_string),
        node: "n1".into(),
        execution_id: execution_id.into(),
        client: None,
        oauth_subject: None,
        oauth_client_id: None,
        session: None,
        code_sha256: code_digest("print(1)"),
        code: None,
        status: "ok".into(),
        error_type: None,
        duration_ms: 12.5,
        calls: vec![],
        files_changed: vec![],
        files_truncated: false,
        packages: None,
        plan: None,
        http: Vec::new(),
        http_more: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_leaves_out_what_it_does_not_have() {
        let record = sample(None, &now(), "exe_0123456789abcdef");
        let line = serde_json::to_string(&record).unwrap();
        for absent in ["tenant", "client", "session", "\"code\"", "files_truncated"] {
            assert!(!line.contains(absent), "{absent} in {line}");
        }
        assert_eq!(serde_json::from_str::<AuditRecord>(&line).unwrap(), record);
        assert_eq!(
            record.code_sha256,
            "d287bb7f9d15abdc5b6e98536263815744b6ef21c8f3c839fc434ca70d8efe99"
        );
        assert!(record.time.ends_with('Z'));
    }
}

/// One line of the trail: a transfer (it has a `kind`), else an execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AuditEntry {
    Transfer(TransferRecord),
    Execution(Box<AuditRecord>),
}

impl AuditEntry {
    /// When it was recorded (RFC 3339 UTC, milliseconds).
    pub fn time(&self) -> &str {
        match self {
            AuditEntry::Transfer(t) => &t.time,
            AuditEntry::Execution(e) => &e.time,
        }
    }

    /// The execution's record, when it is one.
    pub fn execution(&self) -> Option<&AuditRecord> {
        match self {
            AuditEntry::Execution(e) => Some(e),
            AuditEntry::Transfer(_) => None,
        }
    }
}

/// Which way a file went through a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransferKind {
    Upload,
    Download,
}

/// A file that came in through an upload link or went out through a download link (or a
/// use of a link that was refused after its signature checked).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransferRecord {
    pub kind: TransferKind,
    /// When it ended: RFC 3339, UTC, milliseconds.
    pub time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub node: String,
    /// The link's id (as the tool that made it returned it).
    pub link_id: String,
    /// The file's workspace path (tokenized), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Bytes received or sent.
    pub size: u64,
    /// SHA-256 of the content, hex (an upload's, or a download of the whole file's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The client's address, keyed-hashed (the same address gives the same value on every
    /// node; the address cannot be read back).
    pub client: String,
    /// `ok`, else why it was refused or failed.
    pub status: String,
}
