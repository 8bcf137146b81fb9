//! One execution in one fresh container, in three steps a reader can take in order:
//!
//! 1. [`start`]: a container ready for its job (created, attached and started now, or taken
//!    from the pool), sent its job within the start deadline;
//! 2. [`frames`]: the frame loop, until `done`, the deadline, cancellation, end of stream or a
//!    flood;
//! 3. [`outcome`]: why the loop stopped, classified into an [`Outcome`] (killing what still
//!    runs, asking the engine how a container that ended by itself ended).
//!
//! Removal is the [`start::ContainerGuard`]'s job, so every path — including a dropped future
//! — removes the container. Everything here talks to the engine through
//! [`crate::sandbox::engine::backend::Backend`], so the state machine is unit-tested with a fake engine.

pub mod carry;
pub mod channel;
pub mod egress;
mod frames;
mod outcome;
pub mod output;
pub mod prepared;
pub mod returned;
mod start;

pub use outcome::{Edges, Outcome, Status};
pub(crate) use start::{Announcement, Cleanup, Source, Started, start};

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::Value;
use tokio::time::Instant as TokioInstant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::sandbox::engine::backend::{Backend, OutputStream};
use crate::sandbox::engine::error::EngineError;
use crate::sandbox::engine::events::{EngineBreaks, OomEvents};
use crate::sandbox::run::channel::{CallHandler, HarnessLimits};
use crate::sandbox::run::output::OutputTap;

/// What the caller asked to run, with limits already checked and clamped.
#[derive(Clone)]
pub struct Job {
    pub code: String,
    pub context_vars: Value,
    pub timeout: Duration,
    pub memory_bytes: i64,
    /// Receives each output chunk as it arrives (set when the client asked for progress).
    pub tap: Option<Arc<dyn OutputTap>>,
    /// Answers this job's calls instead of the sandbox's handler (calls that need the
    /// execution's own state, such as its upstream tool calls).
    pub calls: Option<Arc<dyn CallHandler>>,
    /// The version of the generated tools package (a directory of the servers mount) the
    /// harness imports `servers` from.
    pub servers: Option<String>,
    /// The installed package set (a directory of the read-only `/mnt/packages` mount) the
    /// harness puts on `sys.path`.
    pub packages: Option<String>,
    /// That set replaces distributions of the image (another version of numpy, say): a pooled
    /// container that imported modules ahead may hold the image's, which would win, so the
    /// job gets a container of its own when the pool preloads anything.
    pub replaces_image: bool,
    /// A session's state: loaded before the code runs, saved after it (see [`crate::sandbox::run::carry`]).
    pub carry: Option<crate::sandbox::run::carry::Carry>,
    /// The execution's way out (guarded egress): served on the container's proxy socket
    /// while the job runs.
    pub egress: Option<Arc<dyn egress::EgressHandler>>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("code_bytes", &self.code.len())
            .field("timeout", &self.timeout)
            .field("memory_bytes", &self.memory_bytes)
            .field("tap", &self.tap.is_some())
            .field("calls", &self.calls.is_some())
            .field("servers", &self.servers)
            .field("packages", &self.packages)
            .field("carry", &self.carry)
            .field("egress", &self.egress.is_some())
            .finish()
    }
}

/// Default of the longest wait for a container to be ready for its job: taken from the pool
/// or created, attached and started (a cold start takes 0.2-1.6 s on a loaded 2-core machine).
/// The code's own timeout starts once it has its job. `--start-timeout-secs` sets it.
pub const DEFAULT_START_LIMIT: Duration = Duration::from_secs(30);

/// How long output is drained after the execution has ended (the removal ends it sooner).
const DRAIN_LIMIT: Duration = Duration::from_secs(60);
/// How long a container has, after its execution's outcome, to end by itself (its output
/// closing) before it is removed at once instead of through the removal backlog. The harness
/// exits right after `done`; code that outlives it (a forged `done`) is removed at once.
const END_GRACE: Duration = Duration::from_secs(2);

