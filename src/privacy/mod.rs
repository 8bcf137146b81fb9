//! Privacy by default, and by type: with `--pii-output tokenize`, what the server shows the
//! model passes through the PII engine, so values become tokens like `[EMAIL_ab12cd34]`.
//! Workspace files and code keep the real values; `restore_pii` (or `detokenize_pii` in the
//! sandbox) turns tokens back into values where a tool call needs them.
//!
//! The guarantee is a type, on every road to the model:
//! - A tool handler returns [`Json`] or [`Reply`], and only [`Privacy`] makes them:
//!   [`Privacy::json`] sends every string of the response through the engine,
//!   [`Privacy::error`] and [`Privacy::failure`] every error text, and [`Privacy::structured`]
//!   the JSON and every attachment's text (an image's bytes are not text).
//! - Every other road takes a [`Shown`], a text only [`Privacy::text`] and
//!   [`Privacy::text_cut`] make from data: JSON-RPC errors ([`Privacy::refusal`], [`refusal`]),
//!   resources' names, URIs and contents ([`resource`], [`text_contents`]), progress reports
//!   ([`progress_note`]), task statuses ([`set_task_status`], [`with_task_status`]) and
//!   resource notifications ([`resource_updated`], [`notify_resource_updated`]).
//!
//! So a new response field, or an error that quotes a path, cannot reach the model
//! untokenized. rmcp's own ways are banned outside this module: clippy.toml names rmcp's `Json`,
//! `CallToolResult`, `ErrorData` and its other types with public fields that carry text
//! (`disallowed-types`) and its constructors of answers, contents, errors, resources, progress,
//! task statuses and notifications (`disallowed-methods`); `src/lib.rs` denies both lints for
//! the whole crate, and this module allows them. Elsewhere an `allow` says on the line above
//! why it is safe, handlers name rmcp's error as [`Refusal`], and no struct literal of these
//! types is written outside this module, which clippy does not see (`tests/privacy_lints.rs`
//! checks all three). rmcp also turns a handler's bare `String` or `ContentBlock` into an
//! answer, which no lint can ban; such a tool has no output schema, and `src/mcp/tests.rs`
//! checks that every tool has one. What no type can reach, the words rmcp and serde use about
//! a malformed request (they quote the value they could not read), is read again on its way
//! out ([`Privacy::screen_error`], [`Privacy::screen_tool_response`]).
//!
//! The exceptions are named: [`Privacy::revealed`] (`restore_pii`, whose answer is the values
//! the model asked for), [`Privacy::json_keeping`] (fields that are binary as base64),
//! [`blob_contents`] (a binary resource), [`Privacy::echoed`] (a URI the client subscribed to,
//! sent back in its own words), and [`Shown::fixed`] and [`Shown::framed`] (the server's own
//! words, alone or around a shown text).
//!
//! JSON has one policy, the engine's: strings and object keys are tokenized (a map keyed by
//! email addresses holds personal data in its keys; a response's field names hold none and
//! stay), with [`crate::pii::Batch::key`] on both paths. Numbers differ by path: the engine's
//! `sanitize_json` tokenizes a number a key marks as personal (`phone`), while a response keeps
//! its numbers, since its schema says they are numbers.
//!
//! `execute_code`'s outcome is tokenized earlier, in the application, where the bytes past
//! each cut are still at hand ([`redact_outcome`]): a value the cut splits becomes its token
//! whole, never its first part. Passing a tokenized text through the engine again leaves it
//! as it is.
//!
//! Values minted here are recorded with their origin (`pii::Origin`): `sandbox` for what an
//! execution printed ([`redact_outcome`], [`Privacy::text_cut`]), `workspace` for every other
//! answer (files, resources, skills, the server's own words).
//!
//! This stops accidental exposure, not a determined program: code the model writes can reshape
//! a restored value (spell it out, reverse it) before printing it.

// This module is the one place that makes what rmcp sends the model: its banned types and
// constructors (clippy.toml) are used here, each with the texts the engine has read.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

mod outcome;
mod reply;
mod roads;
mod screen;
mod shown;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use rmcp::model::{ErrorCode, ErrorData};
use serde::Serialize;
use serde_json::{Map, Value};

pub use outcome::{MAX_TOKENS_PER_RESTORE, check_restore_budget, redact_outcome};
pub use reply::{Attachment, Json, Link, Reply};
pub use roads::{
    Refusal, blob_contents, notify_resource_updated, progress_note, refusal, resource,
    resource_updated, set_task_status, text_contents, with_task_status,
};
pub use shown::Shown;

use crate::host::blocking_here;
use crate::pii::{Batch, Origin, PiiEngine};

/// The one door from the server to the model: every response and notification text passes
/// here.
#[derive(Clone)]
pub struct Privacy {
    pii: Arc<PiiEngine>,
    tokenize: bool,
    /// Which origins' values may become readable in the workspace (the gateway's flow rules);
    /// `None`: every origin's.
    workspace_may_hold: Option<MayHold>,
}

/// Whether a value of these origins may be restored where sandbox code can read it.
pub type MayHold = Arc<dyn Fn(&[Origin]) -> bool + Send + Sync>;

impl Privacy {
    /// With `tokenize` false (`--pii-output off`), texts pass as they are.
    pub fn new(pii: Arc<PiiEngine>, tokenize: bool) -> Self {
        Self {
            pii,
            tokenize,
            workspace_may_hold: None,
        }
    }

    /// Tokens from the model restore into workspace names and contents only where `may_hold`
    /// allows their origins: the sandbox reads the workspace, so a value the flow rules keep
    /// from the code must not arrive there by way of a file.
    pub fn with_flow(mut self, may_hold: MayHold) -> Self {
        self.workspace_may_hold = Some(may_hold);
        self
    }

