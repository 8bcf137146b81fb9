//! The check of an installed set before it enters the cache: the installer container could
//! write only its own staging directory, and this walk (which follows no link) makes sure
//! that what it left there is plain directories and files, within the size and file-count
//! caps, with no link, device, socket or setuid/setgid bit, and no top-level name that would
//! shadow a module of the sandbox's harness.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// Top-level names a set may not hold: the harness's own modules and packages, and the names
/// Python's `site` runs at start-up.
pub const RESERVED_NAMES: &[&str] = &[
    "harness",
    "cem_helpers",
    "cem_matplotlib",
    "cem_state",
    "cem_runtime",
    "servers",
    "skills",
    "sitecustomize",
    "usercustomize",
];

/// Deepest directory nesting walked.
const MAX_DEPTH: usize = 64;

/// The limits of one set.
#[derive(Debug, Clone, Copy)]
pub struct TreeLimits {
    pub max_bytes: u64,
    pub max_files: u64,
}

/// What a checked tree holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TreeSize {
    pub bytes: u64,
    pub files: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    #[error(
        "the installed set is over {limit_mb} MiB (--packages-max-mb); ask for fewer or smaller packages"
    )]
    TooLarge { limit_mb: u64 },
    #[error("the installed set holds over {limit} files")]
    TooManyFiles { limit: u64 },
    #[error("the installed set holds {path}, {what}; such a set is not installed")]
    Refused { path: String, what: &'static str },
    #[error("a package would install `{name}`, a name the sandbox's harness uses; it is refused")]
    Shadows { name: String },
    #[error("the installed set could not be read: {0}")]
    Io(String),
}

/// Walks `root` (a staging directory) and checks everything in it.
pub fn check(root: &Path, limits: TreeLimits) -> Result<TreeSize, TreeError> {
    for entry in std::fs::read_dir(root).map_err(|e| TreeError::Io(e.to_string()))? {
        let entry = entry.map_err(|e| TreeError::Io(e.to_string()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let stem = name
            .strip_suffix(".py")
            .or_else(|| name.split('.').next())
            .unwrap_or(&name);
        if RESERVED_NAMES.contains(&stem) {
            return Err(TreeError::Shadows { name });
        }
    }
    let mut size = TreeSize::default();
    walk(root, root, 0, limits, &mut size)?;
    Ok(size)
}

fn walk(
    root: &Path,
    dir: &Path,
    depth: usize,
    limits: TreeLimits,
    size: &mut TreeSize,
) -> Result<(), TreeError> {
    let shown = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
    if depth > MAX_DEPTH {
        return Err(TreeError::Refused {
            path: shown(dir),
            what: "a directory nested too deeply",
        });
    }
    for entry in std::fs::read_dir(dir).map_err(|e| TreeError::Io(e.to_string()))? {
        let entry = entry.map_err(|e| TreeError::Io(e.to_string()))?;
        let path = entry.path();
        // symlink_metadata: a link is seen as a link, never followed.
        let meta = std::fs::symlink_metadata(&path).map_err(|e| TreeError::Io(e.to_string()))?;
        let kind = meta.file_type();
        if meta.permissions().mode() & 0o6000 != 0 {
            return Err(TreeError::Refused {
                path: shown(&path),
                what: "a setuid or setgid bit",
            });
        }
        size.files += 1;
        if size.files > limits.max_files {
            return Err(TreeError::TooManyFiles {
                limit: limits.max_files,
            });
        }
        if kind.is_dir() {
            walk(root, &path, depth + 1, limits, size)?;
        } else if kind.is_file() {
            // Blocks, not the length: a sparse file is counted as what it takes.
            size.bytes += meta.len().max(meta.blocks() * 512);
            if size.bytes > limits.max_bytes {
                return Err(TreeError::TooLarge {
                    limit_mb: limits.max_bytes >> 20,
                });
            }
        } else {
            let what = if kind.is_symlink() {
                "a symbolic link"
            } else {
                "a device, socket or pipe"
            };
            return Err(TreeError::Refused {
                path: shown(&path),
                what,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: TreeLimits = TreeLimits {
        max_bytes: 1 << 20,
        max_files: 100,
    };

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("humanize/__pycache__")).unwrap();
        std::fs::write(dir.path().join("humanize/__init__.py"), "x = 1\n").unwrap();
        std::fs::create_dir(dir.path().join("humanize-4.12.3.dist-info")).unwrap();
        dir
    }

    #[test]
    fn a_plain_tree_passes_with_its_size() {
        let dir = tree();
        let size = check(dir.path(), LIMITS).unwrap();
        assert_eq!(size.files, 4);
        assert!(size.bytes >= 6);
    }

    #[test]
    fn links_setuid_bits_reserved_names_and_caps_are_refused() {
        let dir = tree();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("humanize/passwd")).unwrap();
        assert!(matches!(
            check(dir.path(), LIMITS),
            Err(TreeError::Refused { .. })
        ));

        let dir = tree();
        let file = dir.path().join("humanize/__init__.py");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o4755)).unwrap();
        assert!(matches!(
            check(dir.path(), LIMITS),
            Err(TreeError::Refused { .. })
        ));

        for name in ["cem_helpers.py", "servers", "sitecustomize.py"] {
            let dir = tree();
            std::fs::write(dir.path().join(name), "").unwrap();
            assert!(
                matches!(check(dir.path(), LIMITS), Err(TreeError::Shadows { .. })),
                "{name}"
            );
        }

        let dir = tree();
        std::fs::write(dir.path().join("big"), vec![1u8; 2 << 20]).unwrap();
        assert!(matches!(
            check(dir.path(), LIMITS),
            Err(TreeError::TooLarge { .. })
        ));

        let dir = tree();
        for i in 0..100 {
            std::fs::write(dir.path().join(format!("f{i}")), "").unwrap();
        }
        assert!(matches!(
            check(dir.path(), LIMITS),
            Err(TreeError::TooManyFiles { .. })
        ));
    }
}
