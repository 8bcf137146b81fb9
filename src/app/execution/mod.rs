//! `execute_code` in the application: the request's checks and clamping ([`request`]), the
//! workspace's soft quota and snapshot, the tool session of the code's upstream calls, what
//! sandbox code may call on the server ([`calls`]), progress reports while it runs
//! ([`progress`]), the run in a fresh container, then redaction of what the model will see and
//! what the code returns besides text ([`produced`]: pictures made safe by [`pictures`],
//! resource links, the files it created or changed). A session's turn ([`sessions`]), an
//! execution in its own task ([`detached`]), one waiting for an answer ([`paused`]), its
//! packages ([`packages`]) and its audit record ([`audit`]) are here too.

pub(crate) mod audit;
pub mod calls;
pub mod detached;
mod egress;
pub mod packages;
pub mod paused;
pub mod pictures;
pub(crate) mod plan;
pub mod produced;
pub mod progress;
pub mod request;
pub(crate) mod sessions;

use std::sync::Arc;

use tracing::Instrument;

use crate::app::execution::calls::ServerCalls;
use crate::app::{App, ExecuteError};
use crate::gateway::{Confirm, ToolCallRecord, UpstreamCalls};
use crate::sandbox::{CallHandler, Job, Outcome};
use crate::workspace::Snapshot;
use request::{ExecLimits, ExecuteRequest};

/// What one execution gave: its outcome, the limits it ran under, and the upstream tool calls
/// its code made.
#[derive(Debug)]
pub struct Executed {
    /// This execution's id (`exe_…`), as its log lines and audit record name it.
    pub id: String,
    pub outcome: Outcome,
    pub limits: ExecLimits,
    pub tool_calls: Vec<ToolCallRecord>,
    /// Images, resource links and the files the code created or changed.
    pub produced: crate::app::execution::produced::Produced,
    /// The session the call belonged to, and what became of its state.
    pub session: Option<String>,
    pub state: Option<crate::sandbox::run::carry::StateReport>,
    /// The installed packages the code ran with (with `packages`, or a session that has some).
    pub packages: Option<packages::PackagesReport>,
    /// The same for the audit trail, with every wheel's sha256.
    pub packages_audit: Option<crate::audit::record::AuditPackages>,
    /// What became of the calls the code planned (policy `plan`), if it planned any.
    pub plan: Option<crate::gateway::plan::PlanReport>,
    /// The requests the code made through the egress proxy (the first ones), and how many
    /// more it made.
    pub http_requests: (Vec<crate::gateway::egress::record::HttpRecord>, u64),
}

