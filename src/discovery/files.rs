//! Which files make up the registry, in which order, and a cheap fingerprint of them.
//!
//! The registry is every `*.json` file anywhere under the directory (hidden files and folders
//! skipped, symlinked folders not followed, so a link cannot loop or escape). Files are ordered
//! shallowest first, then by path: a file in a subfolder (say `tools_registry/local/`) comes
//! after every shipped top-level file, so its definitions override theirs.
//!
//! The same listing gives the fingerprint `Discovery` polls: paths, sizes and modification
//! times hashed together. Listing ~30 files costs a few dozen `stat` calls, cheap enough to do
//! once a second, and any added, removed, resized or rewritten file changes it.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// How deep folders are searched; deeper is a mistake, not a catalog.
const MAX_DEPTH: usize = 8;

/// One registry file as seen when the directory was listed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FileStamp {
    pub path: PathBuf,
    pub len: u64,
    pub modified: Option<SystemTime>,
}

/// The registry's files in load order. A missing directory is `Ok(None)`.
pub fn list(dir: &Path) -> io::Result<Option<Vec<FileStamp>>> {
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
        Ok(m) if !m.is_dir() => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a directory",
            ));
        }
        Ok(_) => {}
    }
    let mut out = Vec::new();
    walk(dir, 0, &mut out)?;
    out.sort_by(|a, b| {
        let depth = |p: &Path| p.components().count();
        depth(&a.path)
            .cmp(&depth(&b.path))
            .then_with(|| a.path.cmp(&b.path))
    });
    Ok(Some(out))
}

/// A hash of the listing; differs whenever a file is added, removed, resized or rewritten.
/// An unreadable or missing directory hashes to a value of its own, so a directory that comes
/// back (or goes away) is noticed too.
pub fn fingerprint(dir: &Path) -> u64 {
    match list(dir) {
        Ok(files) => fingerprint_of(&files),
        Err(e) => {
            let mut h = DefaultHasher::new();
            e.kind().hash(&mut h);
            h.finish()
        }
    }
}

/// Hash of an already taken listing, equal to `fingerprint` of an unchanged directory.
pub fn fingerprint_of(files: &Option<Vec<FileStamp>>) -> u64 {
    let mut h = DefaultHasher::new();
    files.hash(&mut h);
    h.finish()
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<FileStamp>) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            if depth < MAX_DEPTH {
                walk(&path, depth + 1, out)?;
            }
            continue;
        }
        let is_json = Path::new(&*name)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        if !is_json {
            continue;
        }
        // Follows a symlink to a file; a link to a folder is not a file and is skipped.
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.is_file() {
            out.push(FileStamp {
                path,
                len: meta.len(),
                modified: meta.modified().ok(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn lists_json_files_shallow_first_and_skips_hidden_and_others() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("local/deeper")).unwrap();
        fs::create_dir_all(d.path().join(".git")).unwrap();
        for f in [
            "b.json",
            "a.JSON",
            "notes.md",
            ".hidden.json",
            "local/a.json",
            "local/deeper/z.json",
            ".git/x.json",
        ] {
            fs::write(d.path().join(f), "{}").unwrap();
        }
        let names: Vec<_> = list(d.path())
            .unwrap()
            .unwrap()
            .into_iter()
            .map(|f| {
                f.path
                    .strip_prefix(d.path())
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(
            names,
            ["a.JSON", "b.json", "local/a.json", "local/deeper/z.json"]
        );
    }

    #[test]
    fn missing_dir_is_none_and_fingerprint_tracks_changes() {
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("nope");
        assert!(list(&missing).unwrap().is_none());

        let before = fingerprint(d.path());
        fs::write(d.path().join("a.json"), "{}").unwrap();
        let added = fingerprint(d.path());
        assert_ne!(before, added);
        fs::write(d.path().join("a.json"), "{\"categories\":{}}").unwrap();
        assert_ne!(added, fingerprint(d.path()));
        assert_eq!(
            fingerprint(d.path()),
            fingerprint_of(&list(d.path()).unwrap())
        );
    }
}
