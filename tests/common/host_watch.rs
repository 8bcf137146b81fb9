//! Host-side checks for the adversarial suite (`tests/security/`): what a case must leave
//! untouched on the host, whatever the sandbox or a tool call attempted.
//!
//! A [`HostWatch`] is taken before a case runs and checked after it:
//! - canaries outside the workspace: `<root>/outside/secret.txt` (a secret whose absolute host
//!   path the cases plant in symlinks, hard links and tool arguments) and
//!   `<root>/outside/only-outside.txt`, plus the host's `/etc/passwd`, must keep their content
//!   (SHA-256) and mtime;
//! - the test's root directory, walked without following links and leaving out the workspace and
//!   skills directories (and anything else the case names), must hold exactly the entries it
//!   held before, each unchanged: nothing created, deleted or modified outside the directories
//!   the server may write.
//!
//! [`HostWatch::finish`] also checks that the server still runs code and that the instance left
//! no container on the engine.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{RawStdio, TestApp, assert_ok};

/// What a watched path looked like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fingerprint {
    File {
        len: u64,
        mtime_ns: i128,
        sha256: [u8; 32],
        mode: u32,
    },
    Dir {
        mode: u32,
    },
    Symlink(PathBuf),
    Other {
        mode: u32,
    },
}

/// Fingerprints `path` without following a final symlink.
pub fn fingerprint(path: &Path) -> std::io::Result<Fingerprint> {
    let md = std::fs::symlink_metadata(path)?;
    let ft = md.file_type();
    Ok(if ft.is_symlink() {
        Fingerprint::Symlink(std::fs::read_link(path)?)
    } else if ft.is_dir() {
        Fingerprint::Dir { mode: md.mode() }
    } else if ft.is_file() {
        Fingerprint::File {
            len: md.len(),
            mtime_ns: i128::from(md.mtime()) * 1_000_000_000 + i128::from(md.mtime_nsec()),
            sha256: Sha256::digest(std::fs::read(path)?).into(),
            mode: md.mode(),
        }
    } else {
        Fingerprint::Other { mode: md.mode() }
    })
}

/// Canaries and a snapshot of a test's root directory; see the module docs.
pub struct HostWatch {
    root: PathBuf,
    excluded: Vec<PathBuf>,
    secret: String,
    canaries: Vec<(PathBuf, Fingerprint)>,
    before: BTreeMap<PathBuf, Fingerprint>,
}

/// Host files outside any test directory that no case may change.
const HOST_FILES: [&str; 1] = ["/etc/passwd"];

impl HostWatch {
    /// Plants the canaries under `root` and snapshots it, leaving out `excluded` (each
    /// canonicalised; a path that does not exist yet is compared as given).
    pub fn new(root: &Path, excluded: &[PathBuf]) -> Self {
        let root = root.canonicalize().expect("the test root exists");
        let outside = root.join("outside");
        std::fs::create_dir_all(&outside).expect("canary dir");
        let secret = format!("CEM-CANARY-{}", uuid::Uuid::new_v4().simple());
        std::fs::write(outside.join("secret.txt"), format!("{secret}\n")).expect("canary");
        std::fs::write(outside.join("only-outside.txt"), "only outside\n").expect("canary");
        let mut watch = Self {
            excluded: excluded
                .iter()
                .map(|p| p.canonicalize().unwrap_or_else(|_| p.clone()))
                .collect(),
            root,
            secret,
            canaries: Vec::new(),
            before: BTreeMap::new(),
        };
        for path in HOST_FILES
            .iter()
            .map(PathBuf::from)
            .chain([watch.canary_file(), outside.join("only-outside.txt")])
        {
            let print = fingerprint(&path)
                .unwrap_or_else(|e| panic!("cannot fingerprint {}: {e}", path.display()));
            watch.canaries.push((path, print));
        }
        watch.before = watch.snapshot();
        watch
    }

    /// A watch over a [`TestApp`]'s temp dir, leaving out its workspace, its skills directory
    /// and the workspace's quota image.
    pub fn for_app(t: &TestApp) -> Self {
        Self::new(t.dir.path(), &app_dirs(t))
    }

    /// A watch over a [`RawStdio`] server's temp dir (workspace, skills and the server's own
    /// data directory left out: see [`spawned_dirs`]).
    pub fn for_raw(raw: &RawStdio) -> Self {
        let dir = raw._dir.path();
        Self::new(dir, &spawned_dirs(dir))
    }

    /// The canary secret's absolute host path.
    pub fn canary_file(&self) -> PathBuf {
        self.root.join("outside").join("secret.txt")
    }

    /// The directory holding the canaries (a target for directory symlinks).
    pub fn canary_dir(&self) -> PathBuf {
        self.root.join("outside")
    }

    /// The canary's secret text: no tool answer may contain it.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// The canonical root this watch walks.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Panics if `answer` (a tool's answer, an outcome's text) carries the canary's secret.
    #[track_caller]
    pub fn assert_not_leaked(&self, answer: &impl std::fmt::Display) {
        let text = answer.to_string();
        assert!(
            !text.contains(&self.secret),
            "the canary secret leaked: {text:.500}"
        );
    }

