//! One execution in one fresh container: create → attach → start → send the job → serve the
//! harness's frames until `done`, the deadline, cancellation or end of stream → outcome.
//!
//! The loop drains the attach stream continuously (the engine writes to attached clients
//! synchronously, so a slow reader would stall the container), keeps a bounded amount of what
//! it reads, and kills the container when the code overruns its time or floods past the hard
//! output cap. Removal is the [`ContainerGuard`]'s job, so every path — including a dropped
//! future — removes the container.

use std::time::{Duration, Instant};

use bollard::container::LogOutput;
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, StartContainerOptions,
    WaitContainerOptionsBuilder,
};
use futures::StreamExt;
use serde::Serialize;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::time::Instant as TokioInstant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::channel::{
    CallHandler, FromHarness, HarnessLimits, Line, LineSplitter, MAX_FRAME_BYTES, StreamName,
    ToHarness, parse_frame,
};
use super::engine::{Engine, EngineError};
use super::events::{EngineBreaks, OomEvents};
use super::output::BoundedText;
use super::spec::{SandboxSpec, container_body};

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

/// How an execution ended, machine-readable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The code ran to the end.
    Ok,
    /// The code raised an exception (or the sandbox failed).
    Error,
    /// Killed at the deadline.
    Timeout,
    /// Killed by the kernel for exceeding its memory limit (or raised MemoryError).
    MemoryLimit,
    /// Killed for writing past the hard output cap.
    OutputLimit,
    /// Cancelled by the client or by server shutdown.
    Cancelled,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::Ok,
        Status::Error,
        Status::Timeout,
        Status::MemoryLimit,
        Status::OutputLimit,
        Status::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Error => "error",
            Status::Timeout => "timeout",
            Status::MemoryLimit => "memory_limit",
            Status::OutputLimit => "output_limit",
            Status::Cancelled => "cancelled",
        }
    }
}

/// Everything an execution produced, before it is shaped into the tool's response.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub status: Status,
    pub result: Value,
    pub result_truncated: bool,
    pub stdout: BoundedText,
    pub stderr: BoundedText,
    pub error: Option<String>,
    pub error_type: Option<String>,
    pub traceback: Option<String>,
    pub elapsed: Duration,
}

impl Outcome {
    pub fn success(&self) -> bool {
        self.status == Status::Ok
    }
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
const KILL_LIMIT: Duration = Duration::from_secs(10);
const INSPECT_LIMIT: Duration = Duration::from_secs(10);

/// How long output is drained after the execution has ended (the removal ends it sooner).
const DRAIN_LIMIT: Duration = Duration::from_secs(60);

/// Removes its container when dropped, in the background, tracked so shutdown can wait.
pub(crate) struct ContainerGuard {
    engine: Engine,
    id: String,
    tracker: TaskTracker,
    /// Whether the engine answered the create. A create abandoned half-way (its execution
    /// timed out or was cancelled) may still land after a first removal found nothing, so
    /// then the removal is repeated for a few seconds.
    created: bool,
}

impl ContainerGuard {
    pub(crate) fn new(engine: Engine, id: String, tracker: TaskTracker) -> Self {
        Self {
            engine,
            id,
            tracker,
            created: false,
        }
    }
}

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        let engine = self.engine.clone();
        let id = std::mem::take(&mut self.id);
        let created = self.created;
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            self.tracker.spawn_on(
                async move {
                    if !created {
                        // Removing a name the engine does not know (yet) succeeds: repeat it.
                        for delay in [0, 1, 2, 4] {
                            tokio::time::sleep(Duration::from_secs(delay)).await;
                            let _ = engine.remove(&id).await;
                        }
                    }
                    // Retried, so an engine restarting under us does not leave the container.
                    for delay in [1, 2, 4, 8, 0] {
                        match engine.remove(&id).await {
                            Ok(()) => return,
                            Err(e) if delay == 0 => {
                                tracing::warn!(container = %id, "could not remove sandbox container: {e}; the next start removes it");
                            }
                            Err(_) => tokio::time::sleep(Duration::from_secs(delay)).await,
                        }
                    }
                },
                &handle,
            );
        }
    }
}

/// Bytes the server reads from one container before it kills it as a flood. The harness
/// stops forwarding at the output limits, so only code that bypasses it gets here.
fn hard_cap(limits: HarnessLimits) -> u64 {
    let kept = 2 * limits.max_output_bytes + limits.max_result_bytes;
    8 * kept as u64 + 16 * 1024 * 1024
}

/// Longest frame accepted: a done frame carries the result (as JSON text inside JSON, which
/// escaping can double when it is cut), the error and the traceback.
fn frame_limit(limits: HarnessLimits) -> usize {
    2 * limits.max_result_bytes + 2 * MAX_ERROR_BYTES + (1 << 20)
}

