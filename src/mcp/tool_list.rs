//! `tools/list` as this tenant sees it: the tools sorted by name (rmcp 3.9's router sorts too;
//! sorting here keeps the order ours), with `execute_code`'s description ending in the sentence
//! of [`crate::gateway::listing`] when the tenant has upstreams, and the version of its
//! `servers` package in that tool's `_meta` (`code-execution-mcp/servers-package`), so the
//! listing changes exactly when an upstream's tool list of this tenant does. `get_tool`
//! answers from the same place, so what rmcp validates against is what was listed.
//!
//! The sentence goes through [`crate::privacy::Privacy::text`] like everything else the model
//! reads.
//!
//! Every conversation pays for this list before its first call, so it is listed short
//! ([`listed`]): the input schemas without what only restates the JSON Schema (the dialect
//! MCP defaults to, `format`, `default: null`, `null` beside a type: an argument may be left
//! out), their `$defs` inlined; the output schemas as the object and the fields it always has
//! (`required`), which a client validates a result against. The whole definition, every field
//! described, is the tool's reference ([`super::reference`]), a `resources/read` away. Calls are
//! checked against the router's own schemas, which name the same arguments.

use rmcp::model::{JsonObject, MetaObject, Tool};
use serde_json::Value;
use std::sync::Arc;

use super::CodeExecutionServer;
use crate::gateway::listing::UpstreamListing;

/// The `_meta` key of `execute_code` that holds the `servers` package version.
pub const PACKAGE_META_KEY: &str = "code-execution-mcp/servers-package";

const EXECUTE_CODE: &str = "execute_code";

impl CodeExecutionServer {
    /// Every tool, in name order, as this tenant sees it.
    pub(super) async fn listed_tools(&self) -> Vec<Tool> {
        let listing = match self.app().gateway().cloned() {
            None => None,
            Some(view) => tokio::task::spawn_blocking(move || view.listing())
                .await
                .ok()
                .and_then(|l| {
                    l.inspect_err(|e| tracing::warn!("cannot list the upstreams' tools: {e}"))
                        .ok()
                }),
        };
        let mut tools: Vec<Tool> = self.tool_router.list_all().iter().map(listed).collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        for tool in &mut tools {
            if tool.name == EXECUTE_CODE {
                self.describe_upstreams(tool, listing.as_deref());
            }
        }
        tools
    }

    /// One tool as [`Self::listed_tools`] lists it.
    pub(super) fn listed_tool(&self, name: &str) -> Option<Tool> {
        let mut tool = listed(self.tool_router.get(name)?);
        if tool.name == EXECUTE_CODE {
            let listing = self
                .app()
                .gateway()
                .and_then(|view| crate::host::blocking_here(|| view.listing()).ok());
            self.describe_upstreams(&mut tool, listing.as_deref());
        }
        Some(tool)
    }

    fn describe_upstreams(&self, tool: &mut Tool, listing: Option<&UpstreamListing>) {
        let Some(listing) = listing else { return };
        if let Some(sentence) = listing.sentence() {
            let base = tool.description.as_deref().unwrap_or_default();
            let sentence = self.app().privacy().text(sentence);
            tool.description = Some(format!("{base} {sentence}").into());
        }
        if let Some(package) = &listing.package {
            tool.meta
                .get_or_insert_with(MetaObject::new)
                .0
                .insert(PACKAGE_META_KEY.into(), package.clone().into());
        }
    }
}

/// `tool` as `tools/list` shows it: its input schema compacted ([`input_schema`]), its output
/// schema cut to its type and required fields ([`output_schema`]).
pub fn listed(tool: &Tool) -> Tool {
    let mut tool = tool.clone();
    tool.input_schema = Arc::new(input_schema(&tool.input_schema));
    tool.output_schema = tool.output_schema.map(|s| Arc::new(output_schema(&s)));
    tool
}

