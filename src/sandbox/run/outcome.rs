//! Step 3 of an execution: its outcome. [`Status`] and [`Outcome`], and the classification of
//! why the frame loop stopped into one bounded outcome: what the harness reported, or what the
//! engine tells of a container that ended without a word (the memory limit, an engine that
//! went away, code that killed its interpreter), after killing what still runs.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio::time::Instant as TokioInstant;

use crate::sandbox::engine::backend::{Backend, ExitState};
use crate::sandbox::engine::error::EngineError;
use crate::sandbox::run::channel::{DoneFrame, StateReport};
use crate::sandbox::run::frames::{Collector, MAX_ERROR_BYTES, Stop, hard_cap};
use crate::sandbox::run::output::{BoundedText, EDGE_BYTES};
use crate::sandbox::run::returned::Returned;
use crate::sandbox::run::{Job, Runner};
use crate::text::floor_char_boundary;

/// Exit code of a process ended by SIGKILL (the kernel's OOM killer, among others).
const SIGKILL_EXIT: i64 = 137;
/// Exit code of a process ended by SIGTERM (what the engine sends when it shuts down).
const SIGTERM_EXIT: i64 = 143;
/// How long an execution that ended with [`SIGKILL_EXIT`] waits for the engine's late `oom`
/// event (see [`crate::sandbox::engine::events`]). Only a SIGKILL that was no memory kill waits it out
/// in full; a memory kill returns as soon as its event arrives.
const OOM_EVENT_WAIT: Duration = Duration::from_secs(5);
/// How long an execution whose container was stopped by a signal waits for the engine's event
/// stream to break, the sign that the engine itself went away (see
/// [`crate::sandbox::engine::events::EngineBreaks`]).
const ENGINE_BREAK_WAIT: Duration = Duration::from_secs(1);
/// Longest wait for the engine to kill a container, and to report its state, once the code
/// has ended or run out of time: an engine that does not answer does not hold the response.
const KILL_LIMIT: Duration = Duration::from_secs(10);
const INSPECT_LIMIT: Duration = Duration::from_secs(10);
/// Longest wait for a container whose output ended to be reported stopped.
const STOP_WAIT: Duration = Duration::from_secs(10);

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
    /// Images and resource links the code returned (as sent: not yet checked).
    pub returned: Returned,
    /// What followed the cuts of `result`, `error` and `traceback` (those of stdout and stderr
    /// are in their [`BoundedText`]).
    pub edges: Edges,
    /// Top-level modules the code imported, as the harness reported them (bounded, names only).
    pub imports: Vec<String>,
    /// A session's state after the code ran, as the harness reported it (bounded).
    pub state: Option<StateReport>,
    /// From the execution's start to its job written: its container's start, or none.
    pub ready_after: Duration,
    /// How its container was had, when it was not ready at once.
    pub start: Option<crate::sandbox::StartNote>,
}

/// The bytes that followed a cut, up to [`EDGE_BYTES`], never shown: only a rewrite of the cut
/// text reads them (PII tokenization, which must see a value the cut splits whole). Empty
/// where nothing was cut.
#[derive(Debug, Clone, Default)]
pub struct Edges {
    /// After the cut of a result too large for `max_result_bytes` (then a string).
    pub result: String,
    pub error: String,
    pub traceback: String,
}

impl Outcome {
    pub fn success(&self) -> bool {
        self.status == Status::Ok
    }

    /// An outcome without output or result: `status`, and `error` saying why.
    pub fn without_output(status: Status, error: impl Into<String>, elapsed: Duration) -> Self {
        Self {
            status,
            result: Value::Null,
            result_truncated: false,
            stdout: BoundedText::new(0),
            stderr: BoundedText::new(0),
            error: Some(error.into()),
            error_type: None,
            traceback: None,
            elapsed,
            returned: Returned::default(),
            edges: Edges::default(),
            imports: Vec::new(),
            state: None,
            ready_after: Duration::ZERO,
            start: None,
        }
    }
}

/// Most modules an outcome lists as imported.
const MAX_IMPORTS: usize = 32;
/// Most names a state report lists (carried and not carried, each).
const MAX_STATE_NAMES: usize = 500;

