//! A session's revisions: each saved state is a manifest, `rev-N.json` in the session's
//! directory, numbered from 1 and never reused, naming its variables' blobs.
//!
//! The manifest a sandbox sends is untrusted: [`Manifest::from_harness`] checks its shape and
//! bounds, names every sent blob by the hash the server computed, and accepts a reference to an
//! existing blob only when the state the container loaded held that blob with those sizes.
//! What it says of a variable (type, shape, preview) is shown as data, tokenized like any output.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::sessions::blobs::valid_blob;

/// Variables one manifest may name.
pub const MAX_VARS: usize = 4096;
/// Pieces of one variable (its pickle, then its out-of-band buffers).
const MAX_PIECES: usize = 4096;
/// Characters of a variable's or a module's name.
const MAX_NAME_CHARS: usize = 200;
/// Characters kept of a variable's type and preview.
const MAX_TYPE_CHARS: usize = 120;
const MAX_PREVIEW_CHARS: usize = 160;

/// Where a revision came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Parent {
    /// The session, when it is another (a fork's first revision).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    pub revision: u64,
}

/// One variable of a revision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Variable {
    pub name: String,
    pub blob: String,
    pub sizes: Vec<u64>,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub len: Option<u64>,
    #[serde(default)]
    pub preview: String,
}

impl Variable {
    pub fn bytes(&self) -> u64 {
        self.sizes.iter().fold(0, |sum, &n| sum.saturating_add(n))
    }
}

/// One saved state of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub revision: u64,
    pub created_unix: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Parent>,
    pub modules: BTreeMap<String, String>,
    pub vars: Vec<Variable>,
    /// The blob bytes the server received for it: its call's changed variables (0 for a call
    /// that changed none, and for a fork's first revision).
    #[serde(default)]
    pub received: u64,
}

impl Manifest {
    /// The state's size: its variables' bytes.
    pub fn bytes(&self) -> u64 {
        (self.vars.iter()).fold(0, |sum, v| sum.saturating_add(v.bytes()))
    }

    /// Checks the manifest a harness sent. `sent` are the blobs of this snapshot in the order
    /// they arrived (name, size); `loaded` the blobs the container was given, with their
    /// sizes. Returns the variables and modules, or why they are refused.
    pub fn from_harness(
        value: Value,
        sent: &[(String, u64)],
        loaded: &HashMap<String, Vec<u64>>,
    ) -> Result<(BTreeMap<String, String>, Vec<Variable>), String> {
        #[derive(Deserialize)]
        struct Sent {
            modules: BTreeMap<String, String>,
            vars: Vec<SentVar>,
        }
        #[derive(Deserialize)]
        struct SentVar {
            name: String,
            sizes: Vec<u64>,
            blob: Option<String>,
            sent: Option<usize>,
            #[serde(rename = "type", default)]
            kind: String,
            shape: Option<Vec<u64>>,
            len: Option<u64>,
            #[serde(default)]
            preview: String,
        }
        let manifest: Sent =
            serde_json::from_value(value).map_err(|e| format!("its manifest is malformed: {e}"))?;
        if manifest.vars.len() + manifest.modules.len() > MAX_VARS {
            return Err(format!("it names more than {MAX_VARS} variables"));
        }
        let long = |name: &str| name.chars().count() > MAX_NAME_CHARS;
        if let Some((name, module)) = (manifest.modules.iter()).find(|(n, m)| long(n) || long(m)) {
            return Err(format!(
                "the module {name:?} ({module:?}) has too long a name"
            ));
        }
        let mut vars = Vec::with_capacity(manifest.vars.len());
        for v in manifest.vars {
            let total = (v.sizes.len() <= MAX_PIECES && !long(&v.name))
                .then(|| v.sizes.iter().try_fold(0u64, |sum, &n| sum.checked_add(n)))
                .flatten()
                .filter(|&total| total > 0)
                .ok_or_else(|| {
                    format!(
                        "variable {:?} has no sound pieces",
                        crate::text::cut(&v.name, 80)
                    )
                })?;
            let blob = match (v.blob, v.sent) {
                (Some(blob), None) if loaded.get(&blob) == Some(&v.sizes) => blob,
                (None, Some(i)) if sent.get(i).is_some_and(|(_, size)| *size == total) => {
                    sent[i].0.clone()
                }
                _ => return Err(format!("variable {:?} names no blob it has", v.name)),
            };
            vars.push(Variable {
                name: v.name,
                blob,
                sizes: v.sizes,
                kind: crate::text::cut(&v.kind, MAX_TYPE_CHARS),
                shape: v.shape.filter(|s| s.len() <= 8),
                len: v.len,
                preview: crate::text::cut(&v.preview, MAX_PREVIEW_CHARS),
            });
        }
        Ok((manifest.modules, vars))
    }
}

/// The file of revision `n` in a session's directory.
pub fn path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("rev-{n}.json"))
}

