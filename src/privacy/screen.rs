//! What rmcp and the transport say in their own words, read by the PII engine before it
//! leaves. serde's messages quote the value they could not read (`invalid type: string
//! "ann@example.com", expected f64`), so an answer to a malformed request can carry the very
//! data a well-formed one would have had tokenized: rmcp's tool result for arguments that do
//! not deserialize, and any JSON-RPC error the stdio transport sends (the net under the errors
//! rmcp makes before a handler runs). A text that went through the engine once passes again
//! unchanged, so what this module made already is not harmed by a second reading.

use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};

use super::{Privacy, Refusal};

impl Privacy {
    /// A JSON-RPC error on its way out: its message, and every string of its data, through
    /// the engine.
    pub fn screen_error(&self, error: Refusal) -> Refusal {
        let message = self.text(error.message.into_owned()).into_string();
        Refusal::new(
            error.code,
            message,
            error.data.map(|data| self.value(data, &[])),
        )
    }

    /// A `tools/call` answer: an error result of text only (what rmcp makes of arguments that
    /// do not deserialize, and [`Privacy::error`]'s) with its texts through the engine; any
    /// other answer as it is (structured results and their attachments were made here).
    pub fn screen_tool_response(&self, response: CallToolResponse) -> CallToolResponse {
        let CallToolResponse::Complete(result) = response else {
            return response;
        };
        if result.is_error != Some(true) || result.structured_content.is_some() {
            return result.into();
        }
        let texts: Option<Vec<String>> = (result.content.iter())
            .map(|block| block.as_text().map(|t| t.text.clone()))
            .collect();
        let Some(texts) = texts else {
            return result.into();
        };
        let blocks = texts
            .into_iter()
            .map(|text| ContentBlock::text(self.text(text).into_string()))
            .collect();
        CallToolResult::error(blocks).into()
    }
}
