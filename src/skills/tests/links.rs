//! Links and special files planted in the store: a symlink or a non-regular file at any name
//! the store uses is refused, never followed, and nothing outside the store changes.

use std::os::unix::fs::symlink;
use std::path::PathBuf;

use rustix::fs::{FileType, Mode};

use super::{files_in, store};
use crate::skills::{SkillError, SkillStore};

struct Planted {
    _tmp: tempfile::TempDir,
    store_dir: PathBuf,
    outside: PathBuf,
}

fn planted() -> Planted {
    let tmp = tempfile::tempdir().unwrap();
    let store_dir = tmp.path().join("store");
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "SECRET\n").unwrap();
    Planted {
        _tmp: tmp,
        store_dir,
        outside,
    }
}

impl Planted {
    fn outside_unchanged(&self) {
        assert_eq!(files_in(&self.outside), ["secret.txt"]);
        assert_eq!(
            std::fs::read_to_string(self.outside.join("secret.txt")).unwrap(),
            "SECRET\n"
        );
    }
}

#[test]
fn symlink_at_code_file_is_refused() {
    let p = planted();
    let s = store(&p.store_dir);
    s.save("ok", "x = 1\n", "").unwrap();
    symlink(p.outside.join("secret.txt"), p.store_dir.join("evil.py")).unwrap();
    let err = s.save("evil", "print('pwned')\n", "").unwrap_err();
    assert!(matches!(err, SkillError::Symlink { .. }), "{err}");
    assert!(err.to_string().contains("evil.py") && err.to_string().contains("symbolic link"));
    assert!(matches!(s.load("evil"), Err(SkillError::Symlink { .. })));
    assert!(matches!(s.delete("evil"), Err(SkillError::Symlink { .. })));
    let names: Vec<String> = s.list().unwrap().into_iter().map(|m| m.name).collect();
    assert_eq!(names, ["ok"]);
    // A dangling link is refused too, and nothing is created at its target.
    symlink(p.outside.join("new.py"), p.store_dir.join("dangling.py")).unwrap();
    assert!(matches!(
        s.save("dangling", "x = 1\n", ""),
        Err(SkillError::Symlink { .. })
    ));
    assert!(s.store_dir_is_intact());
    p.outside_unchanged();
}

impl SkillStore {
    fn store_dir_is_intact(&self) -> bool {
        self.dir
            .join("evil.py")
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink()
    }
}

#[test]
fn symlink_at_metadata_file_is_refused() {
    let p = planted();
    let s = store(&p.store_dir);
    s.save("m", "x = 1\n", "").unwrap();
    std::fs::remove_file(p.store_dir.join("m.json")).unwrap();
    symlink(p.outside.join("secret.txt"), p.store_dir.join("m.json")).unwrap();
    assert!(matches!(
        s.save("m", "x = 2\n", ""),
        Err(SkillError::Symlink { .. })
    ));
    assert!(matches!(s.load("m"), Err(SkillError::Symlink { .. })));
    assert!(s.list().unwrap().is_empty());
    // A new name whose metadata path is a planted link.
    symlink(p.outside.join("secret.txt"), p.store_dir.join("n.json")).unwrap();
    let err = s.save("n", "x = 1\n", "").unwrap_err();
    assert!(matches!(err, SkillError::Symlink { .. }), "{err}");
    assert!(!p.store_dir.join("n.py").exists());
    p.outside_unchanged();
}

#[test]
fn symlink_at_history_is_refused() {
    let p = planted();
    let s = store(&p.store_dir);
    s.save("k", "x = 1\n", "").unwrap();
    symlink(&p.outside, p.store_dir.join(".history")).unwrap();
    let err = s.save("k", "x = 2\n", "").unwrap_err();
    assert!(matches!(err, SkillError::Symlink { .. }), "{err}");
    assert!(err.to_string().contains(".history"));
    assert_eq!(
        s.load("k").unwrap().code,
        "x = 1\n",
        "the current version is untouched"
    );
    assert!(matches!(s.delete("k"), Err(SkillError::Symlink { .. })));
    assert!(matches!(s.history("k"), Err(SkillError::Symlink { .. })));
    p.outside_unchanged();

    // A link at .history/NAME.
    std::fs::remove_file(p.store_dir.join(".history")).unwrap();
    std::fs::create_dir(p.store_dir.join(".history")).unwrap();
    symlink(&p.outside, p.store_dir.join(".history/k")).unwrap();
    assert!(matches!(
        s.save("k", "x = 2\n", ""),
        Err(SkillError::Symlink { .. })
    ));
    assert!(matches!(s.delete("k"), Err(SkillError::Symlink { .. })));
    p.outside_unchanged();
    // A link among the history files is skipped, never read.
    std::fs::remove_file(p.store_dir.join(".history/k")).unwrap();
    s.save("k", "x = 2\n", "").unwrap();
    symlink(
        p.outside.join("secret.txt"),
        p.store_dir
            .join(".history/k/000009-20250101T000000.000000Z.py"),
    )
    .unwrap();
    let h = s.history("k").unwrap();
    assert_eq!(h.iter().map(|m| m.version).collect::<Vec<_>>(), [1]);
    assert!(matches!(
        s.load_version("k", 9),
        Err(SkillError::Symlink { .. })
    ));
    p.outside_unchanged();
}

#[test]
fn symlink_at_lock_file_is_refused() {
    let p = planted();
    let s = store(&p.store_dir);
    std::fs::remove_file(p.store_dir.join(".lock")).unwrap();
    symlink(p.outside.join("secret.txt"), p.store_dir.join(".lock")).unwrap();
    assert!(matches!(
        s.save("a", "x = 1\n", ""),
        Err(SkillError::Symlink { .. })
    ));
    assert!(matches!(s.list(), Err(SkillError::Symlink { .. })));
    p.outside_unchanged();
}

#[test]
fn non_regular_files_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path());
    std::fs::create_dir(tmp.path().join("d.py")).unwrap();
    let err = s.save("d", "x = 1\n", "").unwrap_err();
    assert!(
        matches!(
            err,
            SkillError::NotRegular {
                kind: "a directory",
                ..
            }
        ),
        "{err}"
    );
    assert!(matches!(s.load("d"), Err(SkillError::NotRegular { .. })));
    rustix::fs::mknodat(
        rustix::fs::CWD,
        tmp.path().join("f.py").as_path(),
        FileType::Fifo,
        Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    // Opening a FIFO must not block.
    let err = s.load("f").unwrap_err();
    assert!(
        matches!(err, SkillError::NotRegular { kind: "a FIFO", .. }),
        "{err}"
    );
    assert!(s.list().unwrap().is_empty());
    // A regular file where .history should be a directory.
    s.save("r", "x = 1\n", "").unwrap();
    std::fs::write(tmp.path().join(".history"), "").unwrap();
    let err = s.save("r", "x = 2\n", "").unwrap_err();
    assert!(
        matches!(
            err,
            SkillError::NotRegular {
                expected: "a directory",
                ..
            }
        ),
        "{err}"
    );
}
