//! The engine's link to its vault file (`vault_file.rs`): replay at open, one append per
//! sanitize call that minted anything (a new value, or a new origin of one), a read of what other servers appended before a token is
//! called unknown, and the rewrite that bounds the log.
//!
//! Why failures only warn: the file is what lets tokens outlive this server; the model's answer
//! must not depend on the disk. A failed append (disk full, storage gone) leaves the token in
//! memory, where it restores as before on this server, is counted (`write_failures`) and logged
//! (the first time, then at every power of two). A file written with another key is not written
//! to at all (its records would be unreadable to the servers holding the right key, and theirs to
//! this one): the tenant is served from memory and an error says what to do.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::key::Scope;
use super::lock;
use super::token::{Entry, Keyed, Vault};
use super::vault_file::{ReadReport, VaultFile, VaultFileError};

/// What the vault file has done, for the statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersistenceStats {
    pub path: PathBuf,
    /// Whether minted tokens are written to the file (false when it was written with another
    /// key).
    pub persisting: bool,
    /// Appends and rewrites that failed (the tokens stayed in memory).
    pub write_failures: u64,
    /// Records read that did not authenticate or parse, and were skipped.
    pub records_rejected: u64,
}

pub(crate) struct Store {
    path: PathBuf,
    /// `None` once the file turned out to be another key's.
    file: Mutex<Option<VaultFile>>,
    /// The log is rewritten when it holds more entries than this.
    compact_above: AtomicU64,
    capacity: usize,
    write_failures: AtomicU64,
    rejected: AtomicU64,
}

impl Store {
    /// Opens the file, replays it into `vault` and rewrites it if it ended in a partial record or
    /// has grown past its bound.
    pub(crate) fn open(
        path: PathBuf,
        key: &[u8; 32],
        scope: Scope<'_>,
        vault: &mut Vault,
        keyed: &Keyed,
    ) -> Result<Self, VaultFileError> {
        let (file, report) = VaultFile::open(&path, key, scope)?;
        let held = file.hold();
        let store = Store {
            path,
            file: Mutex::new(Some(file)),
            compact_above: AtomicU64::new(2 * vault.capacity() as u64),
            capacity: vault.capacity(),
            write_failures: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
        };
        let (tail, read) = (report.tail_bytes, report.entries.len());
        if report.records == 0 && report.rejected > 0 {
            tracing::error!(
                "the PII vault file {} was written with another key: none of its {} records authenticate under --pii-key-file. Start this server with the key file the other servers use (the tokens minted before will restore again), or move the file away to start an empty vault (those tokens will no longer restore). Until then this tenant's tokens are kept in memory only",
                store.path.display(),
                report.rejected
            );
            store
                .rejected
                .store(report.rejected as u64, Ordering::Relaxed);
            *lock(&store.file) = None;
            return Ok(store);
        }
        store.replay(report, vault, keyed);
        if tail > 0 {
            tracing::warn!(
                "the PII vault file {}: the last {tail} bytes do not form a whole record (a write cut short, e.g. by a crash); ignored, and the file rewritten without them",
                store.path.display()
            );
        }
        tracing::info!(
            "PII vault file {}: {read} values read, {} kept",
            store.path.display(),
            vault.len()
        );
        if tail > 0 || read > 2 * vault.capacity() {
            // Under the lock: first what others appended since the read above, so the rewrite
            // keeps it, and a tail now is damage, not another server's append under way.
            let mut file = lock(&store.file);
            if let Some(f) = file.as_mut()
                && let Ok(more) = f.read_new()
            {
                store.replay(more, vault, keyed);
            }
            let entries = vault.entries();
            store.rewrite(file.as_mut(), &entries);
        }
        drop(held);
        Ok(store)
    }

    /// Mints what a read found into the vault and counts what it rejected.
    fn replay(&self, report: ReadReport, vault: &mut Vault, keyed: &Keyed) -> usize {
        if report.rejected > 0 {
            let total = self
                .rejected
                .fetch_add(report.rejected as u64, Ordering::Relaxed)
                + report.rejected as u64;
            tracing::warn!(
                "the PII vault file {}: {} records did not authenticate and were skipped ({total} so far): damaged, or copied from another tenant's file",
                self.path.display(),
                report.rejected
            );
        }
        for e in &report.entries {
            vault.replay(e.kind, &e.value, &keyed.mac(e.kind, &e.value), &e.origins);
        }
        report.entries.len()
    }

    /// Appends newly minted values (one write and `fdatasync`), then rewrites the log if it has
    /// outgrown its bound. Failures are logged and counted, never returned.
    pub(crate) fn append(&self, fresh: &[Entry], vault: &Mutex<Vault>, keyed: &Keyed) {
        let mut file = lock(&self.file);
        let Some(f) = file.as_mut() else {
            return;
        };
        let _held = f.hold();
        if let Err(e) = f.append(fresh) {
            self.failed("append to", &e);
        }
        if f.entries_estimate() as u64 > self.compact_above.load(Ordering::Relaxed) {
            // Under both locks: what other servers appended is read in first, so the rewrite
            // keeps it; appends of values minted after the snapshot wait for the rewrite, so
            // they land in the new file.
            if let Ok(more) = f.read_new() {
                self.replay(more, &mut lock(vault), keyed);
            }
            let entries = lock(vault).entries();
            self.rewrite(Some(f), &entries);
        }
    }

    fn rewrite(&self, file: Option<&mut VaultFile>, entries: &[Entry]) {
        let Some(file) = file else {
            return;
        };
        match file.rewrite(entries) {
            Ok(()) => self
                .compact_above
                .store(2 * self.capacity as u64, Ordering::Relaxed),
            Err(e) => {
                // Not again before another vault's worth of appends.
                self.compact_above
                    .fetch_add(self.capacity as u64, Ordering::Relaxed);
                self.failed("rewrite", &e);
            }
        }
    }

    /// Reads what was appended since the last read (by another server sharing the file, say)
    /// into `vault`. Returns how many values it read.
    pub(crate) fn refresh(&self, vault: &Mutex<Vault>, keyed: &Keyed) -> usize {
        let mut file = lock(&self.file);
        let Some(f) = file.as_mut() else {
            return 0;
        };
        let _held = f.hold();
        match f.read_new() {
            Ok(report) => self.replay(report, &mut lock(vault), keyed),
            Err(e) => {
                tracing::warn!("cannot read new records of the PII vault file: {e}");
                0
            }
        }
    }

    fn failed(&self, what: &str, e: &VaultFileError) {
        let n = self.write_failures.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_power_of_two() {
            tracing::warn!(
                "cannot {what} the PII vault file ({n} failures so far): {e}. The tokens stay in memory and restore on this server, but not on another after a move"
            );
        }
    }

    pub(crate) fn stats(&self) -> PersistenceStats {
        PersistenceStats {
            path: self.path.clone(),
            persisting: lock(&self.file).is_some(),
            write_failures: self.write_failures.load(Ordering::Relaxed),
            records_rejected: self.rejected.load(Ordering::Relaxed),
        }
    }
}
