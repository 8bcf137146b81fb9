//! Whether the engine really enforces a sandbox's memory and pids limits, found by running
//! sandboxes that try to pass them: an engine may accept a limit it cannot apply (a rootless
//! engine without cgroups does so silently, see `rootless`), and a limit that is reported as
//! applied but is not is worse than none.
//!
//! The probes are two small jobs in throwaway containers made exactly as an execution's are
//! ([`probe`]); what they show is judged by pure functions ([`memory_verdict`],
//! [`pids_verdict`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::sandbox::container::spec::{ContainerOptions, Seccomp};
use crate::sandbox::stats::Stats;
use crate::sandbox::{
    Backend, BuiltinCalls, HarnessLimits, Job, Outcome, PoolBudget, Removals, Sandbox,
    SandboxSettings, Status,
};

/// A limit the engine may fail to enforce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    Memory,
    Pids,
}

impl Limit {
    /// The name results and logs use: the `limits` field or the flag that sets it.
    pub fn name(self) -> &'static str {
        match self {
            Limit::Memory => "memory_mb",
            Limit::Pids => "pids_limit",
        }
    }

    /// What running without it means, for a result's note.
    pub fn consequence(self) -> &'static str {
        match self {
            Limit::Memory => "the code's memory is not bounded (memory_mb is not applied)",
            Limit::Pids => {
                "its processes and threads are not bounded (--pids-limit is not applied)"
            }
        }
    }
}

/// What a probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The sandbox was stopped at its limit.
    Enforced,
    /// The sandbox went past its limit: what it did.
    NotEnforced(String),
    /// The probe did not end in a way that tells (the engine failed, the job broke): what
    /// happened. Treated as not enforced: never unbounded by default.
    Unknown(String),
}

impl Verdict {
    pub fn enforced(&self) -> bool {
        matches!(self, Verdict::Enforced)
    }

    /// What the probe saw, for logs and `doctor`.
    pub fn detail(&self, limit: Limit) -> String {
        match (self, limit) {
            (Verdict::Enforced, Limit::Memory) => format!(
                "a {PROBE_MEMORY_MB} MB sandbox allocating {PROBE_ALLOCATE_MB} MB was stopped"
            ),
            (Verdict::Enforced, Limit::Pids) => format!(
                "a sandbox limited to {PROBE_PIDS_LIMIT} processes could not start {PROBE_THREADS} threads"
            ),
            (Verdict::NotEnforced(what) | Verdict::Unknown(what), _) => what.clone(),
        }
    }
}

/// The memory probe's limit and what its code allocates (and touches), in MB.
pub const PROBE_MEMORY_MB: i64 = 64;
pub const PROBE_ALLOCATE_MB: i64 = 256;
/// The pids probe's limit and the threads its code tries to start.
pub const PROBE_PIDS_LIMIT: i64 = 32;
pub const PROBE_THREADS: i64 = PROBE_PIDS_LIMIT * 3;

/// Where and how the probe sandboxes run: as an execution's would, with a workspace of their
/// own.
pub struct ProbeSettings {
    pub image: String,
    /// An empty directory, as the engine names it.
    pub workspace: PathBuf,
    pub seccomp: Seccomp,
    pub uid: u32,
    pub gid: u32,
    pub runtime: Option<String>,
    pub runtime_kind: crate::sandbox::container::runtime::RuntimeKind,
    pub oom_reported: bool,
}

/// A sandbox for probes, made as an execution's would be (under the runtime given): no pool,
/// one container at a time, small output bounds. `doctor`'s own checks run in one too.
pub fn probe_sandbox(engine: Arc<dyn Backend>, settings: ProbeSettings) -> Sandbox {
    Sandbox::new(
        engine.clone(),
        SandboxSettings {
            image: settings.image,
            workspace: settings.workspace,
            skills: None,
            servers: None,
            packages: None,
            uid: settings.uid,
            gid: settings.gid,
            container: ContainerOptions {
                pids_limit: PROBE_PIDS_LIMIT,
                tmpfs_bytes: 8 << 20,
                runtime: settings.runtime,
                runtime_kind: settings.runtime_kind,
            },
            limits: HarnessLimits {
                max_output_bytes: 4096,
                max_result_bytes: 4096,
                max_images: 0,
            },
            max_concurrency: 1,
            max_queue: 0,
            server_slots: Arc::new(tokio::sync::Semaphore::new(1)),
            pool_size: 0,
            pool_budget: PoolBudget::new(0),
            pool_idle: Duration::ZERO,
            pool_idle_floor: 0,
            removals: Removals::new(engine, 0),
            pool_memory_bytes: 0,
            image_id: String::new(),
            start_limit: (settings.runtime_kind).start_limit(crate::sandbox::DEFAULT_START_LIMIT),
            preload: crate::sandbox::pool::preload::Preload::Fixed(Vec::new()),
            seccomp: settings.seccomp,
            oom_reported: settings.oom_reported,
            image_tree: None,
            state_dirs: None,
            egress_dirs: None,
            span: tracing::Span::none(),
        },
        Arc::new(BuiltinCalls),
        Arc::new(Stats::new()),
    )
}

/// A probe's job: `code` with `memory_mb` and 30 seconds, nothing else.
pub fn probe_job(code: String, memory_mb: i64) -> Job {
    Job {
        code,
        context_vars: serde_json::Value::Null,
        timeout: Duration::from_secs(30),
        memory_bytes: memory_mb << 20,
        tap: None,
        calls: None,
        servers: None,
        packages: None,
        replaces_image: false,
        carry: None,
        egress: None,
    }
}

