//! Earlier versions kept in `.history/NAME/<version>-<timestamp>.py` (+ `.json`):
//! [`SkillStore::history`] and [`SkillStore::load_version`], archiving a version before it is
//! replaced or deleted, pruning each history to `max_versions_kept`, and bounding the histories
//! of deleted skills.

use std::cmp::Reverse;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use chrono::{DateTime, Utc};
use rustix::fs::{self as rfs, AtFlags, Dir, FileType};
use rustix::io::Errno;

use super::HISTORY_DIR;
use super::error::{Result, SkillError};
use super::io::{mtime_of, remove_dir_shallow};
use super::meta::{MetaRead, RawMeta, Skill, SkillMeta, complete_meta};
use super::name::validate_name;
use super::store::SkillStore;

/// `<version>-<timestamp>` of a history file name, with its version.
fn parse_history_stem(file: &str) -> Option<(&str, u64, bool)> {
    let (stem, is_py) = match file.strip_suffix(".py") {
        Some(s) => (s, true),
        None => (file.strip_suffix(".json")?, false),
    };
    let (digits, ts) = stem.split_once('-')?;
    if digits.is_empty()
        || digits.len() > 20
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || ts.is_empty()
        || !ts.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.')
    {
        return None;
    }
    Some((stem, digits.parse().ok()?, is_py))
}

fn history_stem(version: u64, updated: DateTime<Utc>) -> String {
    format!("{version:06}-{}", updated.format("%Y%m%dT%H%M%S%.6fZ"))
}

/// One version in `.history/NAME`.
#[derive(Debug)]
struct HistEntry {
    stem: String,
    version: u64,
    has_py: bool,
    has_json: bool,
}

impl SkillStore {
    /// Metadata of the earlier versions of `name` kept in the history, oldest first (the current
    /// version is not included). Works for a deleted skill too.
    pub fn history(&self, name: &str) -> Result<Vec<SkillMeta>> {
        self.renewing(|| self.history_once(name))
    }

    fn history_once(&self, name: &str) -> Result<Vec<SkillMeta>> {
        validate_name(name)?;
        let _lock = self.lock(false)?;
        let Some(hdir) = self.history_dir(name, false)? else {
            return if self.py_exists(name)? {
                Ok(Vec::new())
            } else {
                Err(self.not_found(name))
            };
        };
        let mut out = Vec::new();
        for e in self.scan_history(hdir.as_fd())? {
            if !e.has_py {
                continue;
            }
            match self.read_history_entry(hdir.as_fd(), name, &e) {
                Ok(skill) => out.push(skill.meta),
                Err(err) => {
                    tracing::warn!(skill = name, version = e.version, error = %err, "skipping unreadable history entry")
                }
            }
        }
        Ok(out)
    }

    /// Loads an earlier version of `name` from the history.
    pub fn load_version(&self, name: &str, version: u64) -> Result<Skill> {
        self.renewing(|| self.load_version_once(name, version))
    }

    fn load_version_once(&self, name: &str, version: u64) -> Result<Skill> {
        validate_name(name)?;
        let _lock = self.lock(false)?;
        let not_found = |kept: Vec<u64>| SkillError::VersionNotFound {
            name: name.to_owned(),
            version,
            kept,
        };
        let Some(hdir) = self.history_dir(name, false)? else {
            return Err(not_found(Vec::new()));
        };
        let entries = self.scan_history(hdir.as_fd())?;
        match entries.iter().find(|e| e.version == version && e.has_py) {
            Some(e) => self.read_history_entry(hdir.as_fd(), name, e),
            None => Err(not_found(
                entries
                    .iter()
                    .filter(|e| e.has_py)
                    .map(|e| e.version)
                    .collect(),
            )),
        }
    }

    fn read_history_entry(&self, hdir: BorrowedFd<'_>, name: &str, e: &HistEntry) -> Result<Skill> {
        let py = format!("{}.py", e.stem);
        let py_path = format!("{HISTORY_DIR}/{name}/{py}");
        let Some((code, mtime)) = self.read_code(hdir, &py, &py_path)? else {
            return Err(SkillError::io(
                format!("cannot read {py_path}"),
                std::io::Error::from(std::io::ErrorKind::NotFound),
            ));
        };
        let json = format!("{}.json", e.stem);
        let json_path = format!("{HISTORY_DIR}/{name}/{json}");
        let raw = if e.has_json {
            match self.read_meta(hdir, &json, &json_path)? {
                MetaRead::Found(raw) => raw,
                MetaRead::Missing => RawMeta::default(),
                MetaRead::Malformed(reason) => {
                    return Err(SkillError::Corrupt {
                        name: name.to_owned(),
                        path: json_path,
                        reason,
                    });
                }
            }
        } else {
            RawMeta::default()
        };
        let mut meta = complete_meta(name, &raw, Some(&code), mtime).map_err(|reason| {
            SkillError::Corrupt {
                name: name.to_owned(),
                path: json_path,
                reason,
            }
        })?;
        meta.version = e.version; // the file name is authoritative in the history
        Ok(Skill { meta, code })
    }

