//! The server side of the channel's `call` frames: what sandbox code reaches through
//! `save_skill`, `load_skill`, `list_skills`, `tokenize_pii` and `detokenize_pii`, and through
//! `call_tool` (every function of the generated `servers` package) the upstream MCP servers
//! of this tenant. Each call is validated exactly as the matching MCP tool validates it (the
//! same library functions), so the channel gives code nothing it could not get through a
//! tool; upstream calls go through the execution's [`UpstreamCalls`], which holds its limits.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::gateway::UpstreamCalls;
use crate::pii::PiiEngine;
use crate::privacy::check_restore_budget;
use crate::sandbox::{BuiltinCalls, CallHandler};
use crate::skills::SkillStore;

/// Calls served to sandbox code.
pub struct ServerCalls {
    skills: Arc<SkillStore>,
    pii: Arc<PiiEngine>,
    tools: Option<Arc<UpstreamCalls>>,
}

impl ServerCalls {
    pub fn new(skills: Arc<SkillStore>, pii: Arc<PiiEngine>) -> Self {
        Self {
            skills,
            pii,
            tools: None,
        }
    }

    /// The same calls, plus `call_tool` through one execution's session.
    pub fn with_tools(mut self, session: Arc<UpstreamCalls>) -> Self {
        self.tools = Some(session);
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
                    let s = blocking(move || pii.sanitize(&p.text)).await?;
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
                    let pii = self.pii.clone();
                    let restored = blocking(move || match &p.tokens {
                        Some(tokens) => pii.restore_with(&p.text, tokens),
                        None => pii.restore(&p.text),
                    })
                    .await?;
                    Ok(json!(restored.text))
                }
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
