//! code-execution-mcp: an MCP server whose `execute_code` runs agent-written Python in a fresh,
//! locked-down Docker container per execution, with path-safe workspace tools around it.
//!
//! The library holds all logic; `main.rs` only parses the command line. See `app::App` for how
//! the pieces are assembled and `sandbox::Sandbox::run` for the one entry point of execution.

pub mod app;
pub mod config;
pub mod discovery;
pub mod doctor;
pub mod execute_request;
pub mod host_paths;
pub mod mcp;
pub mod pii;
pub mod privacy;
pub mod progress;
pub mod sandbox;
pub mod sandbox_calls;
pub mod skills;
pub mod transport;
pub mod workspace;