/// Runs the probes of `limits`, one container each, and judges them.
pub async fn probe(
    engine: Arc<dyn Backend>,
    settings: ProbeSettings,
    limits: &[Limit],
) -> Vec<(Limit, Verdict)> {
    let oom_reported = settings.oom_reported;
    let sandbox = probe_sandbox(engine, settings);
    let mut verdicts = Vec::new();
    for &limit in limits {
        let (code, memory_mb) = match limit {
            Limit::Memory => (memory_code(), PROBE_MEMORY_MB),
            // Room for the threads' stacks, so only the pids limit can stop them.
            Limit::Pids => (pids_code(), 256),
        };
        let ended = sandbox
            .run(probe_job(code, memory_mb), Default::default())
            .await
            .map_err(|e| e.to_string());
        verdicts.push((
            limit,
            match limit {
                Limit::Memory => memory_verdict(ended, oom_reported),
                Limit::Pids => pids_verdict(ended),
            },
        ));
    }
    sandbox.shutdown().await;
    verdicts
}

fn memory_code() -> String {
    format!(
        "b = bytearray({PROBE_ALLOCATE_MB} * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1\nresult = 'allocated'"
    )
}

fn pids_code() -> String {
    format!(
        "import threading\nhold = threading.Event()\nresult = 0\ntry:\n    for _ in range({PROBE_THREADS}):\n        threading.Thread(target=hold.wait, daemon=True).start()\n        result += 1\nexcept Exception:\n    pass\nhold.set()\n"
    )
}

/// How the memory probe (a 64 MB sandbox touching 256 MB) ended. `oom_reported`: whether the
/// engine tells OOM kills apart; where it does not (Podman before 5.0) a SIGKILL is the limit.
pub fn memory_verdict(ended: Result<Outcome, String>, oom_reported: bool) -> Verdict {
    let outcome = match ended {
        Ok(o) => o,
        Err(e) => return Verdict::Unknown(format!("the memory probe did not run: {e}")),
    };
    let error = outcome.error.clone().unwrap_or_default();
    match outcome.status {
        Status::MemoryLimit => Verdict::Enforced,
        Status::Error if !oom_reported && error.contains("SIGKILL") => Verdict::Enforced,
        Status::Ok => Verdict::NotEnforced(format!(
            "a {PROBE_MEMORY_MB} MB sandbox allocated {PROBE_ALLOCATE_MB} MB and ended ok"
        )),
        status => Verdict::Unknown(format!(
            "the memory probe ended with status {}: {error}",
            status.as_str()
        )),
    }
}

/// How the pids probe (a sandbox limited to 32 processes starting 96 threads) ended: the number
/// of threads it started is its result.
pub fn pids_verdict(ended: Result<Outcome, String>) -> Verdict {
    let outcome = match ended {
        Ok(o) => o,
        Err(e) => return Verdict::Unknown(format!("the pids probe did not run: {e}")),
    };
    match (outcome.status, outcome.result.as_i64()) {
        (Status::Ok, Some(started)) if started < PROBE_PIDS_LIMIT => Verdict::Enforced,
        (Status::Ok, Some(started)) => Verdict::NotEnforced(format!(
            "a sandbox limited to {PROBE_PIDS_LIMIT} processes started {started} threads"
        )),
        (status, _) => Verdict::Unknown(format!(
            "the pids probe ended with status {}: {}",
            status.as_str(),
            outcome.error.unwrap_or_default()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(status: Status, result: serde_json::Value, error: &str) -> Result<Outcome, String> {
        let mut outcome = Outcome::without_output(status, error, Duration::ZERO);
        outcome.result = result;
        Ok(outcome)
    }

    #[test]
    fn the_memory_probe_is_judged_by_how_it_ended() {
        let null = serde_json::Value::Null;
        let killed = "The sandbox was killed (SIGKILL, exit code 137) before reporting a result";
        assert!(memory_verdict(ended(Status::MemoryLimit, null.clone(), ""), true).enforced());
        assert!(memory_verdict(ended(Status::Error, null.clone(), killed), false).enforced());
        assert!(matches!(
            memory_verdict(ended(Status::Error, null.clone(), killed), true),
            Verdict::Unknown(_)
        ));
        let through = memory_verdict(ended(Status::Ok, "allocated".into(), ""), true);
        assert_eq!(
            through,
            Verdict::NotEnforced("a 64 MB sandbox allocated 256 MB and ended ok".into())
        );
        assert!(matches!(
            memory_verdict(Err("engine gone".into()), true),
            Verdict::Unknown(e) if e.contains("engine gone")
        ));
    }

    #[test]
    fn the_pids_probe_is_judged_by_the_threads_it_started() {
        assert!(pids_verdict(ended(Status::Ok, 27.into(), "")).enforced());
        assert_eq!(
            pids_verdict(ended(Status::Ok, 96.into(), "")),
            Verdict::NotEnforced("a sandbox limited to 32 processes started 96 threads".into())
        );
        // Stopped, but not by the limit.
        assert!(!pids_verdict(ended(Status::Ok, 40.into(), "")).enforced());
        assert!(matches!(
            pids_verdict(ended(Status::Error, serde_json::Value::Null, "boom")),
            Verdict::Unknown(e) if e.contains("boom")
        ));
        assert!(matches!(
            pids_verdict(Err("no engine".into())),
            Verdict::Unknown(_)
        ));
    }

    #[test]
    fn the_probes_code_is_python_that_reports_what_it_did() {
        assert!(memory_code().contains("bytearray(256 * 1024 * 1024)"));
        let pids = pids_code();
        assert!(
            pids.contains("range(96)") && pids.contains("result += 1"),
            "{pids}"
        );
        assert_eq!(Limit::Memory.name(), "memory_mb");
        assert_eq!(Limit::Pids.name(), "pids_limit");
    }
}
