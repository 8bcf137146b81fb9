//! A session's state across fresh containers, as the sandbox sees it: opaque bytes that go into
//! a container before its job and come out of it after `done`.
//!
//! The sandbox knows nothing of sessions, handles or tenants: a job that carries state names a
//! [`SnapshotStore`], which hands out the current snapshot and takes the next one. Bytes go in
//! as `state` frames (base64 pieces of at most [`CHUNK_BYTES`], then `state_end` with the total)
//! and come out the same way, after the `done` frame, so the caller has its result while the
//! snapshot still travels. Nothing here parses a snapshot: only the harness does, inside a
//! sandbox. A snapshot that does not arrive whole (the container died, it grew past its bound,
//! the stream broke) is dropped, and the previous one stays.

use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt;
use tokio::io::AsyncWriteExt;

use crate::sandbox::engine::backend::{InputSink, Output, OutputStream};
use crate::sandbox::run::channel::{
    FromHarness, Line, LineSplitter, MAX_FRAME_BYTES, ToHarness, parse_frame,
};
use crate::sandbox::run::prepared::Prepared;

pub use crate::sandbox::run::channel::{NotCarried, StateReport};

/// Snapshot bytes per `state` frame (base64 keeps the frame under [`MAX_FRAME_BYTES`]).
pub const CHUNK_BYTES: usize = 4 << 20;

/// A snapshot this large or larger goes into a container made for it as a read-only file mount
/// ([`crate::sandbox::container::spec::STATE_MOUNT`]), which the harness maps without a copy, rather than
/// through the channel: a container start costs less than streaming it, and the follow-up
/// calls of a session holding a large DataFrame stay fast.
pub const MOUNT_FROM_BYTES: u64 = 4 << 20;

/// Longest a snapshot may take to arrive after `done`, beyond a second per 16 MiB of its bound.
const RECEIVE_BASE: Duration = Duration::from_secs(30);

/// Where a session's snapshots live. Implemented above the sandbox (the session store).
pub trait SnapshotStore: Send + Sync {
    /// The current snapshot, or `None` when the session has none yet.
    fn current(&self) -> std::io::Result<Option<Box<dyn Read + Send>>>;
    /// A writer for the next snapshot: nothing replaces the current one until it commits.
    fn next(&self) -> std::io::Result<Box<dyn SnapshotWriter>>;
    /// The current snapshot as a file the engine can mount (its path as the engine sees it),
    /// when there is one of at least [`MOUNT_FROM_BYTES`]; a store without files says `None`.
    fn mountable(&self) -> Option<std::path::PathBuf> {
        None
    }
}

/// The next snapshot, as it arrives. Dropped without [`SnapshotWriter::commit`], it leaves the
/// current one in place; [`SnapshotWriter::abort`] says why.
pub trait SnapshotWriter: Send {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()>;
    fn commit(self: Box<Self>, bytes: u64) -> std::io::Result<()>;
    fn abort(self: Box<Self>, reason: String);
}

/// What a session's job carries.
#[derive(Clone)]
pub struct Carry {
    pub store: Arc<dyn SnapshotStore>,
    /// The largest snapshot kept (`--session-max-mb`).
    pub max_bytes: u64,
    /// A container made ready for this job ahead of time, with the state loaded.
    pub prepared: Option<Prepared>,
}

impl std::fmt::Debug for Carry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Carry")
            .field("max_bytes", &self.max_bytes)
            .field("prepared", &self.prepared.is_some())
            .finish()
    }
}

/// Sends the store's current snapshot (if any) as state frames. Returns whether one was sent.
pub(crate) async fn send(
    store: &dyn SnapshotStore,
    input: &mut InputSink,
) -> std::io::Result<bool> {
    let Some(mut reader) = store.current()? else {
        return Ok(false);
    };
    let mut chunk = vec![0u8; CHUNK_BYTES];
    let mut total = 0u64;
    loop {
        // A local file in the page cache: a short read, done in place.
        let n = crate::host::blocking_here(|| read_full(&mut reader, &mut chunk))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        let data = base64::engine::general_purpose::STANDARD.encode(&chunk[..n]);
        input
            .write_all(&ToHarness::State { data }.to_line())
            .await?;
    }
    input
        .write_all(&ToHarness::StateEnd { bytes: total }.to_line())
        .await?;
    Ok(true)
}

