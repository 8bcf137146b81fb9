//! How an execution ended: [`Status`] and [`Outcome`], and the pieces that shape what the
//! harness reported (or what the engine tells of a container that ended without a word) into
//! one bounded outcome.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio::time::Instant as TokioInstant;

use super::super::docker::{Engine, EngineError};
use super::{INSPECT_LIMIT, KILL_LIMIT};
use crate::sandbox::output::BoundedText;
use bollard::query_parameters::WaitContainerOptionsBuilder;
use futures::StreamExt;

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

/// Longest `error` or `traceback` passed on.
pub(super) const MAX_ERROR_BYTES: usize = 64 * 1024;

/// The result as it goes back: unchanged when its JSON fits in `max` bytes, else the first
/// `max` bytes of that JSON as a string, and `true`.
pub(super) fn bound_result(result: Value, max: usize) -> (Value, bool) {
    let text = result.to_string();
    if text.len() <= max {
        return (result, false);
    }
    (Value::String(bound_text(text, max)), true)
}

/// `s` cut to at most `max` bytes on a character boundary.
pub(super) fn bound_text(mut s: String, max: usize) -> String {
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
pub(super) async fn kill_bounded(engine: &Engine, id: &str) -> Result<(), String> {
    let why = match tokio::time::timeout(KILL_LIMIT, engine.kill(id)).await {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no answer within {} seconds", KILL_LIMIT.as_secs()),
    };
    tracing::warn!(container = %id, "could not kill sandbox container: {why}");
    Err(why)
}

pub(super) fn memory_message(memory_bytes: i64) -> String {
    format!(
        "Memory limit exceeded: the execution used more than its {} MB and was killed. Process the data in smaller pieces or pass a larger memory_mb",
        memory_bytes / (1024 * 1024)
    )
}

/// After end of stream: waits (briefly) until the engine has the container stopped, then reads
/// whether it was OOM-killed.
pub(super) async fn wait_exit_state(
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
