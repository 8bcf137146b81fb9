//! Generated packages on disk, one directory per version, named by the hash of its contents:
//! `ROOT/<16 hex>/servers/…`. ROOT is bind-mounted read-only into every sandbox of a tenant, and
//! an execution imports from the version that was current when it started, so a tool list that
//! changes mid-execution does not change the code under its feet. A version is removed once it
//! is neither current nor held by an execution ([`TreeVersion`] is the hold).
//!
//! ROOT is `<servers dir>/<pid>-<start time>`, one per server process: two servers on one data
//! directory (Claude Desktop and Claude Code both starting one) each keep and clean their own
//! versions. A ROOT whose process is gone is removed by the next server that opens the
//! directory.
//!
//! A version is written into a temporary directory first and renamed into place, so a sandbox
//! never sees half a package. Files are 0644 and directories 0755: the sandbox's user reads
//! them, and only the server writes under ROOT.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use sha2::{Digest, Sha256};

use super::stubs::Files;

/// A version an execution uses; the directory stays while any clone is alive.
#[derive(Debug)]
pub struct TreeVersion {
    pub id: String,
}

/// The versions of one tenant's package.
#[derive(Debug)]
pub struct Tree {
    root: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    current: Option<Arc<TreeVersion>>,
    held: HashMap<String, Weak<TreeVersion>>,
}

impl Tree {
    /// Opens this process's directory under `dir` (both created 0755 when missing), after
    /// removing the directories of server processes that are gone.
    pub fn open(dir: &Path) -> std::io::Result<Tree> {
        let pid = std::process::id();
        let start = crate::host::process::process_start_time(pid).unwrap_or(0);
        Self::open_as(dir, &format!("{pid}-{start}"))
    }

    fn open_as(dir: &Path, own: &str) -> std::io::Result<Tree> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)?;
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let gone = match name.split_once('-').map(|(p, s)| (p.parse(), s.parse())) {
                Some((Ok(pid), Ok(start))) => {
                    name == own || crate::host::process::process_is_gone(pid, start)
                }
                _ => false,
            };
            if gone && entry.file_type()?.is_dir() {
                std::fs::remove_dir_all(entry.path())?;
            }
        }
        let root = dir.join(own);
        std::fs::DirBuilder::new().mode(0o755).create(&root)?;
        // The modes are set, not asked for: a umask such as 077 (systemd's UMask=) would
        // otherwise leave the package unreadable to the sandbox's user.
        for d in [dir, root.as_path()] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755))?;
        }
        Ok(Tree {
            root,
            state: Mutex::new(State::default()),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The version executions start with now.
    pub fn current(&self) -> Option<Arc<TreeVersion>> {
        self.state.lock().expect("tree lock").current.clone()
    }

    /// Makes `files` the current version (written unless a version with the same contents
    /// exists), then removes versions nothing holds.
    pub fn publish(&self, files: &Files) -> std::io::Result<Arc<TreeVersion>> {
        let id = version_id(files);
        let mut state = self.state.lock().expect("tree lock");
        let version = match state.held.get(&id).and_then(Weak::upgrade) {
            Some(v) => v,
            None => {
                let dir = self.root.join(&id);
                if !dir.exists() {
                    self.write(&id, files)?;
                }
                let v = Arc::new(TreeVersion { id: id.clone() });
                state.held.insert(id, Arc::downgrade(&v));
                v
            }
        };
        state.current = Some(version.clone());
        self.collect(&mut state);
        Ok(version)
    }

    /// Removes versions that are neither current nor held (also those whose last holder
    /// has finished since the previous call).
    pub fn collect_unused(&self) {
        let mut state = self.state.lock().expect("tree lock");
        self.collect(&mut state);
    }

    fn collect(&self, state: &mut State) {
        let current = state.current.as_ref().map(|c| c.id.clone());
        state.held.retain(|id, weak| {
            let keep = Some(id) == current.as_ref() || weak.strong_count() > 0;
            if !keep && let Err(e) = std::fs::remove_dir_all(self.root.join(id.as_str())) {
                tracing::warn!(version = %id, error = %e, "cannot remove an old tools package");
            }
            keep
        });
    }

    fn write(&self, id: &str, files: &Files) -> std::io::Result<()> {
        let temp = self.root.join(format!(".tmp-{id}-{}", std::process::id()));
        if temp.exists() {
            std::fs::remove_dir_all(&temp)?;
        }
        let result = (|| {
            let mut dirs = std::fs::DirBuilder::new();
            dirs.recursive(true).mode(0o755);
            dirs.create(&temp)?;
            let mut made = std::collections::BTreeSet::from([temp.clone()]);
            for (path, text) in files {
                // Paths are made by `stubs` from identifiers: check anyway that each stays inside.
                let relative = Path::new(path);
                if relative.is_absolute()
                    || relative
                        .components()
                        .any(|c| !matches!(c, std::path::Component::Normal(_)))
                {
                    return Err(std::io::Error::other(format!("bad generated path {path}")));
                }
                let target = temp.join(relative);
                if let Some(parent) = target.parent() {
                    dirs.create(parent)?;
                    made.extend(
                        parent
                            .ancestors()
                            .take_while(|a| a.starts_with(&temp))
                            .map(Path::to_path_buf),
                    );
                }
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o644)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&target)?;
                f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
                f.write_all(text.as_bytes())?;
            }
            for d in &made {
                std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755))?;
            }
            std::fs::rename(&temp, self.root.join(id))
        })();
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&temp);
        }
        result
    }
}

