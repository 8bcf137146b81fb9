//! `upstream-fixture`: an MCP server over stdio that integration tests put behind the gateway as
//! an "edge-case upstream". Each tool reproduces one thing a real upstream may do that the
//! gateway must survive or pass through faithfully: structured output, huge or slow answers,
//! crashes, error results, tools added at run time, names that are not Python identifiers,
//! annotations, elicitation, images and embedded resources, text that only looks like JSON, and a
//! stderr flood, a credential quoted in what it returns. The flags below reproduce misbehaviour
//! around the session itself (a slow start, a hung handshake, a stderr flood before serving, an
//! exit in the middle of calls, paginated listings); `--http` serves the same tools over
//! streamable HTTP instead of stdio. `--calls-log` makes every call that arrives observable
//! from outside, so a test can tell whether a refused call reached the upstream without asking
//! the server that refused it.
//!
//! Over stdio, stdout carries MCP frames only; diagnostics go to stderr.
//!
//! The entry file is not `main.rs` because Cargo would then also infer an empty integration test
//! target from `tests/upstream_fixture/main.rs`.

// The fixture is an upstream MCP server of its own, not this one: it makes rmcp's answers
// itself (clippy.toml bans them in src/, whose answers src/privacy/ makes).
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

mod server;
mod tools;

use std::io::Write;

use clap::Parser;
use rmcp::ServiceExt;

/// Command line of the fixture (see the module docs for what each flag is for).
#[derive(Debug, Parser)]
#[command(name = "upstream-fixture")]
pub struct Flags {
    /// Also list N tools `filler_0`..`filler_{N-1}` (each returns "filler i").
    #[arg(long, default_value_t = 0)]
    pub filler: usize,
    /// Read stdin until it closes and never answer `initialize`.
    #[arg(long)]
    pub hang_initialize: bool,
    /// Wait this long before answering anything (a server that is slow to start, such as
    /// one that `uvx` installs first).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub start_delay_ms: u64,
    /// Write this many MiB to stderr before serving.
    #[arg(long, value_name = "MB", default_value_t = 0)]
    pub stderr_flood_at_start: usize,
    /// Exit with code 4 when the N-th `tools/call` arrives, before answering it.
    #[arg(long, value_name = "N")]
    pub exit_after_calls: Option<u64>,
    /// Append one JSON line `{"tool": NAME, "arguments": {...}}` to this file for every
    /// `tools/call` that arrives, before it is answered.
    #[arg(long, value_name = "PATH")]
    pub calls_log: Option<std::path::PathBuf>,
    /// The server name reported in `serverInfo`.
    #[arg(long, default_value = "upstream-fixture")]
    pub name: String,
    /// Serve MCP streamable HTTP at http://ADDR/mcp instead of stdio; the first line on stdout
    /// is then `listening on http://HOST:PORT/mcp` (useful with port 0).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let flags = Flags::parse();
    if flags.stderr_flood_at_start > 0 {
        flood_stderr(flags.stderr_flood_at_start);
    }
    if flags.start_delay_ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(flags.start_delay_ms)).await;
    }
    if flags.hang_initialize {
        eprintln!("fixture: --hang-initialize, reading stdin without answering");
        let mut sink = tokio::io::sink();
        tokio::io::copy(&mut tokio::io::stdin(), &mut sink).await?;
        eprintln!("fixture: stdin closed");
        return Ok(());
    }
    if let Some(addr) = flags.http {
        return serve_http(&flags, addr).await;
    }
    let service = server::Fixture::new(&flags)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| anyhow::anyhow!("fixture: MCP handshake failed: {e}"))?;
    service.waiting().await?;
    Ok(())
}

/// Serves the fixture over streamable HTTP until the process is killed.
async fn serve_http(flags: &Flags, addr: std::net::SocketAddr) -> anyhow::Result<()> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let fixture = server::Fixture::new(flags);
    let service: StreamableHttpService<server::Fixture, LocalSessionManager> =
        StreamableHttpService::new(
            move || Ok(fixture.clone()),
            Default::default(),
            StreamableHttpServerConfig::default(),
        );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("listening on http://{}/mcp", listener.local_addr()?);
    std::io::stdout().flush()?;
    axum::serve(listener, router).await?;
    Ok(())
}

/// Writes `megabytes` MiB to stderr in lines of 100 bytes (99 characters and a newline; the
/// last line is cut so the total is exact). Blocks while nobody reads stderr, on purpose.
pub fn flood_stderr(megabytes: usize) {
    let mut line = vec![b'e'; 99];
    line.push(b'\n');
    let mut left = megabytes * 1024 * 1024;
    let mut err = std::io::stderr().lock();
    while left > 0 {
        let n = left.min(line.len());
        if err.write_all(&line[..n]).is_err() {
            return;
        }
        left -= n;
    }
    let _ = err.flush();
}