impl App {
    /// Checks and clamps the request, then runs it in a fresh container. With a tap, each
    /// output chunk is also offered to it as it arrives (for progress reports; see
    /// `progress`).
    ///
    /// Every execution has an id of its own ([`new_execution_id`]): its log lines carry it
    /// (the `execution` span), and so does its audit record.
    pub async fn execute(
        &self,
        request: ExecuteRequest,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<Executed, ExecuteError> {
        let call_started = std::time::Instant::now();
        let execution_id = new_execution_id();
        let span = crate::logging::execution_span(&execution_id);
        async {
            let audit = self.audit_begin(&request).await?;
            let executed = self.execute_timed(request, cancel, &execution_id).await;
            let took = call_started.elapsed();
            self.stats.phase(crate::sandbox::stats::Phase::Call, took);
            log_end(&executed, took);
            if let Some(audit) = audit {
                self.audit_end(audit, &execution_id, &executed, took).await;
            }
            executed
        }
        .instrument(span)
        .await
    }

    /// [`App::execute`]'s steps: the request's checks, the workspace before, the upstream
    /// calls and the session's turn, the run, then what the model is shown of it.
    async fn execute_timed(
        &self,
        request: ExecuteRequest,
        cancel: tokio_util::sync::CancellationToken,
        execution_id: &str,
    ) -> Result<Executed, ExecuteError> {
        let ExecuteRequest {
            code,
            context_vars,
            timeout_seconds,
            memory_mb,
            tap,
            confirm,
            session: session_arg,
            fork,
            client: _,
            oauth: _,
            packages: named,
        } = request;
        let (context_vars, limits) = self.check(&code, context_vars, timeout_seconds, memory_mb)?;
        let before = self.workspace_before().await?;
        let grant = self.egress_grant(confirm.clone());
        let upstream = self.upstream_calls(confirm).await?;
        let (mut turn, packages) = self.turn_and_packages(session_arg, fork, &named).await?;
        let set = packages.as_ref().map(|p| p.set().to_string());
        let (carry, saved) = turn.as_mut().map(|t| t.carry(set.as_deref())).unzip();
        let job = Job {
            code,
            carry,
            context_vars,
            timeout: limits.timeout,
            memory_bytes: limits.memory_bytes,
            tap,
            servers: (upstream.as_ref()).and_then(|s| s.tree_version().map(str::to_string)),
            calls: (upstream.as_ref()).map(|s| self.calls_with_tools(s, turn.as_ref())),
            packages: set.clone(),
            replaces_image: (packages.as_ref())
                .is_some_and(|p| !p.installed.meta.replaces.is_empty()),
            egress: grant
                .clone()
                .map(|g| g as Arc<dyn crate::sandbox::run::egress::EgressHandler>),
        };
        let ran = self.sandbox.run(job, cancel.clone()).await;
        let handle = turn.as_ref().map(|t| t.handle.clone());
        let (next, forked_from) = (turn.as_ref())
            .map(|t| (t.next, t.forked_from.clone()))
            .unzip();
        if let (Some(turn), Some(saved)) = (turn, saved) {
            turn.finish(saved, self.sandbox.clone(), set);
        }
        let mut outcome = match ran {
            Ok(outcome) => outcome,
            Err(e) => {
                self.end_upstream_calls(upstream);
                return Err(e.into());
            }
        };
        let state = handle.as_ref().map(|_| {
            let mut state = outcome.state.take().unwrap_or_else(|| {
                crate::app::execution::sessions::unsaved(outcome.status.as_str())
            });
            state.revision = next.filter(|_| state.saved);
            state.forked_from = forked_from.flatten();
            state
        });
        let keep_in = handle.clone().zip(state.as_ref().and_then(|s| s.revision));
        let plan = (self.settle_plan(upstream.as_deref(), &mut outcome, keep_in, &cancel)).await;
        let tool_calls = self.end_upstream_calls(upstream);
        self.explain_no_space(&mut outcome);
        let (outcome, produced) = self.redact_and_prepare(outcome, before).await;
        Ok(Executed {
            id: execution_id.to_string(),
            outcome,
            limits,
            tool_calls,
            produced,
            session: handle,
            state,
            packages_audit: packages.as_ref().map(|p| p.audit()),
            // The set's lease ends here: the run is over.
            packages: packages.map(|p| p.report()),
            plan,
            http_requests: grant.map(|g| g.requests()).unwrap_or_default(),
        })
    }

    /// Checks the code and its variables, and clamps the limits asked for to the bounds.
    fn check(
        &self,
        code: &str,
        context_vars: Option<serde_json::Value>,
        timeout_seconds: Option<f64>,
        memory_mb: Option<f64>,
    ) -> Result<(serde_json::Value, ExecLimits), ExecuteError> {
        request::check_code(code, self.config.limits.max_code_bytes)?;
        request::check_context_vars(context_vars.as_ref())?;
        let context_vars = context_vars.unwrap_or(serde_json::Value::Null);
        request::check_job_size(code, &context_vars)?;
        let limits = request::clamp(
            timeout_seconds,
            memory_mb,
            &request::RequestBounds::of(&self.config.limits),
        )?;
        Ok((context_vars, limits))
    }

    /// One trip to a blocking thread: the soft quota, then what the workspace holds (to tell
    /// what the code produced).
    async fn workspace_before(&self) -> Result<Option<Snapshot>, ExecuteError> {
        self.with_workspace(|ws| ws.check_quota().map(|()| ws.snapshot().ok()))
            .await
            .map_err(ExecuteError::Workspace)
    }

    /// The tool session of the code's upstream calls, with `--upstreams` (the `servers`
    /// package generated off the async workers).
    async fn upstream_calls(
        &self,
        confirm: Option<Arc<dyn Confirm>>,
    ) -> Result<Option<Arc<UpstreamCalls>>, ExecuteError> {
        let Some(view) = &self.gateway else {
            return Ok(None);
        };
        view.first_connections().await;
        let view = view.clone();
        let limits = self.config.gateway.call_limits();
        let pii = self.config.pii.tokenizes().then(|| self.pii.clone());
        let session =
            tokio::task::spawn_blocking(move || UpstreamCalls::new(view, limits, confirm, pii))
                .await
                .expect("package generation does not panic")
                .map_err(ExecuteError::ToolsPackage)?;
        Ok(Some(Arc::new(session)))
    }

    /// The session's turn, when the call names one (refused with sessions off).
    pub(crate) async fn session_turn(
        &self,
        session_arg: Option<String>,
        fork: bool,
    ) -> Result<Option<sessions::Turn>, ExecuteError> {
        match session_arg {
            None if fork => Err(crate::sessions::SessionError::ForkOfNew.into()),
            None => Ok(None),
            Some(_) if self.config.sessions.session_max_count == 0 => {
                Err(ExecuteError::SessionsOff)
            }
            Some(arg) => {
                let arg = crate::app::SessionArg::parse(&arg)?;
                Ok(Some(self.sessions.begin(arg, fork).await?))
            }
        }
    }

    /// What sandbox code may call on the server, with the upstream tools of `upstream` and,
    /// in a session, the outcomes of the plan its state's call made.
    fn calls_with_tools(
        &self,
        upstream: &Arc<UpstreamCalls>,
        turn: Option<&sessions::Turn>,
    ) -> Arc<dyn CallHandler> {
        let results = turn.and_then(|t| self.sessions.plan_results(&t.handle, t.revision));
        Arc::new(
            ServerCalls::new(self.skills.clone(), self.pii.clone(), self.may_hold.clone())
                .with_tools(upstream.clone())
                .with_plan_results(results),
        )
    }

    /// The upstream calls the code made; the tool session ends, and the generated packages
    /// no session uses any more go.
    fn end_upstream_calls(&self, upstream: Option<Arc<UpstreamCalls>>) -> Vec<ToolCallRecord> {
        let tool_calls = upstream.as_ref().map(|s| s.records()).unwrap_or_default();
        if let Some(view) = &self.gateway {
            drop(upstream);
            view.collect_unused();
        }
        tool_calls
    }

    /// Adds to an error that mentions a full disk which limits apply and how to free space.
    fn explain_no_space(&self, outcome: &mut Outcome) {
        if let Some(error) = outcome.error.as_mut()
            && mentions_no_space(error)
        {
            error.push_str(&format!(". {}", self.no_space_hint()));
        }
    }

    /// One trip to a blocking thread: redaction, then the images and files produced.
    async fn redact_and_prepare(
        &self,
        mut outcome: Outcome,
        before: Option<Snapshot>,
    ) -> (Outcome, produced::Produced) {
        let pii = self.config.pii.tokenizes().then(|| self.pii.clone());
        let (workspace, bounds) = (
            self.workspace.clone(),
            pictures::PictureBounds::of(&self.config.limits),
        );
        tokio::task::spawn_blocking(move || {
            if let Some(pii) = pii {
                crate::privacy::redact_outcome(&pii, &mut outcome);
            }
            let returned = std::mem::take(&mut outcome.returned);
            let produced = produced::prepare(returned, bounds, &workspace, before.as_ref());
            (outcome, produced)
        })
        .await
        .expect("redaction and preparing images and files do not panic")
    }

    /// What to do when code ran out of space: which limits apply and how to free space.
    fn no_space_hint(&self) -> String {
        let workspace = if self.config.storage.workspace_quota_mb > 0 {
            format!(
                "/workspace holds at most {} MiB (the workspace quota)",
                self.config.storage.workspace_quota_mb
            )
        } else {
            "/workspace is on the host's disk (no quota), which is full".to_string()
        };
        format!(
            "No space left: {workspace} and /tmp at most {} MiB. Delete files you no longer need (delete_file in code, or the delete_workspace_file tool) or write less",
            self.config.sandbox.tmpfs_mb
        )
    }
}

/// The execution's last line (at debug level): how it ended, or why it did not run.
fn log_end(executed: &Result<Executed, ExecuteError>, took: std::time::Duration) {
    let elapsed_ms = took.as_millis() as u64;
    match executed {
        Ok(e) => tracing::debug!(
            status = e.outcome.status.as_str(),
            elapsed_ms,
            "execution ended"
        ),
        Err(e) => tracing::debug!(elapsed_ms, "execution did not run: {e}"),
    }
}

/// A new execution's id: 16 random hex digits, `exe_` before them (unique enough to find one
/// execution in a tenant's logs and audit trail, short enough to read).
pub fn new_execution_id() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("exe_{}", &id[..16])
}

/// Whether an execution's error is Python's "no space left" (ENOSPC) or "disk quota exceeded"
/// (EDQUOT), as `OSError` puts it.
fn mentions_no_space(error: &str) -> bool {
    error.contains("[Errno 28]") || error.contains("[Errno 122]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_space_errors_are_recognised() {
        assert!(mentions_no_space("[Errno 28] No space left on device"));
        assert!(mentions_no_space(
            "[Errno 122] Disk quota exceeded: '/workspace/x'"
        ));
        assert!(!mentions_no_space("[Errno 2] No such file or directory"));
        assert!(!mentions_no_space("division by zero"));
    }
}
