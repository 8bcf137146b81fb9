//! One execution's plan, on the gateway's side: the calls its code plans (each checked as a
//! call is: the upstream visible to this tenant, the tool listed, its policy `plan`), then,
//! once the code has finished, the one question to the user and, on accept, exactly those
//! calls sent in order.
//!
//! What the user sees is what is sent: the arguments are restored (personal-data tokens
//! replaced by their values) once, shown, and those same values go out. The plan is never in
//! the client's hands: a 2026-07-28 answer reaches it only through the paused execution's
//! sealed request state, so it cannot be altered, and it is taken once, so it cannot be
//! applied twice.

use std::time::Instant;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::call_record::{CallAudit, CallOutcome, PolicyDecision};
use super::confirm::{Answer, AskError, Prompt};
use super::plan::{
    Drafted, MAX_LISTED_FAILURES, Plan, PlanFailure, PlanReport, PlanStatus, PlannedCall,
    PlannedOutcome,
};
use super::policy::Decision;
use super::restoring::Outgoing;
use super::upstream_calls::{UpstreamCalls, arguments_digest, json_size, listed_tool};

/// Bytes of results a plan keeps for the session's next call (`plan_results()`); results past
/// them are left out, their outcome kept.
pub const MAX_KEPT_RESULTS_BYTES: usize = 4 * 1024 * 1024;

impl UpstreamCalls {
    /// The `(server, tool)` pairs whose policy is `plan` here: sandbox code plans calls to
    /// them instead of making them.
    pub fn plan_tools(&self) -> Vec<(String, String)> {
        let mut tools = Vec::new();
        for upstream in self.view.upstreams() {
            for tool in upstream.tools().iter() {
                if upstream.config.policy.decide(&tool.name, tool.destructive) == Decision::Plan {
                    tools.push((upstream.config.name.clone(), tool.name.clone()));
                }
            }
        }
        tools
    }

    /// How large this execution's plan may grow.
    pub fn plan_bounds(&self) -> super::plan::PlanBounds {
        self.limits.plan
    }

    /// Records a call to `server`'s `tool` in the plan. A call the policy does not let code
    /// plan, or one past the plan's bounds, refuses the whole plan.
    pub fn plan_call(&self, server: &str, tool: &str, arguments: Value) {
        let checked = self.plannable(server, tool).and_then(|()| match arguments {
            Value::Object(map) => Ok(map),
            Value::Null => Ok(Map::new()),
            _ => Err(format!(
                "the arguments of the planned `{server}/{tool}` are not a dict"
            )),
        });
        let mut draft = self.plan.lock().expect("plan lock");
        match checked {
            Ok(arguments) => {
                let value = Value::Object(arguments);
                let bytes = json_size(&value);
                let arguments_sha256 = arguments_digest(&value);
                let Value::Object(arguments) = value else {
                    unreachable!("built as an object")
                };
                let call = PlannedCall {
                    server: crate::text::prefix_chars(server, 100).to_owned(),
                    tool: crate::text::prefix_chars(tool, 200).to_owned(),
                    arguments,
                    arguments_sha256,
                };
                draft.add(call, bytes, self.limits.plan);
            }
            Err(why) => draft.refuse(why),
        }
    }

    /// Whether code may plan `server`'s `tool`: listed, visible here, policy `plan`.
    fn plannable(&self, server: &str, tool: &str) -> Result<(), String> {
        let upstream = self.view.upstream(server).ok_or_else(|| {
            format!("the code planned a call to {server:?}, which is not an upstream here")
        })?;
        let destructive = listed_tool(upstream, server, tool)?;
        match upstream.config.policy.decide(tool, destructive) {
            Decision::Plan => Ok(()),
            other => Err(format!(
                "the code planned `{server}/{tool}`, whose policy is `{}`, not `plan`",
                other.as_str()
            )),
        }
    }

    /// Whether a failed call stops the calls after it (the default) when the plan applies.
    pub fn set_plan_stop_on_error(&self, stop: bool) {
        self.plan.lock().expect("plan lock").set_stop_on_error(stop);
    }

