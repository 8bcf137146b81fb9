//! The skills store: reusable Python functions that agents save, list and load across executions.
//!
//! # Why it is built this way
//!
//! A skill name arrives from a model (through the `save_skill` tool or from sandbox code over the
//! channel) and becomes a file name on the host, and the directory is also mounted read-only into
//! every sandbox so that `from skills import NAME` works. Both facts shape the design:
//!
//! * **Allowlist before any path.** [`validate_name`] is pure and runs before a path is built:
//!   `^[A-Za-z_][A-Za-z0-9_]{0,63}$`, ASCII only, no leading `__`, no Python keyword. That refuses
//!   `../x`, `%2e%2e`, `/`, `.`, NUL, look-alike Unicode (Cyrillic `а` for Latin `a`) and
//!   over-long input by construction rather than by a deny-list, and it guarantees every stored
//!   name is importable. The error says what is allowed, so a model can fix the call.
//! * **One trusted handle, nothing followed.** [`SkillStore::open`] opens the configured
//!   directory once; every file is then opened relative to that fd with `O_NOFOLLOW` and checked
//!   with `fstat` on the fd actually opened. A symlink (or FIFO, socket, directory) at `NAME.py`,
//!   `NAME.json`, `.history` or `.history/NAME` is refused with an error that names it, never
//!   followed, so a planted link cannot make the server read or write anything outside the store.
//! * **Atomic writes.** Every file is written as a fresh `O_CREAT | O_EXCL | O_NOFOLLOW` temp file
//!   (`.tmp-…`, never ending in `.py`) in the target's own directory, `fsync`ed, `renameat`ed over
//!   the name, and the directory is `fsync`ed. A reader sees the old file or the new one, never a
//!   torn one; an existing inode is never modified, so a hard link elsewhere never changes.
//! * **Two files per skill.** `NAME.py` is the code, exactly as saved (so the read-only mount can
//!   import it); `NAME.json` holds [`SkillMeta`]: name, description, created (kept from the first
//!   save), updated, sha256 and size of the code, version. A skill exists when `NAME.py` is a
//!   regular file. The directory stays hand-editable: a `NAME.py` without `NAME.json`, or a JSON
//!   with only some fields, gets the missing fields from the file (mtime, hash of the code);
//!   [`SkillStore::load`] reports the hash of the code it actually returns. Metadata that is not
//!   valid JSON or names another skill is "malformed": listing skips it with a warning, loading
//!   refuses it, saving the skill again rewrites it.
//! * **Versions are kept.** Overwriting a skill first copies the current version to
//!   `.history/NAME/<version>-<timestamp>.py` (+ `.json`), then prunes that directory to
//!   [`SkillLimits::max_versions_kept`]. Version numbers only grow, also across a delete. Saving
//!   code and description identical to the current version is a no-op and returns its metadata,
//!   so an agent that re-saves in a loop does not push real versions out of the history.
//! * **Delete archives.** [`SkillStore::delete`] moves the current version into the history and
//!   removes `NAME.py` / `NAME.json`: the skill no longer loads or lists, but a mistaken delete by a
//!   model can be undone by hand and [`SkillStore::history`] still shows it. The (possibly empty)
//!   `.history/NAME` directory is a tombstone that stops [`SkillStore::seed_from`] from bringing a
//!   deleted starter skill back at the next start. To keep disk use bounded, histories of deleted
//!   skills beyond `max_skills` are removed, the longest-deleted first.
//! * **Locking.** Every mutation holds an exclusive `flock` on `.lock` in the store; reads hold a
//!   shared one (skipped when the store is read-only). Each operation opens the lock file anew, so
//!   the lock excludes threads of this process as well as other server processes sharing the
//!   directory (several stdio servers started by different clients use the same default
//!   directory). Concurrent saves of one name are therefore serialised: the last writer wins and
//!   every earlier version is in the history. Saves are rare and short, so one store-wide lock
//!   costs nothing measurable and makes the `max_skills` check exact.
//! * **Bounded.** Code, description and metadata sizes, the number of skills and versions are all
//!   capped ([`SkillLimits`]); reads never read more than the cap + 1 bytes. Code must be UTF-8
//!   text without NUL bytes.
//! * **Starter skills.** [`SkillStore::seed_from`] copies the skills the project ships into the
//!   store when a name has never existed there, so a user's skill is never overwritten. The
//!   shipped directory is install data and is read with ordinary (link-following) opens.
//!
//! Everything here is blocking: the async callers wrap these calls in `spawn_blocking`.

use std::cmp::Reverse;
use std::ffi::CStr;
use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use rustix::fs::{self as rfs, AtFlags, Dir, FileType, FlockOperation, Mode, OFlags};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Longest skill name, in bytes (all ASCII).
pub const MAX_NAME_LEN: usize = 64;
/// The naming rule in words, as error messages give it.
pub const NAME_RULE: &str = "a skill name is 1 to 64 ASCII letters, digits and underscores, \
     starts with a letter or a single underscore (not a digit, not \"__\") and is not a Python \
     keyword, so that `from skills import NAME` works; e.g. \"parse_access_log\"";

/// Default cap on the code of one skill (256 KiB).
pub const DEFAULT_MAX_CODE_BYTES: u64 = 256 * 1024;
/// Default cap on a description, after trimming (4 KiB).
pub const DEFAULT_MAX_DESCRIPTION_BYTES: usize = 4 * 1024;
/// Default cap on the number of skills in the store.
pub const DEFAULT_MAX_SKILLS: usize = 10_000;
/// Default number of earlier versions kept per skill.
pub const DEFAULT_MAX_VERSIONS_KEPT: usize = 20;

/// Directory of earlier versions, inside the store.
pub const HISTORY_DIR: &str = ".history";
const LOCK_FILE: &str = ".lock";
const TEMP_PREFIX: &str = ".tmp-";
/// Temp files older than this are left-overs of a crash and are removed.
const STALE_TEMP_SECS: i64 = 3600;
/// Metadata files are small; anything larger is malformed.
const MAX_META_BYTES: u64 = 64 * 1024;
const FILE_MODE: u32 = 0o644;
const DIR_MODE: u32 = 0o755;
/// How many existing names a "not found" error lists.
const SUGGESTIONS: usize = 10;

/// Python's hard keywords (3.12). Soft keywords (`match`, `case`, `type`, `_`) are valid
/// identifiers and allowed.
const PYTHON_KEYWORDS: [&str; 35] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// Bounds of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkillLimits {
    /// Largest code of one skill, in bytes.
    pub max_code_bytes: u64,
    /// Largest description, in bytes after trimming.
    pub max_description_bytes: usize,
    /// Most skills the store holds; saving a new name beyond it is refused.
    pub max_skills: usize,
    /// Earlier versions kept per skill (0 keeps none).
    pub max_versions_kept: usize,
}

impl Default for SkillLimits {
    fn default() -> Self {
        Self {
            max_code_bytes: DEFAULT_MAX_CODE_BYTES,
            max_description_bytes: DEFAULT_MAX_DESCRIPTION_BYTES,
            max_skills: DEFAULT_MAX_SKILLS,
            max_versions_kept: DEFAULT_MAX_VERSIONS_KEPT,
        }
    }
}

/// Metadata of one version of a skill, as stored in `NAME.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillMeta {
    pub name: String,
    pub description: String,
    /// When the skill was first saved (kept across overwrites).
    #[serde(with = "rfc3339")]
    pub created: DateTime<Utc>,
    /// When this version was saved.
    #[serde(with = "rfc3339")]
    pub updated: DateTime<Utc>,
    /// Lower-case hex SHA-256 of the code.
    pub sha256: String,
    /// 1 for the first save, one more for each later one (also across a delete).
    pub version: u64,
    /// Size of the code in bytes.
    pub size: u64,
}

/// A skill with its code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skill {
    pub meta: SkillMeta,
    pub code: String,
}

/// Errors of the store, worded for a model to act on.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    #[error("Invalid skill name {name}: {reason}. Use alphanumeric and underscores only: {rule}.", rule = NAME_RULE)]
    InvalidName { name: String, reason: String },

    #[error("Skill not found: {name}. {}", existing_hint(.existing, *.total))]
    NotFound {
        name: String,
        /// Up to 10 existing names, closest to `name` first.
        existing: Vec<String>,
        /// How many skills exist.
        total: usize,
    },

    #[error("Version {version} of skill {name} is not in its history. {}", kept_hint(.kept))]
    VersionNotFound {
        name: String,
        version: u64,
        /// The versions the history holds, oldest first.
        kept: Vec<u64>,
    },

    #[error(
        "{what} is too large: {size} bytes, the limit is {limit} bytes. Split it into smaller skills or shorten it."
    )]
    TooLarge { what: String, size: u64, limit: u64 },

    #[error("{what} is not text: {reason}. A skill is Python source in UTF-8 without NUL bytes.")]
    NotText { what: String, reason: String },

    #[error(
        "Too many skills: the store holds {count}, the limit is {limit}. Delete a skill you no longer need with delete_skill, or overwrite an existing one."
    )]
    TooMany { count: usize, limit: usize },

    #[error(
        "Refused: {path:?} in the skills directory is a symbolic link; the skills store never reads or writes through links. Remove it (or replace it with a regular file) on the host."
    )]
    Symlink { path: String },

    #[error(
        "Refused: {path:?} in the skills directory is {kind}, not {expected}. Remove or rename it on the host."
    )]
    NotRegular {
        path: String,
        kind: &'static str,
        /// "a regular file" or "a directory".
        expected: &'static str,
    },

    #[error(
        "Metadata of skill {name} ({path:?}) is malformed: {reason}. The code is intact; saving the skill again with save_skill rewrites the metadata."
    )]
    Corrupt {
        name: String,
        path: String,
        reason: String,
    },

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl SkillError {
    fn io(context: impl Into<String>, source: impl Into<std::io::Error>) -> Self {
        SkillError::Io {
            context: context.into(),
            source: source.into(),
        }
    }
}

pub type Result<T, E = SkillError> = std::result::Result<T, E>;

fn kept_hint(kept: &[u64]) -> String {
    if kept.is_empty() {
        return "It has no earlier versions.".into();
    }
    let list: Vec<String> = kept.iter().map(u64::to_string).collect();
    format!("Versions kept: {}.", list.join(", "))
}

fn existing_hint(existing: &[String], total: usize) -> String {
    if total == 0 {
        return "No skills are saved yet; save one with save_skill.".into();
    }
    let names = existing.join(", ");
    if existing.len() < total {
        format!(
            "Existing skills closest to that name: {names} ({} of {total}; list_skills shows all).",
            existing.len()
        )
    } else {
        format!("Existing skills: {names}.")
    }
}

/// A name as an error message shows it: quoted, escaped, at most 80 characters.
fn shown(name: &str) -> String {
    const MAX: usize = 80;
    if name.chars().count() <= MAX {
        format!("{name:?}")
    } else {
        let cut: String = name.chars().take(MAX).collect();
        format!("{cut:?}… ({} characters)", name.chars().count())
    }
}