fn version_id(files: &Files) -> String {
    let mut h = Sha256::new();
    for (path, text) in files {
        h.update((path.len() as u64).to_le_bytes());
        h.update(path.as_bytes());
        h.update((text.len() as u64).to_le_bytes());
        h.update(text.as_bytes());
    }
    hex::encode(&h.finalize()[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(text: &str) -> Files {
        Files::from([
            ("servers/__init__.py".to_string(), String::new()),
            ("servers/a/t.py".to_string(), text.to_string()),
        ])
    }

    #[test]
    fn versions_live_while_held_or_current() {
        let dir = tempfile::tempdir().unwrap();
        let tree = Tree::open(dir.path()).unwrap();
        let root = tree.root().to_path_buf();
        let v1 = tree.publish(&files("one")).unwrap();
        let p1 = root.join(&v1.id);
        assert_eq!(
            std::fs::read_to_string(p1.join("servers/a/t.py")).unwrap(),
            "one"
        );
        let again = tree.publish(&files("one")).unwrap();
        assert_eq!(again.id, v1.id, "same contents, same version");
        drop(again);

        let v2 = tree.publish(&files("two")).unwrap();
        assert_ne!(v2.id, v1.id);
        assert!(p1.exists(), "an execution still holds version one");
        drop(v1);
        tree.collect_unused();
        assert!(!p1.exists(), "released and not current: removed");
        drop(v2);
        tree.collect_unused();
        let current = tree.current().unwrap();
        assert!(root.join(current.id.as_str()).exists(), "current stays");
    }

    /// Writes a package in a child process under umask 077 (the umask is process-wide, so
    /// not in this one, where other tests write files at the same time), then checks its modes.
    #[test]
    fn the_package_is_readable_whatever_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        const CHILD: &str = "CEM_TEST_TREE_UMASK_DIR";
        if let Some(dir) = std::env::var_os(CHILD) {
            let tree = Tree::open(Path::new(&dir)).unwrap();
            let v = tree.publish(&files("x")).unwrap();
            std::mem::forget(v);
            std::mem::forget(tree);
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("servers");
        let name = module_path!().split_once("::").unwrap().1.to_string()
            + "::the_package_is_readable_whatever_the_umask";
        let child = std::process::Command::new("sh")
            .args([
                "-c",
                "umask 077 && exec \"$0\" --exact \"$1\" --test-threads 1",
            ])
            .arg(std::env::current_exe().unwrap())
            .arg(&name)
            .env(CHILD, &base)
            .output()
            .unwrap();
        assert!(
            child.status.success(),
            "the child test failed:\n{}{}",
            String::from_utf8_lossy(&child.stdout),
            String::from_utf8_lossy(&child.stderr)
        );
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let root = std::fs::read_dir(&base)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let version = std::fs::read_dir(&root)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        for d in [
            &base,
            &root,
            &version,
            &version.join("servers"),
            &version.join("servers/a"),
        ] {
            assert_eq!(mode(d), 0o755, "{}", d.display());
        }
        assert_eq!(mode(&version.join("servers/a/t.py")), 0o644);
        assert_eq!(mode(&version.join("servers/__init__.py")), 0o644);
    }

    #[test]
    fn each_server_process_has_its_own_root_and_dead_ones_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let pid = std::process::id();
        let own = format!(
            "{pid}-{}",
            crate::host::process::process_start_time(pid).unwrap()
        );
        // pid 1 runs, but did not start at tick 0: a server that is gone.
        let dead = Tree::open_as(dir.path(), "1-0").unwrap();
        dead.publish(&files("theirs")).unwrap();
        let tree = Tree::open(dir.path()).unwrap();
        tree.publish(&files("mine")).unwrap();
        assert_eq!(tree.root(), dir.path().join(&own));
        let left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, [own], "the dead server's directory is gone");
        drop(tree);
        let reopened = Tree::open(dir.path()).unwrap();
        assert!(reopened.current().is_none());
        assert_eq!(
            std::fs::read_dir(reopened.root()).unwrap().count(),
            0,
            "a new run of the same process starts clean"
        );
    }
}
