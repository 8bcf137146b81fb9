//! Reading the current skills: [`SkillStore::load`] and [`SkillStore::list`], and the readers
//! they share with the writers: a code file (bounded, UTF-8), its metadata (completed from the
//! code when partial), the scan of the store directory, and the "not found" error with the
//! closest existing names.

use std::os::fd::{AsFd, BorrowedFd};

use chrono::{DateTime, Utc};
use rustix::fs::{self as rfs, AtFlags, Dir, FileType};
use rustix::io::Errno;

use super::error::{Result, SkillError};
use super::io::{check_code, kind_name, mtime_of, read_bounded};
use super::meta::{MetaRead, RawMeta, Skill, SkillMeta, complete_meta};
use super::name::{is_name_file, levenshtein, validate_name};
use super::store::SkillStore;
use super::{MAX_META_BYTES, SUGGESTIONS};

/// The current version of a skill, read for an update.
pub(super) struct Current {
    pub(super) meta: SkillMeta,
    pub(super) code: String,
    /// Why `NAME.json` could not be used, when it could not.
    pub(super) meta_problem: Option<String>,
}

impl SkillStore {
    /// Loads skill `name` with its code.
    pub fn load(&self, name: &str) -> Result<Skill> {
        self.renewing(|| self.load_once(name))
    }

    fn load_once(&self, name: &str) -> Result<Skill> {
        validate_name(name)?;
        let _lock = self.lock(false)?;
        match self.read_current(name)? {
            None => Err(self.not_found(name)),
            Some(Current {
                meta_problem: Some(reason),
                ..
            }) => Err(SkillError::Corrupt {
                name: name.to_owned(),
                path: format!("{name}.json"),
                reason,
            }),
            Some(cur) => Ok(Skill {
                meta: cur.meta,
                code: cur.code,
            }),
        }
    }

    /// Metadata of every skill, sorted by name. Entries that cannot be read (a symlink, a
    /// non-regular file, malformed metadata, an I/O error) are skipped and logged; `.history`,
    /// temp files and files whose names are not skill names are ignored.
    pub fn list(&self) -> Result<Vec<SkillMeta>> {
        self.renewing(|| self.list_once())
    }

