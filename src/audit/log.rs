//! One tenant's audit file on one node: records appended as JSON lines, each with a single
//! `write(2)` on a file opened `O_APPEND` (whole lines, even when another process appends too,
//! and in the kernel's hands before the tool answers: a crash of the server loses none), and
//! rotated by size: past `--audit-max-mb` the file is renamed `NODE.<time>.jsonl` and a new
//! one begun; the oldest rotated files past `--audit-keep` are deleted. A line a failed write
//! cut short, in this run or an earlier one, is never continued: the next record starts a line
//! of its own.
//!
//! A write that fails (a full disk, a read-only or missing directory) never fails the call:
//! the trail turns unhealthy, which the log says once (and again when it recovers), the
//! metrics and `/health` show, and `--audit-required` turns into refusing new executions
//! until a write can succeed again ([`AuditLog::check_writable`]).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// How the trail is kept (from the `--audit-*` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditSettings {
    /// A file is rotated before it would pass this size.
    pub max_file_bytes: u64,
    /// Rotated files kept per node and tenant (older ones are deleted).
    pub keep_rotated: usize,
    /// Records carry the code itself (tokenized), not only its digest.
    pub include_code: bool,
    /// Executions are refused while the trail cannot be written.
    pub required: bool,
}

/// Free space below which [`AuditLog::check_writable`] calls the trail's disk full.
const MIN_FREE_BYTES: u64 = 1 << 20;

/// Why a record could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the audit trail {}: {source}", path.display())]
pub struct AuditError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// The trail's state, for `/health`, the metrics and `get_execution_stats` (no paths: the
/// model may read it).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct AuditHealth {
    /// The last write succeeded (or none failed yet).
    pub ok: bool,
    pub records_written: u64,
    pub write_failures: u64,
    /// Why the last write failed, while the trail is failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub struct AuditLog {
    dir: PathBuf,
    stem: String,
    settings: AuditSettings,
    open: Mutex<Open>,
    written: AtomicU64,
    failures: AtomicU64,
    /// Why the last write failed; `None` while healthy.
    failing: Mutex<Option<String>>,
}

#[derive(Default)]
struct Open {
    file: Option<(File, u64)>,
    /// A write failed part-way: the next record starts on a line of its own.
    torn: bool,
}

impl AuditLog {
    /// The trail of the tenant whose directory is `tenant_dir` (see
    /// [`super::valid_tenant_dir`]) on node `node`, under `DATA_DIR/audit`. Nothing is
    /// created until the first record.
    pub fn new(data_dir: &Path, tenant_dir: &str, node: &str, settings: AuditSettings) -> Self {
        Self {
            dir: data_dir.join(super::DIR_NAME).join(tenant_dir),
            stem: super::node_file_stem(node),
            settings,
            open: Mutex::new(Open::default()),
            written: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            failing: Mutex::new(None),
        }
    }

    pub fn settings(&self) -> &AuditSettings {
        &self.settings
    }

    /// The file records go to now.
    pub fn path(&self) -> PathBuf {
        self.dir.join(format!("{}.jsonl", self.stem))
    }

    pub fn health(&self) -> AuditHealth {
        AuditHealth {
            ok: self.is_ok(),
            records_written: self.written.load(Ordering::Relaxed),
            write_failures: self.failures.load(Ordering::Relaxed),
            error: self.failing.lock().expect("audit lock").clone(),
        }
    }

    pub fn is_ok(&self) -> bool {
        self.failing.lock().expect("audit lock").is_none()
    }

    /// Appends `record` as one line (blocking: call it off the async threads). A failure is
    /// counted and logged here; the caller decides nothing on it.
    pub fn append(&self, record: &impl serde::Serialize) -> Result<(), AuditError> {
        let mut line = serde_json::to_string(record).expect("a record serializes");
        line.push('\n');
        let mut open = self.open.lock().expect("audit lock");
        let result = self.write_line(&mut open, &line);
        drop(open);
        match &result {
            Ok(()) => {
                self.written.fetch_add(1, Ordering::Relaxed);
                if let Some(was) = self.failing.lock().expect("audit lock").take() {
                    tracing::info!(
                        "audit trail: writing again to {} (it failed: {was})",
                        self.path().display()
                    );
                }
            }
            Err(e) => self.failed(e),
        }
        result
    }

