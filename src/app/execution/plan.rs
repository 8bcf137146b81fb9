//! The end of an execution that planned calls (policy `plan`): its plan is taken from the
//! execution's upstream calls once the code has finished, and
//!
//! - refused whole when it passed its bounds or held a call the policy does not let code plan
//!   (the execution then ends as an error: nothing is sent);
//! - not asked when the code did not finish well (an error, a timeout, a cancellation): a
//!   plan cut short is not the change the code meant;
//! - otherwise asked once and, on accept, applied ([`crate::gateway::UpstreamCalls::settle_plan`]).
//!
//! The report goes into the response and the audit record, the count into the metrics, and,
//! with a session whose state was saved, the outcomes into the session for its next call.

use crate::app::App;
use crate::gateway::UpstreamCalls;
use crate::gateway::plan::{Drafted, PlanReport, PlanStatus};
use crate::sandbox::{Outcome, Status};

/// Where a session keeps a plan's outcomes: its handle and the revision the call's state became.
pub(crate) type KeepIn = Option<(String, u64)>;

impl App {
    /// What became of the plan the code made, if it made one.
    pub(crate) async fn settle_plan(
        &self,
        upstream: Option<&UpstreamCalls>,
        outcome: &mut Outcome,
        keep_in: KeepIn,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Option<PlanReport> {
        let upstream = upstream?;
        let report = match upstream.take_plan()? {
            Drafted::Refused { reason, plan } => {
                let message = format!(
                    "The plan was refused and none of its calls was sent: {reason}. Plan fewer or smaller calls per execution (split the work over several), or ask an administrator to raise the bound"
                );
                fail(outcome, &message);
                PlanReport::unsent(&plan, PlanStatus::Refused, message)
            }
            Drafted::Ready(plan) if outcome.status != Status::Ok => {
                let message = format!(
                    "None of the plan's {} calls was sent: the code did not finish (status {}), so the user was not asked. Fix the code and run it again",
                    plan.calls.len(),
                    outcome.status.as_str()
                );
                PlanReport::unsent(&plan, PlanStatus::NotAsked, message)
            }
            Drafted::Ready(plan) => upstream.settle_plan(plan, cancel).await,
        };
        if let Some(view) = self.gateway() {
            view.stats.record_plan(report.status);
        }
        tracing::info!(
            plan = %report.id,
            status = report.status.as_str(),
            calls = report.calls,
            ok = report.ok,
            failed = report.failed,
            "plan settled"
        );
        if let Some((handle, n)) = keep_in {
            (self
                .sessions
                .keep_plan_results(handle, n, report.for_session()))
            .await;
        }
        Some(report)
    }
}

/// Ends an execution that ran well as an error: its plan cannot be asked.
fn fail(outcome: &mut Outcome, message: &str) {
    if outcome.status == Status::Ok {
        outcome.status = Status::Error;
        outcome.error = Some(message.to_string());
        outcome.error_type = Some("PlanError".to_string());
        outcome.traceback = None;
    }
}
