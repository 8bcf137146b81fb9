//! The tool surface checked without an engine: the routers' static tool list.

use super::CodeExecutionServer;

/// Every tool declares an output schema. A handler's return type is what gives one: rmcp's
/// `#[tool]` reads it from `privacy::Json<T>`, and a tool answering with `privacy::Reply`
/// names it (`output_schema = ...`). A tool that returned a bare `String` or `ContentBlock`
/// (which rmcp also accepts, untouched by the privacy layer) would have none, and fails here.
#[test]
fn every_tool_has_an_output_schema() {
    let tools = CodeExecutionServer::tool_router().list_all();
    assert!(
        tools.len() >= 15,
        "the whole surface is listed: {}",
        tools.len()
    );
    let without: Vec<&str> = tools
        .iter()
        .filter(|t| t.output_schema.is_none())
        .map(|t| t.name.as_ref())
        .collect();
    assert!(
        without.is_empty(),
        "tools without an output schema (answer with privacy::Json or privacy::Reply and name \
         the schema): {without:?}"
    );
    for tool in &tools {
        let schema = tool.output_schema.as_ref().expect("checked above");
        assert_eq!(
            schema.get("type").and_then(|t| t.as_str()),
            Some("object"),
            "{}: a structured answer is an object",
            tool.name
        );
    }
}

/// `tools/list` lists each tool short ([`super::tool_list::listed`]) and nothing a call
/// accepts is lost: the same arguments, required ones and `additionalProperties`, and an
/// output schema with the object type and required fields a client validates results against.
/// No `$ref` is left without its `$defs`, and no `$schema` is repeated in every schema.
#[test]
fn the_listed_tools_accept_and_answer_what_the_router_does() {
    for full in CodeExecutionServer::tool_router().list_all() {
        let listed = super::tool_list::listed(&full);
        let name = &full.name;
        for key in ["properties", "required", "additionalProperties", "type"] {
            let keys = |s: &rmcp::model::JsonObject| match s.get(key) {
                Some(serde_json::Value::Object(o)) => {
                    serde_json::json!(o.keys().collect::<Vec<_>>())
                }
                other => serde_json::json!(other),
            };
            assert_eq!(
                keys(&listed.input_schema),
                keys(&full.input_schema),
                "{name}: {key}"
            );
        }
        let (listed_out, full_out) = (
            listed.output_schema.as_ref().expect("an output schema"),
            full.output_schema.as_ref().expect("an output schema"),
        );
        assert_eq!(listed_out.get("type"), full_out.get("type"), "{name}");
        assert_eq!(
            listed_out.get("required"),
            full_out.get("required"),
            "{name}"
        );
        let text = serde_json::to_string(&listed).unwrap();
        assert!(!text.contains("$schema"), "{name}: {text}");
        assert!(
            !text.contains("\"$ref\"") || text.contains("\"$defs\""),
            "{name}: {text}"
        );
    }
}

/// The compaction of an input schema, rule by rule: the dialect, `format`, `default: null`
/// and `null` beside a type go; a `$ref` is inlined with the property's own keys kept; a
/// `oneOf` of constants becomes an `enum` of their type; bounds and other defaults stay.
#[test]
fn an_input_schema_is_listed_without_what_restates_json_schema() {
    let full = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": {"Level": {"oneOf": [
            {"const": "a", "type": "string", "description": "A."},
            {"const": "b", "type": "string", "description": "B."}
        ]}},
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "level": {"$ref": "#/$defs/Level", "description": "Which."},
            "limit": {"type": "integer", "format": "uint", "minimum": 0, "default": 10},
            "name": {"type": ["string", "null"], "default": null, "description": "A name."}
        },
        "required": ["limit"]
    });
    let listed = super::tool_list::input_schema(full.as_object().unwrap());
    assert_eq!(
        serde_json::Value::Object(listed),
        serde_json::json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "level": {"enum": ["a", "b"], "type": "string", "description": "Which."},
                "limit": {"type": "integer", "minimum": 0, "default": 10},
                "name": {"type": "string", "description": "A name."}
            },
            "required": ["limit"]
        })
    );
}

/// Each tool's reference holds its whole definition, nested output fields and their
/// descriptions included, and `execute_code`'s description names its reference, which holds
/// the guide.
#[test]
fn every_tool_has_a_reference_with_its_whole_definition() {
    for tool in CodeExecutionServer::tool_router().list_all() {
        let text = super::reference::render(&tool);
        let input = serde_json::to_string(&*tool.input_schema).unwrap();
        let output = serde_json::to_string(tool.output_schema.as_deref().unwrap()).unwrap();
        assert!(text.contains(&input), "{}: {text}", tool.name);
        assert!(text.contains(&output), "{}: {text}", tool.name);
    }
    let router = CodeExecutionServer::tool_router();
    let execute = router.get("execute_code").unwrap();
    let description = execute.description.as_deref().unwrap();
    assert!(
        description.contains(&super::reference::uri("execute_code")),
        "{description}"
    );
    let text = super::reference::render(execute);
    for detail in [
        "## Sessions",
        "`plan_results()`",
        "\"not_carried\"",
        "\"adjustments\"",
    ] {
        assert!(text.contains(detail), "{detail}: {text}");
    }
}