/// The revision numbers on disk in a session's directory, oldest first.
pub fn numbers(dir: &Path) -> Vec<u64> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<u64> = entries
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_prefix("rev-")?
                .strip_suffix(".json")?
                .parse()
                .ok()
        })
        .collect();
    found.sort_unstable();
    found
}

/// Reads revision `n`; `None` when it is not there (or not readable as one).
pub fn read(dir: &Path, n: u64) -> Option<Manifest> {
    let data = std::fs::read(path(dir, n)).ok()?;
    let manifest: Manifest = serde_json::from_slice(&data).ok()?;
    let sound = manifest.revision == n && manifest.vars.iter().all(|v| valid_blob(&v.blob));
    sound.then_some(manifest)
}

/// Writes a revision atomically (a temp file, `fsync`, `rename`).
pub fn write(dir: &Path, manifest: &Manifest) -> std::io::Result<()> {
    let data = serde_json::to_vec(manifest).expect("a manifest serializes");
    let name = format!("rev-{}.json", manifest.revision);
    crate::sessions::write_atomic(dir, &name, &data, true)
}

/// The revisions to remove so that at most `history` remain and their blobs (each counted
/// once) fit in `max_bytes`: the oldest first, never the newest.
pub fn over_bounds(revisions: &[Manifest], history: usize, max_bytes: u64) -> Vec<u64> {
    let mut kept: Vec<&Manifest> = revisions.iter().collect();
    kept.sort_by_key(|m| m.revision);
    let mut removed = Vec::new();
    let unique_bytes = |kept: &[&Manifest]| {
        let mut seen = std::collections::HashSet::new();
        (kept.iter().flat_map(|m| &m.vars))
            .filter(|v| seen.insert(&v.blob))
            .map(Variable::bytes)
            .sum::<u64>()
    };
    while kept.len() > 1 && (kept.len() > history.max(1) || unique_bytes(&kept) > max_bytes) {
        removed.push(kept.remove(0).revision);
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn manifest(n: u64, blobs: &[(&str, u64)]) -> Manifest {
        Manifest {
            revision: n,
            created_unix: 0,
            parent: None,
            modules: BTreeMap::new(),
            vars: (blobs.iter())
                .map(|(b, size)| Variable {
                    name: format!("v{b}"),
                    blob: b.repeat(64),
                    sizes: vec![*size],
                    kind: "int".into(),
                    shape: None,
                    len: None,
                    preview: String::new(),
                })
                .collect(),
            received: 0,
        }
    }

    #[test]
    fn history_keeps_the_newest_and_counts_shared_blobs_once() {
        let revs: Vec<Manifest> = (1..=5).map(|n| manifest(n, &[("a", 100)])).collect();
        assert_eq!(over_bounds(&revs, 3, 1000), vec![1, 2]);
        assert_eq!(over_bounds(&revs, 8, 100), Vec::<u64>::new(), "one blob");
        let grown: Vec<Manifest> = (1..=3)
            .map(|n| manifest(n, &[(["b", "c", "d"][n as usize - 1], 60)]))
            .collect();
        assert_eq!(over_bounds(&grown, 8, 130), vec![1]);
        assert_eq!(over_bounds(&grown, 8, 10), vec![1, 2], "never the newest");
    }

    #[test]
    fn a_harness_manifest_names_only_blobs_it_sent_or_loaded() {
        let sent = vec![("e".repeat(64), 7)];
        let loaded = HashMap::from([("f".repeat(64), vec![2, 3])]);
        let ok = json!({"modules": {"np": "numpy"}, "vars": [
            {"name": "a", "sizes": [3, 4], "sent": 0, "type": "list", "len": 2, "preview": "[1, 2]"},
            {"name": "b", "sizes": [2, 3], "blob": "f".repeat(64), "type": "x"}]});
        let (modules, vars) = Manifest::from_harness(ok, &sent, &loaded).unwrap();
        assert_eq!(modules["np"], "numpy");
        assert_eq!(vars[0].blob, "e".repeat(64));
        assert_eq!(vars[1].bytes(), 5);
        for bad in [
            json!({"modules": {}, "vars": [{"name": "a", "sizes": [7], "blob": "e".repeat(64)}]}),
            json!({"modules": {}, "vars": [{"name": "a", "sizes": [6], "sent": 0}]}),
            json!({"modules": {}, "vars": [{"name": "a", "sizes": [7], "sent": 1}]}),
            json!({"modules": {}, "vars": [{"name": "a", "sizes": [5], "blob": "f".repeat(64)}]}),
            json!({"vars": []}),
            json!({"modules": {}, "vars": [{"name": "a", "sizes": [u64::MAX, 8], "sent": 0}]}),
            json!({"modules": {}, "vars": [{"name": "a", "sizes": [], "sent": 0}]}),
            json!({"modules": {"m": "x".repeat(201)}, "vars": []}),
        ] {
            assert!(
                Manifest::from_harness(bad.clone(), &sent, &loaded).is_err(),
                "{bad}"
            );
        }
    }
}
