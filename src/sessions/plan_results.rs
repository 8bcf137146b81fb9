//! What a session keeps of a plan: the outcomes (and results) of the plan made by the call
//! that produced a revision, as `plan-N.json` beside `rev-N.json`. A call that runs on
//! revision N gets them from `plan_results()`; a fork's first revision keeps its source's; they
//! go when their revision goes.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{SessionError, SessionStore};

/// The plan outcomes of revision `n` in a session's directory.
pub fn path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("plan-{n}.json"))
}

/// Copies revision `from`'s plan outcomes in `source` to revision `to` in `target`, if any.
pub fn copy(source: &Path, from: u64, target: &Path, to: u64) -> std::io::Result<()> {
    match std::fs::read(path(source, from)) {
        Ok(data) => super::write_atomic(target, &format!("plan-{to}.json"), &data, false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

impl SessionStore {
    /// The outcomes of the plan made by the call that produced revision `n`, if it made one.
    pub fn plan_results(&self, handle: &str, n: u64) -> Option<Value> {
        let dir = self.session_dir(handle).ok()?;
        let data = std::fs::read(path(&dir, n)).ok()?;
        serde_json::from_slice(&data).ok()
    }

    /// Keeps the outcomes of the plan made by the call that produced revision `n`.
    pub fn save_plan_results(
        &self,
        handle: &str,
        n: u64,
        value: &Value,
    ) -> Result<(), SessionError> {
        let dir = self.session_dir(handle)?;
        let data = serde_json::to_vec(value).expect("a JSON value serializes");
        super::write_atomic(&dir, &format!("plan-{n}.json"), &data, false).map_err(self.io(&dir))
    }
}
