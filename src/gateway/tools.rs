//! An upstream's tool as the gateway keeps it: taken from the wire JSON of `tools/list`
//! (so it does not depend on how the MCP library models each field), bounded in size.

use serde_json::Value;

/// Longest tool name kept; an upstream tool with a longer one is skipped.
const MAX_NAME_CHARS: usize = 256;
/// Longest description kept (the rest is cut).
const MAX_DESCRIPTION_CHARS: usize = 8 * 1024;
/// Largest schema kept, in bytes of JSON; a larger one is replaced by `{"type": "object"}`.
const MAX_SCHEMA_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq)]
pub struct LiveTool {
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    /// `annotations.destructiveHint` (the MCP default when absent is true for a tool that is
    /// not read-only, but only an explicit hint makes `confirm` the default here).
    pub destructive: bool,
    pub read_only: bool,
}

impl LiveTool {
    /// `None` for an entry without a usable name.
    pub fn from_wire(v: &Value) -> Option<LiveTool> {
        let name = v.get("name")?.as_str()?;
        if name.is_empty() || name.chars().count() > MAX_NAME_CHARS || name.contains('\0') {
            return None;
        }
        let text = |key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
        let schema = |key: &str| {
            v.get(key).filter(|s| s.is_object()).map(|s| {
                if serde_json::to_vec(s).map_or(usize::MAX, |b| b.len()) > MAX_SCHEMA_BYTES {
                    serde_json::json!({"type": "object"})
                } else {
                    s.clone()
                }
            })
        };
        let hint = |key: &str| {
            v.pointer(&format!("/annotations/{key}"))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        Some(LiveTool {
            name: name.to_string(),
            title: text("title").or_else(|| {
                v.pointer("/annotations/title")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            }),
            description: crate::text::prefix_chars(
                &text("description").unwrap_or_default(),
                MAX_DESCRIPTION_CHARS,
            )
            .to_owned(),
            input_schema: schema("inputSchema")
                .unwrap_or_else(|| serde_json::json!({"type": "object"})),
            output_schema: schema("outputSchema"),
            destructive: hint("destructiveHint"),
            read_only: hint("readOnlyHint"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn takes_what_it_needs_from_the_wire() {
        let t = LiveTool::from_wire(&json!({
            "name": "drop", "description": "Drops", "inputSchema": {"type": "object"},
            "annotations": {"destructiveHint": true, "title": "Drop it"}
        }))
        .unwrap();
        assert!(t.destructive && !t.read_only);
        assert_eq!(t.title.as_deref(), Some("Drop it"));
        assert!(LiveTool::from_wire(&json!({"name": ""})).is_none());
        assert!(LiveTool::from_wire(&json!({"description": "x"})).is_none());
        let huge = json!({"name": "x", "inputSchema": {"type": "object", "description": "y".repeat(100_000)}});
        assert_eq!(
            LiveTool::from_wire(&huge).unwrap().input_schema,
            json!({"type": "object"})
        );
    }
}