/// The imports a done frame claims, kept only where they look like module names: the frame
/// may be forged by sandbox code, and these names become the pool's preload.
fn bound_imports(imports: Vec<String>) -> Vec<String> {
    let identifier = |part: &str| {
        !part.is_empty()
            && !part.starts_with(|c: char| c.is_ascii_digit())
            && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    imports
        .into_iter()
        .filter(|m| m.len() <= 128 && m.split('.').count() <= 6 && m.split('.').all(identifier))
        .take(MAX_IMPORTS)
        .collect()
}

/// A state report cut to [`MAX_STATE_NAMES`] names each, names and reasons to a few hundred
/// characters.
fn bound_state(mut report: StateReport) -> StateReport {
    report.carried.truncate(MAX_STATE_NAMES);
    for name in &mut report.carried {
        *name = crate::text::cut(name, 256);
    }
    report.not_carried.truncate(MAX_STATE_NAMES);
    for entry in &mut report.not_carried {
        entry.name = crate::text::cut(&entry.name, 256);
        entry.reason = crate::text::cut(&entry.reason, 512);
    }
    report.reason = report.reason.map(|r| crate::text::cut(&r, 1024));
    report
}

/// What the frame loop left: why it stopped, what it collected, and when.
pub(super) struct Ended<'a> {
    pub stop: Stop,
    pub collected: Collector,
    /// The container's name.
    pub id: &'a str,
    /// The code's deadline.
    pub deadline: TokioInstant,
    pub elapsed: Duration,
    /// [`crate::sandbox::engine::events::EngineBreaks::count`] when the execution began.
    pub breaks_seen: u64,
}

/// The outcome of an execution whose frame loop stopped. A container still running is killed
/// first (Deadline, Cancelled, Flood); one that ended by itself is asked how (Eof). An error
/// means the engine went away and the outcome is unknown.
pub(super) async fn classify(
    runner: &Runner<'_>,
    job: &Job,
    ended: Ended<'_>,
) -> Result<Outcome, EngineError> {
    let Ended {
        stop,
        collected: mut c,
        id,
        deadline,
        elapsed,
        breaks_seen,
    } = ended;
    let backend = runner.backend.as_ref();
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
        returned: std::mem::take(&mut c.returned),
        edges: Edges::default(),
        imports: Vec::new(),
        state: None,
        ready_after: Duration::ZERO,
        start: None,
    };
    match stop {
        Stop::Done => {
            let done = c.done.take().unwrap_or_default();
            from_done(&mut outcome, done, runner, job);
        }
        Stop::Deadline => timed_out(&mut outcome, backend, id, job).await,
        Stop::Cancelled => {
            let _ = kill_bounded(backend, id).await;
            outcome.status = Status::Cancelled;
            outcome.error = Some("Execution cancelled: the container was killed".into());
        }
        Stop::Flood => {
            let _ = kill_bounded(backend, id).await;
            outcome.status = Status::OutputLimit;
            outcome.error = Some(format!(
                "Execution killed: it wrote more than {} bytes of output. Print a summary instead, or write large data to a workspace file",
                hard_cap(runner.limits)
            ));
        }
        Stop::Eof => {
            if let Some(rest) = c.splitter.finish() {
                outcome.stdout.push_bytes(&rest);
            }
            let exit = wait_exit_state(backend, id, deadline)
                .await
                .map_err(EngineError::lost_if_unreachable)?;
            outcome.error = Some(
                ended_by_itself(&mut outcome.status, exit, runner, job, id, breaks_seen).await?,
            );
        }
    }
    Ok(outcome)
}

/// Kills the container, waiting at most [`KILL_LIMIT`]. A failure is logged and returned as
/// text for the message, never as an error, so the outcome (and the output collected so far)
/// still reaches the caller. The guard's removal follows either way.
async fn kill_bounded(backend: &dyn Backend, id: &str) -> Result<(), String> {
    let why = match tokio::time::timeout(KILL_LIMIT, backend.kill(id)).await {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no answer within {} seconds", KILL_LIMIT.as_secs()),
    };
    tracing::warn!(container = %id, "could not kill sandbox container: {why}");
    Err(why)
}