/// The state the frame loop accumulates.
struct Collector {
    stdout: BoundedText,
    stderr: BoundedText,
    splitter: LineSplitter,
    received: u64,
    done: Option<super::channel::DoneFrame>,
}

impl Collector {
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
enum Stop {
    Done,
    Eof,
    Deadline,
    Cancelled,
    Flood,
}

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

type OutputStream = std::pin::Pin<
    Box<dyn futures::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>,
>;
type InputSink = std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>;

/// A created, attached and started container whose harness waits for its job. Dropping it
/// removes the container.
pub(crate) struct Started {
    name: String,
    output: OutputStream,
    input: InputSink,
    guard: ContainerGuard,
}

impl Started {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// False when the container has already ended or printed before its job: it must not be
    /// used (a pooled container is checked this way before it is handed out).
    pub(crate) fn is_waiting(&mut self) -> bool {
        use futures::FutureExt;
        self.output.next().now_or_never().is_none()
    }
}

/// Creates, attaches and starts a container made from `spec`. The guard comes first and
/// works by name: a create the engine carried out but whose answer was lost is still removed.
pub(crate) async fn start(
    engine: &Engine,
    spec: &SandboxSpec,
    name: &str,
    tracker: &TaskTracker,
) -> Result<Started, EngineError> {
    let mut guard = ContainerGuard::new(engine.clone(), name.to_string(), tracker.clone());
    let docker = engine.client();
    let opts = CreateContainerOptionsBuilder::default().name(name).build();
    let created = docker
        .create_container(Some(opts), container_body(spec))
        .await;
    guard.created = true;
    created.map_err(|e| EngineError::api("create a sandbox container", e))?;
    let attach = AttachContainerOptionsBuilder::default()
        .stdin(true)
        .stdout(true)
        .stderr(true)
        .stream(true)
        .build();
    let attached = docker
        .attach_container(name, Some(attach))
        .await
        .map_err(|e| EngineError::api("attach to a sandbox container", e))?;
    docker
        .start_container(name, None::<StartContainerOptions>)
        .await
        .map_err(|e| EngineError::api("start a sandbox container", e))?;
    Ok(Started {
        name: name.to_string(),
        output: attached.output,
        input: attached.input,
        guard,
    })
}

/// Where an execution's container comes from.
pub(crate) enum Source<'a> {
    /// Created now from this spec, under this name.
    Cold(&'a SandboxSpec, &'a str),
    /// Started ahead (the pool).
    Warm(Started),
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

/// Longest `error` or `traceback` passed on.
const MAX_ERROR_BYTES: usize = 64 * 1024;

/// The result as it goes back: unchanged when its JSON fits in `max` bytes, else the first
/// `max` bytes of that JSON as a string, and `true`.
fn bound_result(result: Value, max: usize) -> (Value, bool) {
    let text = result.to_string();
    if text.len() <= max {
        return (result, false);
    }
    (Value::String(bound_text(text, max)), true)
}

/// `s` cut to at most `max` bytes on a character boundary.
fn bound_text(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

/// Kills the container, waiting at most [`KILL_LIMIT`]. A failure is logged and returned as
/// text for the message, never as an error, so the outcome (and the output collected so far)
/// still reaches the caller. The guard's removal follows either way.
async fn kill_bounded(engine: &Engine, id: &str) -> Result<(), String> {
    let why = match tokio::time::timeout(KILL_LIMIT, engine.kill(id)).await {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no answer within {} seconds", KILL_LIMIT.as_secs()),
    };
    tracing::warn!(container = %id, "could not kill sandbox container: {why}");
    Err(why)
}

fn memory_message(memory_bytes: i64) -> String {
    format!(
        "Memory limit exceeded: the execution used more than its {} MB and was killed. Process the data in smaller pieces or pass a larger memory_mb",
        memory_bytes / (1024 * 1024)
    )
}

/// After end of stream: waits (briefly) until the engine has the container stopped, then reads
/// whether it was OOM-killed.
async fn wait_exit_state(
    engine: &Engine,
    id: &str,
    deadline: TokioInstant,
) -> Result<(bool, Option<i64>), EngineError> {
    let opts = WaitContainerOptionsBuilder::default()
        .condition("not-running")
        .build();
    let wait_until = deadline.min(TokioInstant::now() + Duration::from_secs(10));
    let mut wait = engine.client().wait_container(id, Some(opts));
    // A non-zero exit arrives as an error item; either way the container has stopped.
    let _ = tokio::time::timeout_at(wait_until, wait.next()).await;
    tokio::time::timeout(INSPECT_LIMIT, engine.exit_state(id))
        .await
        .unwrap_or_else(|_| {
            Err(EngineError::Unreachable(format!(
                "inspect a sandbox container: no answer within {} seconds",
                INSPECT_LIMIT.as_secs()
            )))
        })
}
