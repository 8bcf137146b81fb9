//! The protected resource's metadata (RFC 9728), at `/.well-known/oauth-protected-resource`
//! and its path-suffixed forms (`…/mcp`, and `…/PREFIX/mcp` when `--public-url` has a path), so
//! that a client which knows only the server's URL finds the authorization servers. Served with
//! CORS open to any origin (the document is public) and `WWW-Authenticate` exposed.

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::oauth::resource::{MCP_PATH, METADATA_PATH};

/// The routes serving `document` (the resource's metadata).
pub(super) fn routes<S: Clone + Send + Sync + 'static>(
    document: serde_json::Value,
    prefix: &str,
) -> Router<S> {
    let mut paths = vec![
        METADATA_PATH.to_string(),
        format!("{METADATA_PATH}{MCP_PATH}"),
    ];
    if !prefix.is_empty() {
        paths.push(format!("{METADATA_PATH}{prefix}{MCP_PATH}"));
    }
    let body = document.to_string();
    let mut router = Router::new();
    for path in paths {
        let body = body.clone();
        router =
            router.route(
                &path,
                get(move || {
                    let body = body.clone();
                    async move {
                        cors(([(header::CONTENT_TYPE, "application/json")], body).into_response())
                    }
                })
                .options(|| async { cors(StatusCode::NO_CONTENT.into_response()) }),
            );
    }
    router
}

fn cors(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
        (header::ACCESS_CONTROL_ALLOW_METHODS, "GET, OPTIONS"),
        (
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            "mcp-protocol-version, authorization",
        ),
        (header::ACCESS_CONTROL_EXPOSE_HEADERS, "WWW-Authenticate"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}
