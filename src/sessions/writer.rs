//! A session's next revision as it arrives: blobs first (each stored under the hash the server
//! computes), then the manifest, checked against what arrived and what the container was
//! given. Only a whole, checked snapshot becomes a revision; then the history bounds apply and
//! the blobs nothing names any more are swept.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::sessions::blobs::{BlobWriter, Blobs};
use crate::sessions::revisions::{self, Manifest, Parent};
use crate::sessions::{Meta, SessionLimits, now_unix, write_meta};

/// The next revision of one session, being written.
#[derive(Debug)]
pub struct RevisionWriter {
    dir: PathBuf,
    blobs: Blobs,
    limits: SessionLimits,
    /// The revision the container loaded (its blobs may be named without being sent).
    parent: Option<Manifest>,
    current: Option<BlobWriter>,
    /// The blobs of this snapshot so far: name and size.
    sent: Vec<(String, u64)>,
    bytes: u64,
}

impl RevisionWriter {
    pub(crate) fn new(
        dir: PathBuf,
        blobs: Blobs,
        limits: SessionLimits,
        parent: Option<Manifest>,
    ) -> Self {
        Self {
            dir,
            blobs,
            limits,
            parent,
            current: None,
            sent: Vec::new(),
            bytes: 0,
        }
    }

    /// Begins a blob of `bytes` bytes (the one before it must be whole).
    pub fn blob(&mut self, bytes: u64) -> std::io::Result<()> {
        self.finish_blob()?;
        self.bytes += bytes;
        if self.bytes > self.limits.max_bytes {
            return Err(std::io::Error::other(format!(
                "the snapshot is over the session's bound of {} MB",
                self.limits.max_bytes >> 20
            )));
        }
        self.current = Some(self.blobs.writer(bytes)?);
        self.sent.push((String::new(), bytes));
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
            let name = blob.finish()?;
            self.sent.last_mut().expect("a blob begun").0 = name;
        }
        Ok(())
    }

    /// Makes the snapshot the session's newest revision, if its manifest holds; returns it.
    pub fn commit(mut self, manifest: Value) -> std::io::Result<Manifest> {
        self.finish_blob()?;
        let loaded: HashMap<String, Vec<u64>> = (self.parent.iter())
            .flat_map(|p| &p.vars)
            .map(|v| (v.blob.clone(), v.sizes.clone()))
            .collect();
        let (modules, vars) = Manifest::from_harness(manifest, &self.sent, &loaded)
            .map_err(|e| std::io::Error::other(format!("the snapshot was refused: {e}")))?;
        let meta = read_meta(&self.dir)?;
        let manifest = Manifest {
            revision: meta.revision + 1,
            created_unix: now_unix(),
            parent: (self.parent.as_ref()).map(|p| Parent {
                session: None,
                revision: p.revision,
            }),
            modules,
            vars,
        };
        if manifest.bytes() > self.limits.max_bytes {
            return Err(std::io::Error::other(format!(
                "the state is over the session's bound of {} MB",
                self.limits.max_bytes >> 20
            )));
        }
        revisions::write(&self.dir, &manifest)?;
        write_meta(
            &self.dir,
            Meta {
                used_unix: now_unix(),
                bytes: manifest.bytes(),
                revision: manifest.revision,
                ..meta
            },
        )?;
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
        }
        if let Some(sessions) = self.dir.parent() {
            super::sweep(sessions, &self.blobs, super::blobs::SWEEP_GRACE);
        }
    }
}

fn read_meta(dir: &std::path::Path) -> std::io::Result<Meta> {
    let data = std::fs::read(dir.join(super::META))?;
    serde_json::from_slice(&data)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}
