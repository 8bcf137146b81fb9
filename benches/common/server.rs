//! The server binary as the stdio benches (`execution`, `notebook`) drive it: spawned with its
//! data in a temporary directory, spoken to by an rmcp client over stdio, its tool calls
//! checked, its pool waited on until settled, the phases of `get_execution_stats` read, and
//! shut down by closing its stdin.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use tokio::process::{Child, Command};

use super::stdio::{describe, tail};

pub const BIN: &str = env!("CARGO_BIN_EXE_code-execution-mcp");

/// The phases whose means the benches print, in the order of a container's life.
pub const PHASES: [&str; 13] = [
    "create",
    "attach",
    "start",
    "ready",
    "pool_wait",
    "state_sent",
    "job_written",
    "first_frame",
    "done",
    "kill_wait",
    "remove",
    "run",
    "call",
];

/// Cumulative (count, total ms) per phase, and executions pooled and prepared, from
/// `get_execution_stats`; or the difference of two such snapshots.
#[derive(Clone, Default)]
pub struct Phases {
    pub phases: [(f64, f64); PHASES.len()],
    pub pooled: f64,
    pub prepared: f64,
}

impl Phases {
    pub fn from_stats(executions: &Value) -> Self {
        let mut phases = [(0.0, 0.0); PHASES.len()];
        for (i, name) in PHASES.iter().enumerate() {
            let p = &executions["phases"][name];
            let (Some(count), Some(total)) = (p["count"].as_f64(), p["total_ms"].as_f64()) else {
                panic!("get_execution_stats has no phases.{name}: {executions}");
            };
            phases[i] = (count, total);
        }
        Self {
            phases,
            pooled: executions["executions_pooled"].as_f64().unwrap_or_default(),
            prepared: executions["executions_prepared"]
                .as_f64()
                .unwrap_or_default(),
        }
    }

    /// `self` − `before`.
    pub fn since(&self, before: &Phases) -> Phases {
        let mut out = self.clone();
        for (o, b) in out.phases.iter_mut().zip(before.phases) {
            *o = (o.0 - b.0, o.1 - b.1);
        }
        out.pooled -= before.pooled;
        out.prepared -= before.prepared;
        out
    }

    pub fn add(&mut self, other: &Phases) {
        for (o, b) in self.phases.iter_mut().zip(other.phases) {
            *o = (o.0 + b.0, o.1 + b.1);
        }
        self.pooled += other.pooled;
        self.prepared += other.prepared;
    }

    /// The cells of a phase table's row: mean ms per timing and the count in brackets, `–`
    /// for a phase not timed.
    pub fn cells(&self) -> Vec<String> {
        self.phases
            .iter()
            .map(|(n, total)| {
                if *n == 0.0 {
                    "–".to_string()
                } else {
                    format!("{:.1} ({n})", total / n)
                }
            })
            .collect()
    }
}

/// Where a server keeps its data, in its temporary directory.
#[derive(Clone, Copy)]
pub enum Storage {
    /// `--data-dir`: all it keeps is fresh, the copies of the image's `/usr` among it.
    DataDir,
    /// `--workspace` and `--skills-dir` only: the rest in the user's data home, kept between
    /// servers and runs.
    WorkspaceAndSkills,
}

/// A server process spawned for some rows, with its MCP session over stdio.
pub struct Server {
    child: Child,
    client: Option<RunningService<RoleClient, ()>>,
    pub pid: u32,
    log: PathBuf,
    exited: bool,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Spawns `serve` with its data in a fresh temp dir (stderr to a log there) and connects.
    pub async fn start(storage: Storage, flags: &[&str]) -> Self {
        Self::start_binary(BIN, storage, flags).await
    }

    /// [`Server::start`] of the binary at `bin` (another build, for a baseline).
    pub async fn start_binary(bin: &str, storage: Storage, flags: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("server.stderr");
        let mut command = Command::new(bin);
        command
            .env("NO_COLOR", "1") // the log is a file, quoted in failure messages
            .args(["serve", "--workspace-quota-mb", "0"]);
        storage_flags(&mut command, storage, dir.path());
        let mut child = command
            .args(flags)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("server log file"))
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the server binary");
        let pid = child.id().expect("server pid");
        let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let client = match ().serve((stdout, stdin)).await {
            Ok(client) => client,
            Err(e) => panic!("MCP handshake with the server failed: {e}\n{}", tail(&log)),
        };
        Self {
            child,
            client: Some(client),
            pid,
            log,
            exited: false,
            _dir: dir,
        }
    }

    pub fn fail(&self, msg: String) -> ! {
        panic!("{msg}\n{}", tail(&self.log))
    }

    /// Calls a tool; anything but a successful result with structured content fails the bench.
    pub async fn call(&self, name: &'static str, args: Value) -> Value {
        let client = self.client.as_ref().expect("the server is running");
        let params = CallToolRequestParams::new(name)
            .with_arguments(args.as_object().cloned().unwrap_or_default());
        let result = match client.call_tool(params).await {
            Ok(r) => r,
            Err(e) => self.fail(format!("{name}: tools/call failed: {e}")),
        };
        if result.is_error == Some(true) {
            self.fail(format!("{name} returned an error: {}", describe(&result)));
        }
        match result.structured_content {
            Some(v) => v,
            None => self.fail(format!("{name}: no structured content: {result:?}")),
        }
    }

    /// `executions` of `get_execution_stats`.
    pub async fn executions(&self) -> Value {
        let v = self
            .call("get_execution_stats", serde_json::json!({}))
            .await;
        if v["executions"]["pool"].is_null() {
            self.fail(format!("get_execution_stats has no executions.pool: {v}"));
        }
        v["executions"].clone()
    }

    /// Waits until the pool holds at least `size` and its target, nothing is starting, and
    /// the removal backlog is empty: the work a row caused is done. Returns the phases then.
    pub async fn settle(&self, size: usize) -> Phases {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let e = self.executions().await;
            let pool = &e["pool"];
            let n = |v: &Value| v.as_u64().unwrap_or_default() as usize;
            if n(&pool["ready"]) >= size.max(n(&pool["target"]))
                && n(&pool["starting"]) == 0
                && n(&e["removal_backlog"]) == 0
            {
                return Phases::from_stats(&e);
            }
            if Instant::now() > deadline {
                self.fail(format!(
                    "the pool did not settle at {size} within 120 s: {e}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Closes stdin (by closing the session) and waits for a clean exit.
    pub async fn shutdown(mut self) {
        if let Some(mut client) = self.client.take() {
            let _ = client.close_with_timeout(Duration::from_secs(5)).await;
        }
        match tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await {
            Ok(Ok(status)) if status.success() => self.exited = true,
            other => self.fail(format!(
                "server {} did not exit cleanly after its stdin closed: {other:?}",
                self.pid
            )),
        }
    }
}

impl Drop for Server {
    /// On a failed run, SIGTERM lets the server remove its containers before `kill_on_drop`.
    fn drop(&mut self) {
        if self.exited {
            return;
        }
        if let Some(pid) = rustix::process::Pid::from_raw(self.pid as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        for _ in 0..200 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn storage_flags(command: &mut Command, storage: Storage, dir: &Path) {
    match storage {
        Storage::DataDir => command.arg("--data-dir").arg(dir),
        Storage::WorkspaceAndSkills => command
            .arg("--workspace")
            .arg(dir.join("workspace"))
            .arg("--skills-dir")
            .arg(dir.join("skills")),
    };
}
