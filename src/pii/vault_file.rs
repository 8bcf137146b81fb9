//! The vault on disk: an append-only, encrypted log of the values behind a tenant's tokens.
//!
//! Why: with `--pii-key-file` several servers serve the same tenants from shared storage, and a
//! tenant moves to another server when its node dies. The token secret is derived from the key
//! (`key.rs`), so the new server mints the same tokens; this file brings the values, so it can
//! also restore the tokens the model saw before the move.
//!
//! Format: a 16-byte header (`CEMPIIVAULT\0`, format version as u32 LE), then records, each a
//! u32 LE length and that many bytes: a random 24-byte nonce and the XChaCha20-Poly1305
//! ciphertext (with its 16-byte tag) of entries `kind u8 ‖ length u32 LE ‖ value`, followed by the
//! value's origins when the kind's high bit is set (`encode_entry`). The associated
//! data names the tenant (`key::Scope`), so a record copied into another tenant's file does not
//! authenticate. Someone with the storage but not the key learns the file's size, the number and
//! sizes of records and when they were written: not the values, not the tokens.
//!
//! Why a log: minting appends one write (then `fdatasync`) per sanitize call, so a token the model
//! saw is on disk before the tool answers, without rewriting the file. Reading tolerates what a
//! crash or damage leaves: a record cut short at the end is reported as a tail, a record that does
//! not authenticate is skipped and counted. The log is bounded by [`VaultFile::rewrite`] (temp file
//! and rename), which the engine calls when the log holds about twice what the vault keeps.
//!
//! Files are opened beneath the directory's descriptor with `O_NOFOLLOW` (and the directory
//! itself without following a symlink), created 0600: a symlink planted at the path is refused,
//! never followed out of the tenant's directory. Before appending, the path is compared with the
//! open file (device and inode): if another server rewrote (or someone removed) the file, it is
//! opened again so appends go where readers look.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::key::Scope;
use super::origin::{self, MAX_ORIGINS, Origin};
use super::token::Entry;
use super::types::PiiKind;

const MAGIC: &[u8; 12] = b"CEMPIIVAULT\0";
const VERSION: u32 = 1;
const HEADER_LEN: u64 = 16;
/// Set in an entry's kind byte when origins follow its value.
const ORIGINS_FLAG: u8 = 0x80;
const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;
/// A record's plaintext is cut at about this size (one record per sanitize call in practice).
const RECORD_PLAINTEXT: usize = 64 * 1024;
/// Longest record body read; a length field above it is damage, not a record.
const MAX_BODY: usize = 16 * 1024 * 1024;

fn header() -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[..12].copy_from_slice(MAGIC);
    h[12..].copy_from_slice(&VERSION.to_le_bytes());
    h
}

/// Why the vault file could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum VaultFileError {
    #[error(
        "{what} {path}: {source}. The vault file lives under --data-dir (CEM_DATA_DIR): the server must be able to write there, and neither the file nor its directory may be a symlink"
    )]
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error(
        "{path} is not a PII vault file (it does not start with the vault header): move it away, or set --data-dir (CEM_DATA_DIR) to the data directory the server wrote"
    )]
    NotAVault { path: PathBuf },
    #[error(
        "{path} is a vault file of format {found}, which this server does not read (it reads format {VERSION}): run the version that wrote it"
    )]
    Version { path: PathBuf, found: u32 },
    #[error("{path} is not a regular file: move it away")]
    NotRegular { path: PathBuf },
    #[error("a value of {0} bytes is too large for a vault record")]
    TooLarge(usize),
}

/// What a read of the log found.
#[derive(Debug, Default)]
pub struct ReadReport {
    /// The entries of the records that authenticated, in file order.
    pub entries: Vec<Entry>,
    /// Records that authenticated.
    pub records: usize,
    /// Records that did not authenticate (another key, another tenant's, damaged) or whose
    /// contents did not parse.
    pub rejected: usize,
    /// Bytes at the end that do not form a whole record: a write cut short (or one still being
    /// written by another server), or a damaged length.
    pub tail_bytes: u64,
}