    /// Refuses the whole plan (the sandbox found it past its bounds).
    pub fn refuse_plan(&self, reason: String) {
        self.plan.lock().expect("plan lock").refuse(reason);
    }

    /// The plan the code made, taken out: `None` when it planned nothing.
    pub fn take_plan(&self) -> Option<Drafted> {
        self.plan.lock().expect("plan lock").take()
    }

    /// Asks the user about `plan` and, on accept, sends its calls in order. A cancelled
    /// request ends the question (nothing is sent); once accepted, the plan is applied whole.
    pub async fn settle_plan(&self, plan: Plan, cancel: &CancellationToken) -> PlanReport {
        let n = plan.calls.len();
        let Some(confirm) = &self.confirm else {
            return PlanReport::unsent(
                &plan,
                PlanStatus::NotAsked,
                format!(
                    "None of the plan's {n} calls was sent: this client cannot answer questions (MCP elicitation), so the user could not approve the plan. Use a client that supports elicitation, or an administrator sets these tools' policy to `confirm` or `allow`"
                ),
            );
        };
        let mut shown = Vec::with_capacity(n);
        for (i, call) in plan.calls.iter().enumerate() {
            let outgoing = match self.view.upstream(&call.server) {
                None => Err(format!(
                    "upstream `{}` is no longer available here",
                    call.server
                )),
                Some(upstream) => self.outgoing(upstream, call.arguments.clone()).await,
            };
            let refused = match &outgoing {
                Ok(o) if o.refused.is_some() => {
                    // Counted now, as none of the plan is sent; an applied call is counted
                    // when it is sent.
                    self.view.stats.record_tokens(&call.server, &o.tokens);
                    o.refused.clone()
                }
                Ok(_) => None,
                Err(why) => Some(why.clone()),
            };
            if let Some(why) = refused {
                let message = format!(
                    "None of the plan's {n} calls was sent: call {} (`{}/{}`): {why}",
                    i + 1,
                    call.server,
                    call.tool
                );
                return PlanReport::unsent(&plan, PlanStatus::NotAsked, message);
            }
            shown.extend(outgoing.ok());
        }
        let prompt = Prompt {
            message: plan.question(&shown),
            key: Some(format!("plan-{}", plan.id)),
        };
        let answer = tokio::select! {
            // An abandoned question (a pause that expired drops it, then cancels) reads as such.
            biased;
            answer = confirm.ask(prompt) => answer,
            _ = cancel.cancelled() => {
                let message = format!("The request was cancelled before the user answered: none of the plan's {n} calls was sent");
                return PlanReport::unsent(&plan, PlanStatus::Cancelled, message);
            }
        };
        let (status, message) = match answer {
            Ok(Answer::Accept) => return self.apply(plan, shown).await,
            Ok(Answer::Decline) => (
                PlanStatus::Declined,
                format!(
                    "The user declined the plan: none of its {n} calls was sent. Ask the user what to change before planning again"
                ),
            ),
            Ok(Answer::Cancel) => (
                PlanStatus::Cancelled,
                format!("The user dismissed the question: none of the plan's {n} calls was sent"),
            ),
            Err(AskError::Expired(why)) => (
                PlanStatus::Expired,
                format!("None of the plan's {n} calls was sent: {why}"),
            ),
            Err(AskError::Failed(why)) => (
                PlanStatus::NotAsked,
                format!(
                    "None of the plan's {n} calls was sent: the user could not be asked ({why})"
                ),
            ),
        };
        PlanReport::unsent(&plan, status, message)
    }

