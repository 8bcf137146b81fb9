//! The audit trail around one execution: its digest taken before it runs (and, with
//! `--audit-required`, the trail's check), its record built from how it ended and written
//! before the tool answers. Every string that could carry personal data (the code, the client's
//! name, file names, a tool name the upstream does not list) goes through the tenant's PII
//! engine first, whatever `--pii-output` says: the trail holds tokens, never values.

use std::sync::Arc;
use std::time::Duration;

use crate::app::execution::request::ExecuteRequest;
use crate::app::{App, ExecuteError, Executed, Shared};
use crate::audit::{
    AuditCall, AuditLog, AuditPlan, AuditPlanCall, AuditRecord, SINGLE_TENANT_DIR, record,
};
use crate::gateway::plan::{PlanReport, PlanStatus};
use crate::pii::{Origin, PiiEngine};
use crate::sandbox::SandboxError;

/// The tenant's trail on this node, when `--audit` keeps one.
pub(crate) fn open(shared: &Shared, tenant: Option<&str>) -> Option<Arc<AuditLog>> {
    let settings = shared.config.operations.audit_settings()?;
    Some(Arc::new(AuditLog::new(
        &shared.config.storage.data_dir(),
        tenant.unwrap_or(SINGLE_TENANT_DIR),
        shared.node_name(),
        settings,
    )))
}

/// What the record needs from the request, taken before the request is spent.
pub(crate) struct Begun {
    log: Arc<AuditLog>,
    code_sha256: String,
    code: Option<String>,
    client: Option<String>,
    oauth: Option<crate::oauth::Identity>,
}

impl App {
    /// The request's part of its record; with `--audit-required`, refuses the execution while
    /// the trail cannot be written.
    pub(crate) async fn audit_begin(
        &self,
        request: &ExecuteRequest,
    ) -> Result<Option<Begun>, ExecuteError> {
        let Some(log) = &self.audit else {
            return Ok(None);
        };
        if log.settings().required && !log.is_ok() {
            let probe = log.clone();
            tokio::task::spawn_blocking(move || probe.check_writable())
                .await
                .expect("the audit check does not panic")
                .map_err(|e| ExecuteError::AuditUnavailable(e.source.to_string()))?;
        }
        Ok(Some(Begun {
            log: log.clone(),
            code_sha256: record::code_digest(&request.code),
            code: log.settings().include_code.then(|| request.code.clone()),
            client: request.client.clone(),
            oauth: request.oauth.clone(),
        }))
    }

    /// Writes the execution's record (on a blocking thread, before the caller answers). A
    /// failure is the trail's to report (log, health, metrics), never the call's.
    pub(crate) async fn audit_end(
        &self,
        begun: Begun,
        execution_id: &str,
        executed: &Result<Executed, ExecuteError>,
        took: Duration,
    ) {
        let mut record = AuditRecord {
            time: record::now(),
            tenant: self.tenant.clone(),
            node: self.node_name().to_string(),
            execution_id: execution_id.to_string(),
            client: begun.client,
            oauth_subject: begun.oauth.as_ref().map(|o| o.subject.clone()),
            oauth_client_id: begun.oauth.and_then(|o| o.client_id),
            session: None,
            code_sha256: begun.code_sha256,
            code: begun.code,
            status: String::new(),
            error_type: None,
            duration_ms: (took.as_secs_f64() * 1e6).round() / 1e3,
            calls: Vec::new(),
            files_changed: Vec::new(),
            files_truncated: false,
            packages: None,
            plan: None,
            http: Vec::new(),
            http_more: 0,
        };
        match executed {
            Ok(e) => {
                record.status = e.outcome.status.as_str().to_string();
                record.error_type = e.outcome.error_type.clone();
                record.session = e.session.clone();
                record.calls = (e.tool_calls.iter())
                    .map(|c| AuditCall {
                        server: c.server.clone(),
                        tool: c.tool.clone(),
                        outcome: c.audit.outcome.as_str().to_string(),
                        policy: c.audit.policy.map(|p| p.as_str().to_string()),
                        arguments_sha256: c.audit.arguments_sha256.clone(),
                        duration_ms: c.duration_ms,
                        tokens: c.audit.tokens.clone(),
                    })
                    .collect();
                record.files_changed = (e.produced.files.iter()).map(|f| f.path.clone()).collect();
                record.files_truncated = e.produced.files_truncated;
                record.packages = e.packages_audit.clone();
                record.plan = e.plan.as_ref().map(plan_audit);
                record.http = e.http_requests.0.clone();
                record.http_more = e.http_requests.1;
            }
            Err(ExecuteError::Packages {
                error,
                requested,
                took,
            }) => {
                record.status = "refused".into();
                record.packages = Some(crate::app::execution::packages::failed_audit(
                    error, requested, *took,
                ));
            }
            Err(ExecuteError::Sandbox(SandboxError::Engine(_))) => {
                record.status = "engine_failure".into();
            }
            Err(_) => record.status = "refused".into(),
        }
        let (log, pii) = (begun.log, self.pii.clone());
        let _ = tokio::task::spawn_blocking(move || {
            tokenize(&pii, &mut record);
            log.append(&record)
        })
        .await;
    }
}

/// The record's texts with personal data as tokens: the code and the client's name are the
/// user's words, an error type the sandbox's, file, server and tool names the workspace's.
fn tokenize(pii: &PiiEngine, record: &mut AuditRecord) {
    let from = |s: &mut String, origin: Origin| *s = pii.sanitize_from(s, &origin).text;
    let tokens = |s: &mut String| from(s, Origin::Workspace);
    for (field, origin) in [
        (&mut record.code, Origin::User),
        (&mut record.client, Origin::User),
        (&mut record.error_type, Origin::Sandbox),
    ] {
        if let Some(s) = field {
            from(s, origin);
        }
    }
    if let Some(subject) = &mut record.oauth_subject {
        *subject = pii.tokenize_value(crate::pii::PiiKind::UserId, subject);
    }
    record.files_changed.iter_mut().for_each(tokens);
    for call in &mut record.calls {
        tokens(&mut call.server);
        tokens(&mut call.tool);
    }
    for call in record.plan.iter_mut().flat_map(|p| &mut p.calls) {
        tokens(&mut call.server);
        tokens(&mut call.tool);
    }
}

/// What the trail keeps of a plan: its calls' digests, never their arguments.
fn plan_audit(plan: &PlanReport) -> AuditPlan {
    let answer = match plan.status {
        s if s.accepted() => Some("accept"),
        PlanStatus::Declined => Some("decline"),
        PlanStatus::Cancelled => Some("cancel"),
        _ => None,
    };
    AuditPlan {
        id: plan.id.clone(),
        status: plan.status.as_str().to_string(),
        answer: answer.map(str::to_string),
        stop_on_error: plan.stop_on_error,
        calls: (plan.records.iter())
            .map(|c| AuditPlanCall {
                server: c.server.clone(),
                tool: c.tool.clone(),
                arguments_sha256: c.arguments_sha256.clone(),
                outcome: c.outcome.as_str().to_string(),
                duration_ms: c.duration_ms,
            })
            .collect(),
    }
}
