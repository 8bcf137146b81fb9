//! The fixture's tools. Each one is the smallest reproduction of one upstream behaviour; the
//! descriptions say which.

use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ClientResult, ContentBlock, ElicitRequest, ElicitRequestParams,
    ElicitationAction, ElicitationSchema, ServerRequest,
};
use rmcp::service::RequestContext;
use rmcp::{Json, Peer, RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::server::{ADDED_LATER, Fixture};

/// A valid 1x1 transparent PNG.
const PIXEL_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

const MIB: usize = 1024 * 1024;

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Echoed {
    /// Any JSON value; it comes back unchanged.
    pub value: Value,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SlowArgs {
    /// How long to sleep, in seconds (fractions allowed).
    pub seconds: f64,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SizeArgs {
    /// How many MiB to produce.
    pub megabytes: u32,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FailArgs {
    /// The error message the result carries.
    pub message: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AskArgs {
    /// The question put to the client's user.
    pub question: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CountArgs {
    /// How many rows to produce.
    pub count: u32,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    /// The row's index, from 0.
    pub id: u64,
    /// "Person {id}".
    pub name: String,
    /// "person{id}@example.com".
    pub email: String,
    /// "+1 415-555-NNNN" with NNNN = id % 10000 (the fictional 555 range).
    pub phone: String,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Rows {
    /// Made-up people, the same for the same count.
    pub rows: Vec<Row>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct StoreArgs {
    /// Objects to append, one JSON line each, to the file named by FIXTURE_RECORD.
    pub rows: Vec<Map<String, Value>>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Stored {
    /// How many rows were appended.
    pub stored: usize,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct LeakArgs {
    /// Where the credential is quoted: "error", "text", "structured", "resource", "stderr"
    /// (a stderr line, then the text "logged") or "exit" (a stderr line, then exit code 5).
    pub place: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct HeaderArgs {
    /// A header name (any case).
    pub name: String,
    /// The value it must have.
    pub value: String,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct HeaderNames {
    /// The names of the headers of the request that carried the call, lowercase, sorted.
    pub names: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct EnvNames {
    /// The names of the fixture's environment variables, sorted.
    pub names: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Present {
    /// Whether what was asked for is there.
    pub present: bool,
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text.into())])
}

fn error(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text.into())])
}

/// The deterministic row `i` of `rows`.
pub fn row(i: u64) -> Row {
    Row {
        id: i,
        name: format!("Person {i}"),
        email: format!("person{i}@example.com"),
        phone: format!("+1 415-555-{:04}", i % 10_000),
    }
}

#[tool_router(router = tools, vis = "pub(crate)")]
impl Fixture {
    #[tool(description = "Returns its argument as structured content {\"value\": value}.")]
    async fn echo(&self, Parameters(args): Parameters<Echoed>) -> Json<Echoed> {
        Json(args)
    }

    #[tool(description = "Sleeps, then answers \"slept {seconds}\".")]
    async fn slow(&self, Parameters(args): Parameters<SlowArgs>) -> CallToolResult {
        match Duration::try_from_secs_f64(args.seconds) {
            Ok(pause) => {
                tokio::time::sleep(pause).await;
                text(format!("slept {}", args.seconds))
            }
            Err(e) => error(format!("seconds must be a non-negative number: {e}")),
        }
    }

    #[tool(description = "Exits the fixture with code 3 before answering.")]
    async fn crash(&self) -> CallToolResult {
        eprintln!("fixture: crashing on purpose");
        std::process::exit(3)
    }

    #[tool(description = "Answers one text content of exactly that many MiB of 'x'.")]
    async fn big(&self, Parameters(args): Parameters<SizeArgs>) -> CallToolResult {
        text("x".repeat(args.megabytes as usize * MIB))
    }

    #[tool(description = "Answers an error result (isError) whose text is the message.")]
    async fn fail(&self, Parameters(args): Parameters<FailArgs>) -> CallToolResult {
        error(args.message)
    }

    #[tool(description = "Adds the tool added_later and sends notifications/tools/list_changed.")]
    async fn add_tool(&self, peer: Peer<RoleServer>) -> CallToolResult {
        self.state.added.store(true, Ordering::SeqCst);
        if let Err(e) = peer.notify_tool_list_changed().await {
            eprintln!("fixture: could not send tools/list_changed: {e}");
        }
        eprintln!("fixture: {ADDED_LATER} added");
        text("added")
    }

    #[tool(name = "weird-name.v2", description = "A name with a dash and a dot.")]
    async fn weird_name(&self) -> CallToolResult {
        text("weird-name.v2")
    }

    #[tool(name = "class", description = "A name that is a Python keyword.")]
    async fn class(&self) -> CallToolResult {
        text("class")
    }

    #[tool(name = "2fast", description = "A name that starts with a digit.")]
    async fn two_fast(&self) -> CallToolResult {
        text("2fast")
    }

    #[tool(name = "Mixed Case", description = "A name with capitals and a space.")]
    async fn mixed_case(&self) -> CallToolResult {
        text("Mixed Case")
    }

    #[tool(
        description = "Pretends to delete everything (annotated destructive).",
        annotations(read_only_hint = false, destructive_hint = true)
    )]
    async fn delete_everything(&self) -> CallToolResult {
        text("deleted")
    }

    #[tool(
        description = "Pretends to read something (annotated read-only).",
        annotations(read_only_hint = true)
    )]
    async fn read_only_thing(&self) -> CallToolResult {
        text("read")
    }

    // Sent whether or not the client declared the elicitation capability: a client that cannot
    // answer must say so in its reply, which then comes back as an error result.
    #[tool(
        description = "Asks the client's user the question (elicitation/create) and answers with the reply."
    )]
    async fn ask_user(
        &self,
        Parameters(args): Parameters<AskArgs>,
        peer: Peer<RoleServer>,
    ) -> CallToolResult {
        match ask(&peer, args.question).await {
            Ok(answer) => text(answer),
            Err(e) => error(format!("the client cannot answer questions: {e}")),
        }
    }

    #[tool(
        description = "Answers count made-up people (id, name, email, phone) as structured content."
    )]
    async fn rows(&self, Parameters(args): Parameters<CountArgs>) -> Json<Rows> {
        Json(Rows {
            rows: (0..u64::from(args.count)).map(row).collect(),
        })
    }

    #[tool(description = "Appends each row as one JSON line to the file named by FIXTURE_RECORD.")]
    async fn store_rows(
        &self,
        Parameters(args): Parameters<StoreArgs>,
    ) -> Result<Json<Stored>, CallToolResult> {
        let path = std::env::var_os("FIXTURE_RECORD")
            .ok_or_else(|| error("FIXTURE_RECORD is not set: nowhere to store rows"))?;
        let mut lines = String::new();
        for row in &args.rows {
            lines.push_str(&serde_json::to_string(row).expect("a JSON object serializes"));
            lines.push('\n');
        }
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(lines.as_bytes()))
            .map_err(|e| error(format!("cannot append to {}: {e}", path.display())))?;
        Ok(Json(Stored {
            stored: args.rows.len(),
        }))
    }

    #[tool(description = "Tells whether FIXTURE_SECRET reached the fixture's environment.")]
    async fn secret_present(&self) -> Json<Present> {
        let present = std::env::var_os("FIXTURE_SECRET").is_some_and(|v| !v.is_empty());
        Json(Present { present })
    }

    #[tool(
        description = "Quotes the credential it was given (FIXTURE_SECRET, or over HTTP the Authorization header's token) where `place` says, as real APIs quote a rejected key."
    )]
    async fn leak(
        &self,
        Parameters(args): Parameters<LeakArgs>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let key = credential(&context);
        match args.place.as_str() {
            "error" => error(format!("invalid key {key}: not allowed for project alpha")),
            "text" => text(format!("authenticated with {key} as project alpha")),
            "structured" => {
                let structured = serde_json::json!({
                    "project": "alpha",
                    "auth": {"keys": [key, "public-key-0"], "note": format!("key {key} is active"),
                             "by_key": {key.clone(): "alpha"}},
                });
                let mut result = text(structured.to_string());
                result.structured_content = Some(structured);
                result
            }
            "resource" => CallToolResult::success(vec![ContentBlock::embedded_text(
                format!("fixture://keys/{key}"),
                format!("key={key}; project=alpha"),
            )]),
            "stderr" => {
                eprintln!("fixture: authenticating with key {key} for project alpha");
                text("logged")
            }
            "exit" => {
                eprintln!("fixture: key {key} rejected, exiting");
                // The line is read before the connection is seen to close.
                std::thread::sleep(Duration::from_millis(200));
                std::process::exit(5)
            }
            other => error(format!("unknown place {other:?}")),
        }
    }

    #[tool(
        description = "Over HTTP: whether the request that carried this call had the header `name` with exactly `value` (compared here, so the value never comes back)."
    )]
    async fn has_header(
        &self,
        Parameters(args): Parameters<HeaderArgs>,
        context: RequestContext<RoleServer>,
    ) -> Json<Present> {
        let present = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.headers.get(args.name.as_str()))
            .is_some_and(|v| v.as_bytes() == args.value.as_bytes());
        Json(Present { present })
    }

    #[tool(
        description = "Over HTTP: the names of the headers of the request that carried this call (never their values)."
    )]
    async fn header_names(&self, context: RequestContext<RoleServer>) -> Json<HeaderNames> {
        let mut names: Vec<String> = (context.extensions.get::<http::request::Parts>())
            .map(|parts| {
                parts
                    .headers
                    .keys()
                    .map(|k| k.as_str().to_string())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        Json(HeaderNames { names })
    }

    #[tool(description = "Answers the names of the fixture's environment variables.")]
    async fn env_names(&self) -> Json<EnvNames> {
        let mut names: Vec<String> = std::env::vars_os()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        names.sort();
        Json(EnvNames { names })
    }

    #[tool(description = "Answers a 1x1 PNG image and an embedded text resource fixture://note.")]
    async fn image(&self) -> CallToolResult {
        CallToolResult::success(vec![
            ContentBlock::image(PIXEL_PNG, "image/png"),
            ContentBlock::embedded_text("fixture://note", "a note"),
        ])
    }

    #[tool(
        description = "Writes that many MiB to stderr in lines of 100 bytes, then answers \"flooded\"."
    )]
    async fn stderr_flood(&self, Parameters(args): Parameters<SizeArgs>) -> CallToolResult {
        // Off the runtime threads: the write blocks for as long as nobody drains stderr.
        let megabytes = args.megabytes as usize;
        match tokio::task::spawn_blocking(move || crate::flood_stderr(megabytes)).await {
            Ok(()) => text("flooded"),
            Err(e) => error(format!("the flood did not finish: {e}")),
        }
    }

    #[tool(description = "Answers text that is a Python repr, not JSON: [{'a': 1}].")]
    async fn repr_text(&self) -> CallToolResult {
        text("[{'a': 1}]")
    }

    #[tool(description = "Answers JSON as plain text (no structured content): {\"a\": [1, 2]}.")]
    async fn json_text(&self) -> CallToolResult {
        text(r#"{"a": [1, 2]}"#)
    }
}

