//! Sessions in the application: `execute_code(session=…)` carries the code's variables from
//! one call to the next while every call still runs in a fresh container.
//!
//! The store on disk ([`crate::sessions`]) keeps each session's snapshot; this module adds what
//! lives only while the server runs: one call of a session at a time (a second call waits for
//! the first, its snapshot included, and then sees its state), and the container prepared for
//! the session's next call ([`crate::sandbox::Prepared`]) once a snapshot is saved. A session's
//! turn ends when its snapshot has arrived (or failed to), in the background: the caller has
//! its result before that.

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedMutexGuard, oneshot};
use tracing::Instrument;

use crate::sandbox::Prepared;
use crate::sandbox::run::carry::{Carry, SnapshotStore, SnapshotWriter, StateReport};
use crate::sessions::{SessionCounts, SessionError, SessionStore, StateWriter};

/// What `execute_code`'s `session` argument asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionArg {
    /// `"new"`: start a session.
    New,
    /// A handle: continue that session.
    Continue(String),
}

impl SessionArg {
    pub fn parse(value: &str) -> Self {
        if value == "new" {
            SessionArg::New
        } else {
            SessionArg::Continue(value.to_string())
        }
    }
}

/// One session while the server runs.
#[derive(Default)]
struct Live {
    /// Held for a call and its snapshot: calls of one session run one after the other.
    turn: Arc<tokio::sync::Mutex<()>>,
    /// The container prepared for the next call.
    prepared: Mutex<Option<Prepared>>,
}

/// One tenant's sessions.
pub struct Sessions {
    store: Arc<SessionStore>,
    live: Mutex<HashMap<String, Arc<Live>>>,
    /// The sessions directory as the engine sees it (for mounting large snapshots), when it
    /// could be translated.
    engine_dir: Option<PathBuf>,
}

impl Sessions {
    pub fn new(store: SessionStore, engine_dir: Option<PathBuf>) -> Self {
        Self {
            store: Arc::new(store),
            live: Mutex::default(),
            engine_dir,
        }
    }

    pub fn counts(&self) -> SessionCounts {
        let mut counts = self.store.counts();
        counts.prepared = self
            .live
            .lock()
            .expect("sessions lock")
            .values()
            .filter(|l| {
                l.prepared
                    .lock()
                    .expect("session lock")
                    .as_ref()
                    .is_some_and(|p| p.is_ready())
            })
            .count();
        counts
    }

    fn live(&self, handle: &str) -> Arc<Live> {
        self.live
            .lock()
            .expect("sessions lock")
            .entry(handle.to_string())
            .or_default()
            .clone()
    }

    /// The requirements a session keeps (none for an unknown handle).
    pub fn packages(&self, handle: &str) -> Vec<String> {
        self.store.packages(handle)
    }

    /// Stores the requirements a session keeps.
    pub fn set_packages(&self, handle: &str, texts: &[String]) -> Result<(), SessionError> {
        self.store.set_packages(handle, texts)
    }

    /// Removes expired sessions, and ends the preparations of sessions that are gone.
    pub fn sweep(&self) {
        self.store.expire_idle();
        let on_disk: std::collections::HashSet<String> = self.store.handles().into_iter().collect();
        self.live
            .lock()
            .expect("sessions lock")
            .retain(|handle, live| {
                let keep = on_disk.contains(handle);
                if !keep && let Some(p) = live.prepared.lock().expect("session lock").take() {
                    p.cancel();
                }
                keep
            });
    }

    /// Begins a call of a session: a new one, or the one `handle` names (waiting for a call of
    /// it already running). The turn holds the session until [`Turn::finish`].
    pub async fn begin(&self, arg: SessionArg) -> Result<Turn, SessionError> {
        let store = self.store.clone();
        let handle = match arg {
            SessionArg::New => {
                let store = store.clone();
                crate::host::blocking_here(move || {
                    store.expire_idle();
                    store.create()
                })?
            }
            SessionArg::Continue(handle) => handle,
        };
        let live = self.live(&handle);
        let guard = live.turn.clone().lock_owned().await;
        // Checked once the turn is ours: the call before may have been the last of it.
        if let Err(e) = crate::host::blocking_here(|| self.store.open(&handle)) {
            if let Some(p) = live.prepared.lock().expect("session lock").take() {
                p.cancel();
            }
            self.live.lock().expect("sessions lock").remove(&handle);
            return Err(e);
        }
        let prepared = live.prepared.lock().expect("session lock").take();
        Ok(Turn {
            handle,
            store,
            engine_dir: self.engine_dir.clone(),
            live,
            guard,
            prepared,
        })
    }
}

/// One call's hold on its session.
pub struct Turn {
    pub handle: String,
    store: Arc<SessionStore>,
    engine_dir: Option<PathBuf>,
    live: Arc<Live>,
    guard: OwnedMutexGuard<()>,
    prepared: Option<Prepared>,
}

