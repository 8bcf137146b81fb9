//! One execution in one fresh container: create → attach → start → send the job → serve the
//! harness's frames until `done`, the deadline, cancellation or end of stream → outcome.
//!
//! The loop drains the attach stream continuously (the engine writes to attached clients
//! synchronously, so a slow reader would stall the container), keeps a bounded amount of what
//! it reads, and kills the container when the code overruns its time or floods past the hard
//! output cap. Removal is the [`ContainerGuard`]'s job, so every path — including a dropped
//! future — removes the container.
mod frames;
mod outcome;
mod start;

use frames::{Collector, Stop, frame_limit, hard_cap};
use outcome::{
    MAX_ERROR_BYTES, bound_result, bound_text, kill_bounded, memory_message, wait_exit_state,
};
pub use outcome::{Outcome, Status};
pub(crate) use start::{Source, Started, start};

use std::time::{Duration, Instant};

use bollard::container::LogOutput;
use futures::StreamExt;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::time::Instant as TokioInstant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::channel::{
    CallHandler, FromHarness, HarnessLimits, Line, LineSplitter, MAX_FRAME_BYTES, ToHarness,
    parse_frame,
};
use super::docker::{Engine, EngineError};
use super::events::{EngineBreaks, OomEvents};
use super::output::BoundedText;

/// What the caller asked to run, with limits already checked and clamped.
#[derive(Debug, Clone)]
pub struct Job {
    pub code: String,
    pub context_vars: Value,
    pub timeout: Duration,
    pub memory_bytes: i64,
    /// Receives each output chunk as it arrives (set when the client asked for progress).
    pub tap: Option<crate::progress::OutputTap>,
}

/// Default of the longest wait for a container to be ready for its job: taken from the pool
/// or created, attached and started (a cold start takes 0.2-1.6 s on a loaded 2-core machine).
/// The code's own timeout starts once it has its job. `--start-timeout-secs` sets it.
pub const DEFAULT_START_LIMIT: Duration = Duration::from_secs(30);
/// Exit code of a process ended by SIGKILL (the kernel's OOM killer, among others).
const SIGKILL_EXIT: i64 = 137;
/// Exit code of a process ended by SIGTERM (what the engine sends when it shuts down).
const SIGTERM_EXIT: i64 = 143;
/// How long an execution that ended with [`SIGKILL_EXIT`] waits for the engine's late `oom`
/// event (see [`super::events`]).
const OOM_EVENT_WAIT: Duration = Duration::from_secs(1);
/// How long an execution whose container was stopped by a signal waits for the engine's event
/// stream to break, the sign that the engine itself went away (see [`EngineBreaks`]).
const ENGINE_BREAK_WAIT: Duration = Duration::from_secs(1);
/// Longest wait for the engine to kill a container, and to report its state, once the code
/// has ended or run out of time: an engine that does not answer does not hold the response.
pub(super) const KILL_LIMIT: Duration = Duration::from_secs(10);
pub(super) const INSPECT_LIMIT: Duration = Duration::from_secs(10);

/// How long output is drained after the execution has ended (the removal ends it sooner).
const DRAIN_LIMIT: Duration = Duration::from_secs(60);

/// What every execution of one sandbox shares.
pub(crate) struct Runner<'a> {
    pub engine: &'a Engine,
    pub limits: HarnessLimits,
    pub calls: &'a dyn CallHandler,
    /// Background removals and drains, awaited at shutdown.
    pub tracker: &'a TaskTracker,
    pub oom: &'a OomEvents,
    pub breaks: &'a EngineBreaks,
    /// The start limit, for the message when it is reached.
    pub start_limit: Duration,
}