    fn snapshot(&self) -> BTreeMap<PathBuf, Fingerprint> {
        let mut seen = BTreeMap::new();
        let mut stack = vec![self.root.clone()];
        while let Some(dir) = stack.pop() {
            let entries = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
            for entry in entries {
                let path = entry.expect("dir entry").path();
                if self.excluded.contains(&path) {
                    continue;
                }
                let print = match fingerprint(&path) {
                    Ok(p) => p,
                    Err(e) => panic!("cannot fingerprint {}: {e}", path.display()),
                };
                if matches!(print, Fingerprint::Dir { .. }) {
                    stack.push(path.clone());
                }
                seen.insert(path, print);
            }
        }
        seen
    }

    /// Asserts that every canary is unchanged and that the root holds exactly what it held,
    /// outside the excluded directories.
    #[track_caller]
    pub fn check(&self) {
        let mut problems = Vec::new();
        for (path, before) in &self.canaries {
            match fingerprint(path) {
                Ok(now) if &now == before => {}
                Ok(now) => {
                    problems.push(format!("{} changed: {before:?} -> {now:?}", path.display()))
                }
                Err(e) => problems.push(format!("{} is gone: {e}", path.display())),
            }
        }
        let after = self.snapshot();
        for (path, print) in &after {
            match self.before.get(path) {
                None => problems.push(format!("{} was created: {print:?}", path.display())),
                Some(before) if before != print => problems.push(format!(
                    "{} changed: {before:?} -> {print:?}",
                    path.display()
                )),
                Some(_) => {}
            }
        }
        for path in self.before.keys() {
            if !after.contains_key(path) {
                problems.push(format!("{} was removed", path.display()));
            }
        }
        assert!(
            problems.is_empty(),
            "outside the workspace and skills directories, the host changed:\n{}",
            problems.join("\n")
        );
    }

    /// Checks that the server still runs code (`print(1)`), then the host ([`Self::check`]),
    /// then shuts the app down and asserts it left no container.
    pub async fn finish(self, t: TestApp) {
        assert_healthy(&t).await;
        self.check();
        t.finish().await;
    }
}

/// The directories a [`TestApp`]'s server may write under its temp dir.
pub fn app_dirs(t: &TestApp) -> Vec<PathBuf> {
    let ws = t.workspace();
    let mut image = ws.clone().into_os_string();
    image.push(code_execution_mcp::workspace::quota::IMAGE_SUFFIX);
    // The audit trail: the server's own record of each execution, out of the sandbox's reach
    // (nothing mounts it) and written on every call.
    let audit = (t.app.config().storage.data_dir()).join(code_execution_mcp::audit::DIR_NAME);
    // Each container's state directory, made and removed by the server around it (mounted
    // read-only: the sandbox cannot write there).
    let states = (t.app.config().storage.data_dir()).join("sessions/.mounts");
    vec![
        ws,
        t.app.skills_dir().to_path_buf(),
        PathBuf::from(image),
        audit,
        states,
    ]
}

/// What a server spawned by `serve_command` in `dir` writes beside the sandbox's directories:
/// its workspace and skills, and its data directory (`CEM_DATA_DIR`: seccomp file, audit
/// trail), which it creates once started, after the watch's snapshot.
pub fn spawned_dirs(dir: &Path) -> Vec<PathBuf> {
    vec![dir.join("workspace"), dir.join("skills"), dir.join("data")]
}

/// Asserts that the server still runs code: `print(1)` prints `1`.
pub async fn assert_healthy(t: &TestApp) {
    let o = t.run("print(1)").await;
    assert_ok(&o);
    assert_eq!(o.stdout.as_str(), "1\n", "the server is healthy afterwards");
}

/// This process's memory in KiB as `/proc/self/status` reports it (`VmRSS`, `VmHWM`, ...).
pub fn proc_status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

/// Resets this process's peak RSS (`VmHWM`) to its current RSS (`/proc/self/clear_refs`).
pub fn reset_peak_rss() {
    std::fs::write("/proc/self/clear_refs", "5").expect("reset the peak RSS");
}

impl RawStdio {
    /// Sends `bytes` and a newline as they are (they need not be UTF-8).
    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        use tokio::io::AsyncWriteExt;
        self.stdin.write_all(bytes).await.unwrap();
        self.stdin.write_all(b"\n").await.unwrap();
    }

    /// The server's data directory (its workspace and skills are below it).
    pub fn dir(&self) -> &Path {
        self._dir.path()
    }
}

impl RawStdio {
    /// [`RawStdio::finish`] (stdin closed, a clean exit asserted), then `watch`'s host check
    /// while the server's directory still exists.
    pub async fn finish_watched(self, watch: HostWatch) {
        let Self {
            mut child,
            stdin,
            _dir,
            ..
        } = self;
        drop(stdin);
        super::assert_exits_when_stdin_closed(&mut child).await;
        watch.check();
        drop(_dir);
    }
}
