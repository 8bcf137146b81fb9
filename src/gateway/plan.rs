//! Plans: a call from sandbox code to a tool whose policy is `plan` is recorded, not sent.
//! When the code has finished, the user is asked once about every recorded call, in order;
//! on accept exactly those calls go out, in that order, with the arguments shown.
//!
//! This file holds the plan as data: the draft an execution's calls add to (bounded by
//! `--plan-max-calls` and `--plan-max-bytes`; past either the plan is refused whole), the
//! question that shows it, and the report of what became of it. Asking and sending are
//! `plan_apply.rs`'s.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::restoring::Outgoing;

/// How large a plan may grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanBounds {
    pub max_calls: usize,
    /// Bytes of all calls' arguments, as compact JSON.
    pub max_bytes: usize,
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedCall {
    pub server: String,
    pub tool: String,
    /// As the code passed them (personal data still as tokens).
    pub arguments: Map<String, Value>,
    /// SHA-256 (hex) of the arguments as the code passed them, for the audit trail.
    pub arguments_sha256: String,
}

/// The calls an execution has planned so far.
#[derive(Debug)]
pub struct PlanDraft {
    calls: Vec<PlannedCall>,
    bytes: usize,
    stop_on_error: bool,
    /// Why the plan can no longer be asked (the first reason): it is refused whole.
    refused: Option<String>,
}

impl Default for PlanDraft {
    fn default() -> Self {
        Self {
            calls: Vec::new(),
            bytes: 0,
            stop_on_error: true,
            refused: None,
        }
    }
}

/// What an execution planned, once its code has finished.
#[derive(Debug)]
pub enum Drafted {
    /// Nothing may be sent: why, and the calls planned before.
    Refused {
        reason: String,
        plan: Plan,
    },
    Ready(Plan),
}

impl PlanDraft {
    /// Adds `call` (`bytes` of arguments), or refuses the plan when it would pass `bounds`.
    /// Returns the call's number in the plan (from 1), or `None` once refused.
    pub fn add(&mut self, call: PlannedCall, bytes: usize, bounds: PlanBounds) -> Option<usize> {
        if self.refused.is_some() {
            return None;
        }
        if self.calls.len() >= bounds.max_calls {
            self.refuse(format!(
                "the code planned more than {} calls, the most one plan may hold (--plan-max-calls)",
                bounds.max_calls
            ));
            return None;
        }
        if self.bytes.saturating_add(bytes) > bounds.max_bytes {
            self.refuse(format!(
                "the planned calls' arguments came to more than {} bytes, the most one plan may hold (--plan-max-bytes)",
                bounds.max_bytes
            ));
            return None;
        }
        self.bytes += bytes;
        self.calls.push(call);
        Some(self.calls.len())
    }

    /// Refuses the whole plan; the first reason is the one kept.
    pub fn refuse(&mut self, reason: String) {
        self.refused.get_or_insert(reason);
    }

    pub fn set_stop_on_error(&mut self, stop: bool) {
        self.stop_on_error = stop;
    }

    /// The plan, taken out (the draft is empty after): `None` when nothing was planned.
    pub fn take(&mut self) -> Option<Drafted> {
        let draft = std::mem::take(self);
        if draft.calls.is_empty() && draft.refused.is_none() {
            return None;
        }
        let plan = Plan {
            id: new_plan_id(),
            calls: draft.calls,
            stop_on_error: draft.stop_on_error,
        };
        Some(match draft.refused {
            Some(reason) => Drafted::Refused { reason, plan },
            None => Drafted::Ready(plan),
        })
    }
}

/// A plan ready to be asked: sealed, its calls fixed.
#[derive(Debug)]
pub struct Plan {
    /// `plan_` and 16 random hex digits.
    pub id: String,
    pub calls: Vec<PlannedCall>,
    pub stop_on_error: bool,
}

/// A new plan's id.
fn new_plan_id() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("plan_{}", &id[..16])
}

impl Plan {
    /// How many calls of each `server/tool`.
    pub fn per_tool(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for call in &self.calls {
            *counts
                .entry(format!("{}/{}", call.server, call.tool))
                .or_insert(0) += 1;
        }
        counts
    }

