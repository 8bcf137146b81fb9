//! Sessions on disk: one tenant's handles, their revisions and the blobs behind them.
//!
//! A session is a directory `<handle>/` under the tenant's sessions directory, holding its
//! revisions (`rev-N.json`, [`revisions`]: the manifests of its saved states, numbered from 1),
//! the outcomes of the plans their calls made (`plan-N.json`, [`plan_results`]) and `meta.json` (when it was created and last used, its newest revision and that state's
//! size). The variables' bytes are blobs ([`blobs`]), stored once per tenant in `.blobs/` under
//! their sha256 and shared by revisions and forks; only a sandbox ever parses them. Files are
//! replaced atomically (a temp file, `fsync`, `rename`), so a crash or a snapshot that never
//! arrived whole leaves the previous state; a restarted server (or, on a shared data
//! directory, another node) finds every session.
//!
//! Handles are made here, `ses_` and 32 hex digits from 122 random bits: unguessable, and
//! checked against that shape before any path is built from one. Each tenant has its own
//! directory, so a handle of another tenant is simply unknown here. Bounds: a state's size
//! (checked while it is written), the revisions a session keeps (`--session-history`, and their
//! blobs within the state bound, oldest removed first, never the newest), the sessions a tenant
//! holds (forks included), and the idle time after which a session expires and is removed.

pub mod blobs;
pub mod plan_results;
pub mod revisions;
#[cfg(test)]
mod sweep_tests;
#[cfg(test)]
mod tests;
pub mod view;
mod writer;

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use blobs::Blobs;
use revisions::{Manifest, Parent};
pub use writer::RevisionWriter;

/// The package requirements a session keeps, as a JSON list of strings.
pub const PACKAGES: &str = "packages.json";
const META: &str = "meta.json";
/// Where a tenant's blobs live, beside its sessions (not a handle's shape: never a session).
const BLOBS: &str = ".blobs";
/// What an earlier version kept as a session's one snapshot.
const OLD_STATE: &str = "state";

