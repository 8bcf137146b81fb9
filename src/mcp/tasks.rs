//! Long executions as tasks (the `io.modelcontextprotocol/tasks` extension). When a request
//! declares the extension, `execute_code` runs detached; an execution that ends within
//! [`INLINE`] answers the call as usual, and one that runs longer (or asks a question first)
//! becomes a task: the call returns its id at once, and the client polls `tasks/get`.
//!
//! While the task runs, its status message is the latest output line (the progress report of
//! the legacy path); a `confirm` question appears in `tasks/get` as an input request and its
//! answer comes through `tasks/update`; `tasks/cancel` cancels the execution, whose container
//! is removed, and the task ends `cancelled`. The tasks are the tenant's (rmcp's
//! `TaskManager`, held by the [`crate::app::App`]), so another tenant cannot see or cancel them.
//! A task whose time to live passes is ended by the manager; dropping its driver cancels the
//! execution.

use std::time::Duration;

use rmcp::model::ErrorCode;
use rmcp::model::{CallToolResponse, CreateTaskResult};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskContext, TaskExit, TaskOptions};
use rmcp::{Peer, RoleServer};
use tracing::Instrument;

use super::CodeExecutionServer;
use super::rounds::elicitation;
use crate::app::execution::detached::{Answer, Detached, Event, Question};
use crate::privacy::{self, Reply, Shown};

/// How long an execution may run before its call becomes a task.
pub const INLINE: Duration = Duration::from_secs(1);

/// How often a client should poll.
const POLL_MS: u64 = 500;

impl CodeExecutionServer {
    /// Runs `detached` for a client that declared the tasks extension: inline if it ends
    /// within [`INLINE`], else as a task.
    pub(super) async fn run_as_task(
        &self,
        mut detached: Detached,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, Reply> {
        let inline = tokio::time::sleep(INLINE);
        tokio::pin!(inline);
        let first = loop {
            tokio::select! {
                _ = &mut inline => break None,
                _ = ctx.ct.cancelled() => {
                    detached.cancel.cancel();
                    return Err(self.error("the request was cancelled, and its execution with it"));
                }
                event = detached.events.recv() => match event {
                    Some(Event::Done(ran)) => return self.finish(*ran, &ctx.peer).await,
                    Some(Event::Progress(_)) => {}
                    // A question makes it a task at once: its answer comes through the task.
                    Some(Event::Question(q)) => break Some(q),
                    None => {
                        return Err(self.error(
                            "the execution stopped without a result (an internal error): run the code again",
                        ));
                    }
                }
            }
        };
        let limits = &self.app.config().limits;
        let wait = self.app.paused().wait();
        // Time for the longest execution, a few questions and a poll after its end.
        let ttl = Duration::from_secs(limits.max_timeout_secs) + 4 * wait + Duration::from_secs(60);
        let options = TaskOptions::new()
            .with_ttl_ms(ttl.as_millis() as u64)
            .with_poll_interval_ms(POLL_MS);
        let options = privacy::with_task_status(options, Shown::fixed("running"));
        let (server, peer) = (self.clone(), ctx.peer.clone());
        // The task outlives this request, and keeps its span (its id, the tenant).
        let span = tracing::Span::current();
        let task = self.app.tasks().spawn(options, move |task| {
            Box::pin(
                server
                    .drive_task(detached, first, task, peer)
                    .instrument(span),
            )
        });
        Ok(CreateTaskResult::new(task).into())
    }

    /// The task's life: status messages from progress, questions as input requests, the
    /// execution's answer or its cancellation.
    // rmcp's task manager keeps rmcp's result type; the answer in it is the privacy layer's.
    #[allow(clippy::disallowed_types)]
    async fn drive_task(
        self,
        mut detached: Detached,
        first: Option<Question>,
        task: TaskContext,
        peer: Peer<RoleServer>,
    ) -> Result<rmcp::model::CallToolResult, TaskExit> {
        // The manager aborts a task past its time to live: the execution goes with it.
        let _cancel_on_drop = detached.cancel.clone().drop_guard();
        let mut asked = 0u32;
        let mut ask = |question: Question| {
            asked += 1;
            let key = (question.key.clone()).unwrap_or_else(|| format!("confirm-{asked}"));
            let task = task.clone();
            let asking = async move {
                let answer = match task
                    .request_input(key, elicitation(&question.message))
                    .await
                {
                    Ok(value) => Answer::from_elicit_result(&value).unwrap_or(Answer::Cancel),
                    Err(_) => Answer::Cancel,
                };
                question.answer(answer);
            };
            tokio::spawn(asking.in_current_span());
        };
        if let Some(question) = first {
            ask(question);
        }
        let cancelled = task.cancelled();
        tokio::pin!(cancelled);
        let mut cancelling = false;
        loop {
            tokio::select! {
                _ = &mut cancelled, if !cancelling => {
                    cancelling = true;
                    detached.cancel.cancel();
                    let status = Shown::fixed("cancelling: the container is being removed");
                    privacy::set_task_status(&task, status);
                }
                event = detached.events.recv() => match event {
                    Some(Event::Done(ran)) => {
                        if cancelling {
                            return Err(TaskExit::Cancelled);
                        }
                        return Ok(match self.respond(*ran, &peer).await {
                            Ok(reply) | Err(reply) => reply.into_result(),
                        });
                    }
                    Some(Event::Progress(p)) => privacy::set_task_status(&task, p.message),
                    Some(Event::Question(q)) => ask(q),
                    None => {
                        return Err(TaskExit::Error(privacy::refusal(
                            ErrorCode::INTERNAL_ERROR,
                            Shown::fixed("the execution stopped without a result: run the code again"),
                        )));
                    }
                }
            }
        }
    }
}
