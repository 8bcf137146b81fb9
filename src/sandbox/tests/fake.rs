//! An in-process engine for the sandbox's unit tests. Each container runs a scripted harness:
//! it reads its job line, then plays the [`Step`]s the test set, and its output ends when the
//! script ends or the container is killed, as a real container's attach stream does. The engine
//! records what it was asked (creates, kills, removals, replies) and can be told to stall or
//! fail, so every path of the execution state machine and the pool can be driven without a
//! kernel. Isolation is never claimed from this fake: those tests run against the real engine.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::channel::mpsc;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;

use crate::sandbox::container::spec::SandboxSpec;
use crate::sandbox::engine::backend::{
    Attached, Backend, EngineEvent, EventFilter, EventStream, ExitState, Labelled, Output,
};
use crate::sandbox::engine::error::EngineError;

/// One thing a scripted harness does after it has read its job.
#[derive(Debug, Clone)]
pub enum Step {
    /// Writes these bytes to stdout.
    Stdout(Vec<u8>),
    /// Writes these bytes to stderr.
    Stderr(Vec<u8>),
    /// Writes a `done` frame.
    Done(serde_json::Value),
    /// Sends a `call` frame and waits for the reply line.
    Call(&'static str),
    Sleep(Duration),
    /// Never goes on (until killed).
    Hang,
    /// The output stream fails, as when the engine's connection breaks.
    StreamError,
    /// Ends with this exit code (and OOM flag) recorded by the engine.
    Exit {
        code: i64,
        oom_killed: bool,
    },
}

/// A `done` frame reporting success with `result`.
pub fn ok(result: serde_json::Value) -> Step {
    Step::Done(serde_json::json!({"type": "done", "success": true, "result": result}))
}

/// An output frame on stdout.
pub fn printed(text: &str) -> Step {
    let frame = serde_json::json!({"type": "output", "stream": "stdout", "data": text});
    Step::Stdout(format!("{frame}\n").into_bytes())
}

struct Container {
    labels: HashMap<String, String>,
    exit: Option<ExitState>,
    kill: CancellationToken,
    stopped: CancellationToken,
}

#[derive(Default)]
struct State {
    containers: HashMap<String, Container>,
    created: Vec<String>,
    /// The `--preload` list of each container created, in creation order.
    preloads: Vec<Vec<String>>,
    removed: HashSet<String>,
    killed: Vec<String>,
    jobs: Vec<String>,
    /// The state_end frames containers received (one per state load).
    states: Vec<String>,
    replies: Vec<String>,
    events: Vec<(
        EventFilter,
        mpsc::UnboundedSender<Result<EngineEvent, EngineError>>,
    )>,
}

/// The fake engine. Settings are plain fields a test changes at any time.
pub struct FakeEngine {
    state: Mutex<State>,
    script: Mutex<Vec<Step>>,
    image: Mutex<String>,
    /// Creates never answer while set.
    pub stall_create: AtomicBool,
    /// The next this many creates fail as if the engine were unreachable.
    pub fail_creates: AtomicUsize,
    /// Kills never answer while set.
    pub stall_kill: AtomicBool,
    /// Memory-limit updates fail while set.
    pub fail_updates: AtomicBool,
    /// Updates answered as an engine without the endpoint answers them (Podman 4).
    pub no_update_endpoint: AtomicBool,
    pub updates: AtomicUsize,
}

impl FakeEngine {
    /// An engine whose containers run `script` once they have their job.
    pub fn new(script: Vec<Step>) -> Self {
        Self {
            state: Mutex::default(),
            script: Mutex::new(script),
            image: Mutex::new("sha256:one".into()),
            stall_create: AtomicBool::new(false),
            fail_creates: AtomicUsize::new(0),
            stall_kill: AtomicBool::new(false),
            fail_updates: AtomicBool::new(false),
            no_update_endpoint: AtomicBool::new(false),
            updates: AtomicUsize::new(0),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("fake engine lock")
    }

    /// Makes the image tag name another image id.
    pub fn set_image(&self, id: &str) {
        *self.image.lock().unwrap() = id.into();
    }

    /// Names of the containers created so far, in order.
    pub fn created(&self) -> Vec<String> {
        self.state().created.clone()
    }

    /// The preload list each container was created with, in creation order.
    pub fn preloads(&self) -> Vec<Vec<String>> {
        self.state().preloads.clone()
    }

    /// Containers created and not removed.
    pub fn live(&self) -> Vec<String> {
        let state = self.state();
        let mut live: Vec<String> = state.containers.keys().cloned().collect();
        live.sort();
        live
    }

    pub fn killed(&self) -> Vec<String> {
        self.state().killed.clone()
    }

    /// The job lines the harnesses received.
    pub fn jobs(&self) -> Vec<String> {
        self.state().jobs.clone()
    }

    /// The reply lines the harnesses received to their calls.
    pub fn states(&self) -> Vec<String> {
        self.state().states.clone()
    }

    pub fn replies(&self) -> Vec<String> {
        self.state().replies.clone()
    }

    /// Sends `event` to every open event stream whose filter it matches.
    pub fn emit(&self, event: EngineEvent) {
        let state = self.state();
        for (filter, tx) in &state.events {
            let matches = matches!(
                (filter, &event),
                (EventFilter::Oom { .. }, EngineEvent::Oom { .. })
                    | (EventFilter::Images, EngineEvent::Image)
            );
            if matches {
                let _ = tx.unbounded_send(Ok(event.clone()));
            }
        }
    }

    /// Ends every open event stream, as an engine that stops does.
    pub fn break_events(&self) {
        self.state().events.clear();
    }

    /// Waits (in virtual time) until `n` containers are live.
    pub async fn until_live(&self, n: usize) {
        for _ in 0..10_000 {
            if self.live().len() >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("never {n} live containers: {:?}", self.live());
    }

    /// Records how container `name` ended without ending its output (its first recorded exit
    /// state is the one the engine keeps).
    pub fn record_exit(&self, name: &str, exit: ExitState) {
        if let Some(c) = self.state().containers.get_mut(name) {
            c.exit.get_or_insert(exit);
        }
    }

    fn stop(&self, name: &str, exit: ExitState) {
        let mut state = self.state();
        if let Some(c) = state.containers.get_mut(name) {
            c.exit.get_or_insert(exit);
            c.stopped.cancel();
        }
    }
}

/// Plays `script` as the harness of container `name`, after it has read its job from `input`.
async fn harness(
    engine: std::sync::Arc<FakeEngine>,
    name: String,
    input: tokio::io::DuplexStream,
    out: mpsc::UnboundedSender<Result<Output, EngineError>>,
) {
    let mut lines = BufReader::new(input).lines();
    // As the real harness: ready once started, then a session's state (answered with loaded),
    // then the job.
    let _ = out.unbounded_send(Ok(Output::Stdout(Bytes::from("{\"type\":\"ready\"}\n"))));
    let job = loop {
        let Ok(Some(line)) = lines.next_line().await else {
            return;
        };
        if line.contains("\"type\":\"state_end\"") {
            engine.state().states.push(line);
            let _ = out.unbounded_send(Ok(Output::Stdout(Bytes::from("{\"type\":\"loaded\"}\n"))));
            continue;
        }
        if line.contains("\"type\":\"state\"") || line.contains("\"type\":\"restore\"") {
            continue;
        }
        break line;
    };
    engine.state().jobs.push(job);
    let script = engine.script.lock().unwrap().clone();
    let mut exit = ExitState {
        oom_killed: false,
        exit_code: Some(0),
    };
    for (call_id, step) in script.into_iter().enumerate() {
        match step {
            Step::Stdout(b) => {
                let _ = out.unbounded_send(Ok(Output::Stdout(Bytes::from(b))));
            }
            Step::Stderr(b) => {
                let _ = out.unbounded_send(Ok(Output::Stderr(Bytes::from(b))));
            }
            Step::Done(frame) => {
                let line = format!("{frame}\n");
                let _ = out.unbounded_send(Ok(Output::Stdout(Bytes::from(line))));
            }
            Step::Call(method) => {
                let frame = serde_json::json!({"type": "call", "id": call_id, "method": method, "params": {"x": 1}});
                let _ = out.unbounded_send(Ok(Output::Stdout(Bytes::from(format!("{frame}\n")))));
                if let Ok(Some(reply)) = lines.next_line().await {
                    engine.state().replies.push(reply);
                }
            }
            Step::Sleep(d) => tokio::time::sleep(d).await,
            Step::Hang => std::future::pending::<()>().await,
            Step::StreamError => {
                let error =
                    EngineError::Unreachable("stream sandbox output: connection reset".into());
                let _ = out.unbounded_send(Err(error));
                std::future::pending::<()>().await
            }
            Step::Exit { code, oom_killed } => {
                exit = ExitState {
                    oom_killed,
                    exit_code: Some(code),
                };
                break;
            }
        }
    }
    engine.stop(&name, exit);
}

#[async_trait::async_trait]
impl Backend for std::sync::Arc<FakeEngine> {
    async fn create(&self, name: &str, spec: &SandboxSpec) -> Result<(), EngineError> {
        if self.stall_create.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        let failing = self.fail_creates.load(Ordering::SeqCst);
        if failing > 0 {
            self.fail_creates.store(failing - 1, Ordering::SeqCst);
            return Err(EngineError::Unreachable(
                "create a sandbox container: refused".into(),
            ));
        }
        let mut state = self.state();
        state.created.push(name.to_string());
        state.preloads.push(spec.preload.clone());
        state.containers.insert(
            name.to_string(),
            Container {
                labels: spec.labels.clone(),
                exit: None,
                kill: CancellationToken::new(),
                stopped: CancellationToken::new(),
            },
        );
        Ok(())
    }

    async fn attach(&self, name: &str) -> Result<Attached, EngineError> {
        let (kill, stopped) = {
            let state = self.state();
            let c = state.containers.get(name).ok_or_else(|| EngineError::Api {
                action: "attach to a sandbox container",
                message: format!("no such container: {name}"),
            })?;
            (c.kill.clone(), c.stopped.clone())
        };
        let (ours, theirs) = tokio::io::duplex(1 << 20);
        let (tx, rx) = mpsc::unbounded();
        let (engine, name) = (self.clone(), name.to_string());
        tokio::spawn(async move {
            tokio::select! {
                _ = kill.cancelled() => {}
                _ = harness(engine.clone(), name.clone(), theirs, tx.clone()) => {}
            }
            // The output ends once the container has stopped, as the engine's does.
            stopped.cancelled().await;
            drop(tx);
        });
        Ok(Attached {
            output: rx.boxed(),
            input: Box::pin(ours),
        })
    }

    async fn start(&self, name: &str) -> Result<(), EngineError> {
        if self.state().containers.contains_key(name) {
            return Ok(());
        }
        Err(EngineError::Api {
            action: "start a sandbox container",
            message: format!("no such container: {name}"),
        })
    }

    async fn kill(&self, name: &str) -> Result<(), EngineError> {
        if self.stall_kill.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        let token = {
            let mut state = self.state();
            state.killed.push(name.to_string());
            state.containers.get(name).map(|c| c.kill.clone())
        };
        if let Some(token) = token {
            token.cancel();
            self.stop(
                name,
                ExitState {
                    oom_killed: false,
                    exit_code: Some(137),
                },
            );
        }
        Ok(())
    }

    async fn wait_stopped(&self, name: &str) {
        let stopped = self.state().containers.get(name).map(|c| c.stopped.clone());
        if let Some(stopped) = stopped {
            stopped.cancelled().await;
        }
    }

    async fn exit_state(&self, name: &str) -> Result<ExitState, EngineError> {
        let state = self.state();
        let c = state.containers.get(name).ok_or_else(|| EngineError::Api {
            action: "inspect a sandbox container",
            message: format!("no such container: {name}"),
        })?;
        Ok(c.exit.unwrap_or_default())
    }

    async fn set_memory_limit(&self, _name: &str, _bytes: i64) -> Result<(), EngineError> {
        self.updates.fetch_add(1, Ordering::SeqCst);
        if self.no_update_endpoint.load(Ordering::SeqCst) {
            return Err(EngineError::Unsupported(
                "updating a container's memory limit",
            ));
        }
        if self.fail_updates.load(Ordering::SeqCst) {
            return Err(EngineError::Api {
                action: "set a sandbox container's memory limit",
                message: "refused".into(),
            });
        }
        Ok(())
    }

    async fn remove(&self, name: &str) -> Result<(), EngineError> {
        let mut state = self.state();
        if let Some(c) = state.containers.remove(name) {
            c.kill.cancel();
            c.stopped.cancel();
            state.removed.insert(name.to_string());
        }
        Ok(())
    }

    async fn list_labelled(&self, labels: &[String]) -> Result<Vec<Labelled>, EngineError> {
        let state = self.state();
        Ok(state
            .containers
            .iter()
            .filter(|(_, c)| {
                labels.iter().all(|l| match l.split_once('=') {
                    Some((k, v)) => c.labels.get(k).is_some_and(|have| have == v),
                    None => c.labels.contains_key(l),
                })
            })
            .map(|(id, c)| Labelled {
                id: id.clone(),
                labels: c.labels.clone(),
            })
            .collect())
    }

    async fn image_id(&self, _image: &str) -> Result<Option<String>, EngineError> {
        Ok(Some(self.image.lock().unwrap().clone()))
    }

    fn events(&self, filter: &EventFilter) -> EventStream {
        let (tx, rx) = mpsc::unbounded();
        self.state().events.push((filter.clone(), tx));
        rx.boxed()
    }
}