impl Turn {
    /// What the job carries, and the signal of its snapshot (if one is taken). A container
    /// prepared with another package set than the call's is not used.
    pub fn carry(&mut self, package_set: Option<&str>) -> (Carry, Saved) {
        if (self.prepared.as_ref()).is_some_and(|p| p.package_set.as_deref() != package_set)
            && let Some(p) = self.prepared.take()
        {
            p.cancel();
        }
        let (tx, rx) = oneshot::channel();
        let store = Arc::new(TurnStore {
            store: self.store.clone(),
            handle: self.handle.clone(),
            engine_dir: self.engine_dir.clone(),
            saved: Mutex::new(Some(tx)),
        });
        let carry = Carry {
            store: store.clone(),
            max_bytes: self.store.limits().max_bytes,
            prepared: self.prepared.clone(),
        };
        (carry, Saved { store, rx })
    }

    /// Ends a turn whose call did not run: its prepared container is removed, and the next
    /// call of the session may start.
    pub fn abandon(self) {
        if let Some(prepared) = self.prepared {
            prepared.cancel();
        }
    }

    /// Ends the turn once the snapshot has arrived (in the background): prepares the
    /// session's next container when it was saved, then lets the next call in.
    pub fn finish(
        self,
        saved: Saved,
        sandbox: Arc<crate::sandbox::Sandbox>,
        package_set: Option<String>,
    ) {
        let Turn {
            handle,
            store,
            live,
            guard,
            prepared,
            engine_dir,
        } = self;
        // Taken by the call, or left unused (the call ran elsewhere): either way it is done.
        if let Some(prepared) = prepared {
            prepared.cancel();
        }
        let taken = saved.store.taken();
        let ending = async move {
            if !taken {
                drop(guard);
                return;
            }
            match saved.rx.await {
                Ok(Ok(_bytes)) => {
                    let reader = Arc::new(TurnStore {
                        store,
                        handle,
                        engine_dir,
                        saved: Mutex::new(None),
                    });
                    let next = sandbox.prepare(reader, package_set);
                    *live.prepared.lock().expect("session lock") = next;
                }
                Ok(Err(reason)) => {
                    tracing::warn!("a session's snapshot was not saved: {reason}");
                }
                Err(_) => tracing::warn!("a session's snapshot was abandoned"),
            }
            drop(guard);
        };
        tokio::spawn(ending.in_current_span());
    }
}

/// The signal that a call's snapshot was saved (or not).
pub struct Saved {
    store: Arc<TurnStore>,
    rx: oneshot::Receiver<Result<u64, String>>,
}

/// The report for a call whose harness said nothing of its state (it timed out, ran out of
/// memory, or was cancelled): the session keeps its previous state.
pub fn unsaved(status: &str) -> StateReport {
    StateReport {
        saved: false,
        reason: Some(format!(
            "the execution ended without a snapshot ({status}): the session keeps the state it had before this call"
        )),
        ..StateReport::default()
    }
}

/// A turn's view of the store, as the sandbox sees it.
struct TurnStore {
    store: Arc<SessionStore>,
    handle: String,
    /// The sessions directory as the engine sees it.
    engine_dir: Option<PathBuf>,
    /// Taken by the first [`SnapshotStore::next`].
    saved: Mutex<Option<oneshot::Sender<Result<u64, String>>>>,
}

impl TurnStore {
    /// Whether a writer was handed out (so a snapshot is on its way).
    fn taken(&self) -> bool {
        self.saved.lock().expect("turn lock").is_none()
    }
}

impl SnapshotStore for TurnStore {
    fn current(&self) -> std::io::Result<Option<Box<dyn Read + Send>>> {
        let file = self
            .store
            .current(&self.handle)
            .map_err(std::io::Error::other)?;
        Ok(file.map(|f| Box::new(std::io::BufReader::new(f)) as _))
    }

    fn mountable(&self) -> Option<PathBuf> {
        let dir = self.engine_dir.as_ref()?;
        let len = self.store.state_len(&self.handle)?;
        (len >= crate::sandbox::run::carry::MOUNT_FROM_BYTES)
            .then(|| dir.join(&self.handle).join(crate::sessions::STATE))
    }

    fn next(&self) -> std::io::Result<Box<dyn SnapshotWriter>> {
        let tx = self
            .saved
            .lock()
            .expect("turn lock")
            .take()
            .ok_or_else(|| std::io::Error::other("this call's snapshot is already on its way"))?;
        let writer = self
            .store
            .writer(&self.handle)
            .map_err(std::io::Error::other)?;
        Ok(Box::new(TurnWriter { writer, tx }))
    }
}

struct TurnWriter {
    writer: StateWriter,
    tx: oneshot::Sender<Result<u64, String>>,
}

impl SnapshotWriter for TurnWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.writer.write(bytes)
    }

    fn commit(self: Box<Self>, bytes: u64) -> std::io::Result<()> {
        let TurnWriter { writer, tx } = *self;
        match writer.commit(bytes) {
            Ok(bytes) => {
                let _ = tx.send(Ok(bytes));
                Ok(())
            }
            Err(e) => {
                let _ = tx.send(Err(e.to_string()));
                Err(e)
            }
        }
    }

    fn abort(self: Box<Self>, reason: String) {
        let _ = self.tx.send(Err(reason));
    }
}
