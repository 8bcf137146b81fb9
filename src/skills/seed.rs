//! Starter skills: [`SkillStore::seed_from`] copies the skills the binary carries
//! ([`crate::shipped::STARTER_SKILLS`]) into the store for every name that has never existed
//! there. Their code and description pass the same checks as a save, and the store side is
//! written like any other skill.

use std::os::fd::AsFd;

use rustix::fs::{self as rfs, AtFlags};
use rustix::io::Errno;

use super::error::{Result, SkillError};
use super::io::check_code;
use super::meta::{RawMeta, SkillMeta, now, sha256_hex};
use super::name::is_name_file;
use super::store::SkillStore;
use super::{HISTORY_DIR, MAX_META_BYTES};
use crate::shipped::ShippedFile;

impl SkillStore {
    /// Copies the skills among `shipped` (`NAME.py`, optionally `NAME.json` with a
    /// `description`) into the store for every name that has never existed there (no `NAME.py`,
    /// no history), so a user's skill, or a starter skill the user deleted, is never overwritten
    /// or restored. Files that are not valid skills are skipped and logged. Returns how many
    /// were added.
    pub fn seed_from(&self, shipped: &[ShippedFile]) -> Result<usize> {
        let mut names: Vec<&str> = shipped
            .iter()
            .filter_map(|f| is_name_file(f.name, ".py"))
            .collect();
        names.sort();
        names.dedup();

        let _lock = self.lock(true)?;
        let mut count = self.scan_names()?.len();
        let mut added = 0;
        for name in names {
            match self.name_ever_existed(name) {
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
            let (code, description) = match self.read_shipped(shipped, name) {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(skill = %name, error = %e, "skipping shipped skill");
                    continue;
                }
            };
            let at = now();
            let meta = SkillMeta {
                name: name.to_owned(),
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

    fn read_shipped(&self, shipped: &[ShippedFile], name: &str) -> Result<(String, String)> {
        let file = |ext: &str| {
            let wanted = format!("{name}{ext}");
            shipped.iter().find(|f| f.name == wanted)
        };
        let py = file(".py").expect("seed_from lists only names with a .py file");
        let what = format!("The starter skill {}", py.name);
        if py.bytes.len() as u64 > self.limits.max_code_bytes {
            return Err(SkillError::TooLarge {
                what,
                size: py.bytes.len() as u64,
                limit: self.limits.max_code_bytes,
            });
        }
        let code = check_code(py.bytes, self.limits.max_code_bytes, &what)?.to_owned();
        let description = match file(".json") {
            None => String::new(),
            Some(json) if json.bytes.len() as u64 > MAX_META_BYTES => {
                tracing::warn!(
                    file = json.name,
                    "ignoring over-long starter skill metadata"
                );
                String::new()
            }
            Some(json) => match serde_json::from_slice::<RawMeta>(json.bytes) {
                Ok(raw) => raw.description.unwrap_or_default(),
                Err(e) => {
                    tracing::warn!(file = json.name, error = %e, "ignoring malformed starter skill metadata");
                    String::new()
                }
            },
        };
        let description = match self.check_description(&description) {
            Ok(d) => d.to_owned(),
            Err(e) => {
                tracing::warn!(skill = name, error = %e, "ignoring starter skill description");
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
        let Some(h) = self.open_dir(self.root_fd()?.as_fd(), HISTORY_DIR, HISTORY_DIR, false)?
        else {
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