    fn write_line(&self, open: &mut Open, line: &str) -> Result<(), AuditError> {
        let path = self.path();
        let err = |source| AuditError {
            path: path.clone(),
            source,
        };
        if let Some((_, size)) = &open.file
            && *size > 0
            && size + line.len() as u64 > self.settings.max_file_bytes
        {
            open.file = None;
            self.rotate().map_err(err)?;
        }
        if open.file.is_none() {
            self.open_file(open).map_err(err)?;
        }
        let (file, size) = open.file.as_mut().expect("opened above");
        let line = if open.torn {
            format!("\n{line}")
        } else {
            line.to_string()
        };
        match write_whole(file, line.as_bytes()) {
            Ok(()) => {
                *size += line.len() as u64;
                open.torn = false;
                Ok(())
            }
            Err((written, e)) => {
                // Reopened next time: the directory may have been fixed or replaced.
                open.file = None;
                open.torn = written > 0;
                Err(err(e))
            }
        }
    }

    /// Opens the current file into `open`. A file that ends in a line cut short (a write that
    /// failed part-way, perhaps in an earlier run of the server) gets its next record on a line
    /// of its own, so the cut line is the only one lost.
    fn open_file(&self, open: &mut Open) -> std::io::Result<()> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(self.path())?;
        let size = file.metadata()?.len();
        let mut last = [b'\n'];
        if size > 0 {
            file.read_exact_at(&mut last, size - 1)?;
        }
        if last[0] != b'\n' && !open.torn {
            tracing::warn!(
                "audit trail: {} ends in a line cut short (a write that failed part-way); the next record starts on a line of its own and `code-execution-mcp audit` skips the cut one",
                self.path().display()
            );
        }
        open.torn |= last[0] != b'\n';
        open.file = Some((file, size));
        Ok(())
    }

    /// Renames the current file aside with the time, then deletes the oldest rotated files
    /// past the bound.
    fn rotate(&self) -> std::io::Result<()> {
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
        let aside = self.dir.join(format!("{}.{stamp}.jsonl", self.stem));
        std::fs::rename(self.path(), &aside)?;
        let mut rotated: Vec<String> = std::fs::read_dir(&self.dir)?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| rotated_stamp(name, &self.stem).is_some())
            .collect();
        rotated.sort();
        let excess = rotated.len().saturating_sub(self.settings.keep_rotated);
        for name in &rotated[..excess] {
            if let Err(e) = std::fs::remove_file(self.dir.join(name)) {
                tracing::warn!("audit trail: cannot delete the old file {name}: {e}");
            }
        }
        Ok(())
    }

    fn failed(&self, e: &AuditError) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        let reason = e.source.to_string();
        let mut failing = self.failing.lock().expect("audit lock");
        if failing.is_none() {
            tracing::error!(
                "{e}. Executions {} while it cannot; free space or make {} writable",
                if self.settings.required {
                    "are refused (--audit-required)"
                } else {
                    "go on unrecorded (--audit-required would refuse them)"
                },
                self.dir.display()
            );
        } else {
            tracing::debug!("{e}");
        }
        *failing = Some(reason);
    }

    /// Whether a record could be written now: always while the trail is healthy; while it is
    /// failing, only if its file opens for appending and its file system has room. For
    /// `--audit-required`, before an execution starts.
    pub fn check_writable(&self) -> Result<(), AuditError> {
        if self.is_ok() {
            return Ok(());
        }
        let path = self.path();
        let err = |source| AuditError {
            path: path.clone(),
            source,
        };
        let mut open = self.open.lock().expect("audit lock");
        if open.file.is_none() {
            self.open_file(&mut open).map_err(err)?;
        }
        let stat = rustix::fs::statvfs(&self.dir).map_err(|e| err(e.into()))?;
        if stat.f_bavail.saturating_mul(stat.f_frsize) < MIN_FREE_BYTES {
            return Err(err(std::io::Error::from_raw_os_error(libc::ENOSPC)));
        }
        Ok(())
    }
}

