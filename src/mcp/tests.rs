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

/// Each tool's reference holds its whole definition, nested output fields and their
/// descriptions included, and `execute_code`'s holds the guide.
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
