//! One execution's use of the gateway: the calls its code makes, each checked in order
//! (upstream visible to this tenant, tool known, call budget, policy, concurrency), with
//! personal-data tokens restored in the arguments on the way out, bounded results on the way
//! back, and a record of every call for the execution's response and the statistics.
//! Calls to a tool whose policy is `plan` are not made here: they are recorded in the
//! execution's plan (`planning.rs`), asked about once the code has finished.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tokio::sync::Semaphore;

use super::call_record::{
    CallAudit, CallOutcome, MAX_RECORD_ERROR_CHARS, PolicyDecision, ToolCallRecord,
};
use super::confirm::{Answer, AskError, Confirm, Prompt};
use super::plan::{PlanBounds, PlanDraft};
use super::policy::Decision;
use super::restoring::{self, Outgoing};
use super::results;
use super::tree::TreeVersion;
use super::upstream::{Upstream, UpstreamStatus};
use super::view::GatewayView;
use crate::pii::{Origin, PiiEngine};
use crate::sandbox::run::output::EDGE_BYTES;

/// Per-execution limits on tool calls.
#[derive(Debug, Clone, Copy)]
pub struct CallLimits {
    pub max_calls: u32,
    pub timeout: Duration,
    pub max_result_bytes: usize,
    pub max_concurrent: usize,
    /// How large a plan (calls to `plan` tools) may grow.
    pub plan: PlanBounds,
}

/// Longest rendering of a call's arguments in a confirmation request.
const MAX_SHOWN_ARGUMENTS: usize = 600;

/// Most records kept per execution (the count goes on).
const MAX_RECORDS: usize = 1000;

pub struct UpstreamCalls {
    pub(super) view: Arc<GatewayView>,
    version: Option<Arc<TreeVersion>>,
    pub(super) limits: CallLimits,
    pub(super) confirm: Option<Arc<dyn Confirm>>,
    /// Restores tokens in arguments when output is tokenized.
    pub(super) pii: Option<Arc<PiiEngine>>,
    made: AtomicU32,
    in_flight: Semaphore,
    records: Mutex<Vec<ToolCallRecord>>,
    /// The calls to `plan` tools, recorded until the code has finished.
    pub(super) plan: Mutex<PlanDraft>,
}

impl UpstreamCalls {
    pub fn new(
        view: Arc<GatewayView>,
        limits: CallLimits,
        confirm: Option<Arc<dyn Confirm>>,
        pii: Option<Arc<PiiEngine>>,
    ) -> std::io::Result<Self> {
        let version = view.current_tree()?;
        Ok(Self {
            view,
            version,
            limits,
            confirm,
            pii,
            made: AtomicU32::new(0),
            in_flight: Semaphore::new(limits.max_concurrent.max(1)),
            records: Mutex::new(Vec::new()),
            plan: Mutex::new(PlanDraft::default()),
        })
    }

    /// The tenant's view of the gateway these calls go through.
    pub fn view(&self) -> Arc<GatewayView> {
        self.view.clone()
    }

    /// The package version this execution imports from.
    pub fn tree_version(&self) -> Option<&str> {
        self.version.as_deref().map(|v| v.id.as_str())
    }

    /// The calls made so far (the first [`MAX_RECORDS`]; [`Self::calls_made`] counts all).
    pub fn records(&self) -> Vec<ToolCallRecord> {
        self.records.lock().expect("records lock").clone()
    }

    pub fn calls_made(&self) -> u32 {
        self.made.load(Ordering::Relaxed)
    }

