//! The two shapes a tool's answer takes, with constructors private to [`super`]: a handler
//! gets one from [`super::Privacy`] only, and rmcp takes nothing else from it.

use std::marker::PhantomData;

use base64::Engine as _;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, Resource};
use serde_json::Value;

/// A tool's structured answer of type `T` (its output schema, which rmcp's `#[tool]` reads
/// from the name `Json<T>`), its strings through the privacy layer.
pub struct Json<T> {
    value: Value,
    shape: PhantomData<fn() -> T>,
}

impl<T> Json<T> {
    pub(super) fn new(value: Value) -> Self {
        Self {
            value,
            shape: PhantomData,
        }
    }

    /// The answer as the model gets it (for tests and logs).
    pub fn value(&self) -> &Value {
        &self.value
    }
}

impl<T: 'static> IntoCallToolResult for Json<T> {
    fn into_call_tool_result(self) -> Result<CallToolResponse, rmcp::ErrorData> {
        Ok(CallToolResult::structured(self.value).into())
    }
}

/// A tool's answer that is not a plain structured value: an error, or a structured result
/// with images and links after it.
pub struct Reply(CallToolResult);

impl Reply {
    pub(super) fn error_text(text: String) -> Self {
        Self(CallToolResult::error(vec![ContentBlock::text(text)]))
    }

    pub(super) fn structured(value: Value, is_error: bool, attachments: Vec<Attachment>) -> Self {
        let mut result = if is_error {
            CallToolResult::structured_error(value)
        } else {
            CallToolResult::structured(value)
        };
        result
            .content
            .extend(attachments.into_iter().map(Attachment::into_block));
        Self(result)
    }

    /// The answer as the model gets it (for tests and logs).
    pub fn result(&self) -> &CallToolResult {
        &self.0
    }
}

impl Reply {
    /// The answer as a `tools/call` response (for a handler that may also answer otherwise,
    /// e.g. with an `InputRequiredResult`).
    pub fn into_response(self) -> CallToolResponse {
        self.0.into()
    }

    /// The answer as rmcp's result (for a task's end, which rmcp's task manager stores).
    pub fn into_result(self) -> CallToolResult {
        self.0
    }
}

impl IntoCallToolResult for Reply {
    fn into_call_tool_result(self) -> Result<CallToolResponse, rmcp::ErrorData> {
        Ok(self.0.into())
    }
}

/// What follows a structured result: a picture, or a link to a workspace file.
pub enum Attachment {
    /// A PNG's bytes.
    Png(Vec<u8>),
    /// A workspace file by reference.
    Link(Link),
}

/// A workspace file returned by reference (`resource_link`).
pub struct Link {
    pub uri: String,
    pub name: String,
    pub mime_type: String,
    pub size: u64,
    pub description: Option<String>,
}

impl Attachment {
    /// The attachment with each of its texts mapped (a picture has none).
    pub(super) fn map_text(self, mut f: impl FnMut(String) -> String) -> Self {
        match self {
            Attachment::Png(bytes) => Attachment::Png(bytes),
            Attachment::Link(link) => Attachment::Link(Link {
                uri: f(link.uri),
                name: f(link.name),
                description: link.description.map(f),
                ..link
            }),
        }
    }

    fn into_block(self) -> ContentBlock {
        match self {
            Attachment::Png(bytes) => ContentBlock::image(
                base64::engine::general_purpose::STANDARD.encode(bytes),
                "image/png",
            ),
            Attachment::Link(link) => {
                let mut resource = Resource::new(link.uri, link.name);
                resource.mime_type = Some(link.mime_type);
                resource.size = Some(link.size);
                resource.description = link.description;
                ContentBlock::resource_link(resource)
            }
        }
    }
}
