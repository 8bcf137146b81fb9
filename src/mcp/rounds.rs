//! `execute_code` on a 2026-07-28 connection whose client can answer questions: the
//! execution runs detached ([`crate::app::execution::detached`]), and a `confirm` question from its code
//! ends this `tools/call` with an `InputRequiredResult` (an elicitation per question and a
//! sealed `requestState`). The client's retry carries the answers and the state; it resumes
//! the same execution, still running in its container, and waits for its end or its next
//! question. The code never runs twice. Between the two requests the execution waits in the
//! tenant's [`crate::app::execution::paused::PausedTable`].
//!
//! A cancelled request cancels its execution, as on the legacy path.

use rmcp::model::{
    CallToolResponse, ElicitRequest, ElicitRequestParams, InputRequest, InputRequests,
    InputRequiredResult, InputResponses,
};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};

use super::CodeExecutionServer;
use crate::app::execution::detached::{Answer, Event, Question};
use crate::app::execution::paused::Parked;
use crate::privacy::Reply;

/// The elicitation that asks `message` (a form with no fields: the answer is the action).
pub(super) fn elicitation(message: &str) -> InputRequest {
    let schema = serde_json::from_value(serde_json::json!({"type": "object", "properties": {}}))
        .expect("an empty object schema parses");
    InputRequest::Elicitation(ElicitRequest::new(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message.to_string(),
            requested_schema: schema,
        },
    ))
}

impl CodeExecutionServer {
    /// Drives `parked` for this request until its execution ends (its answer) or asks (an
    /// `InputRequiredResult`). Questions an earlier round left unanswered are asked again
    /// at once.
    pub(super) async fn drive_rounds(
        &self,
        mut parked: Parked,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, Reply> {
        if !parked.questions.is_empty() {
            return self.pause(parked);
        }
        let token = ctx.meta.get_progress_token();
        loop {
            let event = tokio::select! {
                _ = ctx.ct.cancelled() => {
                    parked.detached.cancel.cancel();
                    return Err(self.error("the request was cancelled, and its execution with it"));
                }
                event = parked.detached.events.recv() => event,
            };
            match event {
                Some(Event::Done(ran)) => return self.finish(*ran, &ctx.peer).await,
                Some(Event::Progress(p)) => {
                    if let Some(token) = &token {
                        let note = crate::privacy::progress_note(
                            token.clone(),
                            p.elapsed.as_secs_f64(),
                            p.message,
                        );
                        let _ = ctx.peer.notify_progress(note).await;
                    }
                }
                Some(Event::Question(q)) => {
                    parked.ask(q);
                    // Questions asked at the same moment (calls from threads) travel together.
                    while let Ok(event) = parked.detached.events.try_recv() {
                        match event {
                            Event::Question(q) => parked.ask(q),
                            Event::Progress(_) => {}
                            Event::Done(ran) => return self.finish(*ran, &ctx.peer).await,
                        }
                    }
                    return self.pause(parked);
                }
                None => {
                    return Err(self.error(
                        "the execution stopped without a result (an internal error): run the code again",
                    ));
                }
            }
        }
    }

    /// Parks the execution and answers with its questions and the state that resumes it.
    fn pause(&self, parked: Parked) -> Result<CallToolResponse, Reply> {
        let requests: InputRequests = parked
            .questions
            .iter()
            .map(|(key, q)| (key.clone(), elicitation(&q.message)))
            .collect();
        let state = self.app.paused().pause(parked).map_err(|e| self.error(e))?;
        Ok(InputRequiredResult::new(Some(requests), Some(state)).into())
    }

    /// A retry: the paused execution `state` names gets the answers in `responses`, then is
    /// driven on. A state that is refused runs nothing.
    pub(super) async fn resume(
        &self,
        code: &str,
        session: Option<&str>,
        state: &str,
        responses: InputResponses,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, Reply> {
        let mut parked = self
            .app
            .paused()
            .resume(state, code, session)
            .map_err(|e| self.error(e))?;
        let mut unanswered: Vec<(String, Question)> = Vec::new();
        for (key, question) in parked.questions.drain(..) {
            match responses.get(&key).and_then(Answer::from_elicit_result) {
                Some(answer) => question.answer(answer),
                None => unanswered.push((key, question)),
            }
        }
        parked.questions = unanswered;
        self.drive_rounds(parked, ctx).await
    }

    /// The answer to a finished execution, as `tools/call` returns it.
    pub(super) async fn finish(
        &self,
        ran: Result<crate::app::Executed, crate::app::ExecuteError>,
        peer: &Peer<RoleServer>,
    ) -> Result<CallToolResponse, Reply> {
        match self.respond(ran, peer).await {
            Ok(reply) => Ok(reply.into_response()),
            Err(reply) => Err(reply),
        }
    }
}
