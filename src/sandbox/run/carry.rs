//! A session's state across fresh containers, as the sandbox sees it: blobs that go into a
//! container before its job and come out of it after `done`.
//!
//! The sandbox knows nothing of sessions, handles or tenants: a job that carries state names a
//! [`SnapshotStore`], which hands out the snapshot to restore and takes the next one. A snapshot
//! is a manifest (modules, and per variable its blob and the sizes of its pieces) over blobs,
//! files named by their sha256.
//!
//! In: a `restore` frame naming the variables. Every container has a read-only directory of
//! its own at [`STATE_MOUNT`] (an empty host directory, [`crate::sandbox::StateDirs`]); the
//! blobs are hard-linked into it just before the frame, so any pooled container takes any
//! session's state without a copy, and the harness maps them. Where there is no such
//! directory (or a link fails), the blobs' bytes follow the frame as base64 `state` frames.
//!
//! Out: after `done`, per variable whose bytes changed, a `blob` frame and that many raw bytes
//! on the same stream (no base64); a variable that did not change is named by its blob, not
//! sent. `state_end` carries the manifest. The caller has its result while the snapshot still
//! travels. Nothing here parses a pickle: only the harness does, inside a sandbox. A snapshot
//! that does not arrive whole (the container died, it grew past its bound, the stream broke) is
//! dropped, and the previous one stays.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt;
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use crate::sandbox::container::spec::STATE_MOUNT;
use crate::sandbox::engine::backend::{InputSink, Output, OutputStream};
use crate::sandbox::run::channel::{FromHarness, MAX_FRAME_BYTES, ToHarness, parse_frame};
use crate::sandbox::run::prepared::Prepared;
use crate::sandbox::stats::Stats;

pub use crate::sandbox::run::channel::{NotCarried, StateReport, StateVar};

/// Snapshot bytes per inline `state` frame (base64 keeps the frame under [`MAX_FRAME_BYTES`]).
pub const CHUNK_BYTES: usize = 4 << 20;

/// Longest a snapshot may take to arrive after `done`, beyond a second per 16 MiB of its bound.
const RECEIVE_BASE: Duration = Duration::from_secs(30);

/// A snapshot to load into a container.
#[derive(Debug, Clone, Default)]
pub struct Restore {
    /// Names bound to modules, imported again by name.
    pub modules: BTreeMap<String, String>,
    pub vars: Vec<StateVar>,
    /// Each blob's file on the host, by blob name.
    pub files: BTreeMap<String, PathBuf>,
}

/// Where a session's snapshots live. Implemented above the sandbox (the session store).
pub trait SnapshotStore: Send + Sync {
    /// The snapshot to load, or `None` when there is none yet.
    fn restore(&self) -> std::io::Result<Option<Restore>>;
    /// A writer for the next snapshot: nothing changes until it commits.
    fn next(&self) -> std::io::Result<Box<dyn SnapshotWriter>>;
}

/// The next snapshot, as it arrives: blobs, then the manifest. Dropped without
/// [`SnapshotWriter::commit`], it leaves the current state in place; [`SnapshotWriter::abort`]
/// says why.
pub trait SnapshotWriter: Send {
    /// Begins the next blob, `bytes` long (the one before it is whole).
    fn blob(&mut self, bytes: u64) -> std::io::Result<()>;
    /// More of the current blob.
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()>;
    /// The snapshot is whole: `manifest` (the harness's, untrusted) names its variables.
    fn commit(self: Box<Self>, manifest: Value) -> std::io::Result<()>;
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

/// Sends the store's snapshot (if any) to a container: its blobs hard-linked into `dir` (the
/// container's state directory on the host) when it has one, else inline. Returns whether a
/// snapshot was sent.
pub(crate) async fn deliver(
    store: &dyn SnapshotStore,
    input: &mut InputSink,
    dir: Option<&Path>,
) -> std::io::Result<bool> {
    let Some(restore) = crate::host::blocking_here(|| store.restore())? else {
        return Ok(false);
    };
    let linked = dir.is_some_and(
        |dir| match crate::host::blocking_here(|| link(&restore, dir)) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!("a session's state goes inline: linking it failed: {e}");
                false
            }
        },
    );
    let frame = ToHarness::Restore {
        modules: &restore.modules,
        vars: &restore.vars,
        dir: linked.then_some(STATE_MOUNT),
    };
    input.write_all(&frame.to_line()).await?;
    if !linked {
        send_inline(&restore, input).await?;
    }
    Ok(true)
}

