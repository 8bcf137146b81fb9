//! A session's next revision as it arrives: blobs first (each staged under the hash the server
//! computes), then the manifest, checked against what arrived and what the container was
//! given. Only a whole, checked snapshot becomes a revision: its blobs are placed and its
//! manifest written under the tenant's blob lock, then the history bounds apply and, when they
//! removed revisions, the blobs nothing names any more are swept. A snapshot that fails leaves
//! nothing but its reason, which the session's view shows.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::sessions::blobs::{BlobWriter, Blobs, Staged};
use crate::sessions::revisions::{self, Manifest, Parent};
use crate::sessions::{Meta, SessionLimits, now_unix, read_meta, write_meta};

/// The next revision of one session, being written.
#[derive(Debug)]
pub struct RevisionWriter {
    dir: PathBuf,
    blobs: Blobs,
    limits: SessionLimits,
    /// The revision the container loaded (its blobs may be named without being sent).
    parent: Option<Manifest>,
    /// The number reserved for it when its call began.
    number: u64,
    current: Option<BlobWriter>,
    /// The blobs of this snapshot so far, staged until it commits.
    staged: Vec<Staged>,
    bytes: u64,
}

impl RevisionWriter {
    pub(crate) fn new(
        dir: PathBuf,
        blobs: Blobs,
        limits: SessionLimits,
        parent: Option<Manifest>,
        number: u64,
    ) -> Self {
        Self {
            dir,
            blobs,
            limits,
            parent,
            number,
            current: None,
            staged: Vec::new(),
            bytes: 0,
        }
    }

    /// Begins a blob of `bytes` bytes (the one before it must be whole).
    pub fn blob(&mut self, bytes: u64) -> std::io::Result<()> {
        self.finish_blob()?;
        self.bytes = (self.bytes.checked_add(bytes))
            .filter(|&total| total <= self.limits.max_bytes)
            .ok_or_else(|| {
                std::io::Error::other(format!(
                    "the snapshot is over the session's bound of {} MB",
                    self.limits.max_bytes >> 20
                ))
            })?;
        self.current = Some(self.blobs.writer(bytes)?);
        Ok(())
    }

    pub fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match &mut self.current {
            Some(blob) => blob.write(bytes),
            None => Err(std::io::Error::other("snapshot bytes outside a blob")),
        }
    }

    fn finish_blob(&mut self) -> std::io::Result<()> {
        if let Some(blob) = self.current.take() {
            self.staged.push(blob.finish()?);
        }
        Ok(())
    }

    /// Makes the snapshot the session's newest revision, if its manifest holds; returns it.
    /// A snapshot refused is noted in the session's meta, with why.
    pub fn commit(mut self, manifest: Value) -> std::io::Result<Manifest> {
        let committed = self.try_commit(manifest);
        if let Err(e) = &committed {
            self.note_unsaved(e.to_string());
        }
        committed
    }

    /// Notes in the session's meta that the snapshot of its last call was not saved, and why.
    pub fn abort(self, reason: String) {
        self.note_unsaved(reason);
    }

    fn note_unsaved(&self, reason: String) {
        if let Ok(meta) = read_meta(&self.dir) {
            let unsaved = Some(crate::text::cut(&reason, 500));
            let _ = write_meta(&self.dir, Meta { unsaved, ..meta });
        }
    }

    fn try_commit(&mut self, manifest: Value) -> std::io::Result<Manifest> {
        self.finish_blob()?;
        let loaded: HashMap<String, Vec<u64>> = (self.parent.iter())
            .flat_map(|p| &p.vars)
            .map(|v| (v.blob.clone(), v.sizes.clone()))
            .collect();
        let sent: Vec<(String, u64)> = (self.staged.iter())
            .map(|b| (b.name.clone(), b.bytes))
            .collect();
        let (modules, vars) = Manifest::from_harness(manifest, &sent, &loaded)
            .map_err(|e| std::io::Error::other(format!("the snapshot was refused: {e}")))?;
        let manifest = Manifest {
            revision: self.number,
            created_unix: now_unix(),
            parent: (self.parent.as_ref()).map(|p| Parent {
                session: None,
                revision: p.revision,
            }),
            modules,
            vars,
            // Every staged blob arrived whole: its announced size is what came.
            received: self.bytes,
        };
        if manifest.bytes() > self.limits.max_bytes {
            return Err(std::io::Error::other(format!(
                "the state is over the session's bound of {} MB",
                self.limits.max_bytes >> 20
            )));
        }
        {
            let _lock = self.blobs.lock();
            for staged in self.staged.drain(..) {
                staged.place()?;
            }
            revisions::write(&self.dir, &manifest)?;
            let meta = read_meta(&self.dir)?;
            write_meta(
                &self.dir,
                Meta {
                    used_unix: now_unix(),
                    bytes: manifest.bytes(),
                    revision: manifest.revision.max(meta.revision),
                    unsaved: None,
                    ..meta
                },
            )?;
        }
        self.apply_bounds();
        Ok(manifest)
    }

    /// Removes the revisions past the history and byte bounds, then the blobs nothing names.
    fn apply_bounds(&self) {
        let held: Vec<Manifest> = (revisions::numbers(&self.dir).into_iter())
            .filter_map(|n| revisions::read(&self.dir, n))
            .collect();
        let over = revisions::over_bounds(&held, self.limits.history, self.limits.max_bytes);
        for n in &over {
            let _ = std::fs::remove_file(revisions::path(&self.dir, *n));
            let _ = std::fs::remove_file(super::plan_results::path(&self.dir, *n));
        }
        if !over.is_empty()
            && let Some(sessions) = self.dir.parent()
        {
            super::sweep(sessions, &self.blobs, super::blobs::SWEEP_GRACE);
        }
    }
}
