//! The seam between the sandbox and a container engine: the few operations an execution, the
//! pool, the reaper and the event watchers need, as one trait. The Docker Engine API
//! ([`crate::sandbox::engine::docker::Engine`], through bollard) is its implementation; a Podman or Kubernetes
//! backend would be another. The logic above it — the execution state machine, the pool, the
//! cleanup on every path — is written against this trait only, so it is unit-tested with an
//! in-process fake, while every isolation claim is tested against the real engine.
//!
//! Containers are addressed by the name the sandbox gave them at creation, so a create whose
//! answer was lost can still be removed by name.

use std::collections::HashMap;
use std::pin::Pin;

use bytes::Bytes;
use futures::stream::BoxStream;
use tokio::io::AsyncWrite;

use crate::sandbox::container::spec::SandboxSpec;
use crate::sandbox::engine::error::EngineError;

/// A chunk of what a container wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    Stdout(Bytes),
    Stderr(Bytes),
}

/// What a container writes, chunk by chunk, until it ends. An error is a transport failure.
pub type OutputStream = BoxStream<'static, Result<Output, EngineError>>;
/// The container's standard input.
pub type InputSink = Pin<Box<dyn AsyncWrite + Send>>;

/// A container's standard streams, attached before it starts so nothing it writes is lost.
pub struct Attached {
    pub output: OutputStream,
    pub input: InputSink,
}

/// How a stopped container ended, as the engine recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExitState {
    /// The kernel killed it for exceeding its memory limit.
    pub oom_killed: bool,
    pub exit_code: Option<i64>,
}

/// A container found by its labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labelled {
    pub id: String,
    pub labels: HashMap<String, String>,
}

/// Which engine events to follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventFilter {
    /// The kernel's OOM notices for the containers of one server instance (its label value).
    Oom { instance: String },
    /// Any change to any image (a tag moved, an image was built or removed).
    Images,
}

/// An engine event the sandbox acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineEvent {
    /// The kernel OOM-killed a process of this container (by name).
    Oom { container: String },
    /// Something happened to an image.
    Image,
}

/// Engine events, until the stream breaks (the engine stopped or restarted) or ends.
pub type EventStream = BoxStream<'static, Result<EngineEvent, EngineError>>;

/// The container operations the sandbox needs. Every method may hang on an engine that stalls:
/// callers bound each call with a timeout. Errors say what happened and what to do.
#[async_trait::async_trait]
pub trait Backend: Send + Sync + 'static {
    /// Creates (does not start) a container from `spec` under `name`.
    async fn create(&self, name: &str, spec: &SandboxSpec) -> Result<(), EngineError>;
    /// Attaches to a created container's standard streams.
    async fn attach(&self, name: &str) -> Result<Attached, EngineError>;
    async fn start(&self, name: &str) -> Result<(), EngineError>;
    /// Sends SIGKILL; a container that is already gone or stopped is not an error.
    async fn kill(&self, name: &str) -> Result<(), EngineError>;
    /// Returns once the container is not running, or once waiting failed: the caller reads
    /// [`Backend::exit_state`] next either way.
    async fn wait_stopped(&self, name: &str);
    async fn exit_state(&self, name: &str) -> Result<ExitState, EngineError>;
    /// Sets a running container's memory limit, swap included (as at creation).
    async fn set_memory_limit(&self, name: &str, bytes: i64) -> Result<(), EngineError>;
    /// Force-removes a container with its anonymous volumes; one that is already gone, or whose
    /// removal is already under way, is not an error.
    async fn remove(&self, name: &str) -> Result<(), EngineError>;
    /// Containers carrying all the given labels (`key=value` or `key`), running or not.
    async fn list_labelled(&self, labels: &[String]) -> Result<Vec<Labelled>, EngineError>;
    /// The id an image name resolves to, or `None` when the engine has no such image.
    async fn image_id(&self, image: &str) -> Result<Option<String>, EngineError>;
    /// Follows the engine's events matching `filter`.
    fn events(&self, filter: &EventFilter) -> EventStream;
    /// The engine's id of container `name`, where the engine says (the fake engine does not).
    async fn container_id(&self, _name: &str) -> Result<Option<String>, EngineError> {
        Ok(None)
    }
}