/// After end of stream: waits (briefly) until the engine has the container stopped, then reads
/// whether it was OOM-killed.
async fn wait_exit_state(
    backend: &dyn Backend,
    id: &str,
    deadline: TokioInstant,
) -> Result<ExitState, EngineError> {
    let wait_until = deadline.min(TokioInstant::now() + STOP_WAIT);
    let _ = tokio::time::timeout_at(wait_until, backend.wait_stopped(id)).await;
    tokio::time::timeout(INSPECT_LIMIT, backend.exit_state(id))
        .await
        .unwrap_or_else(|_| {
            Err(EngineError::Unreachable(format!(
                "inspect a sandbox container: no answer within {} seconds",
                INSPECT_LIMIT.as_secs()
            )))
        })
}

/// The result as it goes back: unchanged when its JSON fits in `max` bytes, else the first
/// `max` bytes of that JSON as a string, and `true`; what followed the cut goes to `edge`. A
/// result the harness already cut (`cut_by_harness`) is that JSON text, cut with its own edge
/// past the limit: it is cut again here, not encoded a second time.
fn bound_result(
    result: Value,
    cut_by_harness: bool,
    max: usize,
    edge: &mut String,
) -> (Value, bool) {
    let text = match result {
        Value::String(text) if cut_by_harness => text,
        result => {
            let text = result.to_string();
            if text.len() <= max {
                return (result, false);
            }
            text
        }
    };
    (Value::String(bound_text(text, max, edge)), true)
}

/// `s` cut to at most `max` bytes on a character boundary; up to [`EDGE_BYTES`] of what
/// followed the cut go to `edge`.
fn bound_text(mut s: String, max: usize, edge: &mut String) -> String {
    if s.len() > max {
        let cut = floor_char_boundary(s.as_bytes(), max);
        let end = floor_char_boundary(s.as_bytes(), cut + EDGE_BYTES);
        *edge = s[cut..end].to_string();
        s.truncate(cut);
    }
    s
}

/// A SIGKILL the engine did not report as an OOM kill, `why` it could not: most likely the
/// memory limit all the same.
fn unreported_kill_message(memory_bytes: i64, why: &str) -> String {
    format!(
        "The sandbox was killed (SIGKILL, exit code 137) before reporting a result, most likely at its memory limit of {} MB: {why}, so the server cannot be sure. Process the data in smaller pieces or pass a larger memory_mb (code that kills its own interpreter ends the same way)",
        memory_bytes / (1024 * 1024)
    )
}

/// Why the engine could not tell: it never reports OOM kills.
const ENGINE_NEVER_REPORTS: &str = "this engine (Podman before 5.0) does not report OOM kills";

/// Why the engine could not tell: its notice did not come within [`OOM_EVENT_WAIT`]. Docker
/// 20.10 records a kill whose exit it handled first as no OOM kill, and under load its late
/// `oom` event can be lost too (measured: 1 memory kill in 512 with both cores busy).
fn engine_did_not_report() -> String {
    format!(
        "the engine reported no OOM kill for it within {} s (under load it can lose that notice)",
        OOM_EVENT_WAIT.as_secs()
    )
}

fn memory_message(memory_bytes: i64) -> String {
    format!(
        "Memory limit exceeded: the execution used more than its {} MB and was killed. Process the data in smaller pieces or pass a larger memory_mb",
        memory_bytes / (1024 * 1024)
    )
}

/// The outcome as the harness's `done` frame reports it, bounded again (sandbox code can forge
/// the frame).
fn from_done(outcome: &mut Outcome, done: DoneFrame, runner: &Runner<'_>, job: &Job) {
    outcome.imports = bound_imports(done.imports);
    outcome.state = done.state.map(bound_state);
    outcome.status = if done.success {
        Status::Ok
    } else if done.error_type.as_deref() == Some("MemoryError") {
        Status::MemoryLimit
    } else {
        Status::Error
    };
    // The frame is the harness's word, but sandbox code can forge one: bound it again.
    let (result, cut) = bound_result(
        done.result,
        done.result_truncated,
        runner.limits.max_result_bytes,
        &mut outcome.edges.result,
    );
    outcome.result = result;
    outcome.result_truncated = done.result_truncated || cut;
    outcome.error = done
        .error
        .map(|e| bound_text(e, MAX_ERROR_BYTES, &mut outcome.edges.error));
    outcome.error_type = done
        .error_type
        .map(|e| bound_text(e, 256, &mut String::new()));
    outcome.traceback = done
        .traceback
        .map(|t| bound_text(t, MAX_ERROR_BYTES, &mut outcome.edges.traceback));
    if outcome.status == Status::MemoryLimit {
        outcome.error = Some(format!(
            "MemoryError: {}. The execution's memory limit is {} MB: process the data in smaller pieces or pass a larger memory_mb",
            outcome.error.as_deref().unwrap_or("allocation failed"),
            job.memory_bytes / (1024 * 1024)
        ));
    }
}