/// Checks `name` against the allowlist `^[A-Za-z_][A-Za-z0-9_]{0,63}$`, refusing names that
/// start with `__` and Python keywords. Pure; runs before any path is built.
pub fn validate_name(name: &str) -> Result<()> {
    let fail = |reason: String| {
        Err(SkillError::InvalidName {
            name: shown(name),
            reason,
        })
    };
    if name.is_empty() {
        return fail("it is empty".into());
    }
    if name.contains(['/', '\\']) || name.contains("..") {
        return fail("it looks like a path; a skill name is a bare name, not a path".into());
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
    {
        let what = match c {
            '.' => "it contains '.'".into(),
            c if c.is_ascii_control() => {
                format!("it contains the control character U+{:04X}", c as u32)
            }
            c if !c.is_ascii() => {
                format!(
                    "it contains the non-ASCII character {c:?} (U+{:04X})",
                    c as u32
                )
            }
            c => format!("it contains {c:?}"),
        };
        return fail(what);
    }
    if name.len() > MAX_NAME_LEN {
        return fail(format!("it is {} characters long", name.len()));
    }
    if name.as_bytes()[0].is_ascii_digit() {
        return fail("it starts with a digit".into());
    }
    if name.starts_with("__") {
        return fail("names starting with \"__\" are reserved".into());
    }
    if PYTHON_KEYWORDS.contains(&name) {
        return fail("it is a Python keyword".into());
    }
    Ok(())
}

/// Serde for timestamps: RFC 3339 in UTC with microseconds, e.g. `2025-01-31T12:00:00.123456Z`.
mod rfc3339 {
    use chrono::{DateTime, SecondsFormat, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&t.to_rfc3339_opts(SecondsFormat::Micros, true))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        let s = String::deserialize(d)?;
        DateTime::parse_from_rfc3339(&s)
            .map(|t| t.with_timezone(&Utc))
            .map_err(serde::de::Error::custom)
    }
}

/// `NAME.json` as found on disk: every field optional, so that hand-written metadata (or the
/// shipped `{"description": …}` form) is accepted and completed from the code file.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RawMeta {
    name: Option<String>,
    description: Option<String>,
    created: Option<String>,
    updated: Option<String>,
    sha256: Option<String>,
    version: Option<u64>,
    size: Option<u64>,
}

enum MetaRead {
    Missing,
    Malformed(String),
    Found(RawMeta),
}

/// Now, to the microsecond (what the metadata stores, so values round-trip exactly).
fn now() -> DateTime<Utc> {
    let t = Utc::now();
    DateTime::from_timestamp_micros(t.timestamp_micros()).unwrap_or(t)
}

fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

fn parse_time(field: &str, value: &str) -> std::result::Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(value)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("{field} {value:?} is not an RFC 3339 timestamp ({e})"))
}

/// Completes `raw` into metadata for `name`. With `code`, hash and size are computed from it
/// (the code is the truth); without, they must be in `raw`.
fn complete_meta(
    name: &str,
    raw: &RawMeta,
    code: Option<&str>,
    mtime: DateTime<Utc>,
) -> std::result::Result<SkillMeta, String> {
    if let Some(n) = &raw.name
        && n != name
    {
        return Err(format!("its name field says {n:?}"));
    }
    let created = match &raw.created {
        Some(s) => parse_time("created", s)?,
        None => mtime,
    };
    let updated = match &raw.updated {
        Some(s) => parse_time("updated", s)?,
        None => mtime.max(created),
    };
    if let Some(h) = &raw.sha256
        && (h.len() != 64 || !h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
    {
        return Err(format!("sha256 {h:?} is not 64 lower-case hex digits"));
    }
    let (sha256, size) = match code {
        Some(code) => {
            let sha = sha256_hex(code.as_bytes());
            if raw.sha256.as_ref().is_some_and(|h| *h != sha) {
                tracing::warn!(
                    skill = name,
                    "the code of this skill was changed outside the store; reporting the hash of the file"
                );
            }
            (sha, code.len() as u64)
        }
        None => match (&raw.sha256, raw.size) {
            (Some(h), Some(s)) => (h.clone(), s),
            _ => return Err("sha256 or size is missing".into()),
        },
    };
    Ok(SkillMeta {
        name: name.to_owned(),
        description: raw.description.clone().unwrap_or_default(),
        created,
        updated,
        sha256,
        version: raw.version.unwrap_or(1).max(1),
        size,
    })
}

fn kind_name(ft: FileType) -> &'static str {
    match ft {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        _ => "of an unknown kind",
    }
}

fn mtime_of(st: &rfs::Stat) -> DateTime<Utc> {
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    let (secs, nsec) = (st.st_mtime as i64, st.st_mtime_nsec as u32);
    DateTime::from_timestamp(secs, nsec / 1000 * 1000).unwrap_or_default()
}

fn is_name_file<'a>(file: &'a str, ext: &str) -> Option<&'a str> {
    let stem = file.strip_suffix(ext)?;
    validate_name(stem).ok().map(|()| stem)
}

/// `<version>-<timestamp>` of a history file name, with its version.
fn parse_history_stem(file: &str) -> Option<(&str, u64, bool)> {
    let (stem, is_py) = match file.strip_suffix(".py") {
        Some(s) => (s, true),
        None => (file.strip_suffix(".json")?, false),
    };
    let (digits, ts) = stem.split_once('-')?;
    if digits.is_empty()
        || digits.len() > 20
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || ts.is_empty()
        || !ts.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.')
    {
        return None;
    }
    Some((stem, digits.parse().ok()?, is_py))
}

fn history_stem(version: u64, updated: DateTime<Utc>) -> String {
    format!("{version:06}-{}", updated.format("%Y%m%dT%H%M%S%.6fZ"))
}

/// One version in `.history/NAME`.
#[derive(Debug)]
struct HistEntry {
    stem: String,
    version: u64,
    has_py: bool,
    has_json: bool,
}

/// The current version of a skill, read for an update.
struct Current {
    meta: SkillMeta,
    code: String,
    /// Why `NAME.json` could not be used, when it could not.
    meta_problem: Option<String>,
}

fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    RandomState::new().hash_one((COUNTER.fetch_add(1, Ordering::Relaxed), std::process::id()))
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// A store of skills in one directory. See the module documentation.
pub struct SkillStore {
    dir: PathBuf,
    /// `O_RDONLY | O_DIRECTORY` fd of the store; every path is resolved relative to it.
    root: OwnedFd,
    limits: SkillLimits,
}

impl fmt::Debug for SkillStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SkillStore")
            .field("dir", &self.dir)
            .field("limits", &self.limits)
            .finish()
    }
}