    /// Calls `server`'s tool `tool`; the value for sandbox code, or why not.
    pub async fn call(&self, server: &str, tool: &str, arguments: Value) -> Result<Value, String> {
        let started = Instant::now();
        let mut audit = CallAudit {
            arguments_sha256: arguments_digest(&arguments),
            ..CallAudit::default()
        };
        let result = self.call_checked(server, tool, arguments, &mut audit).await;
        if result.is_ok() {
            audit.outcome = CallOutcome::Ok;
        }
        if self.view.upstream(server).is_some() {
            self.view
                .stats
                .record(server, result.is_ok(), started.elapsed());
            self.view.stats.record_call(server, tool, &audit);
        }
        let mut records = self.records.lock().expect("records lock");
        if records.len() < MAX_RECORDS {
            records.push(ToolCallRecord {
                server: crate::text::prefix_chars(server, 100).to_owned(),
                tool: crate::text::prefix_chars(tool, 200).to_owned(),
                duration_ms: (started.elapsed().as_secs_f64() * 1e6).round() / 1e3,
                ok: result.is_ok(),
                // Cut for the model where the PII engine can see past the cut (`Privacy::text_cut`).
                error: result.as_ref().err().map(|e| {
                    crate::text::prefix_chars(e, MAX_RECORD_ERROR_CHARS + EDGE_BYTES).to_owned()
                }),
                audit,
            });
        }
        result
    }

    async fn call_checked(
        &self,
        server: &str,
        tool: &str,
        arguments: Value,
        audit: &mut CallAudit,
    ) -> Result<Value, String> {
        let made = self.made.fetch_add(1, Ordering::Relaxed);
        if made >= self.limits.max_calls {
            return Err(format!(
                "this execution has made {} tool calls, the most one may (--max-tool-calls): do more per call, or split the work over executions",
                self.limits.max_calls
            ));
        }
        let upstream = self.view.upstream(server).ok_or_else(|| {
            format!(
                "no upstream MCP server named {server:?} is available here; available: {}",
                self.view.server_names().join(", ")
            )
        })?;
        let destructive = listed_tool(upstream, server, tool)?;
        audit.listed = true;
        let Value::Object(arguments) = arguments else {
            return Err(format!(
                "the arguments of `{server}/{tool}` must be a dict of argument names to values"
            ));
        };
        refuse_links(server, tool, &arguments, audit)?;
        let decision = upstream.config.policy.decide(tool, destructive);
        // The user decides on the arguments as the code passed them (tokens, not values).
        let shown = match decision {
            Decision::Confirm => arguments.clone(),
            _ => Map::new(),
        };
        let outgoing = match decision {
            Decision::Allow | Decision::Confirm => {
                Some(self.flow_checked(upstream, arguments, audit).await?)
            }
            Decision::Deny | Decision::Plan => None,
        };
        let note = outgoing.as_ref().map(Outgoing::note).unwrap_or_default();
        self.apply_policy(decision, server, tool, destructive, &shown, &note, audit)
            .await?;
        let _permit = self.in_flight.try_acquire().map_err(|_| {
            format!(
                "{} tool calls are already in flight in this execution, the most at once (--max-concurrent-tool-calls): wait for one to finish",
                self.limits.max_concurrent
            )
        })?;
        let arguments = outgoing.map(|o| o.arguments).unwrap_or_default();
        self.send(upstream, server, tool, arguments, audit).await
    }

    /// [`Self::outgoing`], counted and noted in the call's audit; an error when the rule
    /// refuses the call.
    async fn flow_checked(
        &self,
        upstream: &Upstream,
        arguments: Map<String, Value>,
        audit: &mut CallAudit,
    ) -> Result<Outgoing, String> {
        let outgoing = self.outgoing(upstream, arguments).await?;
        audit.tokens = outgoing.tokens.clone();
        self.view
            .stats
            .record_tokens(upstream.name(), &outgoing.tokens);
        match &outgoing.refused {
            Some(why) => {
                audit.outcome = CallOutcome::Withheld;
                Err(why.clone())
            }
            None => Ok(outgoing),
        }
    }

    /// `arguments` for `upstream` after its flow rule: personal-data tokens restored where the
    /// rule allows their origin (`restoring.rs`).
    pub(super) async fn outgoing(
        &self,
        upstream: &Upstream,
        arguments: Map<String, Value>,
    ) -> Result<Outgoing, String> {
        match &self.pii {
            Some(pii) => {
                let (pii, rule) = (pii.clone(), upstream.config.pii.clone());
                let server = upstream.name().to_owned();
                tokio::task::spawn_blocking(move || {
                    restoring::restore_for(&pii, &server, &rule, arguments)
                })
                .await
                .map_err(|e| format!("internal error: {e}"))
            }
            None => Ok(Outgoing::unchanged(arguments)),
        }
    }