/// Reads until `buf` is full or the reader ends.
fn read_full(reader: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Longest a snapshot of at most `max_bytes` may take to arrive after `done`.
pub(crate) fn receive_limit(max_bytes: u64) -> Duration {
    RECEIVE_BASE + Duration::from_secs(max_bytes / (16 << 20))
}

/// Receives the snapshot that follows `done`: `pending` are the lines that arrived with `done`,
/// `splitter` holds what came after them. Commits the writer when `state_end` names the bytes
/// that arrived; aborts it (saying why) otherwise. Reads the output to its end either way, so
/// the container is never blocked on a full pipe.
pub(crate) async fn receive(
    mut writer: Box<dyn SnapshotWriter>,
    max_bytes: u64,
    pending: Vec<Line>,
    mut splitter: LineSplitter,
    output: &mut OutputStream,
) {
    let limit = receive_limit(max_bytes);
    let received = tokio::time::timeout(limit, async {
        let mut state = Receiving::default();
        for line in pending {
            if let Some(end) = state.line(&mut *writer, line, max_bytes) {
                return end;
            }
        }
        while let Some(chunk) = output.next().await {
            let bytes = match chunk {
                Ok(Output::Stdout(bytes)) => bytes,
                Ok(Output::Stderr(_)) => continue,
                Err(e) => return Err(format!("the container's output broke: {e}")),
            };
            for line in splitter.push(&bytes) {
                if let Some(end) = state.line(&mut *writer, line, max_bytes) {
                    return end;
                }
            }
        }
        Err("the container ended before the whole snapshot arrived".to_string())
    })
    .await
    .unwrap_or_else(|_| {
        Err(format!(
            "the snapshot did not arrive within {} s",
            limit.as_secs()
        ))
    });
    match received {
        Ok(bytes) => {
            let committed = crate::host::blocking_here(|| writer.commit(bytes));
            if let Err(e) = committed {
                tracing::warn!("a session's snapshot could not be saved: {e}");
            }
        }
        Err(reason) => writer.abort(reason),
    }
}

/// The receiving side's count of snapshot bytes.
#[derive(Default)]
struct Receiving {
    bytes: u64,
}

impl Receiving {
    /// Handles one line; `Some` when the snapshot is complete (its length) or failed (why).
    fn line(
        &mut self,
        writer: &mut dyn SnapshotWriter,
        line: Line,
        max_bytes: u64,
    ) -> Option<Result<u64, String>> {
        let Line::Complete(line) = line else {
            return Some(Err(format!(
                "a snapshot frame was longer than {MAX_FRAME_BYTES} bytes"
            )));
        };
        match parse_frame(&line) {
            Some(FromHarness::State { data }) => {
                let decoded = match base64::engine::general_purpose::STANDARD.decode(data) {
                    Ok(d) => d,
                    Err(e) => return Some(Err(format!("a snapshot frame was not base64: {e}"))),
                };
                self.bytes += decoded.len() as u64;
                if self.bytes > max_bytes {
                    return Some(Err(format!(
                        "the snapshot grew past the session's bound of {} MB",
                        max_bytes >> 20
                    )));
                }
                if let Err(e) = crate::host::blocking_here(|| writer.write(&decoded)) {
                    return Some(Err(format!("writing the snapshot failed: {e}")));
                }
                None
            }
            Some(FromHarness::StateEnd { bytes }) if bytes < 0 => {
                Some(Err("the harness sent no snapshot".into()))
            }
            Some(FromHarness::StateEnd { bytes }) if bytes as u64 == self.bytes => {
                Some(Ok(self.bytes))
            }
            Some(FromHarness::StateEnd { bytes }) => Some(Err(format!(
                "the snapshot announced {bytes} bytes, {} arrived",
                self.bytes
            ))),
            // Output after done (a thread still printing) is not the state's business.
            _ => None,
        }
    }
}

/// The longest line of the snapshot phase: a state frame is 4/3 of [`CHUNK_BYTES`] plus the
/// frame around it, under [`MAX_FRAME_BYTES`].
pub(crate) fn splitter_limit() -> usize {
    MAX_FRAME_BYTES
}
