//! `/mcp`'s way in: the bearer token names the tenant whose sessions the request is for, before
//! its body is read and whether or not anything has started (a missing or wrong token is
//! answered 401 at once); then the request goes to that start's MCP service.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{Endpoint, HttpState, McpService, json_answer};
use crate::tenancy::tokens::AuthFailure;

/// The MCP service a request is for, found by [`authenticate`].
#[derive(Clone)]
struct Target(McpService);

/// Finds the request's tenant from its bearer token (before its body is read), or answers 401.
/// The request carries the service of its start and its [`crate::privacy::Privacy`] (the
/// started app's, or the start's own before), which reads the errors the body check answers
/// with.
pub(super) async fn authenticate(
    State(state): State<Arc<HttpState>>,
    mut request: Request,
    next: Next,
) -> Response {
    let door = match &state.endpoint {
        Endpoint::Open(door) => door.clone(),
        Endpoint::Tokens { tenants, .. } => {
            let header = request
                .headers()
                .get(header::AUTHORIZATION)
                .map(|v| v.as_bytes());
            match tenants.get(header).await {
                Ok(tenant) => tenant.service.clone(),
                Err(failure) => return unauthorized(failure),
            }
        }
    };
    request.extensions_mut().insert(door.lobby.privacy());
    request.extensions_mut().insert(Target(door.service));
    next.run(request).await
}

pub(super) async fn mcp_endpoint(request: Request) -> Response {
    let Some(Target(service)) = request.extensions().get::<Target>().cloned() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let delete = request.method() == Method::DELETE;
    let response = service.handle(request).await.into_response();
    if delete {
        session_ended(response)
    } else {
        response
    }
}

/// A DELETE that ended a legacy session, answered 204 No Content. rmcp answers it 202 Accepted,
/// which says the work is still to be done; the session is gone by then, and clients read 202 as
/// a failure (the MCP Python SDK logs "Session termination failed: 202", expecting 200 or 204).
/// Other answers (no such session, no session id) pass as they are.
fn session_ended(response: Response) -> Response {
    if response.status() == StatusCode::ACCEPTED {
        StatusCode::NO_CONTENT.into_response()
    } else {
        response
    }
}

fn unauthorized(failure: AuthFailure) -> Response {
    let challenge = match failure {
        AuthFailure::Missing => r#"Bearer realm="code-execution-mcp""#,
        AuthFailure::Invalid => r#"Bearer realm="code-execution-mcp", error="invalid_token""#,
    };
    let mut response = json_answer(
        StatusCode::UNAUTHORIZED,
        serde_json::json!({"error": "unauthorized", "message": failure.to_string()}),
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(challenge),
    );
    response
}
