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
//! * **Starter skills.** [`SkillStore::seed_from`] copies the skills the binary carries into the
//!   store when a name has never existed there, so a user's skill is never overwritten.
//!
//! Everything here is blocking: the async callers wrap these calls in `spawn_blocking`.
//!
//! # Layout
//!
//! `store.rs` holds [`SkillStore`] itself (opening, locking); its operations are grouped by what
//! they do in `read.rs` (load, list), `write.rs` (save, delete), `history.rs` (earlier versions)
//! and `seed.rs` (starter skills). `io.rs` has the fd-relative file primitives they all use,
//! `name.rs` the name allowlist, `meta.rs` the metadata format, `error.rs` [`SkillError`].
//! [`agent_skill`] shows a stored skill in the Agent Skills format (names, `skill://` URIs,
//! `SKILL.md`), for the MCP Skills extension.

pub mod agent_skill;
mod error;
mod history;
mod io;
mod meta;
mod name;
mod read;
mod seed;
mod store;
mod write;

#[cfg(test)]
mod tests;

pub use error::{Result, SkillError};
pub use meta::{Skill, SkillMeta};
pub use name::{MAX_NAME_LEN, NAME_RULE, validate_name};
pub use store::SkillStore;

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