    /// A text on its way to the model by another road than a tool's response: a progress
    /// message, a resource's name, URI or contents, a notification.
    pub fn text(&self, text: String) -> Shown {
        self.text_from(text, &Origin::Workspace)
    }

    fn text_from(&self, text: String, origin: &Origin) -> Shown {
        if !self.tokenize {
            return Shown::new(text);
        }
        Shown::new(blocking_here(|| self.pii.sanitize_from(&text, origin).text))
    }

    /// [`Privacy::text`] of `text` cut to `max_chars` characters, with `…` where it was cut.
    /// The PII engine reads past the cut, so a value the cut splits becomes its token whole
    /// (which may end past `max_chars`) rather than leave its first part in clear. For what
    /// an execution printed (progress, errors): its values' origin is the sandbox.
    pub fn text_cut(&self, text: String, max_chars: usize) -> Shown {
        let cut = crate::text::prefix_chars(&text, max_chars).len();
        if cut == text.len() {
            return self.text_from(text, &Origin::Sandbox);
        }
        let shown = if self.tokenize {
            blocking_here(|| self.pii.sanitize_cut(&text, cut, &Origin::Sandbox))
        } else {
            text[..cut].to_string()
        };
        Shown::new(format!("{shown}…"))
    }

    /// The client's own words sent back as they came: a URI it subscribed to, named in the
    /// notification that it changed. Nothing of the server's is in them.
    pub fn echoed(&self, client_text: String) -> Shown {
        Shown::new(client_text)
    }

    /// A JSON-RPC error the model can act on, its text through the engine.
    pub fn refusal(&self, code: ErrorCode, message: impl std::fmt::Display) -> ErrorData {
        refusal(code, self.text(message.to_string()))
    }

    /// Text coming from the model into a tool call: tokens this server minted become their
    /// values again (so a file listed as `[EMAIL_ab12cd34].json` can be read under that name).
    pub fn from_model(&self, text: String) -> String {
        if !(self.tokenize && text.contains('[') && check_restore_budget(&text).is_ok()) {
            return text;
        }
        blocking_here(|| match &self.workspace_may_hold {
            Some(may_hold) => self.pii.restore_where(&text, |o| may_hold(o)).text,
            None => self.pii.restore(&text).text,
        })
    }

    /// A tool's structured answer, every string of it (at any depth) through the engine.
    pub fn json<T: Serialize>(&self, value: T) -> Json<T> {
        Json::new(self.value(to_value(&value), &[]))
    }

    /// [`Privacy::json`], except the top-level string fields named in `binary`, which carry
    /// bytes as base64 (a file that is not text), or what the server minted whole (a signed
    /// link): nothing the engine should read.
    pub fn json_keeping<T: Serialize>(&self, value: T, binary: &[&str]) -> Json<T> {
        Json::new(self.value(to_value(&value), binary))
    }

    /// `restore_pii`'s answer: the values the model asked to have back, shown as they are.
    /// The one response the engine does not read.
    pub(crate) fn revealed<T: Serialize>(&self, value: T) -> Json<T> {
        Json::new(to_value(&value))
    }

    /// A tool error the model can act on, its text through the engine (an error may quote a
    /// path or a value the model only knows as a token).
    pub fn error(&self, message: impl std::fmt::Display) -> Reply {
        Reply::error_text(self.text(message.to_string()).into_string())
    }

    /// The original's `{success: false, error}` as an error result.
    pub fn failure(&self, error: impl std::fmt::Display) -> Reply {
        let value = serde_json::json!({"success": false, "error": error.to_string()});
        Reply::structured(self.value(value, &[]), true, Vec::new())
    }

    /// A structured result (or, with `is_error`, a structured error), followed by
    /// attachments: images pass as they are, the text of a link (URI, name, description)
    /// through the engine.
    pub fn structured(
        &self,
        value: &impl Serialize,
        is_error: bool,
        attachments: Vec<Attachment>,
    ) -> Reply {
        let value = self.value(to_value(value), &[]);
        let attachments = attachments
            .into_iter()
            .map(|a| a.map_text(|t| self.text(t).into_string()))
            .collect();
        Reply::structured(value, is_error, attachments)
    }

    /// `value` with every string through the engine in one batch (one vault write), except the
    /// top-level fields named in `keep`.
    fn value(&self, value: Value, keep: &[&str]) -> Value {
        if !self.tokenize {
            return value;
        }
        blocking_here(|| {
            self.pii.together(&Origin::Workspace, |batch| match value {
                Value::Object(map) => {
                    let mut out = Map::with_capacity(map.len());
                    for (k, v) in map {
                        let v = if keep.contains(&k.as_str()) {
                            v
                        } else {
                            strings(batch, v)
                        };
                        out.insert(batch.key(&k, &out), v);
                    }
                    Value::Object(out)
                }
                other => strings(batch, other),
            })
        })
    }
}

/// Every string of `value` through `batch`, keys by [`Batch::key`] (the engine's one policy
/// for keys: a map keyed by personal data shows tokens; the response's field names hold none
/// and stay); numbers and the shape stay, so the response's schema holds.
fn strings(batch: &mut Batch<'_>, value: Value) -> Value {
    match value {
        Value::String(s) => Value::String(batch.text(&s)),
        Value::Array(items) => Value::Array(items.into_iter().map(|v| strings(batch, v)).collect()),
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            for (k, v) in map {
                let v = strings(batch, v);
                out.insert(batch.key(&k, &out), v);
            }
            Value::Object(out)
        }
        other => other,
    }
}

fn to_value(value: &impl Serialize) -> Value {
    serde_json::to_value(value).expect("responses serialize")
}