/// Writes all of `bytes`; on failure, how many were written before it.
fn write_whole(file: &mut File, bytes: &[u8]) -> Result<(), (usize, std::io::Error)> {
    let mut done = 0;
    while done < bytes.len() {
        match file.write(&bytes[done..]) {
            Ok(0) => return Err((done, std::io::ErrorKind::WriteZero.into())),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err((done, e)),
        }
    }
    Ok(())
}

/// The time part of a rotated file of `stem` (`STEM.20261126T101500.123Z.jsonl`), or `None`
/// for any other name (another node's files, the current file).
pub fn rotated_stamp<'a>(name: &'a str, stem: &str) -> Option<&'a str> {
    let stamp = name.strip_prefix(stem)?.strip_prefix('.')?;
    let stamp = stamp.strip_suffix(".jsonl")?;
    let b = stamp.as_bytes();
    let shaped = b.len() == 20
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[8] == b'T'
        && b[9..15].iter().all(u8::is_ascii_digit)
        && b[15] == b'.'
        && b[16..19].iter().all(u8::is_ascii_digit)
        && b[19] == b'Z';
    shaped.then_some(stamp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::record::{now, sample};

    use crate::audit::AuditRecord;

    fn record(i: usize) -> AuditRecord {
        sample(Some("alice"), &now(), &format!("exe_{i:016x}"))
    }

    fn settings(max: u64, keep: usize) -> AuditSettings {
        AuditSettings {
            max_file_bytes: max,
            keep_rotated: keep,
            include_code: false,
            required: false,
        }
    }

    #[test]
    fn records_are_lines_and_files_rotate_by_size_keeping_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let line_len = serde_json::to_string(&record(0)).unwrap().len() as u64 + 1;
        let log = AuditLog::new(dir.path(), "alice", "n1", settings(line_len * 3, 2));
        for i in 0..20 {
            log.append(&record(i)).unwrap();
            // Rotated names carry milliseconds: keep them apart.
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let tenant = dir.path().join("audit/alice");
        let mut names: Vec<String> = std::fs::read_dir(&tenant)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names.len(), 3, "the current file and 2 rotated: {names:?}");
        assert!(names.contains(&"n1.jsonl".to_string()));
        let current = std::fs::read_to_string(tenant.join("n1.jsonl")).unwrap();
        let last: AuditRecord = serde_json::from_str(current.lines().last().unwrap()).unwrap();
        assert_eq!(last.execution_id, format!("exe_{:016x}", 19));
        assert!(current.lines().count() <= 3);
        assert_eq!(log.health().records_written, 20);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(tenant.join("n1.jsonl"))
                .unwrap()
                .permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_failing_directory_is_reported_and_recovers() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the audit directory should be: every write fails.
        std::fs::write(dir.path().join("audit"), b"").unwrap();
        let log = AuditLog::new(dir.path(), "alice", "n1", settings(1 << 20, 2));
        assert!(log.append(&record(0)).is_err());
        assert!(log.check_writable().is_err());
        let health = log.health();
        assert!(!health.ok);
        assert_eq!(health.write_failures, 1);
        assert!(health.error.is_some());
        std::fs::remove_file(dir.path().join("audit")).unwrap();
        log.check_writable().unwrap();
        log.append(&record(1)).unwrap();
        assert!(log.health().ok);
    }

    #[test]
    fn a_link_at_the_file_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let tenant = dir.path().join("audit/alice");
        std::fs::create_dir_all(&tenant).unwrap();
        let target = dir.path().join("elsewhere");
        std::os::unix::fs::symlink(&target, tenant.join("n1.jsonl")).unwrap();
        let log = AuditLog::new(dir.path(), "alice", "n1", settings(1 << 20, 2));
        assert!(log.append(&record(0)).is_err());
        assert!(!target.exists());
    }

    #[test]
    fn rotated_names_are_recognised_only_for_their_node() {
        assert_eq!(
            rotated_stamp("n1.20261126T101500.123Z.jsonl", "n1"),
            Some("20261126T101500.123Z")
        );
        assert_eq!(rotated_stamp("n1.jsonl", "n1"), None);
        assert_eq!(rotated_stamp("n1.b.20261126T101500.123Z.jsonl", "n1"), None);
        assert_eq!(rotated_stamp("n2.20261126T101500.123Z.jsonl", "n1"), None);
    }
}
