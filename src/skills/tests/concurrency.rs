//! Concurrency: saves from many threads and two stores on one directory (standing for two
//! server processes) keep every version, and readers never see a torn skill.

use std::sync::Arc;

use super::{files_in, store};
use crate::skills::meta::sha256_hex;
use crate::skills::{SkillMeta, TEMP_PREFIX};

#[test]
fn concurrent_saves_of_different_names() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Arc::new(store(tmp.path()));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let s = Arc::clone(&s);
            std::thread::spawn(move || {
                for i in 0..10 {
                    s.save(&format!("s{t}_{i}"), format!("x = {t}{i}\n"), "")
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let list = s.list().unwrap();
    assert_eq!(list.len(), 80);
    for m in &list {
        let code = s.load(&m.name).unwrap().code;
        assert_eq!(sha256_hex(code.as_bytes()), m.sha256);
    }
    assert!(
        files_in(tmp.path())
            .iter()
            .all(|f| !f.starts_with(TEMP_PREFIX))
    );
}

#[test]
fn concurrent_saves_of_one_name_keep_every_version() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    // Two stores on one directory stand for two server processes.
    let stores = [Arc::new(store(&dir)), Arc::new(store(&dir))];
    let threads: Vec<_> = (0..12)
        .map(|t| {
            let s = Arc::clone(&stores[t % 2]);
            std::thread::spawn(move || s.save("same", format!("x = {t}\n"), "").unwrap())
        })
        .collect();
    let results: Vec<SkillMeta> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let mut versions: Vec<u64> = results.iter().map(|m| m.version).collect();
    versions.sort();
    assert_eq!(versions, (1..=12).collect::<Vec<_>>());

    let current = stores[0].load("same").unwrap();
    assert_eq!(current.meta.version, 12, "the last writer wins");
    let last = results.iter().find(|m| m.version == 12).unwrap();
    assert_eq!(&current.meta, last);
    let mut codes: Vec<String> = (1..12)
        .map(|v| stores[1].load_version("same", v).unwrap().code)
        .collect();
    codes.push(current.code);
    codes.sort();
    let mut expected: Vec<String> = (0..12).map(|t| format!("x = {t}\n")).collect();
    expected.sort();
    assert_eq!(
        codes, expected,
        "every saved version is current or in the history"
    );
    let created = results.iter().find(|m| m.version == 1).unwrap().created;
    assert!(results.iter().all(|m| m.created == created));
}

#[test]
fn readers_never_see_a_torn_skill() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Arc::new(store(tmp.path()));
    s.save("t", "x = 0\n", "").unwrap();
    let writer = {
        let s = Arc::clone(&s);
        std::thread::spawn(move || {
            for i in 1..40 {
                s.save("t", format!("x = {i}\n{}", "#".repeat(i * 100)), "")
                    .unwrap();
            }
        })
    };
    for _ in 0..200 {
        let skill = s.load("t").unwrap();
        assert_eq!(sha256_hex(skill.code.as_bytes()), skill.meta.sha256);
        assert_eq!(skill.code.len() as u64, skill.meta.size);
    }
    writer.join().unwrap();
}