/// An input schema with the same arguments, types, bounds and descriptions, and none of what
/// restates JSON Schema's defaults: `$schema` (MCP's default dialect), `format` (an
/// annotation), `default: null`, and `null` beside another type (an argument left out and
/// one sent as `null` mean the same to every tool). Its `$defs` are inlined where they are
/// used, and a `oneOf` of constants is an `enum`.
pub fn input_schema(schema: &JsonObject) -> JsonObject {
    let defs = schema.get("$defs").and_then(Value::as_object);
    let mut compact = compact(schema, defs, 0);
    compact.remove("$schema");
    let defs_used = Value::Object(compact.clone())
        .to_string()
        .contains("\"$ref\"");
    if !defs_used {
        compact.remove("$defs");
    }
    compact
}

/// An output schema as the object it describes and the fields every result has: what a
/// client validates a result against, with each field's type and meaning left to the tool's
/// reference.
pub fn output_schema(schema: &JsonObject) -> JsonObject {
    let mut compact = JsonObject::new();
    for key in ["type", "required"] {
        if let Some(value) = schema.get(key) {
            compact.insert(key.into(), value.clone());
        }
    }
    compact
}

/// How deep `$ref`s are followed: the argument types hold no recursive type, so a deeper one
/// is left as it is.
const MAX_DEPTH: usize = 8;

fn compact(schema: &JsonObject, defs: Option<&JsonObject>, depth: usize) -> JsonObject {
    let mut out = JsonObject::new();
    if let Some(target) = schema.get("$ref").and_then(Value::as_str)
        && let Some(def) = target
            .strip_prefix("#/$defs/")
            .and_then(|name| defs?.get(name))
            .and_then(Value::as_object)
        && depth < MAX_DEPTH
    {
        out = compact(def, defs, depth + 1);
    }
    for (key, value) in schema {
        match (key.as_str(), value) {
            ("$ref", _) if !out.is_empty() => {}
            ("$schema" | "format", _) | ("default", Value::Null) => {}
            ("type", Value::Array(types)) => {
                let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
                let kept = match kept.as_slice() {
                    [] => value.clone(),
                    [one] => one.clone(),
                    _ => Value::Array(kept),
                };
                out.insert(key.clone(), kept);
            }
            ("properties", Value::Object(properties)) => {
                let properties = properties
                    .iter()
                    .map(|(name, s)| (name.clone(), subschema(s, defs, depth)))
                    .collect();
                out.insert(key.clone(), Value::Object(properties));
            }
            ("items" | "additionalProperties", Value::Object(_)) => {
                out.insert(key.clone(), subschema(value, defs, depth));
            }
            ("anyOf" | "oneOf" | "allOf", Value::Array(alternatives)) => {
                let alternatives = alternatives
                    .iter()
                    .map(|s| subschema(s, defs, depth))
                    .collect();
                out.insert(key.clone(), Value::Array(alternatives));
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    constants_as_enum(&mut out);
    out
}

fn subschema(schema: &Value, defs: Option<&JsonObject>, depth: usize) -> Value {
    match schema.as_object() {
        Some(object) => Value::Object(compact(object, defs, depth)),
        None => schema.clone(),
    }
}

/// `oneOf: [{const: a, type: string, description}, ...]` as `enum: [a, ...]` with the type
/// they share (the alternatives' descriptions are the tool's reference's).
fn constants_as_enum(schema: &mut JsonObject) {
    let Some(Value::Array(alternatives)) = schema.get("oneOf") else {
        return;
    };
    let Some(constants) = alternatives
        .iter()
        .map(|a| a.get("const").cloned())
        .collect::<Option<Vec<Value>>>()
    else {
        return;
    };
    let types: Vec<Option<&Value>> = alternatives.iter().map(|a| a.get("type")).collect();
    let shared = types
        .first()
        .copied()
        .flatten()
        .filter(|first| types.iter().all(|t| *t == Some(*first)))
        .cloned();
    schema.remove("oneOf");
    schema.insert("enum".into(), Value::Array(constants));
    if let Some(shared) = shared {
        schema.entry("type").or_insert(shared);
    }
}
