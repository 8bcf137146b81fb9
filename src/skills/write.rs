//! Changing the store: [`SkillStore::save`] and [`SkillStore::delete`], each under the
//! exclusive lock, archiving the current version into the history first, and the write of a
//! skill's two files (`NAME.py`, then `NAME.json`, each atomically).

use std::os::fd::AsFd;

use rustix::fs::{self as rfs, AtFlags, FileType};
use rustix::io::Errno;

use super::error::{Result, SkillError};
use super::io::{check_code, kind_name};
use super::meta::{SkillMeta, now, sha256_hex};
use super::name::validate_name;
use super::store::SkillStore;

impl SkillStore {
    /// Saves `code` as skill `name`, keeping the previous version in the history. Saving code
    /// and description identical to the current version changes nothing and returns its
    /// metadata.
    pub fn save(&self, name: &str, code: impl AsRef<[u8]>, description: &str) -> Result<SkillMeta> {
        let code = code.as_ref();
        self.renewing(|| self.save_once(name, code, description))
    }

    fn save_once(&self, name: &str, code: &[u8], description: &str) -> Result<SkillMeta> {
        validate_name(name)?;
        let code = check_code(code, self.limits.max_code_bytes, "The skill code")?;
        let description = self.check_description(description)?;
        let _lock = self.lock(true)?;

        let current = self.read_current(name)?;
        if let Some(cur) = &current {
            if let Some(problem) = &cur.meta_problem {
                tracing::warn!(skill = name, problem, "rewriting malformed skill metadata");
            } else if cur.code == code && cur.meta.description == description {
                return Ok(cur.meta.clone());
            }
        } else {
            let count = self.scan_names()?.len();
            if count >= self.limits.max_skills {
                return Err(SkillError::TooMany {
                    count,
                    limit: self.limits.max_skills,
                });
            }
        }

        let hist_max = self.max_history_version(name)?;
        let at = now();
        let (created, version) = match current {
            Some(cur) => {
                let archived = cur.meta.version.max(hist_max + 1);
                if self.limits.max_versions_kept > 0 {
                    let hdir = self.history_dir(name, true)?.expect("created");
                    self.archive(hdir.as_fd(), name, &cur.meta, archived, &cur.code)?;
                    self.prune_history(hdir.as_fd(), name)?;
                }
                (cur.meta.created, archived + 1)
            }
            None => (at, hist_max + 1),
        };
        let meta = SkillMeta {
            name: name.to_owned(),
            description: description.to_owned(),
            created,
            updated: at,
            sha256: sha256_hex(code.as_bytes()),
            version,
            size: code.len() as u64,
        };
        self.write_skill(&meta, code)?;
        Ok(meta)
    }

    /// Deletes skill `name`: its current version moves into the history (up to
    /// `max_versions_kept`), after which it no longer loads or lists.
    pub fn delete(&self, name: &str) -> Result<()> {
        self.renewing(|| self.delete_once(name))
    }

    fn delete_once(&self, name: &str) -> Result<()> {
        validate_name(name)?;
        let _lock = self.lock(true)?;
        let Some(cur) = self.read_current(name)? else {
            return Err(self.not_found(name));
        };
        // The history directory is created even when no versions are kept: it is the tombstone
        // that keeps `seed_from` from restoring a deleted starter skill.
        let hdir = self.history_dir(name, true)?.expect("created");
        if self.limits.max_versions_kept > 0 {
            let archived = cur.meta.version.max(self.max_history_version(name)? + 1);
            self.archive(hdir.as_fd(), name, &cur.meta, archived, &cur.code)?;
            self.prune_history(hdir.as_fd(), name)?;
        }
        for file in [format!("{name}.py"), format!("{name}.json")] {
            match rfs::unlinkat(&*self.root_fd()?, file.as_str(), AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => {}
                Err(e) => return Err(SkillError::io(format!("cannot delete {file}"), e)),
            }
        }
        self.sync_dir(self.root_fd()?.as_fd(), "the skills directory")?;
        if let Err(e) = self.prune_deleted_histories() {
            tracing::warn!(error = %e, "cannot prune histories of deleted skills");
        }
        Ok(())
    }

    pub(super) fn check_description<'a>(&self, description: &'a str) -> Result<&'a str> {
        let d = description.trim();
        if d.len() > self.limits.max_description_bytes {
            return Err(SkillError::TooLarge {
                what: "The description".into(),
                size: d.len() as u64,
                limit: self.limits.max_description_bytes as u64,
            });
        }
        Ok(d)
    }

    // ---- writing ---------------------------------------------------------------------------

    /// Writes `NAME.py` then `NAME.json`, each atomically, and syncs the directory.
    pub(super) fn write_skill(&self, meta: &SkillMeta, code: &str) -> Result<()> {
        let name = &meta.name;
        let py = format!("{name}.py");
        let json = format!("{name}.json");
        // Refuse rather than replace a link or a directory planted at either name.
        for file in [&py, &json] {
            match rfs::statat(&*self.root_fd()?, file.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                    FileType::RegularFile => {}
                    FileType::Symlink => {
                        return Err(SkillError::Symlink { path: file.clone() });
                    }
                    ft => {
                        return Err(SkillError::NotRegular {
                            path: file.clone(),
                            kind: kind_name(ft),
                            expected: "a regular file",
                        });
                    }
                },
                Err(Errno::NOENT) => {}
                Err(e) => return Err(SkillError::io(format!("cannot stat {file}"), e)),
            }
        }
        self.write_atomic(self.root_fd()?.as_fd(), &py, code.as_bytes(), &py)?;
        let bytes = serde_json::to_vec_pretty(meta).expect("metadata serialises");
        self.write_atomic(self.root_fd()?.as_fd(), &json, &bytes, &json)?;
        self.sync_dir(self.root_fd()?.as_fd(), "the skills directory")
    }
}