/// The code ran out of time: its container is killed, and the outcome says whether the kernel
/// had killed it for its memory first.
async fn timed_out(outcome: &mut Outcome, backend: &dyn Backend, id: &str, job: &Job) {
    let secs = job.timeout.as_secs_f64();
    let killed = kill_bounded(backend, id).await;
    // A container that hit its memory limit while running out of time was killed by
    // the kernel first; say so. (An engine that did not answer the kill is not asked.)
    let oom_killed = killed.is_ok()
        && matches!(
            tokio::time::timeout(INSPECT_LIMIT, backend.exit_state(id)).await,
            Ok(Ok(ExitState {
                oom_killed: true,
                ..
            }))
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

/// Why a container that ended by itself before `done` ended, as the error its outcome
/// carries (and `status` set to `MemoryLimit` when the kernel killed it for its memory). An
/// error: the engine stopped and took the container with it.
async fn ended_by_itself(
    status: &mut Status,
    exit: ExitState,
    runner: &Runner<'_>,
    job: &Job,
    id: &str,
    breaks_seen: u64,
) -> Result<String, EngineError> {
    let ExitState {
        mut oom_killed,
        exit_code,
    } = exit;
    if !oom_killed && exit_code == Some(SIGKILL_EXIT) && runner.oom_reported {
        oom_killed = runner.oom.wait_for(id, OOM_EVENT_WAIT).await;
    }
    // Stopped by a signal from outside while the engine's event stream broke: the
    // engine stopped (or restarted) and took the container with it.
    if !oom_killed
        && matches!(exit_code, Some(SIGKILL_EXIT | SIGTERM_EXIT))
        && runner
            .breaks
            .changed_since(breaks_seen, ENGINE_BREAK_WAIT)
            .await
    {
        return Err(EngineError::Lost(format!(
            "its container was stopped with exit code {} as the engine shut down",
            exit_code.unwrap_or_default()
        )));
    }
    Ok(if oom_killed {
        *status = Status::MemoryLimit;
        memory_message(job.memory_bytes)
    } else if exit_code == Some(SIGKILL_EXIT) {
        let why = if runner.oom_reported {
            engine_did_not_report()
        } else {
            ENGINE_NEVER_REPORTS.to_string()
        };
        unreported_kill_message(job.memory_bytes, &why)
    } else if runner.runtime.ended_at_process_limit(exit_code) {
        format!(
            "The sandbox reached its process limit ({} processes and threads) and gVisor ended it (exit code 2) before it could report a result: start fewer processes or threads (a pool of workers rather than one per item), or raise --pids-limit",
            runner.pids_limit
        )
    } else {
        format!(
            "The sandbox exited (code {}) before reporting a result: the code may have closed the harness's channel or killed the interpreter (os._exit, signals)",
            exit_code.map_or_else(|| "unknown".into(), |c| c.to_string())
        )
    })
}

#[cfg(test)]
mod tests {
    use super::bound_imports;

    #[test]
    fn imports_keep_dotted_module_names_and_drop_anything_else() {
        let given = [
            "pandas",
            "matplotlib.pyplot",
            "a..b",
            "os; rm",
            "9x",
            ".x",
            "sklearn.linear_model",
        ];
        let kept = bound_imports(given.iter().map(|s| s.to_string()).collect());
        assert_eq!(
            kept,
            ["pandas", "matplotlib.pyplot", "sklearn.linear_model"]
        );
    }
}
