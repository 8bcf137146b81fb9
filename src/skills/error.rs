//! Errors of the skills store. They reach a model through the skills tools and the sandbox's
//! `skills` calls, so each message says what is allowed or what to do next.

use crate::host::renewable_dir::is_stale;

/// The naming rule of `skills::name` in words, as error messages give it.
pub const NAME_RULE: &str = "a skill name is 1 to 64 ASCII letters, digits and underscores, \
     starts with a letter or a single underscore (not a digit, not \"__\") and is not a Python \
     keyword, so that `from skills import NAME` works; e.g. \"parse_access_log\"";

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
    pub(super) fn io(context: impl Into<String>, source: impl Into<std::io::Error>) -> Self {
        SkillError::Io {
            context: context.into(),
            source: source.into(),
        }
    }

    /// Whether the filesystem called a handle stale (`ESTALE`): the store's fd may need reopening.
    pub(super) fn is_stale(&self) -> bool {
        matches!(self, Self::Io { source, .. } if is_stale(source))
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
