//! Checks every JSON body POSTed to `/mcp` before rmcp's streamable HTTP service sees it: a
//! body over [`MAX_MESSAGE_BYTES`] gets 413, and a body that is not one well-formed JSON-RPC
//! message gets 400 with the JSON-RPC error [`crate::transport::jsonrpc_input`] gives it (rmcp itself
//! answers such bodies with a bare 415 and a line of text). Everything else passes unchanged.
//! The error's words pass through the PII engine of the request's tenant, which
//! authentication put in the request's extensions (serde's words quote the value they could
//! not read).

use axum::body::{Body, to_bytes};
use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{ErrorCode, JsonRpcError, JsonRpcMessage};
use rmcp::service::TxJsonRpcMessage;

use crate::privacy::{Privacy, Shown};
use crate::transport::jsonrpc_input::{MAX_MESSAGE_BYTES, Parsed, classify, error, too_large};

/// Axum middleware: see the module docs.
pub async fn check_body(request: Request, next: Next) -> Response {
    let is_json = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    if request.method() != Method::POST || !is_json {
        return next.run(request).await;
    }
    let Some(privacy) = request.extensions().get::<Privacy>().cloned() else {
        // Authentication runs first and always names the tenant: a missing one is a bug here.
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let (parts, body) = request.into_parts();
    let bytes = match to_bytes(body, MAX_MESSAGE_BYTES).await {
        Ok(bytes) => bytes,
        Err(_) => return answer(StatusCode::PAYLOAD_TOO_LARGE, too_large(MAX_MESSAGE_BYTES)),
    };
    match classify(&bytes, &privacy) {
        Parsed::Message(_) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Parsed::Answer(e) => answer(StatusCode::BAD_REQUEST, *e),
        Parsed::Skip => answer(
            StatusCode::BAD_REQUEST,
            error(
                None,
                ErrorCode::INVALID_REQUEST,
                Shown::fixed(
                    "invalid request: the body holds no usable JSON-RPC message; POST one JSON-RPC 2.0 request or notification",
                ),
            ),
        ),
    }
}

fn answer(status: StatusCode, e: JsonRpcError) -> Response {
    let message: TxJsonRpcMessage<rmcp::RoleServer> = JsonRpcMessage::Error(e);
    let body = serde_json::to_vec(&message).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}