/// What every execution of one sandbox shares.
pub(crate) struct Runner<'a> {
    pub backend: &'a Arc<dyn Backend>,
    pub limits: HarnessLimits,
    pub calls: &'a dyn CallHandler,
    /// Background removals and drains (awaited at shutdown), the stats, the removal backlog.
    pub cleanup: &'a Cleanup,
    pub oom: &'a OomEvents,
    /// Whether the engine reports OOM kills; when it does not, an exit by SIGKILL is reported
    /// as a likely memory-limit kill without waiting for an event that never comes.
    pub oom_reported: bool,
    /// The runtime's kind: under gVisor, an exit with code 2 is the process limit.
    pub runtime: crate::sandbox::container::runtime::RuntimeKind,
    /// The process limit the code has (`--pids-limit`), for the message when it is reached.
    pub pids_limit: i64,
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
    let started = Instant::now();
    // On tokio's clock, which the tests pause and advance.
    let began = TokioInstant::now();
    let breaks_seen = runner.breaks.count();

    let ready = match start::ready_for_job(runner, source, job, cancel, start_deadline).await {
        Ok(ready) => ready,
        Err(start::NotReady::Cancelled) => {
            return Ok(Outcome::without_output(
                Status::Cancelled,
                "Execution cancelled while its container was starting",
                started.elapsed(),
            ));
        }
        Err(start::NotReady::Failed(e)) => return Err(e),
    };
    let Started {
        name,
        mut output,
        mut input,
        guard,
        loaded: _,
        state_dir: _,
        egress_dir: _,
        // Served until the execution's outcome is known; dropped with this function.
        listening: _listening,
    } = ready;
    let job_sent = started.elapsed();
    let ready_after = began.elapsed();
    // The code's time starts now: starting its container is the engine's time.
    let deadline = TokioInstant::now() + job.timeout;

    let job_written = Instant::now();
    let (stop, collected) = frames::serve(
        runner,
        job,
        &mut output,
        &mut input,
        cancel,
        deadline,
        job_written,
    )
    .await?;
    runner
        .cleanup
        .stats
        .phase(crate::sandbox::stats::Phase::Done, job_written.elapsed());
    drop(input);
    let mut collected = collected;
    let snapshot = incoming_snapshot(job, stop, &mut collected);
    // The container's removal waits, after the outcome, this long for it to end by itself
    // (receiving a snapshot included).
    let grace = END_GRACE
        + snapshot.as_ref().map_or(Duration::ZERO, |s| {
            crate::sandbox::run::carry::receive_limit(s.max_bytes)
        });
    let ended = drain(runner, snapshot, output);

    let elapsed = started.elapsed();
    tracing::debug!(
        container = %name,
        job_sent_us = job_sent.as_micros() as u64,
        ended_us = elapsed.as_micros() as u64,
        "execution timings"
    );
    let ended_at = outcome::Ended {
        stop,
        collected,
        id: &name,
        deadline,
        elapsed,
        breaks_seen,
    };
    let classified = Instant::now();
    let outcome = outcome::classify(runner, job, ended_at)
        .await
        .map(|o| Outcome { ready_after, ..o });
    if stop != frames::Stop::Done {
        runner
            .cleanup
            .stats
            .phase(crate::sandbox::stats::Phase::KillWait, classified.elapsed());
    }
    remove_when_ended(runner, guard, grace, ended);
    outcome
}

/// A session's snapshot on its way after `done`: where it goes, its bound, and what of the
/// output past `done` has been read already.
struct Incoming {
    writer: Box<dyn carry::SnapshotWriter>,
    max_bytes: u64,
    /// What arrived after `done` in its chunk.
    rest: Vec<u8>,
}

/// A session's snapshot follows `done`: its writer is taken now, so the caller knows a
/// snapshot is on its way when the execution returns.
fn incoming_snapshot(
    job: &Job,
    stop: frames::Stop,
    collected: &mut frames::Collector,
) -> Option<Incoming> {
    let (Some(carry), frames::Stop::Done, Some(done)) = (&job.carry, stop, collected.done.as_ref())
    else {
        return None;
    };
    if !done.state.as_ref().is_some_and(|s| s.saved) {
        return None;
    }
    match carry.store.next() {
        Ok(writer) => Some(Incoming {
            writer,
            max_bytes: carry.max_bytes,
            rest: std::mem::take(&mut collected.after_done),
        }),
        Err(e) => {
            tracing::warn!("a session's snapshot has nowhere to go: {e}");
            None
        }
    }
}

/// Keeps draining the container's output (receiving the snapshot first) until the container
/// is gone: the engine blocks a container (and a kill of it) on an attached client that stops
/// reading. The end of the output is the sign that every process of the container has ended:
/// the returned receiver hears of it.
fn drain(
    runner: &Runner<'_>,
    snapshot: Option<Incoming>,
    mut output: OutputStream,
) -> tokio::sync::oneshot::Receiver<()> {
    let (ended_tx, ended) = tokio::sync::oneshot::channel::<()>();
    let stats = runner.cleanup.stats.clone();
    let drained = async move {
        if let Some(s) = snapshot {
            carry::receive(s.writer, s.max_bytes, s.rest, &mut output, &stats).await;
        }
        let drain = async { while output.next().await.is_some() {} };
        if tokio::time::timeout(DRAIN_LIMIT, drain).await.is_ok() {
            let _ = ended_tx.send(());
        }
    };
    runner.cleanup.tracker.spawn(drained.in_current_span());
    ended
}

/// The removal waits (briefly, in the background) for the container to end by itself, so that
/// it may go through the backlog; dropped at once, the guard removes it at once.
fn remove_when_ended(
    runner: &Runner<'_>,
    guard: start::ContainerGuard,
    grace: Duration,
    ended: tokio::sync::oneshot::Receiver<()>,
) {
    let removal = async move {
        match tokio::time::timeout(grace, ended).await {
            Ok(Ok(())) => guard.ended(),
            _ => drop(guard),
        }
    };
    runner.cleanup.tracker.spawn(removal.in_current_span());
}