impl SkillStore {
    /// Opens the store in `dir`, creating it (mode 0755) when missing. The configured path itself
    /// may go through symlinks (it is configuration, not input); nothing inside it is followed.
    pub fn open(dir: &Path, limits: SkillLimits) -> Result<Self> {
        match std::fs::symlink_metadata(dir) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(DIR_MODE)
                    .create(dir)
                    .map_err(|e| {
                        SkillError::io(
                            format!("cannot create the skills directory {}", dir.display()),
                            e,
                        )
                    })?;
                // The mode given to mkdir is reduced by the umask; the sandbox user must read.
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))
                    .map_err(|e| SkillError::io(format!("cannot chmod {}", dir.display()), e))?;
            }
            Err(e) => {
                return Err(SkillError::io(
                    format!("cannot access the skills directory {}", dir.display()),
                    e,
                ));
            }
        }
        let root = rfs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            SkillError::io(
                format!("cannot open the skills directory {}", dir.display()),
                e,
            )
        })?;
        let store = Self {
            dir: dir.to_path_buf(),
            root,
            limits,
        };
        // Create the lock file now (best effort: a read-only store is still readable).
        if let Err(e) = store.open_lock_file(true) {
            tracing::debug!(dir = %dir.display(), error = %e, "skills store lock file not created");
        }
        store.remove_stale_temps(store.root.as_fd());
        Ok(store)
    }

    /// The directory of the store.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The limits of the store.
    pub fn limits(&self) -> &SkillLimits {
        &self.limits
    }

    /// Saves `code` as skill `name`, keeping the previous version in the history. Saving code
    /// and description identical to the current version changes nothing and returns its
    /// metadata.
    pub fn save(&self, name: &str, code: impl AsRef<[u8]>, description: &str) -> Result<SkillMeta> {
        validate_name(name)?;
        let code = check_code(code.as_ref(), self.limits.max_code_bytes, "The skill code")?;
        let description = self.check_description(description)?;
        let _lock = self.lock(true)?;

        let current = self.read_current(name)?;
        if let Some(cur) = &current {
            if let Some(problem) = &cur.meta_problem {
                tracing::warn!(skill = name, problem, "rewriting malformed skill metadata");
            } else if cur.code == code && cur.meta.description == description {
                return Ok(cur.meta.clone());
            }
        } else {
            let count = self.scan_names()?.len();
            if count >= self.limits.max_skills {
                return Err(SkillError::TooMany {
                    count,
                    limit: self.limits.max_skills,
                });
            }
        }

        let hist_max = self.max_history_version(name)?;
        let at = now();
        let (created, version) = match current {
            Some(cur) => {
                let archived = cur.meta.version.max(hist_max + 1);
                if self.limits.max_versions_kept > 0 {
                    let hdir = self.history_dir(name, true)?.expect("created");
                    self.archive(hdir.as_fd(), name, &cur.meta, archived, &cur.code)?;
                    self.prune_history(hdir.as_fd(), name)?;
                }
                (cur.meta.created, archived + 1)
            }
            None => (at, hist_max + 1),
        };
        let meta = SkillMeta {
            name: name.to_owned(),
            description: description.to_owned(),
            created,
            updated: at,
            sha256: sha256_hex(code.as_bytes()),
            version,
            size: code.len() as u64,
        };
        self.write_skill(&meta, code)?;
        Ok(meta)
    }

    /// Loads skill `name` with its code.
    pub fn load(&self, name: &str) -> Result<Skill> {
        validate_name(name)?;
        let _lock = self.lock(false)?;
        match self.read_current(name)? {
            None => Err(self.not_found(name)),
            Some(Current {
                meta_problem: Some(reason),
                ..
            }) => Err(SkillError::Corrupt {
                name: name.to_owned(),
                path: format!("{name}.json"),
                reason,
            }),
            Some(cur) => Ok(Skill {
                meta: cur.meta,
                code: cur.code,
            }),
        }
    }

    /// Metadata of every skill, sorted by name. Entries that cannot be read (a symlink, a
    /// non-regular file, malformed metadata, an I/O error) are skipped and logged; `.history`,
    /// temp files and files whose names are not skill names are ignored.
    pub fn list(&self) -> Result<Vec<SkillMeta>> {
        let _lock = self.lock(false)?;
        let mut out = Vec::new();
        for (name, ft) in self.scan_entries()? {
            if ft != FileType::RegularFile {
                tracing::warn!(skill = %name, kind = kind_name(ft), "skipping skill: {name}.py is not a regular file");
                continue;
            }
            match self.read_listed(&name) {
                Ok(Some(meta)) => out.push(meta),
                Ok(None) => {} // deleted meanwhile by hand
                Err(e) => tracing::warn!(skill = %name, error = %e, "skipping unreadable skill"),
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Deletes skill `name`: its current version moves into the history (up to
    /// `max_versions_kept`), after which it no longer loads or lists.
    pub fn delete(&self, name: &str) -> Result<()> {
        validate_name(name)?;
        let _lock = self.lock(true)?;
        let Some(cur) = self.read_current(name)? else {
            return Err(self.not_found(name));
        };
        // The history directory is created even when no versions are kept: it is the tombstone
        // that keeps `seed_from` from restoring a deleted starter skill.
        let hdir = self.history_dir(name, true)?.expect("created");
        if self.limits.max_versions_kept > 0 {
            let archived = cur.meta.version.max(self.max_history_version(name)? + 1);
            self.archive(hdir.as_fd(), name, &cur.meta, archived, &cur.code)?;
            self.prune_history(hdir.as_fd(), name)?;
        }
        for file in [format!("{name}.py"), format!("{name}.json")] {
            match rfs::unlinkat(&self.root, file.as_str(), AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => {}
                Err(e) => return Err(SkillError::io(format!("cannot delete {file}"), e)),
            }
        }
        self.sync_dir(self.root.as_fd(), "the skills directory")?;
        if let Err(e) = self.prune_deleted_histories() {
            tracing::warn!(error = %e, "cannot prune histories of deleted skills");
        }
        Ok(())
    }

    /// Metadata of the earlier versions of `name` kept in the history, oldest first (the current
    /// version is not included). Works for a deleted skill too.
    pub fn history(&self, name: &str) -> Result<Vec<SkillMeta>> {
        validate_name(name)?;
        let _lock = self.lock(false)?;
        let Some(hdir) = self.history_dir(name, false)? else {
            return if self.py_exists(name)? {
                Ok(Vec::new())
            } else {
                Err(self.not_found(name))
            };
        };
        let mut out = Vec::new();
        for e in self.scan_history(hdir.as_fd())? {
            if !e.has_py {
                continue;
            }
            match self.read_history_entry(hdir.as_fd(), name, &e) {
                Ok(skill) => out.push(skill.meta),
                Err(err) => {
                    tracing::warn!(skill = name, version = e.version, error = %err, "skipping unreadable history entry")
                }
            }
        }
        Ok(out)
    }

    /// Loads an earlier version of `name` from the history.
    pub fn load_version(&self, name: &str, version: u64) -> Result<Skill> {
        validate_name(name)?;
        let _lock = self.lock(false)?;
        let not_found = |kept: Vec<u64>| SkillError::VersionNotFound {
            name: name.to_owned(),
            version,
            kept,
        };
        let Some(hdir) = self.history_dir(name, false)? else {
            return Err(not_found(Vec::new()));
        };
        let entries = self.scan_history(hdir.as_fd())?;
        match entries.iter().find(|e| e.version == version && e.has_py) {
            Some(e) => self.read_history_entry(hdir.as_fd(), name, e),
            None => Err(not_found(
                entries
                    .iter()
                    .filter(|e| e.has_py)
                    .map(|e| e.version)
                    .collect(),
            )),
        }
    }

    /// Copies the skills in `shipped` (`NAME.py`, optionally `NAME.json` with a `description`)
    /// into the store for every name that has never existed there (no `NAME.py`, no history), so
    /// a user's skill, or a starter skill the user deleted, is never overwritten or restored.
    /// Files that are not valid skills are skipped and logged. Returns how many were added.
    pub fn seed_from(&self, shipped: &Path) -> Result<usize> {
        let entries = match std::fs::read_dir(shipped) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tracing::warn!(dir = %shipped.display(), "no shipped skills directory; nothing to seed");
                return Ok(0);
            }
            Err(e) => {
                return Err(SkillError::io(
                    format!("cannot read the shipped skills in {}", shipped.display()),
                    e,
                ));
            }
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| {
                let file = e.file_name().into_string().ok()?;
                is_name_file(&file, ".py").map(str::to_owned)
            })
            .collect();
        names.sort();

        let _lock = self.lock(true)?;
        let mut count = self.scan_names()?.len();
        let mut added = 0;
        for name in names {
            match self.name_ever_existed(&name) {
                Ok(false) => {}
                Ok(true) => continue,
                Err(e) => {
                    tracing::warn!(skill = %name, error = %e, "not seeding skill");
                    continue;
                }
            }
            if count >= self.limits.max_skills {
                tracing::warn!(
                    limit = self.limits.max_skills,
                    "skills store full; seeding stopped"
                );
                break;
            }
            let (code, description) = match self.read_shipped(shipped, &name) {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(skill = %name, error = %e, "skipping shipped skill");
                    continue;
                }
            };
            let at = now();
            let meta = SkillMeta {
                name: name.clone(),
                description,
                created: at,
                updated: at,
                sha256: sha256_hex(code.as_bytes()),
                version: 1,
                size: code.len() as u64,
            };
            self.write_skill(&meta, &code)?;
            count += 1;
            added += 1;
        }
        Ok(added)
    }

    // ---- reading ---------------------------------------------------------------------------

    fn check_description<'a>(&self, description: &'a str) -> Result<&'a str> {
        let d = description.trim();
        if d.len() > self.limits.max_description_bytes {
            return Err(SkillError::TooLarge {
                what: "The description".into(),
                size: d.len() as u64,
                limit: self.limits.max_description_bytes as u64,
            });
        }
        Ok(d)
    }

    /// Opens `file` in `dir` without following a link; `None` when it does not exist. Anything
    /// but a regular file is refused.
    fn open_regular(
        &self,
        dir: BorrowedFd<'_>,
        file: &str,
        path: &str,
    ) -> Result<Option<(std::fs::File, rfs::Stat)>> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        match rfs::openat(dir, file, flags, Mode::empty()) {
            Ok(fd) => {
                let st = rfs::fstat(&fd)
                    .map_err(|e| SkillError::io(format!("cannot stat {path}"), e))?;
                let ft = FileType::from_raw_mode(st.st_mode);
                if ft != FileType::RegularFile {
                    return Err(SkillError::NotRegular {
                        path: path.to_owned(),
                        kind: kind_name(ft),
                        expected: "a regular file",
                    });
                }
                Ok(Some((std::fs::File::from(fd), st)))
            }
            Err(Errno::NOENT) => Ok(None),
            Err(Errno::LOOP) => Err(SkillError::Symlink {
                path: path.to_owned(),
            }),
            Err(Errno::NXIO) => Err(SkillError::NotRegular {
                path: path.to_owned(),
                kind: "a socket or device",
                expected: "a regular file",
            }),
            Err(e) => Err(SkillError::io(format!("cannot open {path}"), e)),
        }
    }

    /// Reads a code file: bounded, UTF-8, no NUL. `None` when it does not exist.
    fn read_code(
        &self,
        dir: BorrowedFd<'_>,
        file: &str,
        path: &str,
    ) -> Result<Option<(String, DateTime<Utc>)>> {
        let Some((f, st)) = self.open_regular(dir, file, path)? else {
            return Ok(None);
        };
        let limit = self.limits.max_code_bytes;
        let what = format!("The stored file {path:?}");
        let buf = read_bounded(f, limit, path)?;
        if buf.len() as u64 > limit {
            return Err(SkillError::TooLarge {
                what,
                size: (st.st_size as u64).max(buf.len() as u64),
                limit,
            });
        }
        let code = check_code(&buf, limit, &what)?.to_owned();
        Ok(Some((code, mtime_of(&st))))
    }

    fn read_meta(&self, dir: BorrowedFd<'_>, file: &str, path: &str) -> Result<MetaRead> {
        let Some((f, _)) = self.open_regular(dir, file, path)? else {
            return Ok(MetaRead::Missing);
        };
        let buf = read_bounded(f, MAX_META_BYTES, path)?;
        if buf.len() as u64 > MAX_META_BYTES {
            return Ok(MetaRead::Malformed(format!(
                "it is larger than {MAX_META_BYTES} bytes"
            )));
        }
        Ok(match serde_json::from_slice::<RawMeta>(&buf) {
            Ok(raw) => MetaRead::Found(raw),
            Err(e) => MetaRead::Malformed(format!("it is not a valid metadata object ({e})")),
        })
    }

    /// The current version of `name`, or `None` when `NAME.py` does not exist. Malformed
    /// metadata is replaced by metadata derived from the code file and reported in
    /// `meta_problem`.
    fn read_current(&self, name: &str) -> Result<Option<Current>> {
        let py = format!("{name}.py");
        let Some((code, mtime)) = self.read_code(self.root.as_fd(), &py, &py)? else {
            return Ok(None);
        };
        let json = format!("{name}.json");
        let (raw, mut meta_problem) = match self.read_meta(self.root.as_fd(), &json, &json)? {
            MetaRead::Missing => (RawMeta::default(), None),
            MetaRead::Malformed(reason) => (RawMeta::default(), Some(reason)),
            MetaRead::Found(raw) => (raw, None),
        };
        let meta = match complete_meta(name, &raw, Some(&code), mtime) {
            Ok(meta) => meta,
            Err(reason) => {
                meta_problem = Some(reason);
                complete_meta(name, &RawMeta::default(), Some(&code), mtime)
                    .expect("metadata derived from the file is complete")
            }
        };
        Ok(Some(Current {
            meta,
            code,
            meta_problem,
        }))
    }

    /// Metadata of `name` for a listing: from `NAME.json` alone when it is complete, otherwise
    /// completed from the code.
    fn read_listed(&self, name: &str) -> Result<Option<SkillMeta>> {
        let json = format!("{name}.json");
        let raw = match self.read_meta(self.root.as_fd(), &json, &json)? {
            MetaRead::Missing => RawMeta::default(),
            MetaRead::Malformed(reason) => {
                return Err(SkillError::Corrupt {
                    name: name.to_owned(),
                    path: json,
                    reason,
                });
            }
            MetaRead::Found(raw) => raw,
        };
        let py = format!("{name}.py");
        let complete = raw.sha256.is_some()
            && raw.size.is_some()
            && raw.created.is_some()
            && raw.updated.is_some();
        let result = if complete {
            let st = match rfs::statat(&self.root, py.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(Errno::NOENT) => return Ok(None),
                Err(e) => return Err(SkillError::io(format!("cannot stat {py}"), e)),
            };
            complete_meta(name, &raw, None, mtime_of(&st))
        } else {
            let Some((code, mtime)) = self.read_code(self.root.as_fd(), &py, &py)? else {
                return Ok(None);
            };
            complete_meta(name, &raw, Some(&code), mtime)
        };
        result.map(Some).map_err(|reason| SkillError::Corrupt {
            name: name.to_owned(),
            path: json,
            reason,
        })
    }

    fn read_history_entry(&self, hdir: BorrowedFd<'_>, name: &str, e: &HistEntry) -> Result<Skill> {
        let py = format!("{}.py", e.stem);
        let py_path = format!("{HISTORY_DIR}/{name}/{py}");
        let Some((code, mtime)) = self.read_code(hdir, &py, &py_path)? else {
            return Err(SkillError::io(
                format!("cannot read {py_path}"),
                std::io::Error::from(std::io::ErrorKind::NotFound),
            ));
        };
        let json = format!("{}.json", e.stem);
        let json_path = format!("{HISTORY_DIR}/{name}/{json}");
        let raw = if e.has_json {
            match self.read_meta(hdir, &json, &json_path)? {
                MetaRead::Found(raw) => raw,
                MetaRead::Missing => RawMeta::default(),
                MetaRead::Malformed(reason) => {
                    return Err(SkillError::Corrupt {
                        name: name.to_owned(),
                        path: json_path,
                        reason,
                    });
                }
            }
        } else {
            RawMeta::default()
        };
        let mut meta = complete_meta(name, &raw, Some(&code), mtime).map_err(|reason| {
            SkillError::Corrupt {
                name: name.to_owned(),
                path: json_path,
                reason,
            }
        })?;
        meta.version = e.version; // the file name is authoritative in the history
        Ok(Skill { meta, code })
    }

    fn read_shipped(&self, shipped: &Path, name: &str) -> Result<(String, String)> {
        let py = shipped.join(format!("{name}.py"));
        let file = std::fs::File::open(&py)
            .map_err(|e| SkillError::io(format!("cannot open {}", py.display()), e))?;
        let md = file
            .metadata()
            .map_err(|e| SkillError::io(format!("cannot stat {}", py.display()), e))?;
        let shown_path = py.display().to_string();
        if !md.is_file() {
            return Err(SkillError::NotRegular {
                path: shown_path,
                kind: if md.is_dir() {
                    "a directory"
                } else {
                    "a special file"
                },
                expected: "a regular file",
            });
        }
        let buf = read_bounded(file, self.limits.max_code_bytes, &shown_path)?;
        let what = format!("The shipped skill {shown_path}");
        if buf.len() as u64 > self.limits.max_code_bytes {
            return Err(SkillError::TooLarge {
                what,
                size: md.len(),
                limit: self.limits.max_code_bytes,
            });
        }
        let code = check_code(&buf, self.limits.max_code_bytes, &what)?.to_owned();
        let json = shipped.join(format!("{name}.json"));
        let description = match std::fs::read(&json) {
            Ok(bytes) if bytes.len() as u64 <= MAX_META_BYTES => {
                match serde_json::from_slice::<RawMeta>(&bytes) {
                    Ok(raw) => raw.description.unwrap_or_default(),
                    Err(e) => {
                        tracing::warn!(file = %json.display(), error = %e, "ignoring malformed shipped metadata");
                        String::new()
                    }
                }
            }
            Ok(_) => {
                tracing::warn!(file = %json.display(), "ignoring over-long shipped metadata");
                String::new()
            }
            Err(_) => String::new(),
        };
        let description = match self.check_description(&description) {
            Ok(d) => d.to_owned(),
            Err(e) => {
                tracing::warn!(skill = name, error = %e, "ignoring shipped description");
                String::new()
            }
        };
        Ok((code, description))
    }

    /// `(name, type)` of every `NAME.py` entry whose stem is a valid name, not following links.
    fn scan_entries(&self) -> Result<Vec<(String, FileType)>> {
        let mut out = Vec::new();
        let dir = Dir::read_from(&self.root)
            .map_err(|e| SkillError::io("cannot read the skills directory", e))?;
        for entry in dir {
            let entry = entry.map_err(|e| SkillError::io("cannot read the skills directory", e))?;
            let Some(file) = entry.file_name().to_str().ok() else {
                continue;
            };
            let Some(name) = is_name_file(file, ".py") else {
                continue;
            };
            let mut ft = entry.file_type();
            if ft == FileType::Unknown {
                match rfs::statat(&self.root, file, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => ft = FileType::from_raw_mode(st.st_mode),
                    Err(_) => continue,
                }
            }
            out.push((name.to_owned(), ft));
        }
        Ok(out)
    }

    /// Names of the skills that exist (regular `NAME.py`), sorted.
    fn scan_names(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = self
            .scan_entries()?
            .into_iter()
            .filter(|(_, ft)| *ft == FileType::RegularFile)
            .map(|(n, _)| n)
            .collect();
        names.sort();
        Ok(names)
    }

    fn not_found(&self, name: &str) -> SkillError {
        let names = self.scan_names().unwrap_or_default();
        let total = names.len();
        let existing = if total <= SUGGESTIONS {
            names
        } else {
            let lower = name.to_ascii_lowercase();
            let mut scored: Vec<(usize, String)> = names
                .into_iter()
                .map(|n| (levenshtein(&lower, &n.to_ascii_lowercase()), n))
                .collect();
            scored.sort();
            scored
                .into_iter()
                .take(SUGGESTIONS)
                .map(|(_, n)| n)
                .collect()
        };
        SkillError::NotFound {
            name: name.to_owned(),
            existing,
            total,
        }
    }

    fn py_exists(&self, name: &str) -> Result<bool> {
        let py = format!("{name}.py");
        match rfs::statat(&self.root, py.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(_) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(SkillError::io(format!("cannot stat {py}"), e)),
        }
    }

    /// Whether `NAME.py` (of any kind) or `.history/NAME` exists.
    fn name_ever_existed(&self, name: &str) -> Result<bool> {
        if self.py_exists(name)? {
            return Ok(true);
        }
        let Some(h) = self.open_dir(self.root.as_fd(), HISTORY_DIR, HISTORY_DIR, false)? else {
            return Ok(false);
        };
        match rfs::statat(&h, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(_) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(SkillError::io(
                format!("cannot stat {HISTORY_DIR}/{name}"),
                e,
            )),
        }
    }

    // ---- directories and history -------------------------------------------------------------

    /// Opens directory `file` in `dir` without following a link, creating it (0755) when
    /// `create`; `None` when it does not exist and `create` is false.
    fn open_dir(
        &self,
        dir: BorrowedFd<'_>,
        file: &str,
        path: &str,
        create: bool,
    ) -> Result<Option<OwnedFd>> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        for _ in 0..2 {
            match rfs::openat(dir, file, flags, Mode::empty()) {
                Ok(fd) => return Ok(Some(fd)),
                Err(Errno::NOENT) if create => {
                    match rfs::mkdirat(dir, file, Mode::from_raw_mode(DIR_MODE)) {
                        Ok(()) => {
                            let fd = rfs::openat(dir, file, flags, Mode::empty())
                                .map_err(|e| SkillError::io(format!("cannot open {path}"), e))?;
                            rfs::fchmod(&fd, Mode::from_raw_mode(DIR_MODE))
                                .map_err(|e| SkillError::io(format!("cannot chmod {path}"), e))?;
                            self.sync_dir(dir, path)?;
                            return Ok(Some(fd));
                        }
                        Err(Errno::EXIST) => continue, // raced with another creator
                        Err(e) => return Err(SkillError::io(format!("cannot create {path}"), e)),
                    }
                }
                Err(Errno::NOENT) => return Ok(None),
                Err(Errno::NOTDIR | Errno::LOOP) => {
                    let ft = rfs::statat(dir, file, AtFlags::SYMLINK_NOFOLLOW)
                        .map(|st| FileType::from_raw_mode(st.st_mode))
                        .unwrap_or(FileType::Unknown);
                    return Err(if ft == FileType::Symlink {
                        SkillError::Symlink {
                            path: path.to_owned(),
                        }
                    } else {
                        SkillError::NotRegular {
                            path: path.to_owned(),
                            kind: kind_name(ft),
                            expected: "a directory",
                        }
                    });
                }
                Err(e) => return Err(SkillError::io(format!("cannot open {path}"), e)),
            }
        }
        Err(SkillError::io(format!("cannot open {path}"), Errno::NOENT))
    }

    /// `.history/NAME`, optionally created.
    fn history_dir(&self, name: &str, create: bool) -> Result<Option<OwnedFd>> {
        let Some(h) = self.open_dir(self.root.as_fd(), HISTORY_DIR, HISTORY_DIR, create)? else {
            return Ok(None);
        };
        self.open_dir(h.as_fd(), name, &format!("{HISTORY_DIR}/{name}"), create)
    }

    /// The versions in a history directory, oldest first. Removes stale temp files.
    fn scan_history(&self, hdir: BorrowedFd<'_>) -> Result<Vec<HistEntry>> {
        self.remove_stale_temps(hdir);
        let mut by_stem: std::collections::BTreeMap<String, HistEntry> = Default::default();
        let dir = Dir::read_from(hdir)
            .map_err(|e| SkillError::io("cannot read a history directory", e))?;
        for entry in dir {
            let entry = entry.map_err(|e| SkillError::io("cannot read a history directory", e))?;
            let Ok(file) = entry.file_name().to_str() else {
                continue;
            };
            let Some((stem, version, is_py)) = parse_history_stem(file) else {
                continue;
            };
            let e = by_stem.entry(stem.to_owned()).or_insert(HistEntry {
                stem: stem.to_owned(),
                version,
                has_py: false,
                has_json: false,
            });
            if is_py {
                e.has_py = true;
            } else {
                e.has_json = true;
            }
        }
        let mut out: Vec<HistEntry> = by_stem.into_values().collect();
        out.sort_by(|a, b| (a.version, &a.stem).cmp(&(b.version, &b.stem)));
        Ok(out)
    }

    fn max_history_version(&self, name: &str) -> Result<u64> {
        match self.history_dir(name, false)? {
            None => Ok(0),
            Some(h) => Ok(self
                .scan_history(h.as_fd())?
                .iter()
                .map(|e| e.version)
                .max()
                .unwrap_or(0)),
        }
    }

    /// Writes version `version` of `name` (code and metadata) into its history directory.
    fn archive(
        &self,
        hdir: BorrowedFd<'_>,
        name: &str,
        meta: &SkillMeta,
        version: u64,
        code: &str,
    ) -> Result<()> {
        let meta = SkillMeta {
            version,
            ..meta.clone()
        };
        let stem = history_stem(version, meta.updated);
        let base = format!("{HISTORY_DIR}/{name}/{stem}");
        self.write_atomic(
            hdir,
            &format!("{stem}.py"),
            code.as_bytes(),
            &format!("{base}.py"),
        )?;
        let json = serde_json::to_vec_pretty(&meta).expect("metadata serialises");
        self.write_atomic(
            hdir,
            &format!("{stem}.json"),
            &json,
            &format!("{base}.json"),
        )?;
        self.sync_dir(hdir, &format!("{HISTORY_DIR}/{name}"))
    }

    /// Removes the oldest versions beyond `max_versions_kept`.
    fn prune_history(&self, hdir: BorrowedFd<'_>, name: &str) -> Result<()> {
        let entries = self.scan_history(hdir)?;
        let keep = self.limits.max_versions_kept;
        if entries.len() <= keep {
            return Ok(());
        }
        for e in &entries[..entries.len() - keep] {
            for file in [format!("{}.py", e.stem), format!("{}.json", e.stem)] {
                match rfs::unlinkat(hdir, file.as_str(), AtFlags::empty()) {
                    Ok(()) | Err(Errno::NOENT) => {}
                    Err(err) => {
                        return Err(SkillError::io(
                            format!("cannot prune {HISTORY_DIR}/{name}/{file}"),
                            err,
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Keeps the histories of at most `max_skills` deleted skills, removing the oldest.
    fn prune_deleted_histories(&self) -> Result<()> {
        let Some(h) = self.open_dir(self.root.as_fd(), HISTORY_DIR, HISTORY_DIR, false)? else {
            return Ok(());
        };
        let mut deleted = Vec::new();
        let dir = Dir::read_from(&h).map_err(|e| SkillError::io("cannot read .history", e))?;
        for entry in dir {
            let entry = entry.map_err(|e| SkillError::io("cannot read .history", e))?;
            let Ok(name) = entry.file_name().to_str() else {
                continue;
            };
            if validate_name(name).is_err() || self.py_exists(name)? {
                continue;
            }
            if let Ok(st) = rfs::statat(&h, name, AtFlags::SYMLINK_NOFOLLOW)
                && FileType::from_raw_mode(st.st_mode) == FileType::Directory
            {
                deleted.push((mtime_of(&st), name.to_owned()));
            }
        }
        if deleted.len() <= self.limits.max_skills {
            return Ok(());
        }
        deleted.sort_by_key(|(t, n)| (Reverse(*t), n.clone()));
        for (_, name) in deleted.drain(self.limits.max_skills..) {
            remove_dir_shallow(h.as_fd(), &name);
        }
        Ok(())
    }

    // ---- writing ---------------------------------------------------------------------------

    /// Writes `NAME.py` then `NAME.json`, each atomically, and syncs the directory.
    fn write_skill(&self, meta: &SkillMeta, code: &str) -> Result<()> {
        let name = &meta.name;
        let py = format!("{name}.py");
        let json = format!("{name}.json");
        // Refuse rather than replace a link or a directory planted at either name.
        for file in [&py, &json] {
            match rfs::statat(&self.root, file.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                    FileType::RegularFile => {}
                    FileType::Symlink => {
                        return Err(SkillError::Symlink { path: file.clone() });
                    }
                    ft => {
                        return Err(SkillError::NotRegular {
                            path: file.clone(),
                            kind: kind_name(ft),
                            expected: "a regular file",
                        });
                    }
                },
                Err(Errno::NOENT) => {}
                Err(e) => return Err(SkillError::io(format!("cannot stat {file}"), e)),
            }
        }
        self.write_atomic(self.root.as_fd(), &py, code.as_bytes(), &py)?;
        let bytes = serde_json::to_vec_pretty(meta).expect("metadata serialises");
        self.write_atomic(self.root.as_fd(), &json, &bytes, &json)?;
        self.sync_dir(self.root.as_fd(), "the skills directory")
    }

    /// Writes `data` to `file` in `dir` through a fresh `O_EXCL` temp file, `fsync` and
    /// `renameat`. The caller syncs the directory.
    fn write_atomic(&self, dir: BorrowedFd<'_>, file: &str, data: &[u8], path: &str) -> Result<()> {
        let (tmp, fd) = create_temp(dir, path)?;
        let written = (|| -> std::io::Result<()> {
            rfs::fchmod(&fd, Mode::from_raw_mode(FILE_MODE))?;
            let mut f = std::fs::File::from(fd);
            f.write_all(data)?;
            f.sync_all()?;
            rfs::renameat(dir, tmp.as_str(), dir, file)?;
            Ok(())
        })();
        written.map_err(|e| {
            let _ = rfs::unlinkat(dir, tmp.as_str(), AtFlags::empty());
            SkillError::io(format!("cannot write {path}"), e)
        })
    }

    fn sync_dir(&self, dir: BorrowedFd<'_>, path: &str) -> Result<()> {
        match rfs::fsync(dir) {
            Ok(()) | Err(Errno::INVAL) => Ok(()), // some filesystems cannot sync directories
            Err(e) => Err(SkillError::io(format!("cannot sync {path}"), e)),
        }
    }

    /// Removes temp files left by a crash (older than an hour, so a writer in another process is
    /// never disturbed).
    fn remove_stale_temps(&self, dir: BorrowedFd<'_>) {
        let Ok(entries) = Dir::read_from(dir) else {
            return;
        };
        let cutoff = Utc::now().timestamp() - STALE_TEMP_SECS;
        for entry in entries.flatten() {
            let Ok(file) = entry.file_name().to_str() else {
                continue;
            };
            if !file.starts_with(TEMP_PREFIX) {
                continue;
            }
            if let Ok(st) = rfs::statat(dir, file, AtFlags::SYMLINK_NOFOLLOW)
                && FileType::from_raw_mode(st.st_mode) != FileType::Directory
                && mtime_of(&st).timestamp() < cutoff
            {
                let _ = rfs::unlinkat(dir, file, AtFlags::empty());
            }
        }
    }

    // ---- locking ---------------------------------------------------------------------------

    fn open_lock_file(&self, write: bool) -> Result<OwnedFd> {
        let flags = if write {
            OFlags::RDWR | OFlags::CREATE
        } else {
            OFlags::RDONLY
        } | OFlags::NOFOLLOW
            | OFlags::CLOEXEC;
        match rfs::openat(&self.root, LOCK_FILE, flags, Mode::from_raw_mode(FILE_MODE)) {
            Ok(fd) => Ok(fd),
            Err(Errno::LOOP) => Err(SkillError::Symlink {
                path: LOCK_FILE.into(),
            }),
            Err(e) => Err(SkillError::io(format!("cannot open {LOCK_FILE}"), e)),
        }
    }

    /// Takes the store lock: exclusive for mutations, shared for reads. A reader of a store it
    /// cannot write (no lock file, read-only) proceeds without one.
    fn lock(&self, exclusive: bool) -> Result<Option<OwnedFd>> {
        let fd = match self.open_lock_file(true) {
            Ok(fd) => fd,
            Err(e @ SkillError::Symlink { .. }) => return Err(e),
            Err(e) if exclusive => return Err(e),
            Err(_) => match self.open_lock_file(false) {
                Ok(fd) => fd,
                Err(e @ SkillError::Symlink { .. }) => return Err(e),
                Err(_) => return Ok(None),
            },
        };
        let op = if exclusive {
            FlockOperation::LockExclusive
        } else {
            FlockOperation::LockShared
        };
        loop {
            match rfs::flock(&fd, op) {
                Ok(()) => return Ok(Some(fd)),
                Err(Errno::INTR) => continue,
                Err(e) => return Err(SkillError::io("cannot lock the skills directory", e)),
            }
        }
    }
}

/// Checks code bytes: within `limit`, UTF-8, no NUL, not blank.
fn check_code<'a>(bytes: &'a [u8], limit: u64, what: &str) -> Result<&'a str> {
    if bytes.len() as u64 > limit {
        return Err(SkillError::TooLarge {
            what: what.to_owned(),
            size: bytes.len() as u64,
            limit,
        });
    }
    let text = std::str::from_utf8(bytes).map_err(|e| SkillError::NotText {
        what: what.to_owned(),
        reason: format!("it is not valid UTF-8 (at byte {})", e.valid_up_to()),
    })?;
    if let Some(at) = text.find('\0') {
        return Err(SkillError::NotText {
            what: what.to_owned(),
            reason: format!("it contains a NUL byte (at byte {at})"),
        });
    }
    if text.trim().is_empty() {
        return Err(SkillError::NotText {
            what: what.to_owned(),
            reason: "it is empty".into(),
        });
    }
    Ok(text)
}

/// Reads at most `limit + 1` bytes, so a caller can tell "over the limit" without reading it all.
fn read_bounded(f: std::fs::File, limit: u64, path: &str) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    f.take(limit.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| SkillError::io(format!("cannot read {path}"), e))?;
    Ok(buf)
}

fn create_temp(dir: BorrowedFd<'_>, path: &str) -> Result<(String, OwnedFd)> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    for _ in 0..16 {
        let tmp = format!("{TEMP_PREFIX}{:016x}", random_u64());
        match rfs::openat(dir, tmp.as_str(), flags, Mode::from_raw_mode(FILE_MODE)) {
            Ok(fd) => return Ok((tmp, fd)),
            Err(Errno::EXIST) => continue,
            Err(e) => {
                return Err(SkillError::io(
                    format!("cannot create a temp file for {path}"),
                    e,
                ));
            }
        }
    }
    Err(SkillError::io(
        format!("cannot create a temp file for {path}"),
        Errno::EXIST,
    ))
}

/// Removes directory `name` in `parent` and the non-directory entries in it, following nothing.
fn remove_dir_shallow(parent: BorrowedFd<'_>, name: &str) {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(fd) = rfs::openat(parent, name, flags, Mode::empty()) else {
        return;
    };
    if let Ok(entries) = Dir::read_from(&fd) {
        for entry in entries.flatten() {
            let file: &CStr = entry.file_name();
            if file.to_bytes() == b"." || file.to_bytes() == b".." {
                continue;
            }
            if entry.file_type() != FileType::Directory {
                let _ = rfs::unlinkat(&fd, file, AtFlags::empty());
            }
        }
    }
    if let Err(e) = rfs::unlinkat(parent, name, AtFlags::REMOVEDIR) {
        tracing::warn!(skill = name, error = %e, "cannot remove the history of a deleted skill");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::os::unix::fs::symlink;
    use std::sync::Arc;

    fn store(dir: &Path) -> SkillStore {
        SkillStore::open(dir, SkillLimits::default()).unwrap()
    }

    fn store_with(dir: &Path, f: impl FnOnce(&mut SkillLimits)) -> SkillStore {
        let mut limits = SkillLimits::default();
        f(&mut limits);
        SkillStore::open(dir, limits).unwrap()
    }

    fn files_in(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn store_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<SkillStore>();
        check::<SkillError>();
    }

    // ---- names -----------------------------------------------------------------------------

    #[test]
    fn name_allowlist_table() {
        let long_ok = "a".repeat(64);
        let accepted = [
            "a",
            "_",
            "_private",
            "filter_high_risk",
            "A1",
            "CamelCase",
            "x_2_y",
            "match",
            "case",
            "type",
            long_ok.as_str(),
        ];
        for name in accepted {
            assert!(validate_name(name).is_ok(), "{name:?} should be accepted");
        }
        let long = "a".repeat(65);
        let very_long = "x".repeat(300);
        let refused: &[(&str, &str)] = &[
            ("", "empty"),
            ("../../x", "looks like a path"),
            ("..", "looks like a path"),
            (".", "'.'"),
            (".hidden", "'.'"),
            ("%2e%2e", "'%'"),
            ("%2e%2e%2fetc", "'%'"),
            ("a/b", "looks like a path"),
            ("/etc/passwd", "looks like a path"),
            ("a\\b", "looks like a path"),
            ("a.py", "'.'"),
            ("a b", "' '"),
            ("a-b", "'-'"),
            ("a\0b", "U+0000"),
            ("a\nb", "U+000A"),
            ("1abc", "digit"),
            ("9", "digit"),
            ("__init__", "\"__\""),
            ("__x", "\"__\""),
            ("class", "keyword"),
            ("import", "keyword"),
            ("None", "keyword"),
            ("lambda", "keyword"),
            ("await", "keyword"),
            (long.as_str(), "65 characters"),
            (very_long.as_str(), "300 characters"),
            ("filt\u{0435}r", "U+0435"), // Cyrillic е
            ("\u{0430}dmin", "U+0430"),  // Cyrillic а
            ("\u{FF41}", "U+FF41"),      // fullwidth a
            ("caf\u{e9}", "non-ASCII"),
            ("a\u{200b}", "U+200B"),      // zero-width space
            ("x\u{2024}py", "non-ASCII"), // one dot leader
        ];
        for (name, why) in refused {
            let err = validate_name(name).expect_err(name);
            let msg = err.to_string();
            assert!(matches!(err, SkillError::InvalidName { .. }));
            assert!(msg.contains(why), "{name:?}: {msg}");
            assert!(msg.starts_with("Invalid skill name"), "{msg}");
            assert!(msg.contains("alphanumeric and underscores only"), "{msg}");
            assert!(msg.contains("from skills import NAME"), "{msg}");
            assert!(
                msg.len() < 600,
                "message stays short even for long names: {msg}"
            );
        }
    }

    #[test]
    fn every_operation_validates_the_name_first() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        for bad in ["../x", "a/b", "..", "class"] {
            assert!(matches!(
                s.save(bad, "x = 1\n", ""),
                Err(SkillError::InvalidName { .. })
            ));
            assert!(matches!(s.load(bad), Err(SkillError::InvalidName { .. })));
            assert!(matches!(s.delete(bad), Err(SkillError::InvalidName { .. })));
            assert!(matches!(
                s.history(bad),
                Err(SkillError::InvalidName { .. })
            ));
            assert!(matches!(
                s.load_version(bad, 1),
                Err(SkillError::InvalidName { .. })
            ));
        }
        assert_eq!(files_in(tmp.path()), vec![".lock"]);
        assert!(!tmp.path().parent().unwrap().join("x.py").exists());
    }

    fn bad_char() -> impl Strategy<Value = char> {
        prop_oneof![
            Just('/'),
            Just('.'),
            Just('\0'),
            any::<char>().prop_filter("non-ASCII", |c| !c.is_ascii()),
        ]
    }

    proptest! {
        #[test]
        fn validate_never_accepts_separators_dots_nul_or_non_ascii(
            s in "[A-Za-z0-9_]{0,40}",
            c in bad_char(),
            at in any::<prop::sample::Index>(),
        ) {
            let mut chars: Vec<char> = s.chars().collect();
            let i = at.index(chars.len() + 1);
            chars.insert(i, c);
            let name: String = chars.into_iter().collect();
            prop_assert!(validate_name(&name).is_err());
        }

        #[test]
        fn validate_accepts_exactly_the_allowlist(name in "\\PC{0,70}|[A-Za-z_][A-Za-z0-9_]{0,70}") {
            let by_rule = !name.is_empty()
                && name.len() <= 64
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && !name.as_bytes()[0].is_ascii_digit()
                && !name.starts_with("__")
                && !PYTHON_KEYWORDS.contains(&name.as_str());
            prop_assert_eq!(validate_name(&name).is_ok(), by_rule);
        }
    }

    // ---- round trip and metadata -------------------------------------------------------------

    #[test]
    fn save_load_list_delete_round_trip() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        assert!(s.list().unwrap().is_empty());
        let meta = s
            .save(
                "double",
                "def double(x):\n    return 2 * x\n",
                "  doubles  ",
            )
            .unwrap();
        assert_eq!(meta.name, "double");
        assert_eq!(meta.description, "doubles");
        s.save("alpha", "x = 1\n", "").unwrap();

        let skill = s.load("double").unwrap();
        assert_eq!(skill.code, "def double(x):\n    return 2 * x\n");
        assert_eq!(skill.meta, meta);
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("double.py")).unwrap(),
            skill.code
        );

        let names: Vec<String> = s.list().unwrap().into_iter().map(|m| m.name).collect();
        assert_eq!(names, ["alpha", "double"]);

        s.delete("double").unwrap();
        let err = s.load("double").unwrap_err();
        assert!(matches!(err, SkillError::NotFound { .. }));
        assert!(
            err.to_string().starts_with("Skill not found: double."),
            "{err}"
        );
        assert!(err.to_string().contains("alpha"), "{err}");
        let names: Vec<String> = s.list().unwrap().into_iter().map(|m| m.name).collect();
        assert_eq!(names, ["alpha"]);
        assert!(matches!(
            s.delete("double"),
            Err(SkillError::NotFound { .. })
        ));
        // The deleted version is in the history.
        let h = s.history("double").unwrap();
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].version, 1);
        assert_eq!(s.load_version("double", 1).unwrap().code, skill.code);
        assert!(!tmp.path().join("double.py").exists());
        assert!(!tmp.path().join("double.json").exists());
    }

    #[test]
    fn metadata_fields_and_sha256() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let before = now();
        let meta = s.save("one", "x = 1\n", "sets x").unwrap();
        assert_eq!(
            meta.sha256,
            "9e26bf369911c45c243c684147b23fc9e1dcfcf257d299a1c632016a6fcd33f4"
        );
        assert_eq!(meta.size, 6);
        assert_eq!(meta.version, 1);
        assert_eq!(meta.created, meta.updated);
        assert!(meta.created >= before && meta.created <= now());

        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(tmp.path().join("one.json")).unwrap()).unwrap();
        let obj = json.as_object().unwrap();
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "created",
                "description",
                "name",
                "sha256",
                "size",
                "updated",
                "version"
            ]
        );
        assert_eq!(obj["name"], "one");
        assert_eq!(obj["description"], "sets x");
        assert_eq!(obj["sha256"], meta.sha256);
        let created = obj["created"].as_str().unwrap();
        assert!(created.ends_with('Z'), "{created}");
        assert_eq!(DateTime::parse_from_rfc3339(created).unwrap(), meta.created);

        let mode = |p: &str| {
            std::fs::metadata(tmp.path().join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("one.py"), 0o644);
        assert_eq!(mode("one.json"), 0o644);
        assert_eq!(s.list().unwrap(), vec![meta]);
    }

    #[test]
    fn open_creates_the_directory_0755() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b/skills");
        let s = store(&dir);
        assert_eq!(s.dir(), dir);
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755);
        s.save("x", "x = 1\n", "").unwrap();
        s.save("x", "x = 2\n", "").unwrap();
        for d in [".history", ".history/x"] {
            let mode = std::fs::metadata(dir.join(d)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o755, "{d}");
        }
    }

    #[test]
    fn created_kept_across_overwrite_and_versions_grow() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let v1 = s.save("w", "x = 1\n", "first").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let v2 = s.save("w", "x = 2\n", "second").unwrap();
        assert_eq!(v2.created, v1.created);
        assert!(v2.updated > v1.updated);
        assert_eq!(v2.version, 2);
        assert_eq!(s.load("w").unwrap().meta, v2);
        // Re-saving identical code and description is a no-op.
        let again = s.save("w", "x = 2\n", " second ").unwrap();
        assert_eq!(again, v2);
        assert_eq!(s.history("w").unwrap().len(), 1);
        // A description change alone is a new version.
        let v3 = s.save("w", "x = 2\n", "third").unwrap();
        assert_eq!(v3.version, 3);
        assert_eq!(v3.created, v1.created);
        // Delete and save again: a new skill (new created), versions keep growing.
        s.delete("w").unwrap();
        let v4 = s.save("w", "x = 4\n", "").unwrap();
        assert_eq!(v4.version, 4);
        assert!(v4.created > v1.created);
        let versions: Vec<u64> = s.history("w").unwrap().iter().map(|m| m.version).collect();
        assert_eq!(versions, [1, 2, 3]);
    }

    #[test]
    fn history_kept_and_pruned() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store_with(tmp.path(), |l| l.max_versions_kept = 3);
        for i in 1..=6 {
            s.save("h", format!("x = {i}\n"), &format!("v{i}")).unwrap();
        }
        let h = s.history("h").unwrap();
        let versions: Vec<u64> = h.iter().map(|m| m.version).collect();
        assert_eq!(versions, [3, 4, 5]);
        assert_eq!(h[0].description, "v3");
        assert_eq!(h[0].sha256, sha256_hex(b"x = 3\n"));
        assert_eq!(s.load("h").unwrap().meta.version, 6);
        assert_eq!(s.load_version("h", 4).unwrap().code, "x = 4\n");
        let err = s.load_version("h", 1).unwrap_err();
        assert!(matches!(err, SkillError::VersionNotFound { .. }), "{err}");
        assert!(err.to_string().contains("Versions kept: 3, 4, 5."), "{err}");
        let files = files_in(&tmp.path().join(".history/h"));
        assert_eq!(files.len(), 6, "{files:?}");
        assert!(
            files[0].starts_with("000003-") && files[0].ends_with(".json"),
            "{files:?}"
        );
        // No history at all when none is kept.
        let s0 = store_with(&tmp.path().join("none"), |l| l.max_versions_kept = 0);
        s0.save("h", "x = 1\n", "").unwrap();
        s0.save("h", "x = 2\n", "").unwrap();
        assert!(s0.history("h").unwrap().is_empty());
        assert_eq!(s0.load("h").unwrap().meta.version, 2);
    }

    // ---- links and special files ---------------------------------------------------------------

    struct Planted {
        _tmp: tempfile::TempDir,
        store_dir: PathBuf,
        outside: PathBuf,
    }

    fn planted() -> Planted {
        let tmp = tempfile::tempdir().unwrap();
        let store_dir = tmp.path().join("store");
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), "SECRET\n").unwrap();
        Planted {
            _tmp: tmp,
            store_dir,
            outside,
        }
    }

    impl Planted {
        fn outside_unchanged(&self) {
            assert_eq!(files_in(&self.outside), ["secret.txt"]);
            assert_eq!(
                std::fs::read_to_string(self.outside.join("secret.txt")).unwrap(),
                "SECRET\n"
            );
        }
    }

    #[test]
    fn symlink_at_code_file_is_refused() {
        let p = planted();
        let s = store(&p.store_dir);
        s.save("ok", "x = 1\n", "").unwrap();
        symlink(p.outside.join("secret.txt"), p.store_dir.join("evil.py")).unwrap();
        let err = s.save("evil", "print('pwned')\n", "").unwrap_err();
        assert!(matches!(err, SkillError::Symlink { .. }), "{err}");
        assert!(err.to_string().contains("evil.py") && err.to_string().contains("symbolic link"));
        assert!(matches!(s.load("evil"), Err(SkillError::Symlink { .. })));
        assert!(matches!(s.delete("evil"), Err(SkillError::Symlink { .. })));
        let names: Vec<String> = s.list().unwrap().into_iter().map(|m| m.name).collect();
        assert_eq!(names, ["ok"]);
        // A dangling link is refused too, and nothing is created at its target.
        symlink(p.outside.join("new.py"), p.store_dir.join("dangling.py")).unwrap();
        assert!(matches!(
            s.save("dangling", "x = 1\n", ""),
            Err(SkillError::Symlink { .. })
        ));
        assert!(s.store_dir_is_intact());
        p.outside_unchanged();
    }

    impl SkillStore {
        fn store_dir_is_intact(&self) -> bool {
            self.dir
                .join("evil.py")
                .symlink_metadata()
                .unwrap()
                .file_type()
                .is_symlink()
        }
    }

    #[test]
    fn symlink_at_metadata_file_is_refused() {
        let p = planted();
        let s = store(&p.store_dir);
        s.save("m", "x = 1\n", "").unwrap();
        std::fs::remove_file(p.store_dir.join("m.json")).unwrap();
        symlink(p.outside.join("secret.txt"), p.store_dir.join("m.json")).unwrap();
        assert!(matches!(
            s.save("m", "x = 2\n", ""),
            Err(SkillError::Symlink { .. })
        ));
        assert!(matches!(s.load("m"), Err(SkillError::Symlink { .. })));
        assert!(s.list().unwrap().is_empty());
        // A new name whose metadata path is a planted link.
        symlink(p.outside.join("secret.txt"), p.store_dir.join("n.json")).unwrap();
        let err = s.save("n", "x = 1\n", "").unwrap_err();
        assert!(matches!(err, SkillError::Symlink { .. }), "{err}");
        assert!(!p.store_dir.join("n.py").exists());
        p.outside_unchanged();
    }

    #[test]
    fn symlink_at_history_is_refused() {
        let p = planted();
        let s = store(&p.store_dir);
        s.save("k", "x = 1\n", "").unwrap();
        symlink(&p.outside, p.store_dir.join(".history")).unwrap();
        let err = s.save("k", "x = 2\n", "").unwrap_err();
        assert!(matches!(err, SkillError::Symlink { .. }), "{err}");
        assert!(err.to_string().contains(".history"));
        assert_eq!(
            s.load("k").unwrap().code,
            "x = 1\n",
            "the current version is untouched"
        );
        assert!(matches!(s.delete("k"), Err(SkillError::Symlink { .. })));
        assert!(matches!(s.history("k"), Err(SkillError::Symlink { .. })));
        p.outside_unchanged();

        // A link at .history/NAME.
        std::fs::remove_file(p.store_dir.join(".history")).unwrap();
        std::fs::create_dir(p.store_dir.join(".history")).unwrap();
        symlink(&p.outside, p.store_dir.join(".history/k")).unwrap();
        assert!(matches!(
            s.save("k", "x = 2\n", ""),
            Err(SkillError::Symlink { .. })
        ));
        assert!(matches!(s.delete("k"), Err(SkillError::Symlink { .. })));
        p.outside_unchanged();
        // A link among the history files is skipped, never read.
        std::fs::remove_file(p.store_dir.join(".history/k")).unwrap();
        s.save("k", "x = 2\n", "").unwrap();
        symlink(
            p.outside.join("secret.txt"),
            p.store_dir
                .join(".history/k/000009-20250101T000000.000000Z.py"),
        )
        .unwrap();
        let h = s.history("k").unwrap();
        assert_eq!(h.iter().map(|m| m.version).collect::<Vec<_>>(), [1]);
        assert!(matches!(
            s.load_version("k", 9),
            Err(SkillError::Symlink { .. })
        ));
        p.outside_unchanged();
    }

    #[test]
    fn symlink_at_lock_file_is_refused() {
        let p = planted();
        let s = store(&p.store_dir);
        std::fs::remove_file(p.store_dir.join(".lock")).unwrap();
        symlink(p.outside.join("secret.txt"), p.store_dir.join(".lock")).unwrap();
        assert!(matches!(
            s.save("a", "x = 1\n", ""),
            Err(SkillError::Symlink { .. })
        ));
        assert!(matches!(s.list(), Err(SkillError::Symlink { .. })));
        p.outside_unchanged();
    }

    #[test]
    fn non_regular_files_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        std::fs::create_dir(tmp.path().join("d.py")).unwrap();
        let err = s.save("d", "x = 1\n", "").unwrap_err();
        assert!(
            matches!(
                err,
                SkillError::NotRegular {
                    kind: "a directory",
                    ..
                }
            ),
            "{err}"
        );
        assert!(matches!(s.load("d"), Err(SkillError::NotRegular { .. })));
        rustix::fs::mknodat(
            rustix::fs::CWD,
            tmp.path().join("f.py").as_path(),
            FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        // Opening a FIFO must not block.
        let err = s.load("f").unwrap_err();
        assert!(
            matches!(err, SkillError::NotRegular { kind: "a FIFO", .. }),
            "{err}"
        );
        assert!(s.list().unwrap().is_empty());
        // A regular file where .history should be a directory.
        s.save("r", "x = 1\n", "").unwrap();
        std::fs::write(tmp.path().join(".history"), "").unwrap();
        let err = s.save("r", "x = 2\n", "").unwrap_err();
        assert!(
            matches!(
                err,
                SkillError::NotRegular {
                    expected: "a directory",
                    ..
                }
            ),
            "{err}"
        );
    }

    // ---- limits and content ---------------------------------------------------------------------

    #[test]
    fn size_and_content_limits() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store_with(tmp.path(), |l| {
            l.max_code_bytes = 100;
            l.max_description_bytes = 10;
            l.max_skills = 2;
        });
        let err = s.save("big", "#".repeat(101), "").unwrap_err();
        assert!(
            matches!(
                err,
                SkillError::TooLarge {
                    size: 101,
                    limit: 100,
                    ..
                }
            ),
            "{err}"
        );
        s.save("edge", "#".repeat(100), "").unwrap();
        let err = s.save("d", "x = 1\n", "12345678901").unwrap_err();
        assert!(
            matches!(err, SkillError::TooLarge { limit: 10, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("description"));
        s.save("d", "x = 1\n", "   1234567890   \n").unwrap();
        assert_eq!(s.load("d").unwrap().meta.description, "1234567890");

        let err = s.save("e", &b"x = '\xff'\n"[..], "").unwrap_err();
        assert!(matches!(err, SkillError::NotText { .. }), "{err}");
        assert!(err.to_string().contains("UTF-8"));
        let err = s.save("e", "x = 1\0\n", "").unwrap_err();
        assert!(err.to_string().contains("NUL"), "{err}");
        let err = s.save("e", " \n\t", "").unwrap_err();
        assert!(err.to_string().contains("empty"), "{err}");

        // The store is full: new names are refused, overwrites are not.
        let err = s.save("third", "x = 1\n", "").unwrap_err();
        assert!(
            matches!(err, SkillError::TooMany { count: 2, limit: 2 }),
            "{err}"
        );
        assert!(err.to_string().contains("delete_skill"));
        s.save("d", "x = 2\n", "").unwrap();
        s.delete("d").unwrap();
        s.save("third", "x = 1\n", "").unwrap();

        // A stored file over the limit (hand-placed) is refused on load without reading it all.
        std::fs::write(tmp.path().join("edge.py"), "#".repeat(5000)).unwrap();
        assert!(matches!(
            s.load("edge"),
            Err(SkillError::TooLarge { size: 5000, .. })
        ));
    }

    // ---- concurrency --------------------------------------------------------------------------

    #[test]
    fn concurrent_saves_of_different_names() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Arc::new(store(tmp.path()));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let s = Arc::clone(&s);
                std::thread::spawn(move || {
                    for i in 0..10 {
                        s.save(&format!("s{t}_{i}"), format!("x = {t}{i}\n"), "")
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let list = s.list().unwrap();
        assert_eq!(list.len(), 80);
        for m in &list {
            let code = s.load(&m.name).unwrap().code;
            assert_eq!(sha256_hex(code.as_bytes()), m.sha256);
        }
        assert!(
            files_in(tmp.path())
                .iter()
                .all(|f| !f.starts_with(TEMP_PREFIX))
        );
    }

    #[test]
    fn concurrent_saves_of_one_name_keep_every_version() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        // Two stores on one directory stand for two server processes.
        let stores = [Arc::new(store(&dir)), Arc::new(store(&dir))];
        let threads: Vec<_> = (0..12)
            .map(|t| {
                let s = Arc::clone(&stores[t % 2]);
                std::thread::spawn(move || s.save("same", format!("x = {t}\n"), "").unwrap())
            })
            .collect();
        let results: Vec<SkillMeta> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let mut versions: Vec<u64> = results.iter().map(|m| m.version).collect();
        versions.sort();
        assert_eq!(versions, (1..=12).collect::<Vec<_>>());

        let current = stores[0].load("same").unwrap();
        assert_eq!(current.meta.version, 12, "the last writer wins");
        let last = results.iter().find(|m| m.version == 12).unwrap();
        assert_eq!(&current.meta, last);
        let mut codes: Vec<String> = (1..12)
            .map(|v| stores[1].load_version("same", v).unwrap().code)
            .collect();
        codes.push(current.code);
        codes.sort();
        let mut expected: Vec<String> = (0..12).map(|t| format!("x = {t}\n")).collect();
        expected.sort();
        assert_eq!(
            codes, expected,
            "every saved version is current or in the history"
        );
        let created = results.iter().find(|m| m.version == 1).unwrap().created;
        assert!(results.iter().all(|m| m.created == created));
    }

    #[test]
    fn readers_never_see_a_torn_skill() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Arc::new(store(tmp.path()));
        s.save("t", "x = 0\n", "").unwrap();
        let writer = {
            let s = Arc::clone(&s);
            std::thread::spawn(move || {
                for i in 1..40 {
                    s.save("t", format!("x = {i}\n{}", "#".repeat(i * 100)), "")
                        .unwrap();
                }
            })
        };
        for _ in 0..200 {
            let skill = s.load("t").unwrap();
            assert_eq!(sha256_hex(skill.code.as_bytes()), skill.meta.sha256);
            assert_eq!(skill.code.len() as u64, skill.meta.size);
        }
        writer.join().unwrap();
    }

    // ---- seeding -----------------------------------------------------------------------------

    #[test]
    fn seed_from_adds_only_absent_names() {
        let tmp = tempfile::tempdir().unwrap();
        let shipped = tmp.path().join("shipped");
        std::fs::create_dir(&shipped).unwrap();
        std::fs::write(shipped.join("mine.py"), "def mine(): return 'shipped'\n").unwrap();
        std::fs::write(
            shipped.join("mine.json"),
            r#"{"description": "shipped one"}"#,
        )
        .unwrap();
        std::fs::write(shipped.join("fresh.py"), "def fresh(): return 1\n").unwrap();
        std::fs::write(
            shipped.join("fresh.json"),
            r#"{"name": "fresh", "description": " new "}"#,
        )
        .unwrap();
        std::fs::write(shipped.join("nodesc.py"), "def nodesc(): pass\n").unwrap();
        std::fs::write(shipped.join("badjson.py"), "def badjson(): pass\n").unwrap();
        std::fs::write(shipped.join("badjson.json"), "{not json").unwrap();
        std::fs::write(shipped.join("1bad.py"), "x = 1\n").unwrap();
        std::fs::write(shipped.join("__init__.py"), "").unwrap();
        std::fs::write(shipped.join("README.md"), "# skills\n").unwrap();
        std::fs::write(shipped.join("binary.py"), b"\xff\xfe").unwrap();
        std::fs::create_dir(shipped.join("dir.py")).unwrap();

        let s = store(&tmp.path().join("store"));
        let user = s
            .save("mine", "def mine(): return 'user'\n", "user's")
            .unwrap();
        assert_eq!(s.seed_from(&shipped).unwrap(), 3);
        assert_eq!(
            s.load("mine").unwrap().meta,
            user,
            "a user's skill is never overwritten"
        );
        assert_eq!(s.load("fresh").unwrap().meta.description, "new");
        assert_eq!(s.load("nodesc").unwrap().meta.description, "");
        assert_eq!(s.load("badjson").unwrap().meta.description, "");
        let names: Vec<String> = s.list().unwrap().into_iter().map(|m| m.name).collect();
        assert_eq!(names, ["badjson", "fresh", "mine", "nodesc"]);

        // Idempotent, and a deleted starter skill does not come back.
        assert_eq!(s.seed_from(&shipped).unwrap(), 0);
        s.delete("fresh").unwrap();
        assert_eq!(s.seed_from(&shipped).unwrap(), 0);
        assert!(matches!(s.load("fresh"), Err(SkillError::NotFound { .. })));
        let s0 = store_with(&tmp.path().join("store0"), |l| l.max_versions_kept = 0);
        assert_eq!(s0.seed_from(&shipped).unwrap(), 4);
        s0.delete("fresh").unwrap();
        assert_eq!(s0.seed_from(&shipped).unwrap(), 0);

        assert_eq!(s.seed_from(&tmp.path().join("missing")).unwrap(), 0);
    }

    #[test]
    fn shipped_skills_seed_cleanly() {
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("skills");
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let added = s.seed_from(&shipped).unwrap();
        assert!(added >= 5, "{added}");
        let list = s.list().unwrap();
        assert_eq!(list.len(), added);
        for m in &list {
            assert!(!m.description.is_empty(), "{} has a description", m.name);
            let code = s.load(&m.name).unwrap().code;
            assert!(
                code.starts_with("\"\"\""),
                "{} starts with a docstring",
                m.name
            );
            assert!(
                code.contains(&format!("def {}(", m.name)),
                "{} defines {0}()",
                m.name
            );
        }
        let high = s.load("filter_high_risk").unwrap().code;
        assert!(high.contains("[v for v in vulns if v['severity'] in ['high', 'critical']]"));
    }

    // ---- hand-edited and malformed entries ----------------------------------------------------

    #[test]
    fn malformed_metadata_is_skipped_in_list() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        s.save("good", "x = 1\n", "").unwrap();
        s.save("garbage", "x = 1\n", "").unwrap();
        s.save("other", "x = 1\n", "").unwrap();
        s.save("badtime", "x = 1\n", "").unwrap();
        std::fs::write(tmp.path().join("garbage.json"), "{ not json").unwrap();
        std::fs::write(tmp.path().join("other.json"), r#"{"name": "good"}"#).unwrap();
        std::fs::write(
            tmp.path().join("badtime.json"),
            r#"{"created": "yesterday"}"#,
        )
        .unwrap();
        // Entries that are not skills are ignored.
        std::fs::write(tmp.path().join(".tmp-0123456789abcdef"), "partial").unwrap();
        std::fs::write(tmp.path().join("notes.txt"), "hello").unwrap();
        std::fs::write(tmp.path().join("bad-name.py"), "x = 1\n").unwrap();
        std::fs::write(tmp.path().join("__init__.py"), "").unwrap();
        std::fs::write(tmp.path().join("orphan.json"), "{}").unwrap();
        let names: Vec<String> = s.list().unwrap().into_iter().map(|m| m.name).collect();
        assert_eq!(names, ["good"]);

        let err = s.load("garbage").unwrap_err();
        assert!(matches!(err, SkillError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("save_skill"), "{err}");
        assert!(matches!(s.load("other"), Err(SkillError::Corrupt { .. })));
        assert!(matches!(s.load("badtime"), Err(SkillError::Corrupt { .. })));
        // Saving again repairs it (the old code goes to the history).
        let m = s.save("garbage", "x = 1\n", "fixed").unwrap();
        assert_eq!(m.version, 2);
        assert_eq!(s.load("garbage").unwrap().meta.description, "fixed");
        assert_eq!(s.list().unwrap().len(), 2);
    }

    #[test]
    fn hand_placed_and_hand_edited_skills() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        // A code file without metadata is a skill with derived metadata.
        std::fs::write(tmp.path().join("manual.py"), "x = 1\n").unwrap();
        let list = s.list().unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].sha256, sha256_hex(b"x = 1\n"));
        assert_eq!(list[0].version, 1);
        // Metadata in the shipped form is completed from the code.
        std::fs::write(
            tmp.path().join("manual.json"),
            r#"{"description": "by hand"}"#,
        )
        .unwrap();
        assert_eq!(s.load("manual").unwrap().meta.description, "by hand");
        // Code edited by hand: load reports the hash of what it returns.
        s.save("edited", "x = 1\n", "").unwrap();
        std::fs::write(tmp.path().join("edited.py"), "x = 2\n").unwrap();
        let skill = s.load("edited").unwrap();
        assert_eq!(skill.code, "x = 2\n");
        assert_eq!(skill.meta.sha256, sha256_hex(b"x = 2\n"));
        // Overwriting it archives the hand-edited code.
        s.save("edited", "x = 3\n", "").unwrap();
        assert_eq!(s.load_version("edited", 1).unwrap().code, "x = 2\n");
    }

    #[test]
    fn not_found_lists_closest_names() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let err = s.load("nothing").unwrap_err();
        assert!(err.to_string().contains("No skills are saved yet"), "{err}");
        for i in 0..15 {
            s.save(&format!("skill_{i:02}"), "x = 1\n", "").unwrap();
        }
        s.save("parse_logs", "x = 1\n", "").unwrap();
        let err = s.load("parse_log").unwrap_err();
        let SkillError::NotFound {
            existing, total, ..
        } = &err
        else {
            panic!("{err}")
        };
        assert_eq!(*total, 16);
        assert_eq!(existing.len(), 10);
        assert_eq!(existing[0], "parse_logs");
        let msg = err.to_string();
        assert!(msg.starts_with("Skill not found: parse_log. "), "{msg}");
        assert!(msg.contains("10 of 16"), "{msg}");
    }

    #[test]
    fn deleted_histories_are_bounded() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store_with(tmp.path(), |l| l.max_skills = 3);
        for i in 0..6 {
            let name = format!("gone_{i}");
            s.save(&name, "x = 1\n", "").unwrap();
            s.delete(&name).unwrap();
            // Directory mtimes have coarse resolution on some filesystems.
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let kept = files_in(&tmp.path().join(".history"));
        assert_eq!(kept, ["gone_3", "gone_4", "gone_5"]);
    }

    #[test]
    fn stale_temp_files_are_removed_on_open() {
        let tmp = tempfile::tempdir().unwrap();
        store(tmp.path());
        let stale = tmp.path().join(".tmp-00000000000000aa");
        let fresh = tmp.path().join(".tmp-00000000000000bb");
        std::fs::write(&stale, "x").unwrap();
        std::fs::write(&fresh, "x").unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(2 * 3600);
        std::fs::File::options()
            .write(true)
            .open(&stale)
            .unwrap()
            .set_modified(old)
            .unwrap();
        store(tmp.path());
        assert!(!stale.exists());
        assert!(fresh.exists());
    }

    // ---- the shipped skills in Python -----------------------------------------------------------

    /// Every shipped skill imports, defines its function, works through `exec`, and behaves as
    /// documented. Skipped when no `python3` is installed.
    #[test]
    fn shipped_skills_work_in_python() {
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("skills");
        let out = match std::process::Command::new("python3")
            .arg("-I")
            .arg("-c")
            .arg(PYTHON_CHECK)
            .arg(&shipped)
            .output()
        {
            Ok(out) => out,
            Err(e) => {
                eprintln!("python3 not available ({e}); skipping");
                return;
            }
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(stdout.contains("ok: filter_high_risk"), "{stdout}");
    }

    const PYTHON_CHECK: &str = r#"
import ast, importlib.util, json, os, sys, tempfile
shipped = sys.argv[1]
names = sorted(f[:-3] for f in os.listdir(shipped) if f.endswith('.py'))
assert names, 'no shipped skills'

# `from skills import NAME` through a package whose __getattr__ returns NAME from NAME.py,
# the way the sandbox exposes the store.
pkg_root = tempfile.mkdtemp()
os.mkdir(os.path.join(pkg_root, 'skills'))
with open(os.path.join(pkg_root, 'skills', '__init__.py'), 'w') as f:
    f.write('import importlib\n'
            'def __getattr__(name):\n'
            '    if name.startswith("__"): raise AttributeError(name)\n'
            '    fn = getattr(importlib.import_module(__name__ + "." + name), name)\n'
            # importing the submodule binds skills.NAME to the module: rebind it to the function
            '    globals()[name] = fn\n'
            '    return fn\n')
for n in names:
    with open(os.path.join(shipped, n + '.py')) as src, \
         open(os.path.join(pkg_root, 'skills', n + '.py'), 'w') as dst:
        dst.write(src.read())
sys.path.insert(0, pkg_root)

funcs = {}
for n in names:
    code = open(os.path.join(shipped, n + '.py'), encoding='utf-8').read()
    tree = ast.parse(code)
    assert ast.get_docstring(tree), n + ': module docstring'
    meta = json.load(open(os.path.join(shipped, n + '.json')))
    assert meta['description'].strip(), n + ': description'
    assert meta.get('name', n) == n
    ns = {}
    exec(code, ns)
    assert callable(ns[n]), n + ': exec defines it'
    mod = __import__('skills', fromlist=[n])
    f = getattr(mod, n)
    assert callable(f) and f.__name__ == n, n + ': from skills import'
    assert f.__doc__, n + ': function docstring'
    funcs[n] = f

def check(name, fn):
    if name in funcs:
        fn(funcs[name]); print('ok:', name)
    else:
        print('missing check target:', name)

def t_filter(f):
    vulns = [{'id': 1, 'severity': 'low'}, {'id': 2, 'severity': 'critical'},
             {'id': 3, 'severity': 'high'}, {'id': 4, 'severity': 'High'},
             {'id': 5, 'severity': 'medium'}]
    assert f(vulns) == [v for v in vulns if v['severity'] in ['high', 'critical']]
    assert [v['id'] for v in f(vulns)] == [2, 3]
    assert f([]) == []
    try:
        f([{'id': 1}]); raise AssertionError('KeyError expected')
    except KeyError:
        pass
check('filter_high_risk', t_filter)

def t_group(f):
    rows = [{'s': 200}, {'s': 404}, {'s': 200}, {}, {'s': [1]}, {'s': 200}, {'s': 404}]
    r = f(rows, 's')
    assert r == {200: 3, 404: 2, None: 1, '[1]': 1}, r
    assert list(r)[:2] == [200, 404]
    assert f(rows, lambda row: 's' in row) == {True: 6, False: 1}
    assert f([], 's') == {}
    assert f(iter([{'a': 1}]), 'a') == {1: 1}
check('group_count', t_group)

def t_top(f):
    rows = [{'n': 5}, {'n': 1}, {'n': None}, {}, {'n': 9}, {'n': 5, 'x': 1}]
    assert [r['n'] for r in f(rows, 'n')] == [9, 5, 5, 1]
    assert f(rows, 'n')[1] == {'n': 5}, 'ties keep input order'
    assert [r['n'] for r in f(rows, 'n', n=2, reverse=False)] == [1, 5]
    assert [r['n'] for r in f(rows, lambda r: -(r.get('n') or 0), n=1)] == [None]
    mixed = [{'n': 'b'}, {'n': 3}, {'n': 'a'}, {'n': 10}]
    assert [r['n'] for r in f(mixed, 'n')] == [10, 3, 'b', 'a']
    assert [r['n'] for r in f(mixed, 'n', reverse=False)] == [3, 10, 'a', 'b']
    assert f([], 'n') == []
    big = [{'n': i} for i in range(100000)]
    assert [r['n'] for r in f(big, 'n', n=3)] == [99999, 99998, 99997]
check('top_n', t_top)

def t_csv(f):
    text = '\ufeffname, zip ,count,price,note\nalice,007,42,3.50,\nbob,12345,-7,1e-3,N/A\n\ncarol,1\n'
    rows = f(text)
    assert rows[0] == {'name': 'alice', 'zip': '007', 'count': 42, 'price': 3.5, 'note': ''}, rows[0]
    assert rows[1] == {'name': 'bob', 'zip': 12345, 'count': -7, 'price': 0.001, 'note': 'N/A'}, rows[1]
    assert rows[2] == {'name': 'carol', 'zip': 1, 'count': None, 'price': None, 'note': None}, rows[2]
    assert len(rows) == 3
    assert f('a;b\n1;"x;y"\n') == [{'a': 1, 'b': 'x;y'}]
    assert f('a\tb\n1\t2\n', convert=False) == [{'a': '1', 'b': '2'}]
    assert f('a,b\n1,2,3\n') == [{'a': 1, 'b': 2, '_extra': ['3']}]
    assert f('a,b\n"multi\nline",2\n') == [{'a': 'multi\nline', 'b': 2}]
    assert f('') == []
    assert f('only\nx\ny\n') == [{'only': 'x'}, {'only': 'y'}]
check('csv_to_dicts', t_csv)

def t_flat(f):
    doc = {'user': {'id': 7, 'tags': ['a', 'b'], 'meta': {}}, 'ok': True, 'list': []}
    assert f(doc) == {'user.id': 7, 'user.tags.0': 'a', 'user.tags.1': 'b', 'user.meta': {},
                      'ok': True, 'list': []}, f(doc)
    assert list(f(doc))[:3] == ['user.id', 'user.tags.0', 'user.tags.1']
    assert f({'a': {'b': 1}}, sep='/') == {'a/b': 1}
    assert f([{'x': 1}, 2]) == {'0.x': 1, '1': 2}
    assert f({}) == {} and f([]) == {}
    assert f(5) == {'': 5}
    assert f({1: {2: 3}}) == {'1.2': 3}
    deep = cur = {}
    for _ in range(5000):
        cur['k'] = {}; cur = cur['k']
    cur['v'] = 1
    assert list(f(deep).values()) == [1], 'no recursion limit'
check('flatten_json', t_flat)
print('checked', len(names), 'skills')
"#;
}
