//! `/mcp`'s way in: the bearer token names the tenant whose sessions the request is for, before
//! its body is read and whether or not anything has started (a missing or wrong token is
//! answered at once: 401, or 403 for a missing scope, or 503 while the OAuth provider cannot
//! be reached); then the request goes to that start's MCP service. With OAuth the answers carry
//! what the MCP authorization spec asks (`WWW-Authenticate: Bearer resource_metadata=…`), and a
//! session belongs to the user who began it ([`owners`](super::owners)).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::owners::Owner;
use super::{Door, Endpoint, HttpState, json_answer};
use crate::oauth::{Refusal, Verifier};
use crate::tenancy::tokens::AuthFailure;
use crate::transport::authentication::{Caller, Denied};

/// The door a request is for and who it comes from, found by [`authenticate`].
#[derive(Clone)]
struct Target {
    door: Door,
    owner: Owner,
}

/// Finds the request's tenant from its bearer token (before its body is read), or answers
/// 401 (403 for a missing scope, 503 while the OAuth provider cannot be reached).
/// The request carries the service of its start and its [`crate::privacy::Privacy`] (the
/// started app's, or the start's own before), which reads the errors the body check answers
/// with; with OAuth, the caller's [`crate::oauth::Identity`] too (the audit trail's).
pub(super) async fn authenticate(
    State(state): State<Arc<HttpState>>,
    mut request: Request,
    next: Next,
) -> Response {
    let (door, owner) = match &state.endpoint {
        Endpoint::Open(door) => (door.clone(), Owner::Anyone),
        Endpoint::Tenants {
            tenants,
            authenticator,
            ..
        } => {
            let header = request
                .headers()
                .get(header::AUTHORIZATION)
                .map(|v| v.as_bytes());
            let caller = match authenticator.authenticate(header).await {
                Ok(caller) => caller,
                Err(denied) => {
                    if let Denied::OAuth(refusal) = &denied {
                        tracing::debug!("OAuth: a token was refused: {refusal}");
                    }
                    return refused(denied, authenticator.oauth.as_deref());
                }
            };
            let door = tenants.get(&caller.tenant).await.service.clone();
            let owner = Owner::of(&caller);
            let Caller { identity, .. } = caller;
            if let Some(identity) = identity {
                request.extensions_mut().insert(identity);
            }
            (door, owner)
        }
    };
    request.extensions_mut().insert(door.lobby.privacy());
    request.extensions_mut().insert(Target { door, owner });
    next.run(request).await
}

pub(super) async fn mcp_endpoint(request: Request) -> Response {
    let Some(Target { door, owner }) = request.extensions().get::<Target>().cloned() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let session = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(id) = &session
        && !door.owners.may_continue(id, &owner)
    {
        // Answered as the MCP library answers a session it does not know: whether the
        // session exists is not for another user to learn.
        return (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response();
    }
    let delete = request.method() == Method::DELETE;
    let response = door.service.handle(request).await.into_response();
    match (&session, response.headers().get("mcp-session-id")) {
        (None, Some(new)) => {
            if let Ok(new) = new.to_str() {
                door.owners.record(new, owner);
            }
        }
        (Some(id), _) if delete && response.status().is_success() => door.owners.forget(id),
        _ => {}
    }
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

/// The answer to a request that was not authenticated.
fn refused(denied: Denied, oauth: Option<&Verifier>) -> Response {
    let Some(oauth) = oauth else {
        return match denied {
            Denied::Token(failure) => unauthorized(failure),
            // Not met: only a verifier refuses an access token.
            Denied::OAuth(_) => unauthorized(AuthFailure::Invalid),
        };
    };
    let metadata = format!(r#"resource_metadata="{}""#, oauth.resource().metadata_url());
    let scope =
        (!oauth.scopes().is_empty()).then(|| format!(r#"scope="{}""#, oauth.scopes().join(" ")));
    let challenge = |parts: &[Option<String>]| {
        let parts: Vec<&str> = parts.iter().flatten().map(String::as_str).collect();
        format!("Bearer {}", parts.join(", "))
    };
    let (status, challenge, message) = match denied {
        Denied::Token(AuthFailure::Missing) => (
            StatusCode::UNAUTHORIZED,
            challenge(&[Some(metadata), scope]),
            format!(
                "this server requires an access token: sign in with the authorization server its metadata names ({}), or send a bearer token your administrator gave you",
                oauth.resource().metadata_url()
            ),
        ),
        Denied::OAuth(Refusal::Unavailable {
            message,
            retry_after,
        }) => return unavailable(&message, retry_after),
        Denied::OAuth(Refusal::Scope(missing)) => {
            let message = Refusal::Scope(missing.clone()).to_string();
            let parts = [
                Some(r#"error="insufficient_scope""#.to_string()),
                Some(format!(r#"scope="{}""#, missing.join(" "))),
                Some(metadata),
                Some(format!(r#"error_description="{}""#, quoted(&message))),
            ];
            (StatusCode::FORBIDDEN, challenge(&parts), message)
        }
        denied => {
            let message = match denied {
                Denied::OAuth(refusal) => refusal.to_string(),
                Denied::Token(failure) => failure.to_string(),
            };
            let parts = [
                Some(r#"error="invalid_token""#.to_string()),
                Some(format!(r#"error_description="{}""#, quoted(&message))),
                Some(metadata),
                scope,
            ];
            (StatusCode::UNAUTHORIZED, challenge(&parts), message)
        }
    };
    with_challenge(status, &challenge, &message)
}

fn unauthorized(failure: AuthFailure) -> Response {
    let challenge = match failure {
        AuthFailure::Missing => r#"Bearer realm="code-execution-mcp""#,
        AuthFailure::Invalid => r#"Bearer realm="code-execution-mcp", error="invalid_token""#,
    };
    with_challenge(StatusCode::UNAUTHORIZED, challenge, &failure.to_string())
}

/// `status` with its JSON body and `WWW-Authenticate`, which a browser-based client may read.
fn with_challenge(status: StatusCode, challenge: &str, message: &str) -> Response {
    let error = if status == StatusCode::FORBIDDEN {
        "forbidden"
    } else {
        "unauthorized"
    };
    let mut response = json_answer(
        status,
        serde_json::json!({"error": error, "message": message}),
    );
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(challenge) {
        headers.insert(header::WWW_AUTHENTICATE, value);
    }
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("WWW-Authenticate"),
    );
    response
}

/// 503 with `Retry-After`: the authorization server cannot be reached.
fn unavailable(message: &str, retry_after: u64) -> Response {
    let mut response = json_answer(
        StatusCode::SERVICE_UNAVAILABLE,
        serde_json::json!({"error": "unavailable", "message": message}),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    response
}

/// `text` as the inside of a quoted string in a header: visible ASCII only, no quote or
/// backslash.
fn quoted(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '"' => '\'',
            '\\' => '/',
            ' ' => ' ',
            c if c.is_ascii_graphic() => c,
            _ => '?',
        })
        .collect()
}
