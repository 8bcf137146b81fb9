//! Step 2 of an execution: the frame loop. It drains the container's output continuously (the
//! engine writes to attached clients synchronously, so a slow reader would stall the
//! container), splits it into the harness's frames, keeps a bounded amount of the output they
//! carry, answers the harness's `call` frames, and stops at `done`, the deadline,
//! cancellation, end of stream, or a flood past the hard output cap.
//!
//! Calls are answered concurrently and out of order (replies carry the call's id): a slow
//! upstream tool must neither stall the output drain nor the code's other threads' calls.
//! At most [`MAX_PENDING_CALLS`] are in flight; past that a call is answered with an error.

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::time::Instant as TokioInstant;
use tokio_util::sync::CancellationToken;

use crate::sandbox::engine::backend::{InputSink, Output, OutputStream};
use crate::sandbox::engine::error::EngineError;
use crate::sandbox::run::channel::{
    DoneFrame, FromHarness, HarnessLimits, Line, LineSplitter, MAX_FRAME_BYTES, StreamName,
    ToHarness, parse_frame,
};
use crate::sandbox::run::output::BoundedText;
use crate::sandbox::run::returned::{MAX_IMAGE_BYTES, Returned};
use crate::sandbox::run::{Job, Runner};
use crate::sandbox::stats::Phase;

/// Longest `error` or `traceback` passed on.
pub(super) const MAX_ERROR_BYTES: usize = 64 * 1024;

/// Bytes the server reads from one container before it kills it as a flood. The harness
/// stops forwarding at the output limits, so only code that bypasses it gets here.
pub(super) fn hard_cap(limits: HarnessLimits) -> u64 {
    let kept = 2 * limits.max_output_bytes + limits.max_result_bytes;
    let images = limits.max_images as u64 * IMAGE_FRAME_BYTES as u64;
    8 * kept as u64 + images + 16 * 1024 * 1024
}

/// Longest image frame: [`MAX_IMAGE_BYTES`] in base64, plus room for the rest of the frame.
const IMAGE_FRAME_BYTES: usize = MAX_IMAGE_BYTES / 3 * 4 + 64 * 1024;

/// Longest frame accepted: a done frame carries the result (as JSON text inside JSON, which
/// escaping can double when it is cut), the error and the traceback; an image frame an image.
fn frame_limit(limits: HarnessLimits) -> usize {
    let done = 2 * limits.max_result_bytes + 2 * MAX_ERROR_BYTES + (1 << 20);
    if limits.max_images > 0 {
        done.max(IMAGE_FRAME_BYTES)
    } else {
        done
    }
}

/// Calls of one container answered at once; more get an error reply at once.
pub(crate) const MAX_PENDING_CALLS: usize = 64;

/// A call being answered: its id and method, and the answer when it comes.
type PendingCall<'a> = BoxFuture<'a, (u64, String, Result<Value, String>)>;

/// The state the frame loop accumulates.
pub(super) struct Collector {
    pub(super) stdout: BoundedText,
    pub(super) stderr: BoundedText,
    pub(super) splitter: LineSplitter,
    received: u64,
    pub(super) done: Option<DoneFrame>,
    pub(super) returned: Returned,
    /// The bytes that arrived after `done` in the same chunk (a session's snapshot begins
    /// there), as they are.
    pub(super) after_done: Vec<u8>,
}

impl Collector {
    fn new(limits: HarnessLimits) -> Self {
        let limit = frame_limit(limits);
        Self {
            stdout: BoundedText::new(limits.max_output_bytes),
            stderr: BoundedText::new(limits.max_output_bytes),
            splitter: LineSplitter::new(limit),
            received: 0,
            done: None,
            returned: Returned::default(),
            after_done: Vec::new(),
        }
    }

    fn output(&mut self, stream: StreamName, data: &str, truncated: bool, dropped: u64) {
        let text = match stream {
            StreamName::Stdout => &mut self.stdout,
            StreamName::Stderr => &mut self.stderr,
        };
        text.push(data);
        if truncated {
            text.note_dropped(dropped);
        }
    }
}

/// Why the frame loop stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// The harness sent its `done` frame.
    Done,
    /// The output ended without one: the container exited (or was stopped).
    Eof,
    /// The code ran past its timeout.
    Deadline,
    Cancelled,
    /// The code wrote past the hard output cap, or a line past the frame limit.
    Flood,
}