    /// The question the user answers: every call in order, with `shown` (the arguments as
    /// they will be sent, personal data restored), and a count per tool.
    pub fn question(&self, shown: &[Outgoing]) -> String {
        let n = self.calls.len();
        let mut text = format!(
            "Code running in the sandbox planned {n} call{} to your MCP servers. Nothing has been sent yet. Accept to send exactly these calls, in this order, with these arguments; decline to send none of them.\n",
            if n == 1 { "" } else { "s" }
        );
        text.push_str(if self.stop_on_error {
            "If a call fails, the calls after it are not sent.\n\nPer tool:"
        } else {
            "If a call fails, the calls after it are still sent.\n\nPer tool:"
        });
        for (tool, count) in self.per_tool() {
            text.push_str(&format!(" {tool} ×{count};"));
        }
        text.pop();
        text.push_str("\n\n");
        for (i, (call, outgoing)) in self.calls.iter().zip(shown).enumerate() {
            let arguments = Value::Object(outgoing.arguments.clone()).to_string();
            text.push_str(&format!(
                "{}. {}/{} {arguments}{}\n",
                i + 1,
                call.server,
                call.tool,
                outgoing.note()
            ));
        }
        text
    }
}

/// What became of a plan.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    /// Accepted; every call was sent and succeeded.
    Applied,
    /// Accepted; a call failed and the calls after it were not sent (stop on error).
    Stopped,
    /// Accepted; some calls failed, the others were sent all the same.
    AppliedWithErrors,
    Declined,
    /// The user dismissed the question.
    Cancelled,
    /// No answer within `--confirm-wait-secs`.
    Expired,
    /// The user could not be asked (the client cannot answer questions, or the code failed).
    NotAsked,
    /// Over its bounds, or a call the policy does not let code plan: nothing may be sent.
    Refused,
}

impl PlanStatus {
    pub const ALL: [PlanStatus; 8] = [
        PlanStatus::Applied,
        PlanStatus::Stopped,
        PlanStatus::AppliedWithErrors,
        PlanStatus::Declined,
        PlanStatus::Cancelled,
        PlanStatus::Expired,
        PlanStatus::NotAsked,
        PlanStatus::Refused,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PlanStatus::Applied => "applied",
            PlanStatus::Stopped => "stopped",
            PlanStatus::AppliedWithErrors => "applied_with_errors",
            PlanStatus::Declined => "declined",
            PlanStatus::Cancelled => "cancelled",
            PlanStatus::Expired => "expired",
            PlanStatus::NotAsked => "not_asked",
            PlanStatus::Refused => "refused",
        }
    }

    /// Whether the user accepted (some calls were sent).
    pub fn accepted(self) -> bool {
        matches!(
            self,
            PlanStatus::Applied | PlanStatus::Stopped | PlanStatus::AppliedWithErrors
        )
    }
}

/// How one planned call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlannedOutcome {
    Ok,
    Error,
    Timeout,
    NotSent,
}

impl PlannedOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            PlannedOutcome::Ok => "ok",
            PlannedOutcome::Error => "error",
            PlannedOutcome::Timeout => "timeout",
            PlannedOutcome::NotSent => "not_sent",
        }
    }
}

/// One planned call, as the session's next call (`plan_results()`) and the audit trail see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedRecord {
    /// Its number in the plan, from 1.
    pub call: usize,
    pub server: String,
    pub tool: String,
    pub outcome: PlannedOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The result was left out: the plan's results passed what a session keeps.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub result_dropped: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip)]
    pub arguments_sha256: String,
    #[serde(skip)]
    pub duration_ms: f64,
}

/// A failed call, as the response lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanFailure {
    pub call: usize,
    pub server: String,
    pub tool: String,
    pub error: String,
}

/// Failed calls a response lists (the count goes on).
pub const MAX_LISTED_FAILURES: usize = 20;

/// What became of a plan, as the execution's response reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanReport {
    /// The plan's id (`plan_…`), as the audit trail names it.
    pub id: String,
    /// applied, stopped, applied_with_errors, declined, cancelled, expired, not_asked or
    /// refused.
    pub status: PlanStatus,
    /// Calls planned.
    pub calls: usize,
    /// Calls per `server/tool`.
    pub per_tool: BTreeMap<String, usize>,
    pub stop_on_error: bool,
    /// Calls sent that succeeded, failed, and not sent. Calls are numbered from 1 in the
    /// order the code made them; every call not in `failures` and before the first not sent
    /// succeeded.
    pub ok: usize,
    pub failed: usize,
    pub not_sent: usize,
    /// The failed calls (the first 20), with the tool's message.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub failures: Vec<PlanFailure>,
    /// What happened and what to do.
    pub message: String,
    /// Every call: for the session's next call and the audit trail, not the model.
    #[serde(skip)]
    #[schemars(skip)]
    pub records: Vec<PlannedRecord>,
}

