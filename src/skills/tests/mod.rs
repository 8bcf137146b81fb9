//! Tests of the skills store, by topic in the files below; the helpers they share are here.

use std::path::Path;

use super::{SkillError, SkillLimits, SkillStore};

mod concurrency;
mod hand_edited;
mod links;
mod names;
mod python;
mod renewal;
mod round_trip;
mod seeding;
mod stale;

fn store(dir: &Path) -> SkillStore {
    SkillStore::open(dir, SkillLimits::default()).unwrap()
}

fn store_with(dir: &Path, f: impl FnOnce(&mut SkillLimits)) -> SkillStore {
    let mut limits = SkillLimits::default();
    f(&mut limits);
    SkillStore::open(dir, limits).unwrap()
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn store_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<SkillStore>();
    check::<SkillError>();
}