/// Hard-links each blob of `restore` into `dir` under its own name. A blob whose file is gone
/// is left out: the harness then says the state cannot be read.
fn link(restore: &Restore, dir: &Path) -> std::io::Result<()> {
    for (blob, file) in &restore.files {
        match std::fs::hard_link(file, dir.join(blob)) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !file.exists() => {}
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// The blobs of `restore`, in the order of its variables, as state frames and `state_end`.
async fn send_inline(restore: &Restore, input: &mut InputSink) -> std::io::Result<()> {
    let mut chunk = vec![0u8; CHUNK_BYTES];
    let mut total = 0u64;
    for var in &restore.vars {
        let path = (restore.files.get(&var.blob))
            .ok_or_else(|| std::io::Error::other(format!("no file for blob {}", var.blob)))?;
        let mut file = crate::host::blocking_here(|| std::fs::File::open(path)).map_err(|e| {
            std::io::Error::other(format!(
                "the session's saved state could not be read (blob {}: {e}): run on an earlier revision (session=\"HANDLE@N\") or start a new session with session=\"new\"",
                var.blob
            ))
        })?;
        loop {
            // A local file in the page cache: a short read, done in place.
            let n = crate::host::blocking_here(|| read_full(&mut file, &mut chunk))?;
            if n == 0 {
                break;
            }
            total += n as u64;
            let data = base64::engine::general_purpose::STANDARD.encode(&chunk[..n]);
            input
                .write_all(&ToHarness::State { data }.to_line())
                .await?;
        }
    }
    input
        .write_all(&ToHarness::StateEnd { bytes: total }.to_line())
        .await
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

/// Receives the snapshot that follows `done`: `rest` is what arrived with `done`, after it.
/// Commits the writer when `state_end` counts the bytes that arrived; aborts it (saying why)
/// otherwise. Reads the output to its end either way, so the container is never blocked on a
/// full pipe. The blob bytes that arrived are counted in `stats` before the commit, whether
/// the snapshot holds or not: what a harness re-sends shows there.
pub(crate) async fn receive(
    mut writer: Box<dyn SnapshotWriter>,
    max_bytes: u64,
    rest: Vec<u8>,
    output: &mut OutputStream,
    stats: &Stats,
) {
    let limit = receive_limit(max_bytes);
    let mut state = Receiving::new(max_bytes);
    let received = tokio::time::timeout(limit, async {
        if let Some(end) = state.feed(&mut *writer, &rest) {
            return end;
        }
        while let Some(chunk) = output.next().await {
            let bytes = match chunk {
                Ok(Output::Stdout(bytes)) => bytes,
                Ok(Output::Stderr(_)) => continue,
                Err(e) => return Err(format!("the container's output broke: {e}")),
            };
            if let Some(end) = state.feed(&mut *writer, &bytes) {
                return end;
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
    stats.record_state_received(state.arrived);
    match received {
        Ok(manifest) => {
            let committed = crate::host::blocking_here(|| writer.commit(manifest));
            if let Err(e) = committed {
                tracing::warn!("a session's snapshot could not be saved: {e}");
            }
        }
        Err(reason) => writer.abort(reason),
    }
}

/// The receiving side of a snapshot: JSON lines, each `blob` line followed by its raw bytes.
struct Receiving {
    line: Vec<u8>,
    /// Bytes of the current blob still to come.
    blob_left: u64,
    /// Blob bytes so far, as the `blob` frames announced them.
    bytes: u64,
    /// Blob bytes that arrived.
    arrived: u64,
    max_bytes: u64,
}

impl Receiving {
    fn new(max_bytes: u64) -> Self {
        Self {
            line: Vec::new(),
            blob_left: 0,
            bytes: 0,
            arrived: 0,
            max_bytes,
        }
    }

    /// Takes the next piece of the stream; `Some` when the snapshot is complete (its manifest)
    /// or failed (why).
    fn feed(
        &mut self,
        writer: &mut dyn SnapshotWriter,
        mut data: &[u8],
    ) -> Option<Result<Value, String>> {
        while !data.is_empty() {
            if self.blob_left > 0 {
                let n = (self.blob_left.min(data.len() as u64)) as usize;
                if let Err(e) = crate::host::blocking_here(|| writer.write(&data[..n])) {
                    return Some(Err(format!("writing the snapshot failed: {e}")));
                }
                self.blob_left -= n as u64;
                self.arrived += n as u64;
                data = &data[n..];
                continue;
            }
            let (part, ends) = match data.iter().position(|&b| b == b'\n') {
                Some(i) => (&data[..i], true),
                None => (data, false),
            };
            if self.line.len() + part.len() > MAX_FRAME_BYTES {
                return Some(Err(format!(
                    "a snapshot frame was longer than {MAX_FRAME_BYTES} bytes"
                )));
            }
            self.line.extend_from_slice(part);
            data = &data[part.len() + usize::from(ends)..];
            if ends {
                let line = std::mem::take(&mut self.line);
                if let Some(end) = self.frame(writer, &line) {
                    return Some(end);
                }
            }
        }
        None
    }

    fn frame(
        &mut self,
        writer: &mut dyn SnapshotWriter,
        line: &[u8],
    ) -> Option<Result<Value, String>> {
        match parse_frame(line) {
            Some(FromHarness::Blob { bytes }) => {
                self.bytes = self.bytes.saturating_add(bytes);
                if self.bytes > self.max_bytes {
                    return Some(Err(format!(
                        "the snapshot grew past the session's bound of {} MB",
                        self.max_bytes >> 20
                    )));
                }
                if let Err(e) = writer.blob(bytes) {
                    return Some(Err(format!("writing the snapshot failed: {e}")));
                }
                self.blob_left = bytes;
                None
            }
            Some(FromHarness::StateEnd { bytes, .. }) if bytes < 0 => {
                Some(Err("the harness sent no snapshot".into()))
            }
            Some(FromHarness::StateEnd { bytes, manifest }) if bytes as u64 == self.bytes => {
                Some(manifest.ok_or_else(|| "the snapshot came without its manifest".into()))
            }
            Some(FromHarness::StateEnd { bytes, .. }) => Some(Err(format!(
                "the snapshot announced {bytes} bytes, {} arrived",
                self.bytes
            ))),
            // Output after done (a thread still printing) is not the state's business.
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what a receiver writes.
    #[derive(Default)]
    struct Recorder {
        blobs: Vec<Vec<u8>>,
    }

    impl SnapshotWriter for Recorder {
        fn blob(&mut self, _bytes: u64) -> std::io::Result<()> {
            self.blobs.push(Vec::new());
            Ok(())
        }
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
            self.blobs.last_mut().unwrap().extend_from_slice(bytes);
            Ok(())
        }
        fn commit(self: Box<Self>, _manifest: Value) -> std::io::Result<()> {
            Ok(())
        }
        fn abort(self: Box<Self>, _reason: String) {}
    }

    fn stream() -> Vec<u8> {
        let mut s = b"{\"type\":\"output\",\"stream\":\"stdout\",\"data\":\"x\"}\n".to_vec();
        s.extend_from_slice(b"{\"type\":\"blob\",\"bytes\":5}\n\n\x00{\n\xff");
        s.extend_from_slice(b"{\"type\":\"blob\",\"bytes\":2}\nab");
        s.extend_from_slice(b"{\"type\":\"state_end\",\"bytes\":7,\"manifest\":{\"vars\":[]}}\n");
        s
    }

    #[test]
    fn raw_blobs_arrive_whole_however_the_stream_is_cut() {
        let whole = stream();
        for cut in 1..whole.len() {
            let mut recorder = Recorder::default();
            let mut state = Receiving::new(1 << 20);
            let first = state.feed(&mut recorder, &whole[..cut]);
            let end = first.or_else(|| state.feed(&mut recorder, &whole[cut..]));
            assert_eq!(
                end,
                Some(Ok(serde_json::json!({"vars": []}))),
                "cut at {cut}"
            );
            assert_eq!(
                recorder.blobs,
                vec![b"\n\x00{\n\xff".to_vec(), b"ab".to_vec()]
            );
            assert_eq!(state.arrived, 7, "cut at {cut}");
        }
    }

    #[test]
    fn a_blob_past_the_bound_or_a_wrong_count_fails_the_snapshot() {
        let mut writer = Recorder::default();
        let end = Receiving::new(4).feed(&mut writer, &stream());
        assert!(end.unwrap().unwrap_err().contains("bound"));
        let short = b"{\"type\":\"blob\",\"bytes\":1}\nx{\"type\":\"state_end\",\"bytes\":2,\"manifest\":{}}\n";
        let end = Receiving::new(100).feed(&mut writer, short);
        assert!(
            end.unwrap()
                .unwrap_err()
                .contains("announced 2 bytes, 1 arrived")
        );
        // Sizes that would wrap around the count are past the bound all the same.
        let wrap = format!(
            "{{\"type\":\"blob\",\"bytes\":1}}\nx{{\"type\":\"blob\",\"bytes\":{}}}\n",
            u64::MAX
        );
        let end = Receiving::new(100).feed(&mut writer, wrap.as_bytes());
        assert!(end.unwrap().unwrap_err().contains("bound"));
        let none = b"{\"type\":\"state_end\",\"bytes\":-1}\n";
        let end = Receiving::new(100).feed(&mut writer, none);
        assert!(end.unwrap().unwrap_err().contains("no snapshot"));
    }
}