impl PlanReport {
    /// A plan none of whose calls was sent.
    pub fn unsent(plan: &Plan, status: PlanStatus, message: String) -> Self {
        let records: Vec<PlannedRecord> = (plan.calls.iter().enumerate())
            .map(|(i, call)| PlannedRecord::not_sent(i + 1, call))
            .collect();
        Self {
            id: plan.id.clone(),
            status,
            calls: plan.calls.len(),
            per_tool: plan.per_tool(),
            stop_on_error: plan.stop_on_error,
            ok: 0,
            failed: 0,
            not_sent: plan.calls.len(),
            failures: Vec::new(),
            message,
            records,
        }
    }

    /// What the session's next call gets from `plan_results()`.
    pub fn for_session(&self) -> Value {
        serde_json::json!({
            "plan": self.id,
            "status": self.status,
            "calls": self.records,
        })
    }
}

impl PlannedRecord {
    pub fn not_sent(n: usize, call: &PlannedCall) -> Self {
        Self {
            call: n,
            server: call.server.clone(),
            tool: call.tool.clone(),
            outcome: PlannedOutcome::NotSent,
            result: None,
            result_dropped: false,
            error: None,
            arguments_sha256: call.arguments_sha256.clone(),
            duration_ms: 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tool: &str, n: i64) -> PlannedCall {
        let arguments = serde_json::json!({"id": n});
        PlannedCall {
            server: "crm".into(),
            tool: tool.into(),
            arguments: arguments.as_object().unwrap().clone(),
            arguments_sha256: String::new(),
        }
    }

    const BOUNDS: PlanBounds = PlanBounds {
        max_calls: 3,
        max_bytes: 100,
    };

    #[test]
    fn calls_are_numbered_in_order_and_taken_once() {
        let mut draft = PlanDraft::default();
        assert!(draft.take().is_none(), "nothing planned");
        assert_eq!(draft.add(call("update", 1), 10, BOUNDS), Some(1));
        assert_eq!(draft.add(call("update", 2), 10, BOUNDS), Some(2));
        let Some(Drafted::Ready(plan)) = draft.take() else {
            panic!("a plan");
        };
        assert!(plan.id.starts_with("plan_") && plan.id.len() == 21);
        assert_eq!(plan.calls.len(), 2);
        assert!(plan.stop_on_error, "the default");
        assert!(draft.take().is_none(), "taken");
    }

    #[test]
    fn past_its_bounds_the_whole_plan_is_refused() {
        let mut draft = PlanDraft::default();
        for n in 0..3 {
            assert!(draft.add(call("update", n), 10, BOUNDS).is_some());
        }
        assert_eq!(draft.add(call("update", 4), 10, BOUNDS), None);
        assert_eq!(
            draft.add(call("update", 5), 1, BOUNDS),
            None,
            "stays refused"
        );
        let Some(Drafted::Refused { reason, plan }) = draft.take() else {
            panic!("refused");
        };
        assert!(reason.contains("--plan-max-calls"), "{reason}");
        assert_eq!(plan.calls.len(), 3);

        let mut draft = PlanDraft::default();
        assert!(draft.add(call("update", 1), 60, BOUNDS).is_some());
        assert_eq!(draft.add(call("update", 2), 41, BOUNDS), None);
        let Some(Drafted::Refused { reason, .. }) = draft.take() else {
            panic!("refused");
        };
        assert!(reason.contains("--plan-max-bytes"), "{reason}");
    }

    #[test]
    fn the_question_shows_every_call_and_the_count_per_tool() {
        let mut draft = PlanDraft::default();
        draft.set_stop_on_error(false);
        for (tool, n) in [("update", 1), ("delete", 2), ("update", 3)] {
            draft.add(call(tool, n), 10, BOUNDS);
        }
        let Some(Drafted::Ready(plan)) = draft.take() else {
            panic!("a plan");
        };
        let shown: Vec<_> = (plan.calls.iter())
            .map(|c| Outgoing::unchanged(c.arguments.clone()))
            .collect();
        let q = plan.question(&shown);
        assert!(q.contains("planned 3 calls"), "{q}");
        assert!(q.contains("are still sent"), "{q}");
        assert!(q.contains("crm/delete ×1; crm/update ×2\n"), "{q}");
        let lines: Vec<&str> = q
            .lines()
            .filter(|l| l.starts_with(char::is_numeric))
            .collect();
        assert_eq!(
            lines,
            [
                r#"1. crm/update {"id":1}"#,
                r#"2. crm/delete {"id":2}"#,
                r#"3. crm/update {"id":3}"#
            ]
        );
        let report = PlanReport::unsent(&plan, PlanStatus::Declined, "no".into());
        assert_eq!((report.not_sent, report.ok), (3, 0));
        let session = report.for_session();
        assert_eq!(session["status"], "declined");
        assert_eq!(session["calls"][2]["outcome"], "not_sent");
    }
}
