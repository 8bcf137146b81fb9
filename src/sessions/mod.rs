//! Sessions on disk: one tenant's handles and the opaque snapshots behind them.
//!
//! A session is a directory `<handle>/` under the tenant's sessions directory, holding `state`
//! (the last snapshot, bytes only a sandbox ever parses) and `meta.json` (when it was created
//! and last used, the snapshot's size). Files are replaced atomically (a temp file, `fsync`,
//! `rename`), so a crash or a snapshot that never arrived whole leaves the previous state; a
//! restarted server (or, on a shared data directory, another node) finds every session.
//!
//! Handles are made here, `ses_` and 32 hex digits from 122 random bits: unguessable, and
//! checked against that shape before any path is built from one. Each tenant has its own
//! directory, so a handle of another tenant is simply unknown here. Bounds: a snapshot's size
//! (checked while it is written), the sessions a tenant holds, and the idle time after which a
//! session expires and is removed.

#[cfg(test)]
mod tests;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The snapshot's file name in a session's directory.
pub const STATE: &str = "state";
/// The package requirements a session keeps, as a JSON list of strings.
pub const PACKAGES: &str = "packages.json";
const META: &str = "meta.json";

/// The bounds of one tenant's sessions.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    /// `--session-max-mb`, in bytes.
    pub max_bytes: u64,
    /// `--session-max-count`: sessions one tenant holds at once.
    pub max_count: usize,
    /// `--session-idle-secs`: a session unused this long expires.
    pub idle: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(
        "no session {handle} here: it never existed for this tenant, expired and was removed, or belongs to another tenant. Start a new one with session=\"new\""
    )]
    Unknown { handle: String },
    #[error(
        "session {handle} expired after {idle_secs} s without a call (--session-idle-secs) and its state is gone. Start a new one with session=\"new\""
    )]
    Expired { handle: String, idle_secs: u64 },
    #[error(
        "this tenant already holds {max} sessions (--session-max-count): keep using one of them, or wait for an idle one to expire"
    )]
    TooMany { max: usize },
    #[error(
        "{given:?} is not a session handle: pass \"new\" to start a session, or the handle a result's `session` field gave"
    )]
    Malformed { given: String },
    #[error(
        "the session store at {path} failed: {source}. Check that the data directory is writable"
    )]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What `meta.json` holds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Meta {
    pub created_unix: u64,
    pub used_unix: u64,
    /// The current snapshot's size (0: none yet).
    pub bytes: u64,
}

