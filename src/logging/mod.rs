//! The server's log on stderr (`--log-format`): human lines by default, or one JSON object per
//! line for a log pipeline, whose keys do not change with the code that logs.
//!
//! A JSON line has `time` (RFC 3339, UTC, milliseconds), `level`, `target` and `message`; then
//! `tenant`, `execution_id` and `request_id` when the event happened inside a span that names
//! them (the nearest such span wins; an event's own field of that name beats any span); then
//! the event's other fields under `fields`. Pipelines index on the ids without knowing how the
//! server nests its spans. tracing-subscriber's own JSON format cannot say this: it names its
//! keys itself (`timestamp`) and puts span fields under `span` and `spans`, shaped by the
//! nesting. So [`JsonLines`] is a layer of its own: it keeps the ids of each span in the span's
//! extensions when it opens (or records one later), and writes each event as one line, with a
//! single `write_all` on stderr's lock, so lines are never split or interleaved.
//!
//! The spans that carry the ids are made here ([`tenant_span`], [`request_span`],
//! [`execution_span`]), so that their field names are the ones [`JsonLines`] reads, and at
//! ERROR level: a span's level decides only whether it exists, and a server filtered down to
//! warnings must still say whose warnings they are.

mod json;

use tracing::Span;

pub use json::JsonLines;

/// The filter without `RUST_LOG`: this server's own information, and warnings of its libraries.
pub const DEFAULT_FILTER: &str = "code_execution_mcp=info,warn";

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// tracing-subscriber's lines for people (colours only on a terminal).
    #[default]
    Human,
    /// One JSON object per line, with fixed keys.
    Json,
}

/// Installs the process's logger: stderr, filtered by `RUST_LOG` (else [`DEFAULT_FILTER`]),
/// in `format`. Records of the `log` crate (some libraries use it) come through too.
pub fn init(format: LogFormat) -> Result<(), tracing_subscriber::util::TryInitError> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| DEFAULT_FILTER.into());
    match format {
        LogFormat::Human => tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            // Colour codes only for a terminal, not in `docker logs` or files.
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_env_filter(filter)
            .finish()
            .try_init(),
        LogFormat::Json => tracing_subscriber::registry()
            .with(filter)
            .with(JsonLines::new(std::io::stderr))
            .try_init(),
    }
}

/// A tenant's span, for its tool calls and its background work; none for the single tenant.
pub fn tenant_span(tenant: Option<&str>) -> Span {
    match tenant {
        Some(tenant) => tracing::error_span!("tenant", tenant = %tenant),
        None => Span::none(),
    }
}

/// The span of one MCP request being handled: its JSON-RPC id (as a string, whether the client
/// sent a number or a string) and the tenant it came for.
pub fn request_span(request_id: &dyn std::fmt::Display, tenant: Option<&str>) -> Span {
    let tenant = tenant.map(tracing::field::display);
    tracing::error_span!("request", request_id = %request_id, tenant)
}

/// The span of one execution (`exe_` and 16 hex digits).
pub fn execution_span(execution_id: &str) -> Span {
    tracing::error_span!("execution", execution_id = %execution_id)
}