    // ---- directories and history -------------------------------------------------------------

    /// `.history/NAME`, optionally created.
    pub(super) fn history_dir(&self, name: &str, create: bool) -> Result<Option<OwnedFd>> {
        let Some(h) = self.open_dir(self.root_fd()?.as_fd(), HISTORY_DIR, HISTORY_DIR, create)?
        else {
            return Ok(None);
        };
        self.open_dir(h.as_fd(), name, &format!("{HISTORY_DIR}/{name}"), create)
    }

    /// The versions in a history directory, oldest first. Removes stale temp files.
    fn scan_history(&self, hdir: BorrowedFd<'_>) -> Result<Vec<HistEntry>> {
        self.remove_stale_temps(hdir);
        let mut by_stem: std::collections::BTreeMap<String, HistEntry> = Default::default();
        let dir = Dir::read_from(hdir)
            .map_err(|e| SkillError::io("cannot read a history directory", e))?;
        for entry in dir {
            let entry = entry.map_err(|e| SkillError::io("cannot read a history directory", e))?;
            let Ok(file) = entry.file_name().to_str() else {
                continue;
            };
            let Some((stem, version, is_py)) = parse_history_stem(file) else {
                continue;
            };
            let e = by_stem.entry(stem.to_owned()).or_insert(HistEntry {
                stem: stem.to_owned(),
                version,
                has_py: false,
                has_json: false,
            });
            if is_py {
                e.has_py = true;
            } else {
                e.has_json = true;
            }
        }
        let mut out: Vec<HistEntry> = by_stem.into_values().collect();
        out.sort_by(|a, b| (a.version, &a.stem).cmp(&(b.version, &b.stem)));
        Ok(out)
    }

    pub(super) fn max_history_version(&self, name: &str) -> Result<u64> {
        match self.history_dir(name, false)? {
            None => Ok(0),
            Some(h) => Ok(self
                .scan_history(h.as_fd())?
                .iter()
                .map(|e| e.version)
                .max()
                .unwrap_or(0)),
        }
    }

    /// Writes version `version` of `name` (code and metadata) into its history directory.
    pub(super) fn archive(
        &self,
        hdir: BorrowedFd<'_>,
        name: &str,
        meta: &SkillMeta,
        version: u64,
        code: &str,
    ) -> Result<()> {
        let meta = SkillMeta {
            version,
            ..meta.clone()
        };
        let stem = history_stem(version, meta.updated);
        let base = format!("{HISTORY_DIR}/{name}/{stem}");
        self.write_atomic(
            hdir,
            &format!("{stem}.py"),
            code.as_bytes(),
            &format!("{base}.py"),
        )?;
        let json = serde_json::to_vec_pretty(&meta).expect("metadata serialises");
        self.write_atomic(
            hdir,
            &format!("{stem}.json"),
            &json,
            &format!("{base}.json"),
        )?;
        self.sync_dir(hdir, &format!("{HISTORY_DIR}/{name}"))
    }

    /// Removes the oldest versions beyond `max_versions_kept`.
    pub(super) fn prune_history(&self, hdir: BorrowedFd<'_>, name: &str) -> Result<()> {
        let entries = self.scan_history(hdir)?;
        let keep = self.limits.max_versions_kept;
        if entries.len() <= keep {
            return Ok(());
        }
        for e in &entries[..entries.len() - keep] {
            for file in [format!("{}.py", e.stem), format!("{}.json", e.stem)] {
                match rfs::unlinkat(hdir, file.as_str(), AtFlags::empty()) {
                    Ok(()) | Err(Errno::NOENT) => {}
                    Err(err) => {
                        return Err(SkillError::io(
                            format!("cannot prune {HISTORY_DIR}/{name}/{file}"),
                            err,
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Keeps the histories of at most `max_skills` deleted skills, removing the oldest.
    pub(super) fn prune_deleted_histories(&self) -> Result<()> {
        let Some(h) = self.open_dir(self.root_fd()?.as_fd(), HISTORY_DIR, HISTORY_DIR, false)?
        else {
            return Ok(());
        };
        let mut deleted = Vec::new();
        let dir = Dir::read_from(&h).map_err(|e| SkillError::io("cannot read .history", e))?;
        for entry in dir {
            let entry = entry.map_err(|e| SkillError::io("cannot read .history", e))?;
            let Ok(name) = entry.file_name().to_str() else {
                continue;
            };
            if validate_name(name).is_err() || self.py_exists(name)? {
                continue;
            }
            if let Ok(st) = rfs::statat(&h, name, AtFlags::SYMLINK_NOFOLLOW)
                && FileType::from_raw_mode(st.st_mode) == FileType::Directory
            {
                deleted.push((mtime_of(&st), name.to_owned()));
            }
        }
        if deleted.len() <= self.limits.max_skills {
            return Ok(());
        }
        deleted.sort_by_key(|(t, n)| (Reverse(*t), n.clone()));
        for (_, name) in deleted.drain(self.limits.max_skills..) {
            remove_dir_shallow(h.as_fd(), &name);
        }
        Ok(())
    }
}
