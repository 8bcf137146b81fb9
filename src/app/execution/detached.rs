//! An execution detached from the request that started it. On a 2026-07-28 connection the
//! server may not send requests of its own, so a `confirm` question cannot be asked while the
//! `tools/call` that runs the code waits: the question has to travel back as that call's
//! result (a multi-round-trip request), or through a task, while the code keeps running in
//! its container. So the execution runs in a task of its own and reports what happens through
//! a bounded channel of [`Event`]s: a question for the user, a progress line, and its end.
//!
//! Whoever holds the receiver drives it: the request that started it, a later request that
//! answers a question (`app::paused` keeps it between the two), or a task of the tasks
//! extension. Dropping the receiver does not stop the execution (a question then gets no
//! answer, which the code sees as a refused call); its cancel token does, and removes the
//! container like any cancelled execution.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::app::execution::progress::{self, LatestLine, Progress};
use crate::app::execution::request::ExecuteRequest;
use crate::app::{App, ExecuteError, Executed};
pub use crate::gateway::Answer;
use crate::gateway::{AskError, Confirm, Prompt};

/// Events one execution may have waiting before its driver reads them. Questions wait for
/// room (the code's call waits anyway); progress lines are dropped when the channel is full.
const EVENTS: usize = 16;

/// What a detached execution reports.
pub enum Event {
    /// Code called a tool whose policy is `confirm`: the user must answer first.
    Question(Question),
    /// The latest output line, every few seconds while the code runs.
    Progress(Progress),
    /// The execution ended.
    Done(Box<Result<Executed, ExecuteError>>),
}

/// One question from the code's upstream call (or its plan), waiting for its answer.
pub struct Question {
    /// What the user is asked (the server, the tool and the call's arguments; or the plan).
    pub message: String,
    /// The key it travels under (a plan's `plan-<id>`); `None`: numbered by its driver.
    pub key: Option<String>,
    answer: oneshot::Sender<Answer>,
}

impl Question {
    /// Gives the code its answer. An execution that already ended ignores it.
    pub fn answer(self, answer: Answer) {
        let _ = self.answer.send(answer);
    }
}

/// A running execution and the means to drive it.
pub struct Detached {
    pub events: mpsc::Receiver<Event>,
    /// Cancels the execution (its container is removed).
    pub cancel: CancellationToken,
}

/// Asks through the channel: the question goes to the driver, the code waits for the answer.
struct ChannelConfirm {
    events: mpsc::Sender<Event>,
}

#[async_trait::async_trait]
impl Confirm for ChannelConfirm {
    async fn ask(&self, prompt: Prompt) -> Result<Answer, AskError> {
        let (answer, answered) = oneshot::channel();
        let question = Question {
            message: prompt.message,
            key: prompt.key,
            answer,
        };
        self.events
            .send(Event::Question(question))
            .await
            .map_err(|_| AskError::Failed("the request that ran the code is gone".into()))?;
        // A pause nobody resumes within --confirm-wait-secs drops the question.
        answered.await.map_err(|_| {
            AskError::Expired(
                "no answer came within the wait (--confirm-wait-secs): the question was abandoned"
                    .into(),
            )
        })
    }
}

impl App {
    /// Starts `request` in a task of its own; its questions (`confirm` policy), progress lines
    /// and end arrive as [`Event`]s. The request's own `confirm` and `tap` are replaced.
    pub fn execute_detached(self: &Arc<Self>, mut request: ExecuteRequest) -> Detached {
        let (events, received) = mpsc::channel(EVENTS);
        let cancel = CancellationToken::new();
        let (tap, latest) = LatestLine::new();
        request.tap = Some(Arc::new(tap));
        request.confirm = Some(Arc::new(ChannelConfirm {
            events: events.clone(),
        }));
        let (app, stop) = (self.clone(), cancel.clone());
        let run = async move {
            let run = app.execute(request, stop);
            let shown = |line| app.privacy().text_cut(line, progress::MAX_LINE_CHARS);
            let report = |p: Progress| {
                let _ = events.try_send(Event::Progress(p));
                std::future::ready(())
            };
            let ran = progress::with_progress(run, latest, shown, report).await;
            let _ = events.send(Event::Done(Box::new(ran))).await;
        };
        // The request's span (its id, the tenant) goes with the execution into its task.
        tokio::spawn(run.in_current_span());
        Detached {
            events: received,
            cancel,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_question_waits_for_its_answer() {
        let (events, mut received) = mpsc::channel(EVENTS);
        let confirm = ChannelConfirm { events };
        let asking = tokio::spawn(async move { confirm.ask(Prompt::new("May I?")).await });
        let Some(Event::Question(q)) = received.recv().await else {
            panic!("a question arrives");
        };
        assert_eq!(q.message, "May I?");
        q.answer(Answer::Decline);
        assert_eq!(asking.await.unwrap(), Ok(Answer::Decline));
    }

    #[tokio::test]
    async fn an_abandoned_question_is_refused() {
        let (events, mut received) = mpsc::channel(EVENTS);
        let confirm = ChannelConfirm { events };
        let asking = tokio::spawn(async move { confirm.ask(Prompt::new("May I?")).await });
        drop(received.recv().await);
        let refused = asking.await.unwrap().unwrap_err();
        assert!(
            matches!(&refused, AskError::Expired(why) if why.contains("no answer")),
            "{refused}"
        );
    }
}
