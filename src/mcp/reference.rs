//! `docs://tools/NAME`: each tool's whole reference, read with `resources/read` (the template
//! is in `resources/templates/list`). `tools/list` is read at the start of every conversation,
//! so it carries what a model needs to call a tool right ([`super::tool_list`] lists it short);
//! the rest is here, one read away when a model needs it: the description, what it leaves out
//! (for `execute_code`, whose description names its reference, the guide `execute_code.md`:
//! the globals with their signatures, sessions, packages, plans), and the input and output
//! schemas as generated (every field described, nested fields included).
//!
//! Made from the router's own tools, so it says what a call accepts and answers; the text goes
//! through the privacy layer like every resource.

use rmcp::model::{ErrorCode, ReadResourceResult, ResourceTemplate, Tool};

use crate::app::App;
use crate::privacy::{self, Refusal};

/// What every reference URI starts with; the tool's name follows.
pub const PREFIX: &str = "docs://tools/";

/// The guide in `execute_code`'s reference.
const EXECUTE_CODE_GUIDE: &str = include_str!("execute_code.md");

pub const MIME: &str = "text/markdown";

/// The reference URI of tool `name`.
pub fn uri(name: &str) -> String {
    format!("{PREFIX}{name}")
}

/// `resources/templates/list`'s entry for the references.
// The template's URI, name, description and type are constants: no data a call brought.
#[allow(clippy::disallowed_methods)]
pub fn template() -> ResourceTemplate {
    let mut template = ResourceTemplate::new(format!("{PREFIX}{{name}}"), "tool reference");
    template.description = Some(
        "A tool's whole reference: its description, its input and output schemas with every field described, and for execute_code its guide".into(),
    );
    template.mime_type = Some(MIME.into());
    template
}

/// `resources/read` of a reference: `tool` is the router's tool its URI names, if any.
pub fn read(app: &App, uri: String, tool: Option<&Tool>) -> Result<ReadResourceResult, Refusal> {
    let Some(tool) = tool else {
        let name = uri.strip_prefix(PREFIX).unwrap_or(&uri);
        return Err(app.privacy().refusal(
            ErrorCode::RESOURCE_NOT_FOUND,
            format!(
                "no tool named {name:?}: {PREFIX}NAME is the reference of each tool tools/list lists, e.g. {}",
                self::uri("execute_code")
            ),
        ));
    };
    let text = app.privacy().text(render(tool));
    Ok(ReadResourceResult::new(vec![
        privacy::text_contents(text, uri).with_mime_type(MIME),
    ]))
}

/// The reference of `tool`, in Markdown.
pub fn render(tool: &Tool) -> String {
    let mut text = format!("# {}\n\n", tool.name);
    if let Some(description) = &tool.description {
        text.push_str(&format!("{description}\n\n"));
    }
    if let Some(guide) = guide(&tool.name) {
        text.push_str(guide);
        text.push_str("\n\n");
    }
    let input = serde_json::Value::Object((*tool.input_schema).clone());
    text.push_str(&schema_section("Input schema (the arguments)", &input));
    if let Some(output) = &tool.output_schema {
        let output = serde_json::Value::Object((**output).clone());
        text.push_str(&schema_section(
            "Output schema (the result's `structuredContent`)",
            &output,
        ));
    }
    if let Some(annotations) = &tool.annotations {
        let annotations = serde_json::to_string(annotations).unwrap_or_default();
        text.push_str(&format!("## Annotations\n\n`{annotations}`\n"));
    }
    text
}

/// What a model may want to know of a tool beyond its listed description.
fn guide(tool: &str) -> Option<&'static str> {
    Some(match tool {
        "execute_code" => EXECUTE_CODE_GUIDE.trim_end(),
        "search_tools" => {
            "Ranks by meaning with a sentence model, beside keyword ranking over names, \
             descriptions and parameters with synonyms and typo tolerance (get_execution_stats \
             says which ranking runs). Tools code can call now (the connected upstream servers') \
             come first. `detail_level`: \"name\" (ids and scores), \"summary\" (the default: \
             name, server, category, description) or \"full\" (everything, the input schema \
             included). Start with \"summary\", then get_tool_definition of the one you need."
        }
        "get_tool_definition" => {
            "The catalog's fields (description, server, category, input schema), whether code \
             can call the tool now and, if it can, the import and call that invoke it from code."
        }
        "save_skill" => {
            "Code uses a saved skill with `from skills import NAME` (the function NAME it \
             defines) or `exec(load_skill(\"NAME\"))`."
        }
        "sanitize_pii" => {
            "Finds emails, phone numbers, SSNs, card numbers, IP addresses, API keys and IBANs. \
             The same value always gets the same token; restore_pii turns tokens back into values."
        }
        "restore_pii" => "Only tokens this server minted (e.g. [EMAIL_ab12cd34]) are restored.",
        "request_upload" => {
            "Arguments: `filename` (a workspace path; default: the name the user's file has), \
             `max_mb` (default and most: the server's --upload-max-mb), `expires_in_seconds` \
             (30 to the server's --link-ttl-secs, also the default), `overwrite` (replace a file \
             of that name; default: refuse). The link opens a page with a file picker and a drop \
             zone; `curl -T FILE URL` works too (`URL/` or `URL/NAME` when the link names no file). It works once: the first upload that lands \
             spends it, a failed one leaves it usable. The file arrives as the user gave it; \
             list_workspace_files then shows it with its size and SHA-256, and clients that \
             subscribed are told."
        }
        "request_download" => {
            "Arguments: `path` (a workspace file), `expires_in_seconds` (30 to the server's \
             --link-ttl-secs, also the default). The first download of the whole file spends \
             the link; HEAD and ranges do not. Pictures open in the browser, anything else is \
             saved."
        }
        "write_workspace_file" => {
            "Creates parent directories; replaces an existing file atomically."
        }
        "get_execution_stats" => {
            "Workspace use and quota, skills, tool registry, limits, the engine and image, \
             executions by status with latency p50/p99, containers running, sessions, the node \
             that served, the pool (ready, target, refill rate) and where execution time goes \
             (engine phases)."
        }
        _ => return None,
    })
}

/// A schema as compact JSON: a quarter fewer tokens than indented, and as plain to a model.
fn schema_section(title: &str, schema: &serde_json::Value) -> String {
    let json = serde_json::to_string(schema).unwrap_or_default();
    format!("## {title}\n\n```json\n{json}\n```\n\n")
}