/// Serves one container's frames until the loop stops, then returns why with what it
/// collected. An output stream that fails is the engine lost mid-execution.
pub(super) async fn serve(
    runner: &Runner<'_>,
    job: &Job,
    output: &mut OutputStream,
    input: &mut InputSink,
    cancel: &CancellationToken,
    deadline: TokioInstant,
    job_written: std::time::Instant,
) -> Result<(Stop, Collector), EngineError> {
    let mut c = Collector::new(runner.limits);
    let mut first = true;
    let cap = hard_cap(runner.limits);
    let mut pending: FuturesUnordered<PendingCall<'_>> = FuturesUnordered::new();
    let stop = loop {
        let chunk = tokio::select! {
            biased;
            _ = cancel.cancelled() => break Stop::Cancelled,
            _ = tokio::time::sleep_until(deadline) => break Stop::Deadline,
            Some((id, method, answer)) = pending.next(), if !pending.is_empty() => {
                reply(input, id, &method, answer, deadline).await;
                continue;
            }
            chunk = output.next() => chunk,
        };
        if std::mem::take(&mut first) {
            runner
                .cleanup
                .stats
                .phase(Phase::FirstFrame, job_written.elapsed());
        }
        let message = match chunk {
            None => break Stop::Eof,
            Some(Err(e)) => return Err(e.lost_if_unreachable()),
            Some(Ok(Output::Stderr(message))) => {
                c.received += message.len() as u64;
                c.stderr.push_bytes(&message);
                if c.received > cap {
                    break Stop::Flood;
                }
                continue;
            }
            Some(Ok(Output::Stdout(message))) => message,
        };
        c.received += message.len() as u64;
        if c.received > cap {
            break Stop::Flood;
        }
        if let Some(stop) =
            handle_lines(runner, job, &mut c, &message, &mut pending, input, deadline).await
        {
            break stop;
        }
    };
    Ok((stop, c))
}

/// Handles the complete lines in a chunk of the channel: output frames are kept, calls are
/// answered, `done` stops the loop, and anything else is kept as output.
async fn handle_lines<'a>(
    runner: &Runner<'a>,
    job: &'a Job,
    c: &mut Collector,
    chunk: &[u8],
    pending: &mut FuturesUnordered<PendingCall<'a>>,
    input: &mut InputSink,
    deadline: TokioInstant,
) -> Option<Stop> {
    let (lines, rest) = c.splitter.push_until(chunk, is_done);
    c.after_done = rest.unwrap_or_default();
    for line in lines {
        let line = match line {
            Line::Complete(line) => line,
            Line::Oversized(_) => return Some(Stop::Flood),
        };
        match parse_frame(&line) {
            Some(FromHarness::Output {
                stream,
                data,
                truncated,
                dropped_bytes,
            }) => {
                if let Some(tap) = &job.tap {
                    tap.offer(&data);
                }
                c.output(stream, &data, truncated, dropped_bytes)
            }
            Some(FromHarness::Call { id, method, params }) => {
                if pending.len() >= MAX_PENDING_CALLS {
                    let error = format!(
                        "{MAX_PENDING_CALLS} calls are already waiting for answers: wait for some to finish"
                    );
                    reply(input, id, &method, Err(error), deadline).await;
                    continue;
                }
                let calls = job.calls.as_deref().unwrap_or(runner.calls);
                pending.push(Box::pin(async move {
                    let answer = calls.call(&method, params).await;
                    (id, method, answer)
                }));
            }
            Some(FromHarness::Image {
                source,
                data,
                dropped,
            }) => c
                .returned
                .image(source, data.as_deref(), dropped, runner.limits.max_images),
            Some(FromHarness::Link { path, description }) => c.returned.link(path, description),
            Some(
                frame @ (FromHarness::Plan { .. }
                | FromHarness::PlanOptions { .. }
                | FromHarness::PlanRefused { .. }),
            ) => job
                .calls
                .as_deref()
                .unwrap_or(runner.calls)
                .plan_frame(frame),
            Some(FromHarness::Done(done)) => {
                c.done = Some(done);
                return Some(Stop::Done);
            }
            // Readiness, for the pool and a prepared container; and a snapshot's frames,
            // which only follow `done`: nothing for the frame loop.
            Some(
                FromHarness::Ready
                | FromHarness::Loaded
                | FromHarness::Blob { .. }
                | FromHarness::StateEnd { .. },
            ) => {}
            None => {
                // Not a frame: something wrote to the channel directly. Keep it as output.
                c.stdout.push_bytes(&line);
                c.stdout.push("\n");
            }
        }
    }
    None
}

/// Whether a line is the `done` frame (the harness writes `type` first; a line that only
/// starts like one is not): what follows it is read as it is.
fn is_done(line: &[u8]) -> bool {
    line.starts_with(br#"{"type":"done""#)
        && matches!(parse_frame(line), Some(FromHarness::Done(_)))
}

/// Writes the reply to one call (an error if the answer is too large for the channel).
async fn reply(
    input: &mut InputSink,
    id: u64,
    method: &str,
    answer: Result<Value, String>,
    deadline: TokioInstant,
) {
    let (result, error) = match answer {
        Ok(v) => (Some(v), None),
        Err(e) => (None, Some(e)),
    };
    let mut line = ToHarness::Reply { id, result, error }.to_line();
    if line.len() > MAX_FRAME_BYTES {
        let error = format!(
            "the answer to `{method}` is {} bytes, over the channel's {MAX_FRAME_BYTES}-byte limit",
            line.len()
        );
        line = ToHarness::Reply {
            id,
            result: None,
            error: Some(error),
        }
        .to_line();
    }
    // A harness that stopped reading gets no reply; the deadline still holds.
    let _ = tokio::time::timeout_at(deadline, input.write_all(&line)).await;
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_a_done_frame_ends_the_lines() {
        assert!(super::is_done(br#"{"type":"done","success":true}"#));
        assert!(!super::is_done(br#"{"type":"done"x"#));
        assert!(!super::is_done(br#"{"type":"output","stream":"stdout"}"#));
    }
}