/// The credential this call came with: the token of the HTTP request's `Authorization` header
/// when served over HTTP, else the FIXTURE_SECRET variable ("" when neither is there).
fn credential(context: &RequestContext<RoleServer>) -> String {
    let header = context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.headers.get(http::header::AUTHORIZATION))
        .and_then(|v| v.to_str().ok())
        .map(|v| v.strip_prefix("Bearer ").unwrap_or(v).to_string());
    header.unwrap_or_else(|| std::env::var("FIXTURE_SECRET").unwrap_or_default())
}

/// Sends `elicitation/create` with a one-field form and returns the answer, or why there is
/// none (the client refused, declined, cancelled or answered without content).
async fn ask(peer: &Peer<RoleServer>, question: String) -> Result<String, String> {
    let schema = ElicitationSchema::builder()
        .required_string("answer")
        .build()
        .map_err(|e| format!("bad form: {e}"))?;
    let request = ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: question,
        requested_schema: schema,
    });
    let reply = peer
        .send_request(ServerRequest::ElicitRequest(request))
        .await
        .map_err(|e| e.to_string())?;
    let ClientResult::ElicitResult(reply) = reply else {
        return Err(format!("unexpected reply {reply:?}"));
    };
    match (reply.action, reply.content) {
        (ElicitationAction::Accept, Some(content)) => Ok(match content.get("answer") {
            Some(Value::String(answer)) => answer.clone(),
            _ => content.to_string(),
        }),
        (ElicitationAction::Accept, None) => Err("accepted without an answer".into()),
        (action, _) => Err(format!("the user chose {action:?}")),
    }
}
