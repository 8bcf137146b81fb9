//! `GET /health`, for proxies and container health checks, and `code-execution-mcp health`,
//! which asks it. A server that listens while it starts is not healthy yet: it answers 503
//! with the step it is in, so that a proxy sends it nobody yet and an operator sees why; after
//! a failed start 503 with the failure. Once started: 200 while the engine answers (and the
//! shared data directory reads, and a required audit trail writes). Unauthenticated, and
//! tells nothing about tenants.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::{HttpState, json_answer};
use crate::app::StartState;
use crate::transport::ServeError;

/// `GET /health`: 503 while the server starts or after its start failed; else 200 while the
/// Docker engine answers (and, with `--shared-data`, the data directory's watch has no failed
/// or hung read), 503 otherwise.
pub(super) async fn health(State(state): State<Arc<HttpState>>) -> Response {
    let unavailable = |reason: &str| {
        json_answer(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "unavailable", "reason": reason}),
        )
    };
    let shared = match state.shared_now() {
        StartState::Ready(shared) => shared,
        StartState::Working(step) => {
            return json_answer(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({
                    "status": "starting",
                    "step": step.what,
                    "step_seconds": step.since.elapsed().as_secs(),
                    "about_seconds_left": step.left().as_secs(),
                }),
            );
        }
        StartState::Failed(e) => {
            return json_answer(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"status": "failed", "reason": format!("the server could not start: {e}")}),
            );
        }
    };
    if !shared
        .engine_answers(std::time::Duration::from_secs(3))
        .await
    {
        return unavailable("the Docker engine does not answer");
    }
    if let Some(Err(reason)) = state.storage.as_ref().map(|w| w.verdict()) {
        return unavailable(&reason);
    }
    match audit_warnings(&state) {
        Err(reason) => unavailable(&reason),
        Ok(mut warnings) => {
            // A provider that cannot be reached is a warning, never a failed check: every
            // node would go out with it.
            warnings.extend(state.oauth().map(|o| o.warnings()).unwrap_or_default());
            healthy(warnings)
        }
    }
}

/// 200, with the warnings if there are any.
fn healthy(warnings: Vec<String>) -> Response {
    match warnings {
        warnings if warnings.is_empty() => json_answer(StatusCode::OK, json!({"status": "ok"})),
        warnings => json_answer(
            StatusCode::OK,
            json!({"status": "ok", "warnings": warnings}),
        ),
    }
}

/// A failing audit trail: unavailable when executions wait for it (`--audit-required`), a
/// warning otherwise. Tenant names only: no paths.
fn audit_warnings(state: &HttpState) -> Result<Vec<String>, String> {
    let mut warnings = Vec::new();
    for app in state.apps() {
        let Some(log) = app.audit() else { continue };
        let health = log.health();
        if health.ok {
            continue;
        }
        let whose = app
            .tenant()
            .map_or(String::new(), |t| format!(" of tenant {t}"));
        let reason = format!(
            "the audit trail{whose} cannot be written: {}",
            health.error.unwrap_or_default()
        );
        if log.settings().required {
            return Err(format!(
                "{reason}; executions are refused (--audit-required)"
            ));
        }
        warnings.push(format!("{reason}; executions go on unrecorded"));
    }
    Ok(warnings)
}

/// Asks `GET /health` of a server listening on `listen` (loopback for an unspecified address);
/// `Ok` with the status line when it answers 200, and an error saying it is still starting
/// (with the step) when it is.
pub async fn probe_health(listen: SocketAddr) -> Result<String, ServeError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut addr = listen;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    let failed = |what: String| ServeError::Health(format!("http://{addr}/health: {what}"));
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await?;
        let mut answer = Vec::new();
        stream.take(64 * 1024).read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    let answer = tokio::time::timeout(std::time::Duration::from_secs(10), exchange)
        .await
        .map_err(|_| failed("no answer within 10 s".into()))?
        .map_err(|e| failed(e.to_string()))?;
    let text = String::from_utf8_lossy(&answer);
    let status = text.lines().next().unwrap_or_default().trim().to_string();
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default().trim();
    if status.split_whitespace().nth(1) == Some("200") {
        return Ok(format!("{status} {body}"));
    }
    match serde_json::from_str::<Value>(body) {
        Ok(v) if v["status"] == "starting" => Err(ServeError::HealthStarting(format!(
            "{}, about {} s left (http://{addr}/health answers 503 until it has started)",
            v["step"].as_str().unwrap_or("its first step"),
            v["about_seconds_left"]
        ))),
        _ => Err(failed(format!("{status} {body}"))),
    }
}