/// The bounds of one tenant's sessions.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    /// `--session-max-mb`, in bytes.
    pub max_bytes: u64,
    /// `--session-max-count`: sessions one tenant holds at once.
    pub max_count: usize,
    /// `--session-idle-secs`: a session unused this long expires.
    pub idle: Duration,
    /// `--session-history`: revisions a session keeps.
    pub history: usize,
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
        "session {handle} has no revision {revision}: it holds {there}. Pass one of those as \"{handle}@N\", or the handle alone for its newest state"
    )]
    NoRevision {
        handle: String,
        revision: u64,
        there: String,
    },
    #[error(
        "session {handle} has no saved state to fork yet: run a call in it first, or start a new session with session=\"new\""
    )]
    NothingToFork { handle: String },
    #[error(
        "{given:?} does not name a revision: write HANDLE@N, N being a revision number from 1 (a result's state.revision), or the handle alone for the newest state"
    )]
    BadRevision { given: String },
    #[error(
        "fork=true needs a session to fork: pass its handle, or HANDLE@N for one of its revisions"
    )]
    ForkOfNew,
    #[error(
        "session {handle} was saved by an earlier version of this server, whose state cannot be read now. Start a new one with session=\"new\""
    )]
    Outdated { handle: String },
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
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Meta {
    pub created_unix: u64,
    pub used_unix: u64,
    /// The newest state's size (0: none yet).
    pub bytes: u64,
    /// The newest revision (0: none yet).
    #[serde(default)]
    pub revision: u64,
    /// The highest revision number given out: numbers are never given twice, so a call whose
    /// snapshot was not saved leaves its number unused.
    #[serde(default)]
    pub last: u64,
    /// Why the last call's snapshot was not saved, until one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsaved: Option<String>,
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
    /// The tenant's blobs; one value, so that its lock is one.
    blobs: Blobs,
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
            blobs: Blobs::new(dir.join(BLOBS), None),
            dir,
            limits,
            reader_gid: None,
        }
    }

    /// Snapshots written from now on are `0640` to `gid` (a tenant's own group), not
    /// readable by every user.
    pub fn with_reader_group(mut self, gid: Option<u32>) -> Self {
        self.reader_gid = gid;
        self.blobs = Blobs::new(self.dir.join(BLOBS), gid);
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
                revision: 0,
                last: 0,
                unsaved: None,
            },
        )?;
        Ok(handle)
    }

    /// A session's meta, without marking it used: it must exist here and not have expired.
    pub fn peek(&self, handle: &str) -> Result<Meta, SessionError> {
        let meta = self.existing(handle)?;
        if self.is_expired(&meta) {
            return Err(SessionError::Expired {
                handle: handle.to_string(),
                idle_secs: self.limits.idle.as_secs(),
            });
        }
        Ok(meta)
    }

    /// A session's meta; `Unknown` when it is not here.
    fn existing(&self, handle: &str) -> Result<Meta, SessionError> {
        let dir = self.session_dir(handle)?;
        match self.read_meta(&dir) {
            Err(SessionError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Err(SessionError::Unknown {
                    handle: handle.to_string(),
                })
            }
            read => read,
        }
    }

    /// Checks a session for a call: it must exist here and not have expired (an expired one is
    /// removed and named as such). Returns its meta marked used, for the caller to write.
    fn open(&self, handle: &str) -> Result<Meta, SessionError> {
        let dir = self.session_dir(handle)?;
        let mut meta = self.existing(handle)?;
        if self.is_expired(&meta) {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(SessionError::Expired {
                handle: handle.to_string(),
                idle_secs: self.limits.idle.as_secs(),
            });
        }
        meta.used_unix = now_unix();
        Ok(meta)
    }

    /// Begins a call of a session in one read and one write of its meta: [`SessionStore::open`]'s
    /// checks, revision `n` (when asked for) checked to be there, and the number of the call's
    /// revision reserved. Returns the newest revision and that number.
    pub fn open_turn(&self, handle: &str, n: Option<u64>) -> Result<(u64, u64), SessionError> {
        let meta = self.open(handle)?;
        if let Some(n) = n {
            self.manifest(handle, Some(n))?;
        }
        let last = meta.last.max(meta.revision) + 1;
        let dir = self.session_dir(handle)?;
        let newest = meta.revision;
        self.write_meta(&dir, Meta { last, ..meta })?;
        Ok((newest, last))
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

    /// A session's revision `n`, or its newest for `None` (`None` when it has none yet).
    pub fn manifest(&self, handle: &str, n: Option<u64>) -> Result<Option<Manifest>, SessionError> {
        let dir = self.session_dir(handle)?;
        let meta = self.read_meta(&dir)?;
        let wanted = match n {
            Some(n) => n,
            None if meta.revision == 0 && dir.join(OLD_STATE).exists() => {
                return Err(SessionError::Outdated {
                    handle: handle.to_string(),
                });
            }
            None if meta.revision == 0 => return Ok(None),
            None => meta.revision,
        };
        match revisions::read(&dir, wanted) {
            Some(manifest) => Ok(Some(manifest)),
            None => Err(SessionError::NoRevision {
                handle: handle.to_string(),
                revision: wanted,
                there: there(&revisions::numbers(&dir)),
            }),
        }
    }

    /// The revisions a session holds, oldest first.
    pub fn revisions(&self, handle: &str) -> Vec<Manifest> {
        let Ok(dir) = self.session_dir(handle) else {
            return Vec::new();
        };
        (revisions::numbers(&dir).into_iter())
            .filter_map(|n| revisions::read(&dir, n))
            .collect()
    }

    /// The file of blob `name` (`None` for a name that is not a blob's).
    pub fn blob_path(&self, name: &str) -> Option<PathBuf> {
        self.blobs.path(name)
    }

    /// The newest revision's number (0: none yet).
    pub fn newest(&self, handle: &str) -> Result<u64, SessionError> {
        let dir = self.session_dir(handle)?;
        Ok(self.read_meta(&dir)?.revision)
    }

    /// Gives out the number of the session's next revision (its call's snapshot becomes it).
    #[cfg(test)]
    pub fn reserve(&self, handle: &str) -> Result<u64, SessionError> {
        let dir = self.session_dir(handle)?;
        let meta = self.read_meta(&dir)?;
        let last = meta.last.max(meta.revision) + 1;
        self.write_meta(&dir, Meta { last, ..meta })?;
        Ok(last)
    }

    /// A writer for the session's next revision, made from `parent` (whose blobs the container
    /// was given, and which the new revision may name without sending).
    pub fn writer(
        &self,
        handle: &str,
        parent: Option<Manifest>,
        number: u64,
    ) -> Result<RevisionWriter, SessionError> {
        let dir = self.session_dir(handle)?;
        let blobs = self.blobs.clone();
        Ok(RevisionWriter::new(dir, blobs, self.limits, parent, number))
    }

    /// Starts a session whose first revision is `source`'s revision `n` (its newest for
    /// `None`), sharing its blobs and keeping its packages. The source is unchanged. Returns
    /// the new handle and `SOURCE@N`.
    pub fn fork(&self, source: &str, n: Option<u64>) -> Result<(String, String), SessionError> {
        let opened = self.open(source)?;
        self.write_meta(&self.dir.join(source), opened)?;
        let Some(mut manifest) = self.manifest(source, n)? else {
            return Err(SessionError::NothingToFork {
                handle: source.to_string(),
            });
        };
        let handle = self.create()?;
        let dir = self.dir.join(&handle);
        manifest.parent = Some(Parent {
            session: Some(source.to_string()),
            revision: manifest.revision,
        });
        let from = format!("{source}@{}", manifest.revision);
        manifest.revision = 1;
        manifest.created_unix = now_unix();
        manifest.received = 0;
        let packages = self.packages(source);
        if !packages.is_empty() {
            self.set_packages(&handle, &packages)?;
        }
        let parent = manifest.parent.as_ref().map_or(0, |p| p.revision);
        let plan = plan_results::copy(&self.dir.join(source), parent, &dir, 1);
        let written = plan
            .and_then(|()| revisions::write(&dir, &manifest))
            .and_then(|()| {
                let meta = self.read_meta(&dir).map_err(std::io::Error::other)?;
                write_meta(
                    &dir,
                    Meta {
                        revision: 1,
                        last: 1,
                        bytes: manifest.bytes(),
                        ..meta
                    },
                )
            });
        if let Err(e) = written {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(self.io(&dir)(e));
        }
        Ok((handle, from))
    }

    /// The directory all sessions live in (created mode 0700 when missing).
    pub fn ensure_dir(&self) -> std::io::Result<&Path> {
        create_private(&self.dir)?;
        Ok(&self.dir)
    }

    /// Removes the blobs no revision of any session names any more.
    pub fn sweep_blobs(&self) -> usize {
        sweep(&self.dir, &self.blobs, blobs::SWEEP_GRACE)
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
        if removed > 0 {
            self.sweep_blobs();
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
        let state_bytes = std::fs::read_dir(self.dir.join(BLOBS))
            .map(|entries| {
                (entries.flatten())
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0);
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
        read_meta(dir).map_err(self.io(&dir.join(META)))
    }

    fn write_meta(&self, dir: &Path, meta: Meta) -> Result<(), SessionError> {
        write_meta(dir, meta).map_err(self.io(&dir.join(META)))
    }
}

/// A session's meta, read from its directory.
fn read_meta(dir: &Path) -> std::io::Result<Meta> {
    let data = std::fs::read(dir.join(META))?;
    serde_json::from_slice(&data)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Replaces a session's meta (times and counts, rewritten on every call: renamed into place,
/// not synced).
fn write_meta(dir: &Path, meta: Meta) -> std::io::Result<()> {
    let data = serde_json::to_vec(&meta).expect("meta serializes");
    write_atomic(dir, META, &data, false)
}

/// Writes `name` in `dir` atomically: a temp file, `fsync` when `sync`, `rename`.
pub(crate) fn write_atomic(dir: &Path, name: &str, data: &[u8], sync: bool) -> std::io::Result<()> {
    let tmp = dir.join(crate::host::safe_fs::temp_name(".tmp-"));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        file.write_all(data)?;
        if sync {
            file.sync_all()?;
        }
        std::fs::rename(&tmp, dir.join(name))
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

/// "revisions 1, 2 and 5", or "no revision".
fn there(numbers: &[u64]) -> String {
    match numbers {
        [] => "no revision".to_string(),
        [one] => format!("revision {one} only"),
        [rest @ .., last] => {
            let rest: Vec<String> = rest.iter().map(u64::to_string).collect();
            format!("revisions {} and {last}", rest.join(", "))
        }
    }
}

/// Removes the blobs under `sessions` that no revision of any session there names.
fn sweep(sessions: &Path, blobs: &Blobs, grace: Duration) -> usize {
    // No snapshot places blobs or names them meanwhile.
    let _lock = blobs.lock();
    let Ok(entries) = std::fs::read_dir(sessions) else {
        return 0;
    };
    let mut named = HashSet::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        if !entry.file_name().to_str().is_some_and(valid_handle) {
            continue;
        }
        for n in revisions::numbers(&dir) {
            match revisions::read(&dir, n) {
                Some(m) => named.extend(m.vars.into_iter().map(|v| v.blob)),
                // A revision that cannot be read keeps every blob: better kept than lost.
                None => return 0,
            }
        }
    }
    blobs.sweep(&named, grace)
}
