//! The server side of the channel's `call` frames: what sandbox code reaches through
//! `save_skill`, `load_skill`, `list_skills`, `tokenize_pii` and `detokenize_pii`, and through
//! `call_tool` (every function of the generated `servers` package) the upstream MCP servers
//! of this tenant. Each call is validated exactly as the matching MCP tool validates it (the
//! same library functions), so the channel gives code nothing it could not get through a
//! tool; upstream calls go through the execution's [`UpstreamCalls`], which holds its limits.
//! Calls to `plan` tools arrive as one-way `plan` frames and are recorded there too;
//! `plan_results` gives a session's call the outcomes of the plan its state's call made.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::gateway::UpstreamCalls;
use crate::pii::{Origin, PiiEngine};
use crate::privacy::{MayHold, check_restore_budget};
use crate::sandbox::run::channel::{FromHarness, MAX_PLAN_TOOLS, PlanSpec};
use crate::sandbox::{BuiltinCalls, CallHandler};
use crate::skills::SkillStore;

/// Calls served to sandbox code.
pub struct ServerCalls {
    skills: Arc<SkillStore>,
    pii: Arc<PiiEngine>,
    /// What the code may hold in clear under the flow rules (none: every value).
    may_hold: Option<MayHold>,
    tools: Option<Arc<UpstreamCalls>>,
    /// The `plan` tools, for the job frame (absent when there are none).
    plan: Option<PlanSpec>,
    /// What `plan_results()` answers: the outcomes of the plan made by the call whose state
    /// this session's call runs on (null when that call planned nothing).
    plan_results: Value,
}

impl ServerCalls {
    pub fn new(skills: Arc<SkillStore>, pii: Arc<PiiEngine>, may_hold: Option<MayHold>) -> Self {
        Self {
            skills,
            pii,
            may_hold,
            tools: None,
            plan: None,
            plan_results: Value::Null,
        }
    }

    /// The same calls, plus `call_tool` through one execution's session.
    pub fn with_tools(mut self, session: Arc<UpstreamCalls>) -> Self {
        let tools = session.plan_tools();
        if !tools.is_empty() {
            let bounds = session.plan_bounds();
            self.plan = Some(PlanSpec {
                tools: (tools.into_iter().take(MAX_PLAN_TOOLS))
                    .map(|(server, tool)| [server, tool])
                    .collect(),
                max_calls: bounds.max_calls,
                max_bytes: bounds.max_bytes,
            });
        }
        self.tools = Some(session);
        self
    }

    /// The outcomes `plan_results()` gives.
    pub fn with_plan_results(mut self, results: Option<Value>) -> Self {
        self.plan_results = results.unwrap_or(Value::Null);
        self
    }
}

#[derive(Deserialize)]
struct CallTool {
    server: String,
    tool: String,
    #[serde(default)]
    arguments: Value,
}

#[derive(Deserialize)]
struct SaveSkill {
    name: String,
    code: String,
    #[serde(default)]
    description: Option<String>,
}

#[derive(Deserialize)]
struct SkillName {
    name: String,
}

#[derive(Deserialize)]
struct Text {
    text: String,
}

#[derive(Deserialize)]
struct Detokenize {
    text: String,
    #[serde(default)]
    tokens: Option<std::collections::BTreeMap<String, String>>,
}

fn params<T: DeserializeOwned>(method: &str, value: Value, expected: &str) -> Result<T, String> {
    serde_json::from_value(value)
        .map_err(|e| format!("{method}: bad arguments ({e}); expected {expected}"))
}

/// Runs blocking store I/O off the async threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("internal error: {e}"))
}

impl CallHandler for ServerCalls {
    fn plan_spec(&self) -> Option<&PlanSpec> {
        self.plan.as_ref()
    }

    fn plan_frame(&self, frame: FromHarness) {
        let Some(tools) = &self.tools else {
            return;
        };
        match frame {
            FromHarness::Plan {
                server,
                tool,
                arguments,
            } => tools.plan_call(&server, &tool, arguments),
            FromHarness::PlanOptions { stop_on_error } => {
                tools.set_plan_stop_on_error(stop_on_error)
            }
            FromHarness::PlanRefused { reason } => {
                tools.refuse_plan(crate::text::cut(&reason, 300));
            }
            _ => {}
        }
    }

    fn call<'a>(&'a self, method: &'a str, args: Value) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move {
            match method {
                "save_skill" => {
                    let p: SaveSkill =
                        params(method, args, "name (str), code (str), description (str)")?;
                    let skills = self.skills.clone();
                    let name = p.name.clone();
                    blocking(move || {
                        skills.save(&p.name, &p.code, p.description.as_deref().unwrap_or(""))
                    })
                    .await?
                    .map_err(|e| e.to_string())?;
                    Ok(json!(format!("Skill '{name}' saved successfully")))
                }
                "load_skill" => {
                    let p: SkillName = params(method, args, "name (str)")?;
                    let skills = self.skills.clone();
                    let skill = blocking(move || skills.load(&p.name))
                        .await?
                        .map_err(|e| e.to_string())?;
                    Ok(json!(skill.code))
                }
                "list_skills" => {
                    let skills = self.skills.clone();
                    let list = blocking(move || skills.list())
                        .await?
                        .map_err(|e| e.to_string())?;
                    serde_json::to_value(list).map_err(|e| e.to_string())
                }
                "tokenize_pii" => {
                    let p: Text = params(method, args, "text (str)")?;
                    let pii = self.pii.clone();
                    let s = blocking(move || pii.sanitize_from(&p.text, &Origin::Sandbox)).await?;
                    Ok(json!({"sanitized": s.text, "tokens": s.tokens}))
                }
                "detokenize_pii" => {
                    let p: Detokenize = params(method, args, "text (str), tokens (dict or None)")?;
                    // With its own token map, code can only undo its own tokenize_pii (each
                    // pair is re-checked against the server's key); without one it draws on
                    // the vault, as restore_pii does, within the same budget.
                    if p.tokens.is_none() {
                        check_restore_budget(&p.text)?;
                    }
                    // The value of an upstream or a host whose results enter tokenized stays a
                    // token here: in clear, the code could send it anywhere (`gateway/flow.rs`).
                    let (pii, may_hold) = (self.pii.clone(), self.may_hold.clone());
                    let restored = blocking(move || match (&p.tokens, may_hold) {
                        (Some(tokens), _) => pii.restore_with(&p.text, tokens).text,
                        (None, Some(may_hold)) => pii.restore_where(&p.text, |o| may_hold(o)).text,
                        (None, None) => pii.restore(&p.text).text,
                    })
                    .await?;
                    Ok(json!(restored))
                }
                "plan_results" => Ok(self.plan_results.clone()),
                "call_tool" => {
                    let p: CallTool =
                        params(method, args, "server (str), tool (str), arguments (dict)")?;
                    let Some(session) = &self.tools else {
                        return Err("no upstream MCP servers are configured on this server (an administrator adds them with `serve --upstreams FILE`)".into());
                    };
                    let arguments = match p.arguments {
                        Value::Null => Value::Object(Default::default()),
                        other => other,
                    };
                    session.call(&p.server, &p.tool, arguments).await
                }
                _ => BuiltinCalls.call(method, args).await,
            }
        })
    }
}
