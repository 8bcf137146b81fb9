//! Faults around the server, each against the real engine: the Docker daemon stopped or
//! restarted under a running server (a private daemon, see `common::private_engine`), the server
//! SIGKILLed mid-execution and mid-write, a slow or stalled engine (a proxy in front of the
//! socket), and a skills directory or tool registry the server cannot read. (A full workspace is
//! tested in tests/workspace_tools.rs.) Every test asserts the safe outcome (a clear error, no
//! hang, no panic, no partial file) and leaves no container behind.
//!
//! One file per fault: `engine_stopped.rs` (the engine stopped or restarted, catalogue case 48),
//! `first_start.rs` (a fresh engine with no images and no registry: the first start builds the
//! offline base and the image), `server_killed.rs` (the server SIGKILLed mid-execution and
//! mid-write, case 49),
//! `slow_engine.rs` (a slow or stalled engine), `health.rs` (`/health` while the engine does not
//! answer) and `skills_and_registry.rs` (skills and registry paths the server cannot use); `server.rs` is the server binary they drive.

#[path = "../common/mod.rs"]
mod common;
mod server;

mod engine_stopped;
mod first_start;
mod health;
mod server_killed;
mod skills_and_registry;
mod slow_engine;