/// Runs `job` in a fresh container (made now, or taken ready from the pool). The container
/// must be ready for the job by `start_deadline`. The container is removed when the returned
/// future completes or is dropped; it never runs another job.
pub(crate) async fn execute(
    runner: &Runner<'_>,
    source: Source<'_>,
    job: &Job,
    cancel: &CancellationToken,
    start_deadline: TokioInstant,
) -> Result<Outcome, EngineError> {
    let Runner {
        engine,
        limits,
        calls,
        tracker,
        oom,
        breaks,
        start_limit,
    } = *runner;
    let started = Instant::now();
    let breaks_seen = breaks.count();

    let setup = async {
        let mut ready = match source {
            Source::Warm(ready) => ready,
            Source::Cold(spec, name) => start(engine, spec, name, tracker).await?,
        };
        let job_line = ToHarness::Job {
            code: &job.code,
            context_vars: &job.context_vars,
            limits,
        }
        .to_line();
        // The harness reads its job before it runs anything, so this completes promptly.
        ready
            .input
            .write_all(&job_line)
            .await
            .map_err(|e| EngineError::Api {
                action: "deliver the job to the sandbox",
                message: e.to_string(),
            })?;
        Ok::<_, EngineError>(ready)
    };
    let early_stop = |status: Status, error: String| Outcome {
        status,
        result: Value::Null,
        result_truncated: false,
        stdout: BoundedText::new(0),
        stderr: BoundedText::new(0),
        error: Some(error),
        error_type: None,
        traceback: None,
        elapsed: started.elapsed(),
    };
    let ready = tokio::select! {
        biased;
        _ = cancel.cancelled() => {
            return Ok(early_stop(Status::Cancelled, "Execution cancelled while its container was starting".into()));
        }
        _ = tokio::time::sleep_until(start_deadline) => return Err(EngineError::Slow(start_limit.as_secs())),
        ready = setup => ready?,
    };
    let Started {
        name,
        mut output,
        mut input,
        guard: _guard,
    } = ready;
    let id = name.as_str();
    let job_sent = started.elapsed();
    // The code's time starts now: starting its container is the engine's time.
    let deadline = TokioInstant::now() + job.timeout;

    let mut c = Collector {
        stdout: BoundedText::new(limits.max_output_bytes),
        stderr: BoundedText::new(limits.max_output_bytes),
        splitter: LineSplitter::new(frame_limit(limits)),
        received: 0,
        done: None,
    };
    let cap = hard_cap(limits);

    let stop = loop {
        let chunk = tokio::select! {
            biased;
            _ = cancel.cancelled() => break Stop::Cancelled,
            _ = tokio::time::sleep_until(deadline) => break Stop::Deadline,
            chunk = output.next() => chunk,
        };
        let message = match chunk {
            None => break Stop::Eof,
            Some(Err(e)) => {
                return Err(EngineError::api("stream sandbox output", e).lost_if_unreachable());
            }
            Some(Ok(LogOutput::StdErr { message })) => {
                c.received += message.len() as u64;
                c.stderr.push_bytes(&message);
                if c.received > cap {
                    break Stop::Flood;
                }
                continue;
            }
            Some(Ok(LogOutput::StdOut { message } | LogOutput::Console { message })) => message,
            Some(Ok(LogOutput::StdIn { .. })) => continue,
        };
        c.received += message.len() as u64;
        if c.received > cap {
            break Stop::Flood;
        }
        let mut stop = None;
        for line in c.splitter.push(&message) {
            let line = match line {
                Line::Complete(line) => line,
                Line::Oversized(_) => {
                    stop = Some(Stop::Flood);
                    break;
                }
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
                    let answer = tokio::select! {
                        biased;
                        _ = cancel.cancelled() => { stop = Some(Stop::Cancelled); break }
                        _ = tokio::time::sleep_until(deadline) => { stop = Some(Stop::Deadline); break }
                        answer = calls.call(&method, params) => answer,
                    };
                    let (result, error) = match answer {
                        Ok(v) => (Some(v), None),
                        Err(e) => (None, Some(e)),
                    };
                    let mut reply = ToHarness::Reply { id, result, error }.to_line();
                    if reply.len() > MAX_FRAME_BYTES {
                        let error = format!(
                            "the answer to `{method}` is {} bytes, over the channel's {MAX_FRAME_BYTES}-byte limit",
                            reply.len()
                        );
                        reply = ToHarness::Reply {
                            id,
                            result: None,
                            error: Some(error),
                        }
                        .to_line();
                    }
                    // A harness that stopped reading gets no reply; the deadline still holds.
                    let _ = tokio::time::timeout_at(deadline, input.write_all(&reply)).await;
                }
                Some(FromHarness::Done(done)) => {
                    c.done = Some(done);
                    stop = Some(Stop::Done);
                    break;
                }
                None => {
                    // Not a frame: something wrote to the channel directly. Keep it as output.
                    c.stdout.push_bytes(&line);
                    c.stdout.push("\n");
                }
            }
        }
        if let Some(stop) = stop {
            break stop;
        }
    };
    drop(input);
    // Keep draining until the container is gone: the engine blocks a container (and a kill of
    // it) on an attached client that stops reading.
    tracker.spawn(async move {
        let drain = async { while output.next().await.is_some() {} };
        let _ = tokio::time::timeout(DRAIN_LIMIT, drain).await;
    });

    let elapsed = started.elapsed();
    tracing::debug!(
        container = %id,
        job_sent_us = job_sent.as_micros() as u64,
        ended_us = elapsed.as_micros() as u64,
        "execution timings"
    );
    let mut outcome = Outcome {
        status: Status::Error,
        result: Value::Null,
        result_truncated: false,
        stdout: c.stdout,
        stderr: c.stderr,
        error: None,
        error_type: None,
        traceback: None,
        elapsed,
    };
    let secs = job.timeout.as_secs_f64();
    match stop {
        Stop::Done => {
            let done = c.done.take().unwrap_or_default();
            outcome.status = if done.success {
                Status::Ok
            } else if done.error_type.as_deref() == Some("MemoryError") {
                Status::MemoryLimit
            } else {
                Status::Error
            };
            // The frame is the harness's word, but sandbox code can forge one: bound it again.
            let (result, cut) = bound_result(done.result, limits.max_result_bytes);
            outcome.result = result;
            outcome.result_truncated = done.result_truncated || cut;
            outcome.error = done.error.map(|e| bound_text(e, MAX_ERROR_BYTES));
            outcome.error_type = done.error_type.map(|e| bound_text(e, 256));
            outcome.traceback = done.traceback.map(|t| bound_text(t, MAX_ERROR_BYTES));
            if outcome.status == Status::MemoryLimit {
                outcome.error = Some(format!(
                    "MemoryError: {}. The execution's memory limit is {} MB: process the data in smaller pieces or pass a larger memory_mb",
                    outcome.error.as_deref().unwrap_or("allocation failed"),
                    job.memory_bytes / (1024 * 1024)
                ));
            }
        }
        Stop::Deadline => {
            let killed = kill_bounded(engine, id).await;
            // A container that hit its memory limit while running out of time was killed by
            // the kernel first; say so. (An engine that did not answer the kill is not asked.)
            let oom_killed = killed.is_ok()
                && matches!(
                    tokio::time::timeout(INSPECT_LIMIT, engine.exit_state(id)).await,
                    Ok(Ok((true, _)))
                );
            if oom_killed {
                outcome.status = Status::MemoryLimit;
                outcome.error = Some(memory_message(job.memory_bytes));
            } else {
                outcome.status = Status::Timeout;
                outcome.error = Some(match killed {
                    Ok(()) => format!(
                        "Execution timed out after {secs} seconds: the container was killed. Make the code faster, process less data per call, or pass a larger timeout_seconds"
                    ),
                    Err(why) => format!(
                        "Execution timed out after {secs} seconds, and the Docker engine did not confirm killing its container ({why}): the engine may be overloaded or stuck, which can also be why the code did not finish. The server removes the container once the engine answers; check the engine with `code-execution-mcp doctor`"
                    ),
                });
            }
        }
        Stop::Cancelled => {
            let _ = kill_bounded(engine, id).await;
            outcome.status = Status::Cancelled;
            outcome.error = Some("Execution cancelled: the container was killed".into());
        }
        Stop::Flood => {
            let _ = kill_bounded(engine, id).await;
            outcome.status = Status::OutputLimit;
            outcome.error = Some(format!(
                "Execution killed: it wrote more than {} bytes of output. Print a summary instead, or write large data to a workspace file",
                cap
            ));
        }
        Stop::Eof => {
            if let Some(rest) = c.splitter.finish() {
                outcome.stdout.push_bytes(&rest);
            }
            let (mut oom_killed, exit_code) = wait_exit_state(engine, id, deadline)
                .await
                .map_err(EngineError::lost_if_unreachable)?;
            if !oom_killed && exit_code == Some(SIGKILL_EXIT) {
                oom_killed = oom.wait_for(id, OOM_EVENT_WAIT).await;
            }
            // Stopped by a signal from outside while the engine's event stream broke: the
            // engine stopped (or restarted) and took the container with it.
            if !oom_killed
                && matches!(exit_code, Some(SIGKILL_EXIT | SIGTERM_EXIT))
                && breaks.changed_since(breaks_seen, ENGINE_BREAK_WAIT).await
            {
                return Err(EngineError::Lost(format!(
                    "its container was stopped with exit code {} as the engine shut down",
                    exit_code.unwrap_or_default()
                )));
            }
            if oom_killed {
                outcome.status = Status::MemoryLimit;
                outcome.error = Some(memory_message(job.memory_bytes));
            } else {
                outcome.error = Some(format!(
                    "The sandbox exited (code {}) before reporting a result: the code may have closed the harness's channel or killed the interpreter (os._exit, signals)",
                    exit_code.map_or_else(|| "unknown".into(), |c| c.to_string())
                ));
            }
        }
    }
    Ok(outcome)
}
