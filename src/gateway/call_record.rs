//! What one upstream call was, as the execution's response lists it ([`ToolCallRecord`]) and
//! as the metrics and the audit trail keep it ([`CallAudit`]: how it ended, what the policy
//! decided, a digest of its arguments).

use serde::Serialize;

use crate::audit::AuditTokens;

/// One call as the execution's response lists it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ToolCallRecord {
    pub server: String,
    pub tool: String,
    pub duration_ms: f64,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    /// What the metrics and the audit trail keep of the call (not shown to the model).
    #[serde(skip)]
    pub audit: CallAudit,
}

/// How one call ended, for the metrics and the audit trail.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CallOutcome {
    /// The upstream answered with a result.
    Ok,
    /// The upstream failed, reported an error, or answered too much.
    Error,
    /// The policy denies the tool.
    Denied,
    /// The user declined the call.
    Declined,
    /// The upstream did not answer in time.
    Timeout,
    /// Refused before any policy: no such upstream or tool, bad arguments, a call limit, or
    /// asking the user failed.
    #[default]
    Refused,
    /// Not sent: its arguments held personal data the upstream's flow rule does not allow, and
    /// the rule says `refuse`.
    Withheld,
}

impl CallOutcome {
    pub const ALL: [CallOutcome; 7] = [
        CallOutcome::Ok,
        CallOutcome::Error,
        CallOutcome::Denied,
        CallOutcome::Declined,
        CallOutcome::Timeout,
        CallOutcome::Refused,
        CallOutcome::Withheld,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::Error => "error",
            CallOutcome::Denied => "denied",
            CallOutcome::Declined => "declined",
            CallOutcome::Timeout => "timeout",
            CallOutcome::Refused => "refused",
            CallOutcome::Withheld => "withheld",
        }
    }
}

/// What the policy decided on one call, the user's answer included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PolicyDecision {
    Allow,
    Deny,
    ConfirmAccepted,
    ConfirmDeclined,
    /// The call needed confirmation and asking failed (no way to ask, dismissed, timed out).
    ConfirmFailed,
    /// A call of a plan the user approved (policy `plan`), sent after the code finished.
    PlanApproved,
}

impl PolicyDecision {
    pub const ALL: [PolicyDecision; 6] = [
        PolicyDecision::Allow,
        PolicyDecision::Deny,
        PolicyDecision::ConfirmAccepted,
        PolicyDecision::ConfirmDeclined,
        PolicyDecision::ConfirmFailed,
        PolicyDecision::PlanApproved,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PolicyDecision::Allow => "allow",
            PolicyDecision::Deny => "deny",
            PolicyDecision::ConfirmAccepted => "confirm_accepted",
            PolicyDecision::ConfirmDeclined => "confirm_declined",
            PolicyDecision::ConfirmFailed => "confirm_failed",
            PolicyDecision::PlanApproved => "plan_approved",
        }
    }
}

/// What the audit trail and the metrics keep of one call: never the arguments' values, only
/// their digest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallAudit {
    pub outcome: CallOutcome,
    /// `None` when the call was refused before the policy was consulted.
    pub policy: Option<PolicyDecision>,
    /// SHA-256 (hex) of the arguments as the code passed them (JSON, keys sorted; personal
    /// data still as tokens).
    pub arguments_sha256: String,
    /// Whether the upstream lists the tool (only listed tools name a metrics series).
    pub listed: bool,
    /// The personal-data tokens of the arguments and what the flow rule did with them.
    pub tokens: AuditTokens,
}

/// Longest error a call's record shows; the record keeps [`EDGE_BYTES`](crate::sandbox::run::output::EDGE_BYTES) characters more, for
/// the PII engine to see a value the cut splits whole.
pub const MAX_RECORD_ERROR_CHARS: usize = 300;