/// One tenant's open vault file.
pub struct VaultFile {
    path: PathBuf,
    dir: OwnedFd,
    name: OsString,
    /// `.NAME.lock` beside the log, never renamed: see [`VaultFile::hold`].
    lock: OwnedFd,
    file: File,
    id: (u64, u64),
    /// Where the next read starts: the end of the last whole record read.
    read_to: u64,
    /// Entries in the records before `read_to`, and those this server appended after it.
    entries_read: usize,
    entries_appended: usize,
    cipher: XChaCha20Poly1305,
    aad: Vec<u8>,
}

impl std::fmt::Debug for VaultFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VaultFile")
            .field("path", &self.path)
            .field("read_to", &self.read_to)
            .finish_non_exhaustive()
    }
}

impl VaultFile {
    /// Opens (creating it, and its directory, when missing) the vault file at `path` for
    /// `scope`, encrypted under `key`, and reads every record in it.
    pub fn open(
        path: &Path,
        key: &[u8; 32],
        scope: Scope<'_>,
    ) -> Result<(Self, ReadReport), VaultFileError> {
        let io_err = |what, source| VaultFileError::Io {
            what,
            path: path.to_path_buf(),
            source,
        };
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(io_err(
                "cannot use",
                io::Error::new(io::ErrorKind::InvalidInput, "not a file path"),
            ));
        };
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(|e| io_err("cannot create the directory of", e))?;
        }
        let dir = rustix::fs::open(
            parent,
            OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io_err("cannot open the directory (not a symlink) of", e.into()))?;
        let lock = rustix::fs::openat(
            &dir,
            format!(".{}.lock", name.to_string_lossy()).as_str(),
            OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| {
            io_err(
                "cannot open the lock file (not following a symlink) of",
                e.into(),
            )
        })?;
        let held = Held::take(&lock, path);
        remove_stale_temps(parent, &dir, name);
        let (file, id) = open_log(path, &dir, name)?;
        let mut vault = VaultFile {
            path: path.to_path_buf(),
            dir,
            name: name.to_os_string(),
            lock,
            file,
            id,
            read_to: HEADER_LEN,
            entries_read: 0,
            entries_appended: 0,
            cipher: XChaCha20Poly1305::new(key.into()),
            aad: [
                b"code-execution-mcp/pii/vault/v1\0".as_slice(),
                &scope.label(),
            ]
            .concat(),
        };
        let report = vault.read_new()?;
        drop(held);
        Ok((vault, report))
    }

    /// Holds the lock that servers sharing this file take around every append, read and
    /// rewrite (and the header's creation), until the returned guard is dropped. With it, a
    /// rewrite cannot drop another server's record appended between the rewrite's read and its
    /// rename, nor an append land in a file a rewrite is replacing, nor two servers write a
    /// header each. `flock`, which GlusterFS and NFS carry across nodes; where the filesystem
    /// refuses it, the file works without (one server per tenant at a time).
    pub fn hold(&self) -> Held {
        Held::take(&self.lock, &self.path)
    }

    /// About how many entries the file holds: those read, plus those appended since (what
    /// other servers appended since the last read is not counted).
    pub fn entries_estimate(&self) -> usize {
        self.entries_read + self.entries_appended
    }

    fn io_err(&self, what: &'static str) -> impl FnOnce(io::Error) -> VaultFileError + '_ {
        move |source| VaultFileError::Io {
            what,
            path: self.path.clone(),
            source,
        }
    }

    /// Whether the path still names the open file; if not (rewritten by another server, removed),
    /// opens what it names now (creating it when missing) and reads it from the start next time.
    /// Returns whether it reopened.
    fn follow_path(&mut self) -> Result<bool, VaultFileError> {
        let now = match rustix::fs::statat(&self.dir, &self.name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Some((st.st_dev, st.st_ino)),
            Err(rustix::io::Errno::NOENT) => None,
            Err(e) => return Err(self.io_err("cannot look at")(e.into())),
        };
        if now == Some(self.id) {
            return Ok(false);
        }
        let (file, id) = open_log(&self.path, &self.dir, &self.name)?;
        (self.file, self.id, self.read_to) = (file, id, HEADER_LEN);
        (self.entries_read, self.entries_appended) = (0, 0);
        Ok(true)
    }

    /// Appends `entries` in one write, then `fdatasync`s: once this returns they survive a crash.
    pub fn append(&mut self, entries: &[Entry]) -> Result<(), VaultFileError> {
        if entries.is_empty() {
            return Ok(());
        }
        self.follow_path()?;
        let buf = self.encode(entries)?;
        let before = self.file.metadata().map(|m| m.len());
        let written = (&self.file)
            .write_all(&buf)
            .and_then(|()| self.file.sync_data());
        if let Err(e) = written {
            // A partial record in the middle would hide every later one from readers. (Should
            // another server have appended since `before`, its record goes too: it stays in that
            // server's memory, as a failed append leaves this one's.)
            if let Ok(len) = before {
                let _ = self.file.set_len(len);
            }
            return Err(self.io_err("cannot append to")(e));
        }
        self.entries_appended += entries.len();
        Ok(())
    }

    /// Reads the records appended since the last read (by this server or another sharing the
    /// file). The position advances over whole records only, so a record still being written is
    /// read next time.
    pub fn read_new(&mut self) -> Result<ReadReport, VaultFileError> {
        self.follow_path()?;
        let end = self
            .file
            .metadata()
            .map_err(self.io_err("cannot read"))?
            .len();
        if end <= self.read_to {
            return Ok(ReadReport::default());
        }
        let mut buf = vec![0u8; (end - self.read_to) as usize];
        self.file
            .read_exact_at(&mut buf, self.read_to)
            .map_err(self.io_err("cannot read"))?;
        let (report, consumed) = self.decode(&buf);
        self.read_to += consumed as u64;
        // What this server appended lay after the old position: it has now been read.
        self.entries_read += report.entries.len();
        self.entries_appended = 0;
        Ok(report)
    }

    /// Replaces the file with one holding just `entries` (temp file, `fdatasync`, rename, then the
    /// directory synced), and continues on it.
    pub fn rewrite(&mut self, entries: &[Entry]) -> Result<(), VaultFileError> {
        let mut suffix = [0u8; 6];
        getrandom::fill(&mut suffix).map_err(|e| {
            self.io_err("no randomness to rewrite")(io::Error::other(e.to_string()))
        })?;
        let temp = format!(
            ".{}.tmp-{}",
            self.name.to_string_lossy(),
            hex::encode(suffix)
        );
        // Opened for appending, like the original: appends go to the end whoever else writes.
        let fd = rustix::fs::openat(
            &self.dir,
            &temp,
            OFlags::RDWR
                | OFlags::CREATE
                | OFlags::EXCL
                | OFlags::APPEND
                | OFlags::NOFOLLOW
                | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| self.io_err("cannot create a temp file beside")(e.into()))?;
        let file = File::from(fd);
        let written = (|| {
            let mut buf = header().to_vec();
            buf.extend(self.encode(entries)?);
            (&file)
                .write_all(&buf)
                .and_then(|()| file.sync_data())
                .map_err(self.io_err("cannot write the rewrite of"))?;
            let st = rustix::fs::fstat(&file)
                .map_err(|e| self.io_err("cannot look at the rewrite of")(e.into()))?;
            rustix::fs::renameat(&self.dir, &temp, &self.dir, &self.name)
                .and_then(|()| rustix::fs::fsync(&self.dir))
                .map_err(|e| self.io_err("cannot replace")(e.into()))?;
            Ok(((st.st_dev, st.st_ino), buf.len() as u64))
        })();
        match written {
            Ok((id, len)) => {
                (self.file, self.id, self.read_to) = (file, id, len);
                (self.entries_read, self.entries_appended) = (entries.len(), 0);
                Ok(())
            }
            Err(e) => {
                let _ = rustix::fs::unlinkat(&self.dir, &temp, AtFlags::empty());
                Err(e)
            }
        }
    }

    /// Records for `entries`: as few as fit [`RECORD_PLAINTEXT`] each.
    fn encode(&self, entries: &[Entry]) -> Result<Vec<u8>, VaultFileError> {
        let mut out = Vec::new();
        let mut plain = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            if entry.value.len() > MAX_BODY / 2 {
                return Err(VaultFileError::TooLarge(entry.value.len()));
            }
            encode_entry(entry, &mut plain);
            let last = i + 1 == entries.len();
            if last || plain.len() + 5 + entries[i + 1].value.len() > RECORD_PLAINTEXT {
                self.seal(&plain, &mut out)?;
                plain.clear();
            }
        }
        Ok(out)
    }

    fn seal(&self, plain: &[u8], out: &mut Vec<u8>) -> Result<(), VaultFileError> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|e| {
            self.io_err("no randomness for a record of")(io::Error::other(e.to_string()))
        })?;
        let sealed = self
            .cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plain,
                    aad: &self.aad,
                },
            )
            .expect("XChaCha20-Poly1305 encrypts any length we write");
        out.extend(((NONCE_LEN + sealed.len()) as u32).to_le_bytes());
        out.extend(nonce);
        out.extend(sealed);
        Ok(())
    }

    /// The records in `buf`, and how many bytes of it are whole records.
    fn decode(&self, buf: &[u8]) -> (ReadReport, usize) {
        let mut report = ReadReport::default();
        let mut at = 0;
        while at < buf.len() {
            let rest = &buf[at..];
            let len = match rest.get(..4) {
                Some(b) => u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize,
                None => break,
            };
            if !(NONCE_LEN + TAG_LEN..=MAX_BODY).contains(&len) || rest.len() < 4 + len {
                break;
            }
            let (nonce, sealed) = rest[4..4 + len].split_at(NONCE_LEN);
            let opened = self.cipher.decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: sealed,
                    aad: &self.aad,
                },
            );
            match opened.ok().and_then(|plain| parse_entries(&plain)) {
                Some(entries) => {
                    report.records += 1;
                    report.entries.extend(entries);
                }
                None => report.rejected += 1,
            }
            at += 4 + len;
        }
        report.tail_bytes = (buf.len() - at) as u64;
        (report, at)
    }
}