    /// Sends one call whose checks passed; its result as a value for sandbox code.
    pub(super) async fn send(
        &self,
        upstream: &Upstream,
        server: &str,
        tool: &str,
        arguments: Map<String, Value>,
        audit: &mut CallAudit,
    ) -> Result<Value, String> {
        audit.outcome = CallOutcome::Error;
        let wire = upstream
            .call(tool, arguments, self.limits.timeout)
            .await
            .map_err(|e| {
                if matches!(e, super::upstream::CallFailure::Timeout { .. }) {
                    audit.outcome = CallOutcome::Timeout;
                }
                e.to_string()
            })?;
        let size = json_size(&wire);
        if size > self.limits.max_result_bytes {
            return Err(format!(
                "the result of `{server}/{tool}` is {:.1} MiB, over the {:.1} MiB limit (--max-tool-result-mb): ask the tool for less (a filter, a page)",
                size as f64 / 1048576.0,
                self.limits.max_result_bytes as f64 / 1048576.0
            ));
        }
        let value = results::for_sandbox(&wire)
            .map_err(|message| format!("`{server}/{tool}` failed: {message}"))?;
        self.entering(server, tool, value).await
    }

    /// A result on its way into the sandbox: tokenized when a flow rule withholds this
    /// upstream's values from another (`flow.rs`), each value recorded as from `server/tool`.
    async fn entering(&self, server: &str, tool: &str, value: Value) -> Result<Value, String> {
        match &self.pii {
            Some(pii) if self.view.tokenizes_results_of(server) => {
                let (pii, origin) = (pii.clone(), Origin::upstream(server, tool));
                tokio::task::spawn_blocking(move || pii.sanitize_json(&value, &origin))
                    .await
                    .map_err(|e| format!("internal error: {e}"))
            }
            _ => Ok(value),
        }
    }

    /// Whether the upstream's policy lets `tool` run now (asking the user when it says
    /// `confirm`), noted in the call's audit.
    #[allow(clippy::too_many_arguments)]
    async fn apply_policy(
        &self,
        decision: Decision,
        server: &str,
        tool: &str,
        destructive: bool,
        arguments: &Map<String, Value>,
        note: &str,
        audit: &mut CallAudit,
    ) -> Result<(), String> {
        match decision {
            Decision::Allow => {
                audit.policy = Some(PolicyDecision::Allow);
                Ok(())
            }
            Decision::Deny => {
                audit.policy = Some(PolicyDecision::Deny);
                audit.outcome = CallOutcome::Denied;
                Err(format!(
                    "the policy for upstream `{server}` denies `{tool}` (set in the upstreams file)"
                ))
            }
            Decision::Confirm => {
                let (decision, answer) = self.ask(server, tool, destructive, arguments, note).await;
                audit.policy = Some(decision);
                if decision == PolicyDecision::ConfirmDeclined {
                    audit.outcome = CallOutcome::Declined;
                }
                answer
            }
            Decision::Plan => Err(format!(
                "`{server}/{tool}` has the policy `plan`, so it is not called while the code runs: call it through its function in the `servers` package (or call_tool), which adds it to the plan the user approves when the code has finished. If its policy just changed, run the code again"
            )),
        }
    }

