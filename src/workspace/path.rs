//! Path validation (pure): what a relative path given to a workspace tool may look like, checked
//! before anything touches the disk, and how a validated path is shown in a message. Nothing here
//! does I/O, so every rule can be tested and fuzzed on its own.

use super::MAX_NAME_LEN;
use super::error::{Result, WorkspaceError};

/// Validates a relative path naming a file and returns its components, with `.` and repeated
/// `/` dropped. Refuses empty, absolute, NUL, control characters, backslashes, `..` components,
/// paths over `max_len` bytes and names over 255 bytes. Touches no disk.
pub fn validate_relative_path(s: &str, max_len: usize) -> Result<Vec<&str>> {
    if s.is_empty() {
        return Err(invalid(s, "it is empty", max_len));
    }
    let comps = validate_inner(s, max_len)?;
    if comps.is_empty() {
        return Err(invalid(
            s,
            "it names no file, only the workspace root",
            max_len,
        ));
    }
    Ok(comps)
}

/// Like [`validate_relative_path`] for a directory to list: `""` and `"."` mean the root and give
/// no components.
pub fn validate_relative_subpath(s: &str, max_len: usize) -> Result<Vec<&str>> {
    validate_inner(s, max_len)
}

fn validate_inner(s: &str, max_len: usize) -> Result<Vec<&str>> {
    if s.len() > max_len {
        return Err(invalid(
            s,
            &format!("it is {} bytes long", s.len()),
            max_len,
        ));
    }
    if s.contains('\0') {
        return Err(invalid(s, "it contains a NUL byte", max_len));
    }
    if let Some(c) = s.chars().find(|c| c.is_control()) {
        return Err(invalid(
            s,
            &format!("it contains the control character U+{:04X}", c as u32),
            max_len,
        ));
    }
    if s.contains('\\') {
        return Err(invalid(
            s,
            "it contains a backslash (separate names with '/')",
            max_len,
        ));
    }
    if s.starts_with('/') {
        return Err(WorkspaceError::Escapes {
            path: escape_for_message(s),
        });
    }
    let mut comps = Vec::new();
    for comp in s.split('/') {
        match comp {
            "" | "." => {}
            ".." => {
                return Err(WorkspaceError::Escapes {
                    path: escape_for_message(s),
                });
            }
            c if c.len() > MAX_NAME_LEN => {
                return Err(invalid(
                    s,
                    &format!("a name in it is {} bytes long", c.len()),
                    max_len,
                ));
            }
            c => comps.push(c),
        }
    }
    Ok(comps)
}

/// The per-name rules of `validate_inner`, for names read from disk by the listing.
pub(super) fn check_name(name: &str) -> std::result::Result<(), ()> {
    if name.is_empty()
        || name == "."
        || name == ".."
        || name.len() > MAX_NAME_LEN
        || name.contains(['/', '\\'])
        || name.chars().any(char::is_control)
    {
        Err(())
    } else {
        Ok(())
    }
}

fn invalid(s: &str, reason: &str, max_len: usize) -> WorkspaceError {
    WorkspaceError::InvalidPath {
        path: escape_for_message(s),
        reason: reason.to_owned(),
        max_len,
    }
}

/// Escapes control characters and quotes, and shortens long input, for an error message.
fn escape_for_message(s: &str) -> String {
    const MAX_CHARS: usize = 120;
    let escaped: String = s.escape_debug().collect();
    let head = crate::text::prefix_chars(&escaped, MAX_CHARS);
    if head.len() == escaped.len() {
        escaped
    } else {
        format!("{head}… ({} bytes)", s.len())
    }
}

/// A validated path for a message (`.` for the root).
pub(super) fn show(comps: &[&str]) -> String {
    if comps.is_empty() {
        ".".to_owned()
    } else {
        escape_for_message(&comps.join("/"))
    }
}

pub(super) fn ctx(action: &str, comps: &[&str]) -> String {
    format!("cannot {action} '{}'", show(comps))
}