/// Temp files of rewrites that a crash interrupted, an hour old or more (a younger one may be
/// another server's rewrite in progress). Best effort: what cannot be removed stays.
fn remove_stale_temps(parent: &Path, dir: &OwnedFd, name: &std::ffi::OsStr) {
    let prefix = format!(".{}.tmp-", name.to_string_lossy());
    let Ok(listing) = std::fs::read_dir(parent) else {
        return;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    for entry in listing.flatten() {
        let temp = entry.file_name();
        if !temp.to_string_lossy().starts_with(&prefix) {
            continue;
        }
        // Looked at and removed beneath the directory's descriptor, never through a link.
        if let Ok(st) = rustix::fs::statat(dir, &temp, AtFlags::SYMLINK_NOFOLLOW)
            && now - st.st_mtime >= 3600
        {
            let _ = rustix::fs::unlinkat(dir, &temp, AtFlags::empty());
        }
    }
}

/// One entry: `kind u8 ‖ length u32 LE ‖ value`, and when the value has origins the kind's
/// high bit set and `count u8 ‖ (length u8 ‖ label)*` after the value (`origin.rs`). A record
/// written before origins were kept has no high bit: its values have no origin.
fn encode_entry(entry: &Entry, plain: &mut Vec<u8>) {
    let kind = PiiKind::ALL
        .iter()
        .position(|k| *k == entry.kind)
        .expect("a kind") as u8;
    let with_origins = !entry.origins.is_empty();
    plain.push(kind | if with_origins { ORIGINS_FLAG } else { 0 });
    plain.extend((entry.value.len() as u32).to_le_bytes());
    plain.extend(entry.value.as_bytes());
    if with_origins {
        let origins = &entry.origins[..entry.origins.len().min(MAX_ORIGINS)];
        plain.push(origins.len() as u8);
        for o in origins {
            let label = o.label();
            plain.push(label.len() as u8);
            plain.extend(label.as_bytes());
        }
    }
}

fn parse_entries(mut plain: &[u8]) -> Option<Vec<Entry>> {
    let mut entries = Vec::new();
    while !plain.is_empty() {
        let first = *plain.first()?;
        let kind = *PiiKind::ALL.get(usize::from(first & !ORIGINS_FLAG))?;
        let len = u32::from_le_bytes(plain.get(1..5)?.try_into().ok()?) as usize;
        let value = std::str::from_utf8(plain.get(5..5 + len)?).ok()?;
        plain = &plain[5 + len..];
        let mut origins = Vec::new();
        if first & ORIGINS_FLAG != 0 {
            let count = *plain.first()?;
            plain = &plain[1..];
            for _ in 0..count {
                let n = usize::from(*plain.first()?);
                let label = std::str::from_utf8(plain.get(1..1 + n)?).ok()?;
                // A label this version does not know (a newer server's) is left out, not the value.
                if let Some(o) = Origin::from_label(label) {
                    origin::add(&mut origins, &o);
                }
                plain = &plain[1 + n..];
            }
        }
        entries.push(Entry {
            kind,
            value: value.to_owned(),
            origins,
        });
    }
    Some(entries)
}

/// The lock of [`VaultFile::hold`], released on drop.
pub struct Held(Option<OwnedFd>);

impl Held {
    fn take(lock: &OwnedFd, path: &Path) -> Self {
        use rustix::fs::{FlockOperation, flock};
        let Ok(fd) = rustix::io::dup(lock) else {
            return Held(None);
        };
        match flock(&fd, FlockOperation::LockExclusive) {
            Ok(()) => Held(Some(fd)),
            Err(e) => {
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    tracing::warn!(
                        "the filesystem of the PII vault file {} refuses locks ({e}): servers sharing a tenant's vault at the same moment could lose each other's records",
                        path.display()
                    )
                });
                Held(None)
            }
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(fd) = &self.0 {
            let _ = rustix::fs::flock(fd, rustix::fs::FlockOperation::Unlock);
        }
    }
}

