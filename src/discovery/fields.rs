//! What text of a tool is searched, split into fields that weigh differently.
//!
//! A word in a tool's name says far more about what the tool does than the same word in the
//! fifth sentence of its description, and a parameter called `city` says something too. So
//! the index keeps five fields (BM25F, see `index.rs`): the name (with any `functions` that
//! differ from it), the server, the description, the use cases, and the parameters (names and
//! descriptions from `input_schema`, walked to a bounded depth).
//!
//! Text is capped per field: a few descriptions run to 50 KB of routing tables, and a file
//! dropped into the registry could be anything.

use serde_json::Value;

use super::catalog::ToolEntry;

/// Fields in this order: name, server, description, use cases, parameters.
pub const FIELD_COUNT: usize = 5;

/// Characters indexed per field at most.
const MAX_FIELD_BYTES: usize = 16 * 1024;
/// How deep `input_schema` is walked (properties of properties of items…).
const MAX_SCHEMA_DEPTH: usize = 4;

/// The searchable text of `tool`, one string per field.
pub fn field_texts(tool: &ToolEntry) -> [String; FIELD_COUNT] {
    let mut name = tool.name.clone();
    for f in &tool.functions {
        if !f.eq_ignore_ascii_case(&tool.name) {
            name.push(' ');
            name.push_str(f);
        }
    }
    let mut params = String::new();
    if let Some(schema) = &tool.input_schema {
        schema_text(schema, 0, &mut params);
    }
    [
        name,
        tool.mcp_server.clone(),
        tool.description.clone(),
        tool.use_cases.join(" \n "),
        params,
    ]
    .map(capped)
}

/// Appends property names and descriptions found under `schema` to `out`.
fn schema_text(schema: &Value, depth: usize, out: &mut String) {
    if depth > MAX_SCHEMA_DEPTH || out.len() > MAX_FIELD_BYTES {
        return;
    }
    let Some(obj) = schema.as_object() else {
        return;
    };
    if depth > 0
        && let Some(Value::String(d)) = obj.get("description")
    {
        out.push_str(d);
        out.push_str(" \n ");
    }
    if let Some(Value::Object(props)) = obj.get("properties") {
        for (name, sub) in props {
            out.push_str(name);
            out.push_str(" \n ");
            schema_text(sub, depth + 1, out);
        }
    }
    if let Some(items) = obj.get("items") {
        schema_text(items, depth + 1, out);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(alts)) = obj.get(key) {
            for alt in alts {
                schema_text(alt, depth + 1, out);
            }
        }
    }
}

fn capped(mut s: String) -> String {
    s.truncate(crate::text::prefix(&s, MAX_FIELD_BYTES).len());
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(schema: Value) -> ToolEntry {
        ToolEntry {
            id: "s/get_forecast".into(),
            name: "get_forecast".into(),
            mcp_server: "wx".into(),
            category: "c".into(),
            description: "d".into(),
            functions: vec!["get_forecast".into(), "forecast_v2".into()],
            use_cases: vec!["plan".into(), "pack".into()],
            input_schema: Some(schema),
            source_file: Default::default(),
        }
    }

    #[test]
    fn names_functions_and_parameters_are_collected() {
        let t = tool(
            json!({"type": "object", "description": "top level is the tool's own",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "options": {"type": "object", "properties": {"units": {"description": "metric or imperial"}}},
                "days": {"type": "array", "items": {"anyOf": [{"description": "a day offset"}]}}
            }}),
        );
        let [name, server, _, use_cases, params] = field_texts(&t);
        assert_eq!(name, "get_forecast forecast_v2");
        assert_eq!(server, "wx");
        assert!(use_cases.contains("plan") && use_cases.contains("pack"));
        for needle in [
            "city",
            "City name",
            "units",
            "metric or imperial",
            "a day offset",
        ] {
            assert!(params.contains(needle), "{needle} missing from {params}");
        }
        assert!(!params.contains("top level"));
    }

    #[test]
    fn deep_or_huge_schemas_are_bounded() {
        let mut deep = json!({"description": "bottom"});
        for i in 0..50 {
            deep = json!({"properties": {format!("p{i}"): deep}});
        }
        let [.., params] = field_texts(&tool(deep));
        assert!(!params.contains("bottom") && params.contains("p49"));

        let mut t = tool(Value::Null);
        t.description = "é".repeat(MAX_FIELD_BYTES);
        let [_, _, description, ..] = field_texts(&t);
        assert!(description.len() <= MAX_FIELD_BYTES);
    }
}