    async fn ask(
        &self,
        server: &str,
        tool: &str,
        destructive: bool,
        arguments: &Map<String, Value>,
        note: &str,
    ) -> (PolicyDecision, Result<(), String>) {
        let Some(confirm) = &self.confirm else {
            return (
                PolicyDecision::ConfirmFailed,
                Err(format!(
                    "`{server}/{tool}` needs the user's confirmation (policy `confirm`{}), and this client cannot ask (it does not support MCP elicitation); an administrator can set the tool's policy to `allow` in the upstreams file",
                    if destructive {
                        ", the default for a tool its server marks destructive"
                    } else {
                        ""
                    }
                )),
            );
        };
        // The user decides on what the call would do: its arguments as the code passed them.
        let shown = crate::text::cut(
            &Value::Object(arguments.clone()).to_string(),
            MAX_SHOWN_ARGUMENTS,
        );
        let message = format!(
            "Code running in the sandbox wants to call `{tool}` on the MCP server `{server}`{} with the arguments {shown}.{note} Allow this call?",
            if destructive {
                " (the server marks this tool destructive)"
            } else {
                ""
            }
        );
        match confirm.ask(Prompt::new(message)).await {
            Ok(Answer::Accept) => (PolicyDecision::ConfirmAccepted, Ok(())),
            Ok(Answer::Decline) => (
                PolicyDecision::ConfirmDeclined,
                Err(format!("the user declined the call to `{server}/{tool}`")),
            ),
            Ok(Answer::Cancel) => (
                PolicyDecision::ConfirmFailed,
                Err(format!(
                    "`{server}/{tool}` needs the user's confirmation and asking failed: the user dismissed the question"
                )),
            ),
            Err(AskError::Expired(why) | AskError::Failed(why)) => (
                PolicyDecision::ConfirmFailed,
                Err(format!(
                    "`{server}/{tool}` needs the user's confirmation and asking failed: {why}"
                )),
            ),
        }
    }
}

/// SHA-256 (hex) of `arguments` as JSON. serde_json's maps keep keys sorted, so equal
/// arguments give equal digests whatever order the code wrote them in.
pub(super) fn arguments_digest(arguments: &Value) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    // Writing JSON into a hasher cannot fail.
    let _ = serde_json::to_writer(HashWriter(&mut hasher), arguments);
    hex::encode(hasher.finalize())
}

/// `io::Write` into a hasher, so a large value is hashed without being written out first.
struct HashWriter<'a>(&'a mut sha2::Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        sha2::Digest::update(self.0, buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The length of `v` as JSON, counted without writing it out (a result may be tens of MiB).
pub(super) fn json_size(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, v) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

/// Whether `tool`, listed by `upstream`, is destructive; an error that says what the upstream
/// lists instead when it does not list `tool`.
pub(super) fn listed_tool(upstream: &Upstream, server: &str, tool: &str) -> Result<bool, String> {
    let tools = upstream.tools();
    let Some(found) = tools.iter().find(|t| t.name == tool) else {
        let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).take(30).collect();
        names.sort_unstable();
        return Err(
            if tools.is_empty() && upstream.status() != UpstreamStatus::Ready {
                format!(
                    "upstream `{server}` is not connected: {}",
                    upstream.unavailable_reason()
                )
            } else if tools.is_empty() {
                format!("upstream `{server}` is connected and lists no tools")
            } else {
                format!(
                    "upstream `{server}` has no tool {tool:?}; its tools: {}",
                    names.join(", ")
                )
            },
        );
    };
    Ok(found.destructive)
}

/// An upload or download link in a call's arguments is refused: a live link is a credential
/// to a workspace, for the person it was made for, never for an upstream.
fn refuse_links(
    server: &str,
    tool: &str,
    arguments: &Map<String, Value>,
    audit: &mut CallAudit,
) -> Result<(), String> {
    let text = serde_json::to_string(arguments).unwrap_or_default();
    if crate::links::mentions_link(&text) {
        audit.outcome = CallOutcome::Withheld;
        return Err(format!(
            "the arguments of `{server}/{tool}` hold an upload or download link of this server; links are for the person they were made for, never for an upstream: pass the file's content or its workspace path instead"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_digests_ignore_key_order_and_differ_by_value() {
        let a = serde_json::json!({"b": 1, "a": "x"});
        let b: Value = serde_json::from_str(r#"{"a": "x", "b": 1}"#).unwrap();
        assert_eq!(arguments_digest(&a), arguments_digest(&b));
        assert_ne!(
            arguments_digest(&a),
            arguments_digest(&serde_json::json!({"b": 2, "a": "x"}))
        );
        assert_eq!(arguments_digest(&a).len(), 64);
    }

    #[test]
    fn json_size_is_the_serialized_length() {
        let v =
            serde_json::json!({"rows": [{"name": "Zoë", "n": 1.5}, null, "a\"b\n"], "ok": true});
        assert_eq!(json_size(&v), serde_json::to_vec(&v).unwrap().len());
    }
}