/// Opens (or creates, 0600, with its header) the log `name` beneath `dir` without following a
/// symlink; refuses anything but a vault file.
fn open_log(
    path: &Path,
    dir: &OwnedFd,
    name: &std::ffi::OsStr,
) -> Result<(File, (u64, u64)), VaultFileError> {
    let io_err = |what, source| VaultFileError::Io {
        what,
        path: path.to_path_buf(),
        source,
    };
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDWR
            | OFlags::CREATE
            | OFlags::APPEND
            | OFlags::NOFOLLOW
            | OFlags::NONBLOCK
            | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| io_err("cannot open (not following a symlink)", e.into()))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| io_err("cannot look at", e.into()))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(VaultFileError::NotRegular {
            path: path.to_path_buf(),
        });
    }
    let file = File::from(fd);
    let mut head = [0u8; HEADER_LEN as usize];
    let size = st.st_size as u64;
    let have = size.min(HEADER_LEN) as usize;
    file.read_exact_at(&mut head[..have], 0)
        .map_err(|e| io_err("cannot read", e))?;
    if size < HEADER_LEN {
        // New, or its creator stopped while writing the header.
        if head[..have] != header()[..have] {
            return Err(VaultFileError::NotAVault {
                path: path.to_path_buf(),
            });
        }
        file.set_len(0)
            .and_then(|()| (&file).write_all(&header()))
            .and_then(|()| file.sync_data())
            .map_err(|e| io_err("cannot write the header of", e))?;
        rustix::fs::fsync(dir).map_err(|e| io_err("cannot sync the directory of", e.into()))?;
    } else if &head[..12] != MAGIC {
        return Err(VaultFileError::NotAVault {
            path: path.to_path_buf(),
        });
    } else {
        let found = u32::from_le_bytes(head[12..].try_into().expect("4 bytes"));
        if found != VERSION {
            return Err(VaultFileError::Version {
                path: path.to_path_buf(),
                found,
            });
        }
    }
    Ok((file, (st.st_dev, st.st_ino)))
}

#[cfg(test)]
#[path = "vault_file_tests.rs"]
mod tests;