    fn list_once(&self) -> Result<Vec<SkillMeta>> {
        let _lock = self.lock(false)?;
        let mut out = Vec::new();
        for (name, ft) in self.scan_entries()? {
            if ft != FileType::RegularFile {
                tracing::warn!(skill = %name, kind = kind_name(ft), "skipping skill: {name}.py is not a regular file");
                continue;
            }
            match self.read_listed(&name) {
                Ok(Some(meta)) => out.push(meta),
                Ok(None) => {} // deleted meanwhile by hand
                Err(e) => tracing::warn!(skill = %name, error = %e, "skipping unreadable skill"),
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    // ---- reading ---------------------------------------------------------------------------

    /// Reads a code file: bounded, UTF-8, no NUL. `None` when it does not exist.
    pub(super) fn read_code(
        &self,
        dir: BorrowedFd<'_>,
        file: &str,
        path: &str,
    ) -> Result<Option<(String, DateTime<Utc>)>> {
        let Some((f, st)) = self.open_regular(dir, file, path)? else {
            return Ok(None);
        };
        let limit = self.limits.max_code_bytes;
        let what = format!("The stored file {path:?}");
        let buf = read_bounded(f, limit, path)?;
        if buf.len() as u64 > limit {
            return Err(SkillError::TooLarge {
                what,
                size: (st.st_size as u64).max(buf.len() as u64),
                limit,
            });
        }
        let code = check_code(&buf, limit, &what)?.to_owned();
        Ok(Some((code, mtime_of(&st))))
    }

    pub(super) fn read_meta(
        &self,
        dir: BorrowedFd<'_>,
        file: &str,
        path: &str,
    ) -> Result<MetaRead> {
        let Some((f, _)) = self.open_regular(dir, file, path)? else {
            return Ok(MetaRead::Missing);
        };
        let buf = read_bounded(f, MAX_META_BYTES, path)?;
        if buf.len() as u64 > MAX_META_BYTES {
            return Ok(MetaRead::Malformed(format!(
                "it is larger than {MAX_META_BYTES} bytes"
            )));
        }
        Ok(match serde_json::from_slice::<RawMeta>(&buf) {
            Ok(raw) => MetaRead::Found(raw),
            Err(e) => MetaRead::Malformed(format!("it is not a valid metadata object ({e})")),
        })
    }

    /// The current version of `name`, or `None` when `NAME.py` does not exist. Malformed
    /// metadata is replaced by metadata derived from the code file and reported in
    /// `meta_problem`.
    pub(super) fn read_current(&self, name: &str) -> Result<Option<Current>> {
        let py = format!("{name}.py");
        let Some((code, mtime)) = self.read_code(self.root_fd()?.as_fd(), &py, &py)? else {
            return Ok(None);
        };
        let json = format!("{name}.json");
        let (raw, mut meta_problem) = match self.read_meta(self.root_fd()?.as_fd(), &json, &json)? {
            MetaRead::Missing => (RawMeta::default(), None),
            MetaRead::Malformed(reason) => (RawMeta::default(), Some(reason)),
            MetaRead::Found(raw) => (raw, None),
        };
        let meta = match complete_meta(name, &raw, Some(&code), mtime) {
            Ok(meta) => meta,
            Err(reason) => {
                meta_problem = Some(reason);
                complete_meta(name, &RawMeta::default(), Some(&code), mtime)
                    .expect("metadata derived from the file is complete")
            }
        };
        Ok(Some(Current {
            meta,
            code,
            meta_problem,
        }))
    }

    /// Metadata of `name` for a listing: from `NAME.json` alone when it is complete, otherwise
    /// completed from the code.
    fn read_listed(&self, name: &str) -> Result<Option<SkillMeta>> {
        let json = format!("{name}.json");
        let raw = match self.read_meta(self.root_fd()?.as_fd(), &json, &json)? {
            MetaRead::Missing => RawMeta::default(),
            MetaRead::Malformed(reason) => {
                return Err(SkillError::Corrupt {
                    name: name.to_owned(),
                    path: json,
                    reason,
                });
            }
            MetaRead::Found(raw) => raw,
        };
        let py = format!("{name}.py");
        let complete = raw.sha256.is_some()
            && raw.size.is_some()
            && raw.created.is_some()
            && raw.updated.is_some();
        let result = if complete {
            let st = match rfs::statat(&*self.root_fd()?, py.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(Errno::NOENT) => return Ok(None),
                Err(e) => return Err(SkillError::io(format!("cannot stat {py}"), e)),
            };
            complete_meta(name, &raw, None, mtime_of(&st))
        } else {
            let Some((code, mtime)) = self.read_code(self.root_fd()?.as_fd(), &py, &py)? else {
                return Ok(None);
            };
            complete_meta(name, &raw, Some(&code), mtime)
        };
        result.map(Some).map_err(|reason| SkillError::Corrupt {
            name: name.to_owned(),
            path: json,
            reason,
        })
    }

    /// `(name, type)` of every `NAME.py` entry whose stem is a valid name, not following links.
    fn scan_entries(&self) -> Result<Vec<(String, FileType)>> {
        let mut out = Vec::new();
        let dir = Dir::read_from(&*self.root_fd()?)
            .map_err(|e| SkillError::io("cannot read the skills directory", e))?;
        for entry in dir {
            let entry = entry.map_err(|e| SkillError::io("cannot read the skills directory", e))?;
            let Some(file) = entry.file_name().to_str().ok() else {
                continue;
            };
            let Some(name) = is_name_file(file, ".py") else {
                continue;
            };
            let mut ft = entry.file_type();
            if ft == FileType::Unknown {
                match rfs::statat(&*self.root_fd()?, file, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => ft = FileType::from_raw_mode(st.st_mode),
                    Err(_) => continue,
                }
            }
            out.push((name.to_owned(), ft));
        }
        Ok(out)
    }

    /// Names of the skills that exist (regular `NAME.py`), sorted.
    pub(super) fn scan_names(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = self
            .scan_entries()?
            .into_iter()
            .filter(|(_, ft)| *ft == FileType::RegularFile)
            .map(|(n, _)| n)
            .collect();
        names.sort();
        Ok(names)
    }

    pub(super) fn not_found(&self, name: &str) -> SkillError {
        let names = self.scan_names().unwrap_or_default();
        let total = names.len();
        let existing = if total <= SUGGESTIONS {
            names
        } else {
            let lower = name.to_ascii_lowercase();
            let mut scored: Vec<(usize, String)> = names
                .into_iter()
                .map(|n| (levenshtein(&lower, &n.to_ascii_lowercase()), n))
                .collect();
            scored.sort();
            scored
                .into_iter()
                .take(SUGGESTIONS)
                .map(|(_, n)| n)
                .collect()
        };
        SkillError::NotFound {
            name: name.to_owned(),
            existing,
            total,
        }
    }

    pub(super) fn py_exists(&self, name: &str) -> Result<bool> {
        let py = format!("{name}.py");
        match rfs::statat(&*self.root_fd()?, py.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(_) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(SkillError::io(format!("cannot stat {py}"), e)),
        }
    }
}
