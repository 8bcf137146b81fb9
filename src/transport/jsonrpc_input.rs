//! What a client sent, read as one JSON-RPC message before rmcp sees it, for both transports.
//! rmcp drops what it cannot parse (stdio) or answers it with a bare 415 (HTTP); here every
//! malformed message gets the JSON-RPC error it deserves: -32700 parse error for what is not
//! JSON, -32600 invalid request for JSON that is no JSON-RPC 2.0 message (with the request's id
//! when it has a usable one), and -32602 invalid params for a request to a method this server
//! serves whose parameters do not fit (rmcp would read it as a custom request and answer
//! "method not found").
//!
//! serde's words about what it could not read quote the value (`invalid type: string
//! "ann@example.com", expected a map`), so every answer's message is a [`Shown`]: the PII
//! engine reads it before it leaves, like every other text the model may see.

use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, ClientRequest, ErrorCode, JsonRpcError, JsonRpcMessage, NumberOrString,
    RequestId,
};
use rmcp::service::RxJsonRpcMessage;
use serde_json::Value;

use crate::privacy::{Privacy, Shown, refusal};

/// Largest JSON-RPC message the server reads, in bytes, on either transport. It leaves room for
/// the largest legitimate request (a 10 MiB workspace file, JSON-escaped) and bounds what one
/// message can make the server hold.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// What a line turned out to be.
#[derive(Debug)]
pub enum Parsed {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Nothing to do (a blank line, or a notification nobody needs an answer to).
    Skip,
    /// Answer this error and read on.
    Answer(Box<JsonRpcError>),
}

/// Methods this server implements: a request for one of them that rmcp could only read as a
/// custom request has parameters of the wrong shape.
const SERVED_METHODS: [&str; 4] = ["initialize", "ping", "tools/list", "tools/call"];

/// What `line` is, and the answer it gets when it is malformed, its words read by `privacy`.
pub fn classify(line: &[u8], privacy: &Privacy) -> Parsed {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Parsed::Skip;
    }
    match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
        Ok(JsonRpcMessage::Request(request)) => match &request.request {
            ClientRequest::CustomRequest(custom)
                if SERVED_METHODS.contains(&custom.method.as_str()) =>
            {
                let detail = match custom.method.as_str() {
                    "tools/call" => custom
                        .params_as::<CallToolRequestParams>()
                        .err()
                        .map(|e| e.to_string()),
                    _ => None,
                };
                Parsed::Answer(Box::new(error(
                    Some(request.id.clone()),
                    ErrorCode::INVALID_PARAMS,
                    privacy.text(format!(
                        "invalid params for {}: {}; see the MCP specification for this method's parameters",
                        custom.method,
                        detail
                            .as_deref()
                            .unwrap_or("they do not have the expected shape")
                    )),
                )))
            }
            _ => Parsed::Message(Box::new(JsonRpcMessage::Request(request))),
        },
        // A request whose id is unusable (an object, a fraction) reads as a notification.
        Ok(JsonRpcMessage::Notification(_)) if has_id(line) => Parsed::Answer(Box::new(error(
            None,
            ErrorCode::INVALID_REQUEST,
            Shown::fixed("invalid request: \"id\" must be a string or an integer"),
        ))),
        Ok(message) => Parsed::Message(Box::new(message)),
        Err(parse) => match serde_json::from_slice::<Value>(line) {
            Err(_) => Parsed::Answer(Box::new(error(
                None,
                ErrorCode::PARSE_ERROR,
                privacy.text(format!(
                    "parse error: the message is not JSON ({parse}); send each JSON-RPC message as one JSON object"
                )),
            ))),
            Ok(value) => {
                let id = value.get("id").and_then(request_id);
                // A malformed notification (a method, no id) gets no answer, as JSON-RPC says.
                if id.is_none() && value.get("method").is_some() && value.get("id").is_none() {
                    tracing::debug!("ignoring a malformed notification: {parse}");
                    return Parsed::Skip;
                }
                Parsed::Answer(Box::new(error(
                    id,
                    ErrorCode::INVALID_REQUEST,
                    privacy.text(format!(
                        "invalid request: {parse}; expected a JSON-RPC 2.0 object with \"jsonrpc\": \"2.0\", a string or integer \"id\", a \"method\" and optional \"params\" (batches are not supported)"
                    )),
                )))
            }
        },
    }
}

