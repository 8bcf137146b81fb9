//! Unknown tool arguments are refused, never dropped: a `tools/call` whose arguments name a
//! field the tool's input schema does not list gets JSON-RPC -32602 (invalid params) naming
//! every unknown field and the accepted ones, before the tool runs. Why: a dropped argument
//! changes what a call does without a word (`fork` ignored runs on the session itself, a
//! misspelled `sesion` runs with no session at all).
//!
//! The argument types also deny unknown fields (`#[serde(deny_unknown_fields)]`, which gives
//! every schema `additionalProperties: false`); this check runs first because rmcp turns an
//! argument that does not deserialize into a tool result with `isError`, not a protocol error.
//! The refusal quotes the arguments' names, so it reaches the model through the privacy layer
//! like every error ([`crate::privacy::Privacy::refusal`]).

use rmcp::model::{ErrorCode, JsonObject, Tool};

/// A refused call: its JSON-RPC code and the words that say what to change.
#[derive(Debug)]
pub struct Refused {
    pub code: ErrorCode,
    pub message: String,
}

/// `Err` with -32602 when `arguments` hold a field `tool`'s input schema does not list.
pub fn check(tool: &Tool, arguments: Option<&JsonObject>) -> Result<(), Refused> {
    let accepted: Vec<&str> = tool
        .input_schema
        .get("properties")
        .and_then(|p| p.as_object())
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let unknown: Vec<String> = arguments
        .into_iter()
        .flat_map(|a| a.keys())
        .filter(|k| !accepted.contains(&k.as_str()))
        .map(|k| format!("`{k}`"))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let takes = if accepted.is_empty() {
        "it takes no arguments".to_string()
    } else {
        let names: Vec<String> = accepted.iter().map(|k| format!("`{k}`")).collect();
        format!("it takes {}", names.join(", "))
    };
    let (noun, unknown) = match unknown.len() {
        1 => ("argument", unknown[0].clone()),
        _ => ("arguments", unknown.join(", ")),
    };
    Err(Refused {
        code: ErrorCode::INVALID_PARAMS,
        message: format!(
            "{} has no {noun} {unknown}: {takes}. Remove it or correct its name; nothing ran",
            tool.name
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn tool(schema: serde_json::Value) -> Tool {
        Tool::new("run", "", Arc::new(schema.as_object().unwrap().clone()))
    }

    fn args(v: serde_json::Value) -> JsonObject {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn every_unknown_field_is_named_with_the_accepted_ones() {
        let t = tool(json!({"type": "object", "properties": {"code": {}, "session": {}}}));
        assert!(check(&t, Some(&args(json!({"code": "1", "session": "s"})))).is_ok());
        assert!(check(&t, None).is_ok());
        let e = check(
            &t,
            Some(&args(json!({"code": "1", "fork": true, "sesion": "s"}))),
        )
        .unwrap_err();
        assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(e.message.contains("no arguments `fork`, `sesion`"), "{e:?}");
        assert!(e.message.contains("takes `code`, `session`"), "{e:?}");
    }

    #[test]
    fn a_tool_without_arguments_refuses_any() {
        let t = tool(json!({"type": "object", "properties": {}}));
        assert!(check(&t, Some(&args(json!({})))).is_ok());
        let e = check(&t, Some(&args(json!({"all": true})))).unwrap_err();
        assert!(
            e.message
                .contains("no argument `all`: it takes no arguments"),
            "{e:?}"
        );
    }
}