    /// Sends the approved calls in order, with the arguments the user saw.
    async fn apply(&self, plan: Plan, shown: Vec<Outgoing>) -> PlanReport {
        let mut report = PlanReport::unsent(&plan, PlanStatus::Applied, String::new());
        report.not_sent = 0;
        let mut kept = 0usize;
        let mut stopped = false;
        for ((i, call), outgoing) in plan.calls.iter().enumerate().zip(shown) {
            if stopped {
                report.not_sent += 1;
                continue;
            }
            let record = &mut report.records[i];
            let started = Instant::now();
            let sent = self.send_planned(call, outgoing).await;
            record.duration_ms = (started.elapsed().as_secs_f64() * 1e6).round() / 1e3;
            match sent {
                Ok(value) => {
                    report.ok += 1;
                    record.outcome = PlannedOutcome::Ok;
                    let size = json_size(&value);
                    if kept + size <= MAX_KEPT_RESULTS_BYTES {
                        kept += size;
                        record.result = Some(value);
                    } else {
                        record.result_dropped = true;
                    }
                }
                Err((outcome, error)) => {
                    report.failed += 1;
                    record.outcome = outcome;
                    record.error = Some(error.clone());
                    if report.failures.len() < MAX_LISTED_FAILURES {
                        report.failures.push(PlanFailure {
                            call: i + 1,
                            server: call.server.clone(),
                            tool: call.tool.clone(),
                            error,
                        });
                    }
                    stopped = plan.stop_on_error;
                }
            }
        }
        (report.status, report.message) = applied_summary(&report);
        report
    }

    /// One approved call: its checks again (the upstream may have gone since), then sent.
    async fn send_planned(
        &self,
        call: &PlannedCall,
        outgoing: Outgoing,
    ) -> Result<Value, (PlannedOutcome, String)> {
        let (server, tool) = (call.server.as_str(), call.tool.as_str());
        let started = Instant::now();
        let mut audit = CallAudit {
            arguments_sha256: call.arguments_sha256.clone(),
            policy: Some(PolicyDecision::PlanApproved),
            tokens: outgoing.tokens,
            ..CallAudit::default()
        };
        let arguments = outgoing.arguments;
        if self.view.upstream(server).is_some() {
            self.view.stats.record_tokens(server, &audit.tokens);
        }
        let sent = match self.view.upstream(server) {
            None => Err(format!("upstream `{server}` is no longer available here")),
            Some(upstream) => match listed_tool(upstream, server, tool) {
                Err(why) => Err(why),
                Ok(_) => {
                    audit.listed = true;
                    (self.send(upstream, server, tool, arguments, &mut audit)).await
                }
            },
        };
        if sent.is_ok() {
            audit.outcome = CallOutcome::Ok;
        }
        if self.view.upstream(server).is_some() {
            let stats = &self.view.stats;
            stats.record(server, sent.is_ok(), started.elapsed());
            stats.record_call(server, tool, &audit);
        }
        sent.map_err(|e| {
            let outcome = match audit.outcome {
                CallOutcome::Timeout => PlannedOutcome::Timeout,
                _ => PlannedOutcome::Error,
            };
            let cut = super::call_record::MAX_RECORD_ERROR_CHARS
                + crate::sandbox::run::output::EDGE_BYTES;
            (outcome, crate::text::prefix_chars(&e, cut).to_owned())
        })
    }
}

/// The status and message of an accepted plan, from its counts.
fn applied_summary(report: &PlanReport) -> (PlanStatus, String) {
    let n = report.calls;
    if report.failed == 0 {
        return (
            PlanStatus::Applied,
            format!("The user approved the plan: all {n} calls were sent and succeeded"),
        );
    }
    let first = report.failures.first().map_or(0, |f| f.call);
    if report.not_sent > 0 {
        return (
            PlanStatus::Stopped,
            format!(
                "The user approved the plan: calls 1 to {} were sent, call {first} failed, and the {} calls after it were not sent (the plan stops at the first error). Fix the cause, then plan the calls that were not sent again",
                first, report.not_sent
            ),
        );
    }
    (
        PlanStatus::AppliedWithErrors,
        format!(
            "The user approved the plan: all {n} calls were sent, {} of them failed (see failures); the plan went on after errors",
            report.failed
        ),
    )
}