/// Whether `handle` has the shape of a handle this module makes.
pub fn valid_handle(handle: &str) -> bool {
    handle.len() == 36
        && handle.starts_with("ses_")
        && handle[4..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// One tenant's sessions.
#[derive(Debug)]
pub struct SessionStore {
    dir: PathBuf,
    limits: SessionLimits,
    /// The group that alone may read snapshots besides the server (a tenant's own, whose
    /// sandboxes mount large ones read-only): snapshots are then 0640 to it.
    reader_gid: Option<u32>,
}

/// Counts for `get_execution_stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionCounts {
    /// Sessions this tenant holds.
    pub sessions: usize,
    /// Bytes of their snapshots.
    pub state_bytes: u64,
    /// Containers prepared for sessions' next calls, their state loaded, waiting now.
    pub prepared: usize,
    /// The bounds: sessions per tenant, megabytes per snapshot, idle seconds before expiry.
    pub max_sessions: usize,
    pub max_mb: u64,
    pub idle_secs: u64,
}

impl SessionStore {
    /// The store in `dir` (created on first use, mode 0700).
    pub fn new(dir: PathBuf, limits: SessionLimits) -> Self {
        Self {
            dir,
            limits,
            reader_gid: None,
        }
    }

    /// Snapshots written from now on are `0640` to `gid` (a tenant's own group), not
    /// readable by every user.
    pub fn with_reader_group(mut self, gid: Option<u32>) -> Self {
        self.reader_gid = gid;
        self
    }

    pub fn limits(&self) -> SessionLimits {
        self.limits
    }

    fn io(&self, path: &Path) -> impl FnOnce(std::io::Error) -> SessionError {
        let path = path.to_path_buf();
        move |source| SessionError::Io { path, source }
    }

    fn session_dir(&self, handle: &str) -> Result<PathBuf, SessionError> {
        if !valid_handle(handle) {
            return Err(SessionError::Malformed {
                given: crate::text::cut(handle, 80),
            });
        }
        Ok(self.dir.join(handle))
    }

    /// Starts a session: a fresh handle and its directory. Expired sessions are removed first,
    /// so they do not count against the bound.
    pub fn create(&self) -> Result<String, SessionError> {
        self.expire_idle();
        if self.handles().len() >= self.limits.max_count {
            return Err(SessionError::TooMany {
                max: self.limits.max_count,
            });
        }
        create_private(&self.dir).map_err(self.io(&self.dir))?;
        let handle = format!("ses_{}", uuid::Uuid::new_v4().simple());
        let dir = self.dir.join(&handle);
        std::fs::create_dir(&dir).map_err(self.io(&dir))?;
        let now = now_unix();
        self.write_meta(
            &dir,
            Meta {
                created_unix: now,
                used_unix: now,
                bytes: 0,
            },
        )?;
        Ok(handle)
    }

    /// Opens a session for a call: it must exist here and not have expired (an expired one is
    /// removed and named as such). Marks it used.
    pub fn open(&self, handle: &str) -> Result<Meta, SessionError> {
        let dir = self.session_dir(handle)?;
        let mut meta = match self.read_meta(&dir) {
            Ok(meta) => meta,
            Err(SessionError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                return Err(SessionError::Unknown {
                    handle: handle.to_string(),
                });
            }
            Err(e) => return Err(e),
        };
        if self.is_expired(&meta) {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(SessionError::Expired {
                handle: handle.to_string(),
                idle_secs: self.limits.idle.as_secs(),
            });
        }
        meta.used_unix = now_unix();
        self.write_meta(&dir, meta)?;
        Ok(meta)
    }

    fn is_expired(&self, meta: &Meta) -> bool {
        now_unix().saturating_sub(meta.used_unix) > self.limits.idle.as_secs()
    }

    /// The package requirements the session keeps (`packages.json`; none when it has none, or
    /// the handle is not a session's).
    pub fn packages(&self, handle: &str) -> Vec<String> {
        let Ok(dir) = self.session_dir(handle) else {
            return Vec::new();
        };
        std::fs::read(dir.join(PACKAGES))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// Replaces the package requirements the session keeps.
    pub fn set_packages(&self, handle: &str, texts: &[String]) -> Result<(), SessionError> {
        let dir = self.session_dir(handle)?;
        let path = dir.join(PACKAGES);
        let tmp = dir.join(format!("{PACKAGES}.tmp"));
        let bytes = serde_json::to_vec(texts).unwrap_or_default();
        std::fs::write(&tmp, bytes).map_err(self.io(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(self.io(&path))
    }

    /// The current snapshot, if the session has one.
    pub fn current(&self, handle: &str) -> Result<Option<std::fs::File>, SessionError> {
        let path = self.session_dir(handle)?.join(STATE);
        match std::fs::File::open(&path) {
            Ok(file) => Ok(Some(file)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io(&path)(e)),
        }
    }

    /// The size of the session's current snapshot, if it has one.
    pub fn state_len(&self, handle: &str) -> Option<u64> {
        let path = self.session_dir(handle).ok()?.join(STATE);
        std::fs::metadata(path).ok().map(|m| m.len())
    }

    /// The directory all sessions live in (created mode 0700 when missing).
    pub fn ensure_dir(&self) -> std::io::Result<&Path> {
        create_private(&self.dir)?;
        Ok(&self.dir)
    }

    /// A writer for the session's next snapshot: a temp file in its directory, renamed over
    /// `state` on [`StateWriter::commit`], removed when dropped uncommitted.
    pub fn writer(&self, handle: &str) -> Result<StateWriter, SessionError> {
        let dir = self.session_dir(handle)?;
        let tmp = dir.join(crate::host::safe_fs::temp_name(".state-"));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(self.io(&tmp))?;
        if let Some(gid) = self.reader_gid {
            use std::os::unix::fs::PermissionsExt;
            let closed = std::os::unix::fs::fchown(&file, None, Some(gid))
                .and_then(|()| file.set_permissions(std::fs::Permissions::from_mode(0o640)));
            if let Err(e) = closed {
                let _ = std::fs::remove_file(&tmp);
                return Err(self.io(&tmp)(e));
            }
        }
        Ok(StateWriter {
            file: Some(std::io::BufWriter::with_capacity(1 << 20, file)),
            tmp,
            dir,
            max_bytes: self.limits.max_bytes,
            written: 0,
        })
    }

    /// Removes the sessions idle past the limit; returns how many.
    pub fn expire_idle(&self) -> usize {
        let mut removed = 0;
        for handle in self.handles() {
            let dir = self.dir.join(&handle);
            if let Ok(meta) = self.read_meta(&dir)
                && self.is_expired(&meta)
                && std::fs::remove_dir_all(&dir).is_ok()
            {
                removed += 1;
            }
        }
        removed
    }

    /// The handles of the sessions on disk.
    pub fn handles(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| valid_handle(name))
            .collect()
    }

    pub fn counts(&self) -> SessionCounts {
        let handles = self.handles();
        let state_bytes = handles
            .iter()
            .filter_map(|h| self.read_meta(&self.dir.join(h)).ok())
            .map(|m| m.bytes)
            .sum();
        SessionCounts {
            sessions: handles.len(),
            state_bytes,
            prepared: 0,
            max_sessions: self.limits.max_count,
            max_mb: self.limits.max_bytes >> 20,
            idle_secs: self.limits.idle.as_secs(),
        }
    }

    fn read_meta(&self, dir: &Path) -> Result<Meta, SessionError> {
        let path = dir.join(META);
        let data = std::fs::read(&path).map_err(self.io(&path))?;
        serde_json::from_slice(&data).map_err(|e| SessionError::Io {
            path,
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        })
    }

    fn write_meta(&self, dir: &Path, meta: Meta) -> Result<(), SessionError> {
        write_meta(dir, meta).map_err(self.io(&dir.join(META)))
    }
}

fn write_meta(dir: &Path, meta: Meta) -> std::io::Result<()> {
    let tmp = dir.join(crate::host::safe_fs::temp_name(".meta-"));
    let data = serde_json::to_vec(&meta).expect("meta serializes");
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        file.write_all(&data)?;
        std::fs::rename(&tmp, dir.join(META))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

fn create_private(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// The next snapshot of a session, being written.
#[derive(Debug)]
pub struct StateWriter {
    file: Option<std::io::BufWriter<std::fs::File>>,
    tmp: PathBuf,
    dir: PathBuf,
    max_bytes: u64,
    written: u64,
}

impl StateWriter {
    pub fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.written += bytes.len() as u64;
        if self.written > self.max_bytes {
            return Err(std::io::Error::other(format!(
                "the snapshot is over the session's bound of {} MB",
                self.max_bytes >> 20
            )));
        }
        self.file
            .as_mut()
            .expect("open until commit")
            .write_all(bytes)
    }

    /// Makes what was written the session's state, if it is `bytes` long; returns its size.
    pub fn commit(mut self, bytes: u64) -> std::io::Result<u64> {
        if bytes != self.written {
            return Err(std::io::Error::other(format!(
                "{} bytes were written, {bytes} announced",
                self.written
            )));
        }
        let file = self.file.take().expect("open until commit");
        let renamed = (|| {
            let file = file.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()?;
            drop(file);
            std::fs::rename(&self.tmp, self.dir.join(STATE))
        })();
        if let Err(e) = renamed {
            let _ = std::fs::remove_file(&self.tmp);
            return Err(e);
        }
        let created = std::fs::read(self.dir.join(META))
            .ok()
            .and_then(|d| serde_json::from_slice::<Meta>(&d).ok())
            .map_or_else(now_unix, |m| m.created_unix);
        write_meta(
            &self.dir,
            Meta {
                created_unix: created,
                used_unix: now_unix(),
                bytes,
            },
        )?;
        Ok(bytes)
    }
}

impl Drop for StateWriter {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}
