//! Starter skills: [`SkillStore::seed_from`] copies the skills the project ships into the store
//! for every name that has never existed there. The shipped directory is install data and is
//! read with ordinary (link-following) opens; its code and description pass the same checks as a
//! save, and the store side is written like any other skill.

use std::os::fd::AsFd;
use std::path::Path;

use rustix::fs::{self as rfs, AtFlags};
use rustix::io::Errno;

use super::error::{Result, SkillError};
use super::io::{check_code, read_bounded};
use super::meta::{RawMeta, SkillMeta, now, sha256_hex};
use super::name::is_name_file;
use super::store::SkillStore;
use super::{HISTORY_DIR, MAX_META_BYTES};

impl SkillStore {
    /// Copies the skills in `shipped` (`NAME.py`, optionally `NAME.json` with a `description`)
    /// into the store for every name that has never existed there (no `NAME.py`, no history), so
    /// a user's skill, or a starter skill the user deleted, is never overwritten or restored.
    /// Files that are not valid skills are skipped and logged. Returns how many were added.
    pub fn seed_from(&self, shipped: &Path) -> Result<usize> {
        let entries = match std::fs::read_dir(shipped) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tracing::warn!(dir = %shipped.display(), "no shipped skills directory; nothing to seed");
                return Ok(0);
            }
            Err(e) => {
                return Err(SkillError::io(
                    format!("cannot read the shipped skills in {}", shipped.display()),
                    e,
                ));
            }
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| {
                let file = e.file_name().into_string().ok()?;
                is_name_file(&file, ".py").map(str::to_owned)
            })
            .collect();
        names.sort();

        let _lock = self.lock(true)?;
        let mut count = self.scan_names()?.len();
        let mut added = 0;
        for name in names {
            match self.name_ever_existed(&name) {
                Ok(false) => {}
                Ok(true) => continue,
                Err(e) => {
                    tracing::warn!(skill = %name, error = %e, "not seeding skill");
                    continue;
                }
            }
            if count >= self.limits.max_skills {
                tracing::warn!(
                    limit = self.limits.max_skills,
                    "skills store full; seeding stopped"
                );
                break;
            }
            let (code, description) = match self.read_shipped(shipped, &name) {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(skill = %name, error = %e, "skipping shipped skill");
                    continue;
                }
            };
            let at = now();
            let meta = SkillMeta {
                name: name.clone(),
                description,
                created: at,
                updated: at,
                sha256: sha256_hex(code.as_bytes()),
                version: 1,
                size: code.len() as u64,
            };
            self.write_skill(&meta, &code)?;
            count += 1;
            added += 1;
        }
        Ok(added)
    }

    fn read_shipped(&self, shipped: &Path, name: &str) -> Result<(String, String)> {
        let py = shipped.join(format!("{name}.py"));
        let file = std::fs::File::open(&py)
            .map_err(|e| SkillError::io(format!("cannot open {}", py.display()), e))?;
        let md = file
            .metadata()
            .map_err(|e| SkillError::io(format!("cannot stat {}", py.display()), e))?;
        let shown_path = py.display().to_string();
        if !md.is_file() {
            return Err(SkillError::NotRegular {
                path: shown_path,
                kind: if md.is_dir() {
                    "a directory"
                } else {
                    "a special file"
                },
                expected: "a regular file",
            });
        }
        let buf = read_bounded(file, self.limits.max_code_bytes, &shown_path)?;
        let what = format!("The shipped skill {shown_path}");
        if buf.len() as u64 > self.limits.max_code_bytes {
            return Err(SkillError::TooLarge {
                what,
                size: md.len(),
                limit: self.limits.max_code_bytes,
            });
        }
        let code = check_code(&buf, self.limits.max_code_bytes, &what)?.to_owned();
        let json = shipped.join(format!("{name}.json"));
        let description = match std::fs::read(&json) {
            Ok(bytes) if bytes.len() as u64 <= MAX_META_BYTES => {
                match serde_json::from_slice::<RawMeta>(&bytes) {
                    Ok(raw) => raw.description.unwrap_or_default(),
                    Err(e) => {
                        tracing::warn!(file = %json.display(), error = %e, "ignoring malformed shipped metadata");
                        String::new()
                    }
                }
            }
            Ok(_) => {
                tracing::warn!(file = %json.display(), "ignoring over-long shipped metadata");
                String::new()
            }
            Err(_) => String::new(),
        };
        let description = match self.check_description(&description) {
            Ok(d) => d.to_owned(),
            Err(e) => {
                tracing::warn!(skill = name, error = %e, "ignoring shipped description");
                String::new()
            }
        };
        Ok((code, description))
    }

    /// Whether `NAME.py` (of any kind) or `.history/NAME` exists.
    fn name_ever_existed(&self, name: &str) -> Result<bool> {
        if self.py_exists(name)? {
            return Ok(true);
        }
        let Some(h) = self.open_dir(self.root.as_fd(), HISTORY_DIR, HISTORY_DIR, false)? else {
            return Ok(false);
        };
        match rfs::statat(&h, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(_) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(SkillError::io(
                format!("cannot stat {HISTORY_DIR}/{name}"),
                e,
            )),
        }
    }
}