/// Whether a message that parsed as a notification carries an "id" member after all.
fn has_id(line: &[u8]) -> bool {
    serde_json::from_slice::<Value>(line).is_ok_and(|v| v.get("id").is_some())
}

/// The request id of a value, when it is one a response can carry back.
fn request_id(v: &Value) -> Option<RequestId> {
    match v {
        Value::String(s) => Some(NumberOrString::String(s.as_str().into())),
        Value::Number(n) => n.as_i64().map(NumberOrString::Number),
        _ => None,
    }
}

/// A JSON-RPC error answer, its message a text the privacy layer let through.
pub fn error(id: Option<RequestId>, code: ErrorCode, message: Shown) -> JsonRpcError {
    JsonRpcError::new(id, refusal(code, message))
}

/// The answer to a message over `limit` bytes.
pub fn too_large(limit: usize) -> JsonRpcError {
    // The limit is the server's own number: no data a call brought.
    let message = Shown::fixed("invalid request: the message is over").framed(|words| {
        format!(
            "{words} {limit} bytes, the most this server reads; send less per call (for example a smaller file)"
        )
    });
    error(None, ErrorCode::INVALID_REQUEST, message)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::pii::PiiEngine;

    fn privacy() -> Privacy {
        Privacy::new(Arc::new(PiiEngine::new([7; 32], 100)), true)
    }

    fn answer(line: &str) -> JsonRpcError {
        match classify(line.as_bytes(), &privacy()) {
            Parsed::Answer(e) => *e,
            other => panic!("expected an error answer for {line:?}, got {other:?}"),
        }
    }

    #[test]
    fn each_kind_of_bad_line_gets_its_json_rpc_error() {
        let e = answer(r#"{"jsonrpc":"2.0","id":2,"method":"tools/li"#);
        assert_eq!((e.error.code, e.id), (ErrorCode::PARSE_ERROR, None));
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(answer(&deep).error.code, ErrorCode::PARSE_ERROR);

        let e = answer(r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#);
        assert_eq!(e.error.code, ErrorCode::INVALID_REQUEST);
        assert_eq!(e.id, Some(NumberOrString::Number(3)));
        let e = answer(r#"[{"jsonrpc":"2.0","id":4,"method":"ping"}]"#);
        assert_eq!((e.error.code, e.id), (ErrorCode::INVALID_REQUEST, None));

        let e = answer(r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":5}}"#);
        assert_eq!(e.error.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(e.id, Some(NumberOrString::String("x".into())));
        assert!(
            e.error.message.contains("invalid type"),
            "{}",
            e.error.message
        );
    }

    #[test]
    fn a_value_serde_quotes_in_an_answer_is_tokenized() {
        let e = answer(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run","arguments":"ann.example@mail.example.org"}}"#,
        );
        assert_eq!(e.error.code, ErrorCode::INVALID_PARAMS);
        assert!(e.error.message.contains("invalid type"), "{e:?}");
        assert!(!e.error.message.contains("ann.example@"), "{e:?}");
        assert!(e.error.message.contains("[EMAIL_"), "{e:?}");
    }

    #[test]
    fn good_lines_pass_and_blank_lines_and_bad_notifications_are_skipped() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}",
            r#"{"jsonrpc":"2.0","id":1,"method":"no/such/method"}"#,
        ] {
            assert!(
                matches!(classify(line.as_bytes(), &privacy()), Parsed::Message(_)),
                "{line}"
            );
        }
        for line in [
            "",
            "   ",
            r#"{"jsonrpc":"1.0","method":"notifications/initialized"}"#,
        ] {
            assert!(
                matches!(classify(line.as_bytes(), &privacy()), Parsed::Skip),
                "{line:?}"
            );
        }
    }
}
